"""Turning a data user's round request into a validated plan (pure; no network)."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from leteo_fed.errors import DataError
from leteo_fed.privacy import distributed_noise as noise
from leteo_fed.proto import leteo_pb2 as pb
from leteo_fed.protocols import METHODS, discriminant, kmeans, moments, pca
from leteo_fed.protocols.moments import ALL_ROWS, Grouping

MIN_QUORUM = 2  # one share alone would reveal that owner's statistics to the data user
DEFAULT_DEADLINE_SECONDS = 120.0
MAX_DEADLINE_SECONDS = 24 * 3600.0
_LABELS_NEEDED = {"pca": 0, "dca": 1, "lda": 1, "mdr": 2}


@dataclass(frozen=True)
class RoundPlan:
    method: str
    features: list[str]
    components: int
    min_owners: int
    deadline_seconds: float
    standardize: bool
    groupings: tuple[Grouping, ...]  # effective: (ALL_ROWS,) for PCA
    declared_groupings: tuple[Grouping, ...]  # what travels in the round spec
    ridge: discriminant.Ridge
    encoding: pca.PcaEncoding
    projection_only: bool = False
    dp: DpPlan | None = None


@dataclass(frozen=True)
class DpPlan:
    """Distributed Skellam noise for an (epsilon, delta)-DP release of the round's statistics."""

    epsilon: float
    delta: float
    row_norm_bound: float
    mu: float  # total Skellam parameter of the aggregate noise (with exactly `quorum` shares)
    quorum: int
    l1: float
    l2: float

    def noise_std(self, n_shares: int, scale_bits: int) -> float:
        """Standard deviation of the aggregate noise per value, in real units."""
        return math.sqrt(2 * noise.effective_mu(self.mu, self.quorum, n_shares)) / 2**scale_bits


DP_DEFAULT_DELTA = 1e-6
DP_DEFAULT_SCALE_BITS = 16
MAX_OWNER_MU = 1e17  # numpy's exact Poisson sampler stops near 9e18


def plan_round(request: pb.RoundRequest, n_invited: int) -> RoundPlan:
    method = request.method or pca.PROTOCOL
    if method not in METHODS:
        raise DataError(f"unknown method {method!r}; expected one of {METHODS}", field="method")
    features = list(request.features)
    if not features:
        raise DataError("features is empty: name the columns to analyse", field="features")
    if len(set(features)) != len(features):
        raise DataError("features contains duplicates", field="features")

    declared = tuple(_grouping(g, features) for g in request.groupings)
    needed = _LABELS_NEEDED[method]
    if len(declared) != needed:
        what = {
            0: "no label column",
            1: "one label column",
            2: "a utility and a privacy label column",
        }
        raise DataError(f"{method} takes {what[needed]}, got {len(declared)}", field="groupings")
    if needed == 2 and declared[0].label_column == declared[1].label_column:
        raise DataError(
            "the utility and privacy labels must be different columns", field="groupings"
        )
    groupings = declared or (ALL_ROWS,)

    d = len(features)
    default_k = (
        min(2, d) if method == pca.PROTOCOL else min(d, max(1, len(declared[0].classes) - 1))
    )
    components = request.components or default_k
    if not 1 <= components <= d:
        raise DataError(f"components must be in 1..{d}, got {components}", field="components")
    if request.standardize and method != pca.PROTOCOL:
        raise DataError("standardize applies to PCA only", field="standardize")
    if request.standardize and request.HasField("dp_epsilon"):
        raise DataError("standardize is not available for DP releases", field="standardize")
    if request.standardize and request.projection_only:
        raise DataError(
            "standardize is not available in projection-only mode (correlation is not "
            "rotation-equivariant)",
            field="standardize",
        )

    min_owners = request.min_owners or MIN_QUORUM
    if min_owners < MIN_QUORUM:
        raise DataError(
            f"min_owners must be at least {MIN_QUORUM}: a single share would be revealed",
            field="min_owners",
        )
    deadline = request.deadline_seconds or DEFAULT_DEADLINE_SECONDS
    if not 0 < deadline <= MAX_DEADLINE_SECONDS:
        raise DataError(
            f"deadline_seconds must be in (0, {MAX_DEADLINE_SECONDS:.0f}]", field="deadline_seconds"
        )
    ridge = discriminant.Ridge(
        _ridge_value(request, "rho", non_negative=True),
        _ridge_value(request, "rho_prime", non_negative=False),
    )
    n_vals = moments.n_values(d, groupings)
    dp, encoding_dp = _plan_dp(request, d, groupings, n_vals, min_owners)
    if dp is not None and method != pca.PROTOCOL:
        # the noisy S_W (or S_B of the privacy label) has spectral norm ~ 2 sqrt(d) sigma
        sigma = dp.noise_std(min_owners, encoding_dp["scale_bits"])
        ridge = discriminant.Ridge(ridge.rho, ridge.rho_prime, 3 * math.sqrt(d) * sigma)
    encoding = pca.PcaEncoding(
        **encoding_dp,
        max_owners=max(pca.DEFAULT_MAX_OWNERS, n_invited),
        rotation_dimension=d if request.projection_only else 0,
    )
    return RoundPlan(
        method,
        features,
        components,
        min_owners,
        deadline,
        request.standardize,
        groupings,
        declared,
        ridge,
        encoding,
        request.projection_only,
        dp,
    )


def _plan_dp(request, d: int, groupings, n_vals: int, quorum: int) -> tuple[DpPlan | None, dict]:
    """No DP: the encoding's usual scale. DP: clip bound, Skellam mu, counts scaled, noise room."""
    if not request.HasField("dp_epsilon"):
        if request.HasField("dp_delta") or request.HasField("row_norm_bound"):
            raise DataError("dp_delta and row_norm_bound need dp_epsilon", field="dp_epsilon")
        return None, {
            "scale_bits": request.scale_bits or pca.DEFAULT_SCALE_BITS,
            "value_bound": request.value_bound or pca.DEFAULT_VALUE_BOUND,
        }
    eps, delta, c = _dp_parameters(request)
    f = request.scale_bits or DP_DEFAULT_SCALE_BITS
    sens = noise.sensitivities_for_scatter(
        c, f, d, len(groupings), n_classes=[len(g.classes) for g in groupings], count_scale_bits=f
    )
    mu = noise.calibrate_mu(eps, delta, sens.l1, sens.l2)
    owner_mu = mu / quorum
    if owner_mu > MAX_OWNER_MU:
        raise DataError(
            f"the noise (Skellam mu {owner_mu:.3g} per owner) is too large to sample exactly: "
            "lower scale_bits or raise dp_epsilon",
            field="scale_bits",
        )
    dp = DpPlan(eps, delta, c, mu, quorum, sens.l1, sens.l2)
    # clipped rows have |x_i| <= C; the noise needs room in every slot
    return dp, {
        "scale_bits": f,
        "value_bound": c,
        "count_scale_bits": f,
        "noise_bound": noise.skellam_magnitude_bound(owner_mu, n_vals),
    }


def _grouping(msg: pb.Grouping, features: list[str]) -> Grouping:
    label = msg.label_column
    if not label:
        raise DataError("a grouping needs a label column", field="groupings.label_column")
    if label in features:
        raise DataError(f"label column '{label}' is also a feature", field="groupings.label_column")
    classes = tuple(msg.classes)
    if len(classes) < 2 or any(not c for c in classes):
        raise DataError(
            f"label column '{label}' needs at least 2 non-empty class names",
            field="groupings.classes",
        )
    return Grouping(label, classes)


def _ridge_value(request: pb.RoundRequest, name: str, non_negative: bool) -> float | None:
    if not request.HasField(name):
        return None
    value = getattr(request, name)
    if not math.isfinite(value) or (non_negative and value < 0):
        raise DataError(
            f"{name} must be a finite{' non-negative' if non_negative else ''} number", field=name
        )
    return value


@dataclass(frozen=True)
class LdpRoundPlan:
    """An LDP collection: the public spec owners receive, the quorum, and post-processing."""

    spec: pb.LdpSpec
    min_owners: int
    consistency: bool


@dataclass(frozen=True)
class KmeansPlan:
    """A federated k-means job: one round per iteration, each with this encoding and noise."""

    features: list[str]
    k: int
    centers: np.ndarray  # initial centers, k x d (validated)
    iterations: int  # maximum number of iterations T
    tolerance: float  # stop once no center moves more than this (L2)
    min_owners: int
    deadline_seconds: float  # per iteration
    encoding: kmeans.KmeansEncoding
    dp: DpPlan | None = None  # per iteration: (epsilon / T, delta / T)
    dp_total: tuple[float, float] | None = None  # the job's (epsilon, delta)
    method: str = kmeans.PROTOCOL
    projection_only: bool = False


def plan_kmeans(request: pb.RoundRequest, n_invited: int) -> KmeansPlan:
    """Validate a k-means job request (method "kmeans"); every refusal names its field."""
    features = list(request.features)
    if not features:
        raise DataError("features is empty: name the columns to cluster", field="features")
    if len(set(features)) != len(features):
        raise DataError("features contains duplicates", field="features")
    for name, set_ in (
        ("groupings", bool(request.groupings)),
        ("projection_only", request.projection_only),
        ("standardize", request.standardize),
        ("components", bool(request.components)),
        ("rho", request.HasField("rho") or request.HasField("rho_prime")),
    ):
        if set_:
            raise DataError(f"{name} does not apply to k-means", field=name)
    spec = request.kmeans
    k = spec.k
    if not 1 <= k <= kmeans.MAX_K:
        raise DataError(f"kmeans.k must be in 1..{kmeans.MAX_K}, got {k}", field="kmeans.k")
    iterations = spec.iterations or kmeans.DEFAULT_ITERATIONS
    if not 1 <= iterations <= kmeans.MAX_ITERATIONS:
        raise DataError(
            f"kmeans.iterations must be in 1..{kmeans.MAX_ITERATIONS}, got {iterations}",
            field="kmeans.iterations",
        )
    tolerance = spec.tolerance
    if not (math.isfinite(tolerance) and tolerance >= 0):
        raise DataError(
            f"kmeans.tolerance must be a finite number >= 0, got {tolerance}",
            field="kmeans.tolerance",
        )
    min_owners, deadline = _quorum_and_deadline(request)
    d = len(features)
    dp, dp_total, enc_args = _plan_kmeans_dp(request, d, k, iterations, min_owners)
    encoding = kmeans.KmeansEncoding(
        **enc_args, max_owners=max(kmeans.DEFAULT_MAX_OWNERS, n_invited)
    )
    centers = kmeans.validate_centers(
        spec.centers, k, d, encoding.value_bound, field="kmeans.centers"
    )
    return KmeansPlan(
        features,
        k,
        centers,
        iterations,
        tolerance,
        min_owners,
        deadline,
        encoding,
        dp,
        dp_total,
    )


def _quorum_and_deadline(request: pb.RoundRequest) -> tuple[int, float]:
    min_owners = request.min_owners or MIN_QUORUM
    if min_owners < MIN_QUORUM:
        raise DataError(
            f"min_owners must be at least {MIN_QUORUM}: a single share would be revealed",
            field="min_owners",
        )
    deadline = request.deadline_seconds or DEFAULT_DEADLINE_SECONDS
    if not 0 < deadline <= MAX_DEADLINE_SECONDS:
        raise DataError(
            f"deadline_seconds must be in (0, {MAX_DEADLINE_SECONDS:.0f}]", field="deadline_seconds"
        )
    return min_owners, deadline


def _plan_kmeans_dp(request, d: int, k: int, iterations: int, quorum: int):
    if not request.HasField("dp_epsilon"):
        if request.HasField("dp_delta") or request.HasField("row_norm_bound"):
            raise DataError("dp_delta and row_norm_bound need dp_epsilon", field="dp_epsilon")
        return (
            None,
            None,
            {
                "scale_bits": request.scale_bits or kmeans.DEFAULT_SCALE_BITS,
                "value_bound": request.value_bound or kmeans.DEFAULT_VALUE_BOUND,
            },
        )
    eps, delta, c = _dp_parameters(request)
    f = request.scale_bits or kmeans.DP_DEFAULT_SCALE_BITS
    it = kmeans.calibrate_iteration(eps, delta, iterations, c, f, d, k)
    owner_mu = it.mu / quorum
    if owner_mu > MAX_OWNER_MU:
        raise DataError(
            f"the noise (Skellam mu {owner_mu:.3g} per owner) is too large to sample exactly: "
            "lower scale_bits, raise dp_epsilon or run fewer iterations",
            field="scale_bits",
        )
    dp = DpPlan(it.epsilon, it.delta, c, it.mu, quorum, it.l1, it.l2)
    return (
        dp,
        (eps, delta),
        {
            "scale_bits": f,
            "value_bound": c,  # clipped rows have |x_i| <= C
            "count_scale_bits": it.count_scale_bits,
            "noise_bound": noise.skellam_magnitude_bound(owner_mu, kmeans.n_values(k, d)),
        },
    )


def _dp_parameters(request) -> tuple[float, float, float]:
    eps = request.dp_epsilon
    delta = request.dp_delta if request.HasField("dp_delta") else DP_DEFAULT_DELTA
    if not (math.isfinite(eps) and 0 < eps <= 100):
        raise DataError(f"dp_epsilon must be in (0, 100], got {eps}", field="dp_epsilon")
    if not (math.isfinite(delta) and 0 < delta <= 1e-2):
        raise DataError(f"dp_delta must be in (0, 0.01], got {delta}", field="dp_delta")
    if not request.HasField("row_norm_bound"):
        raise DataError(
            "a DP round needs row_norm_bound (rows are clipped to it)", field="row_norm_bound"
        )
    c = request.row_norm_bound
    if not (math.isfinite(c) and c > 0):
        raise DataError(
            f"row_norm_bound must be a positive number, got {c}", field="row_norm_bound"
        )
    return eps, delta, c
