"""Federated linear regression with an intercept: ordinary least squares or ridge, in one round.

Every owner sends the moments of its rows z = [x, y] (features, then the label), computed as
for a PCA share of the d + 1 columns (`moments`): V = sum z, its row count n and the upper
triangle of R = sum z z^T. The aggregator reveals the exact integer totals and forms the centered
scatter matrix S = R - V V^T / n in exact rational arithmetic (one rounding per entry), then

    beta      = (S_xx + lambda I)^-1 S_xy        (lambda = 0: ordinary least squares)
    intercept = mean(y) - mean(x)^T beta          (the intercept is not penalized)
    RSS       = S_yy - 2 beta^T S_xy + beta^T S_xx beta,   sigma^2 = RSS / (n - d - 1)
    Cov(beta) = sigma^2 A^-1 S_xx A^-1  with A = S_xx + lambda I   (OLS: sigma^2 S_xx^-1)
    Var(intercept) = sigma^2 / n + mean(x)^T Cov(beta) mean(x)

with t statistics, two-sided p-values (Student t, n - d - 1 degrees of freedom), confidence
intervals, R^2 = 1 - RSS / S_yy and the adjusted R^2. Without DP this is statsmodels' OLS on the
pooled rows (checked to 1e-8 in the tests).

DP rounds clip every row's features to L2 norm C (`row_norm_bound`) and its label to [-B, B]
(`label_bound`, default C), so ||z||_2 <= sqrt(C^2 + B^2), and add distributed Skellam noise
calibrated to the moments' sensitivity for that norm (`Linreg.blocks`, checked by brute force).
The noisy S is post-processed (no privacy cost): the eigenvalues of S_xx are floored at a
multiple of the noise's spectral size, so S_xx is positive definite, and the RSS is kept above
what the noise alone could make (`fit_from_scatter`). The standard
errors are the sampling errors of the fit to the noisy moments; the noise's own error of every
term is reported beside them (`noise_std_errors`, the delta method at the released estimates).

Every party learns: the owners nothing; the CSP masked plaintexts only; the aggregator the
pooled moments of [x, y] (hence the released fit, the pooled means, the row count), never one
site's. Single-round: one DP release costs each owner the round's (epsilon, delta) once.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np

from leteo_fed.errors import DataError
from leteo_fed.privacy.noise_gate import ReleaseWarning
from leteo_fed.protocols import moments, registry
from leteo_fed.protocols.linreg_fit import (
    CI_LEVEL,
    FLOOR_FACTOR,
    INTERCEPT,
    Fit,
    fit_from_scatter,
    noise_preview,
    t_tests,
)
from leteo_fed.protocols.moments import ALL_ROWS
from leteo_fed.protocols.requests import check_features
from leteo_fed.protocols.results import DpFacts, Result, RoundFacts, result_type, terms_in_order
from leteo_fed.protocols.secure_sum import SecureSumProtocol
from leteo_fed.protocols.statistic import (
    COUNT,
    Block,
    NoiseReport,
    Release,
    Rows,
    SecureSumStatistic,
    Totals,
)

EXPLAINED = 0.5  # the preview's label: this share of its variance explained by the features


@dataclass(frozen=True)
class LinregRequest:
    features: tuple[str, ...] = field(
        default=(), metadata={"help": "comma-separated feature columns", "required": True}
    )
    label_column: str = field(
        default="", metadata={"help": "the column to predict (y)", "required": True}
    )
    ridge: float = field(  # lambda >= 0 on the coefficients (not the intercept); 0 = OLS
        default=0.0,
        metadata={
            "help": "ridge penalty lambda >= 0 on the coefficients, not the intercept "
            "(default: 0, ordinary least squares)",
            "metavar": "L",
        },
    )
    label_bound: float = field(  # DP: labels clipped to [-B, B] (0 = row_norm_bound)
        default=0.0,
        metadata={
            "help": "DP: labels are clipped to [-B, B] (default: `row_norm_bound`)",
            "metavar": "B",
        },
    )


@dataclass(frozen=True)
class LinregSpec:
    features: tuple[str, ...]
    label_column: str
    label_bound: float  # DP: B; 0 in non-DP rounds (value_bound bounds every value)


@result_type
@dataclass(frozen=True, kw_only=True)
class LinregResult(RoundFacts, Result):
    wire: ClassVar[str] = "linreg"
    protocol: str
    method: str
    features: list[str]
    label_column: str
    ridge: float
    n_rows: int
    df_residual: int
    terms: list[str]
    coefficients: dict[str, float]
    std_errors: dict[str, float]
    t_statistics: dict[str, float]
    p_values: dict[str, float]
    ci_level: float
    ci_lower: dict[str, float]
    ci_upper: dict[str, float]
    r_squared: float
    adj_r_squared: float
    residual_std_error: float
    label_bound: float | None = None
    noise_std_errors: dict[str, float] | None = None
    dp: DpFacts | None = None

    def table(self) -> tuple[dict[str, list], list, str]:
        """A row per term: coefficient, standard error, t, p and the confidence interval."""
        cols = {
            name: [values[t] for t in self.terms]
            for name, values in (
                ("coefficient", self.coefficients),
                ("std_error", self.std_errors),
                ("t_statistic", self.t_statistics),
                ("p_value", self.p_values),
                ("ci_lower", self.ci_lower),
                ("ci_upper", self.ci_upper),
            )
        }
        return cols, list(self.terms), "term"

    def to_dict(self) -> dict[str, Any]:
        """The document, every per-term map in the order of `terms`."""
        return terms_in_order(super().to_dict())


def joint_bound(row_norm_bound: float, label_bound: float) -> float:
    """||[x, y]||_2 of a clipped row: sqrt(C^2 + B^2)."""
    return math.hypot(row_norm_bound, label_bound)


def fit_from_totals(totals: Totals, d: int, ridge: float, noisy: bool, sigma: float = 0.0) -> Fit:
    """The released totals -> the fit (exact rationals, one rounding per entry of the
    scatter); `sigma` (DP) is the noise std per released value."""
    (r, f), (v, _), (m, cs) = (totals.encoded(b) for b in ("products", "sums", "rows"))
    agg = moments.decode_totals([*r, *v, *m], d + 1, [ALL_ROWS], f, cs, noisy=noisy)
    scatter = moments.total_scatter(agg)
    return fit_from_scatter(scatter, moments.mean(agg), agg.n, ridge, noisy, sigma)


def moment_sums(mom: moments.LocalMoments, k: int) -> dict[str, np.ndarray]:
    """The blocks of one site's moments of its k columns [x, y] (one class: every row)."""
    return {"sums": mom.v[0][0], "rows": mom.m[0], "products": mom.r[np.triu_indices(k)]}


class Linreg(SecureSumStatistic[LinregRequest, LinregSpec]):
    name = "linreg"
    request_type = LinregRequest
    spec_type = LinregSpec
    result_type = LinregResult
    output_file = "result.json"
    plot_file = "coefficients.png"
    spark_engine = True
    summary = ("round_id", "owners", "n_rows", "coefficients", "std_errors", "r_squared")
    help = "linear regression (OLS or ridge) across the owners"
    description = (
        "Linear regression of `label_column` on `features`, with an intercept, in one round: every owner\n"
        "sends its Paillier-encrypted moments of [x, y] (sum z z^T, sum z, its row count); the aggregator\n"
        "learns only the pooled moments and solves the normal equations: ordinary least squares, or\n"
        "ridge with `ridge` L (the penalty on the coefficients, not the intercept). Writes\n"
        "OUT/result.json (coefficients, standard errors, t statistics, p-values, 95% confidence\n"
        "intervals, R^2) and OUT/coefficients.png (each coefficient with its confidence interval).\n"
        "\n"
        "With `dp_epsilon` the release is (epsilon, delta)-DP: give public bounds per column in natural\n"
        "units (`bounds` age=17,90 for every feature and the label, or `codebook` FILE); every owner\n"
        "clips each value to them and adds its share of Skellam noise. `dry_run` shows each figure's\n"
        "expected error first; after the release each figure is printed with its noise, and a warning\n"
        "names any figure the noise buries. Experts may instead clip rows to `row_norm_bound` (L2) and\n"
        "labels to +/- `label_bound`.\n"
        "See docs/linear-regression.md.\n"
    )

    def spec(self, request: LinregRequest) -> LinregSpec:
        features = check_features(tuple(request.features), "regress on")
        label = request.label_column
        if not label:
            raise DataError(
                "label_column is empty: name the column to predict", field="label_column"
            )
        if label in features:
            raise DataError(f"label column '{label}' is also a feature", field="label_column")
        if INTERCEPT in features:
            raise DataError(
                f"a feature may not be named '{INTERCEPT}' (the result's name of the constant "
                "term)",
                field="features",
            )
        return LinregSpec(features, label, float(request.label_bound))

    def settings(self, request: LinregRequest) -> float:
        """The ridge penalty (the aggregator's alone: owners send the same moments)."""
        if not (math.isfinite(request.ridge) and request.ridge >= 0):
            raise DataError(
                f"ridge must be a finite number >= 0, got {request.ridge}", field="ridge"
            )
        return float(request.ridge)

    def spec_for(self, spec: LinregSpec, dp: Any) -> LinregSpec:
        """The label's clipping bound B: DP rounds only; 1 with public bounds (the label's
        bounds scale it to [-1, 1]), else the request's or the row norm bound."""
        if dp is None:
            if spec.label_bound:
                raise DataError(
                    "label_bound applies to DP rounds (value_bound bounds every value otherwise)",
                    field="label_bound",
                )
            return spec
        if dp.bounds:
            if spec.label_bound:
                raise DataError(
                    "with per-column bounds the label's bounds come from them: give the label "
                    "column's bounds (`bounds`), not label_bound",
                    field="label_bound",
                )
            return dataclasses.replace(spec, label_bound=1.0)  # every scaled value in [-1, 1]
        b = spec.label_bound or dp.row_norm_bound
        if not (math.isfinite(b) and b > 0):
            raise DataError(f"label_bound must be a positive number, got {b}", field="label_bound")
        return dataclasses.replace(spec, label_bound=float(b))

    def features(self, spec: LinregSpec) -> tuple[str, ...]:
        return tuple(spec.features)

    def bounded_columns(self, spec: LinregSpec) -> dict[str, float]:
        return {spec.label_column: spec.label_bound}

    def blocks(self, spec: LinregSpec, bound: float) -> tuple[Block, ...]:
        """The moments of z = [x, y], ||z||_2 <= J = sqrt(C^2 + B^2) (|x_j|, |y| <= B without
        DP, label_bound 0): V moves by z (L2 <= J, L1 <= sqrt(k) J), R's triangle by at most
        ||z||^2 <= J^2 in L2 and (k + 1) J^2 / 2 in L1 (k = d + 1 columns), n by 1: in this
        order the integer sensitivity is `moments.sensitivities_for_scatter`'s, bit for bit."""
        k = len(spec.features) + 1
        j = joint_bound(bound, spec.label_bound)
        return (
            Block("sums", k, j, l1=math.sqrt(k) * j, l2=j),
            Block("rows", 1, 1.0, l1=1.0, l2=1.0, kind=COUNT),
            Block("products", k * (k + 1) // 2, j * j, l1=(k + 1) * j * j / 2, l2=j * j),
        )

    def sums(self, spec: LinregSpec, rows: Rows) -> dict[str, np.ndarray]:
        mom = moments.local_moments(rows.x, [None], [ALL_ROWS])
        return moment_sums(mom, rows.x.shape[1])

    def spark_sums(self, spec: LinregSpec, site: Any, bound: float) -> dict[str, np.ndarray]:
        columns = [*spec.features, spec.label_column]
        return moment_sums(site.spark_moments(columns, [], bound), len(columns))

    def fit(self, spec: LinregSpec, totals: Totals, release: Release) -> Fit:
        """The fit a round's totals give, in natural units."""
        d, ridge = len(spec.features), release.settings
        fit = fit_from_totals(totals, d, ridge, release.noisy, release.noise_std)
        return fit.in_natural_units(release.bounds) if release.bounds else fit

    def result(self, spec: LinregSpec, totals: Totals, release: Release) -> dict[str, Any]:
        fit = self.fit(spec, totals, release)
        tests = t_tests(fit)
        terms = [INTERCEPT, *spec.features]

        def by_term(values: Any) -> dict[str, float]:
            return {k: float(v) for k, v in zip(terms, values, strict=True)}

        return {
            "method": "ridge" if release.settings > 0 else "ols",
            "features": list(spec.features),
            "label_column": spec.label_column,
            "ridge": release.settings,
            "n_rows": fit.n,
            "df_residual": fit.df,
            "terms": terms,
            "coefficients": by_term(tests["coef"]),
            "std_errors": by_term(fit.std_errors),
            "t_statistics": by_term(tests["t"]),
            "p_values": by_term(tests["p"]),
            "ci_level": CI_LEVEL,
            "ci_lower": by_term(tests["lower"]),
            "ci_upper": by_term(tests["upper"]),
            "r_squared": fit.r_squared,
            "adj_r_squared": fit.adj_r_squared,
            "residual_std_error": fit.residual_std_error,
            "label_bound": spec.label_bound if release.noisy else None,
            "noise_std_errors": None,
        }

    def figures(self, spec: LinregSpec, result: Mapping[str, Any]) -> dict[str, float]:
        """Every coefficient and R^2."""
        figures = {f"coefficient {t}": result["coefficients"][t] for t in result["terms"]}
        return figures | {"r_squared": result["r_squared"]}

    def with_noise(
        self, spec: LinregSpec, result: dict[str, Any], noise_std: Mapping[str, float]
    ) -> dict[str, Any]:
        """The noise's own error of every term, beside the sampling errors."""
        noise = {t: noise_std[f"coefficient {t}"] for t in result["terms"]}
        return result | {"noise_std_errors": noise}

    def noise_report(
        self, spec: LinregSpec, result: Mapping[str, Any], totals: Totals, release: Release
    ) -> NoiseReport:
        floored = self.fit(spec, totals, release).floored
        d, c, b = len(spec.features), release.bound, spec.label_bound
        warnings = []
        if floored:
            warnings.append(
                ReleaseWarning(
                    "spread of the features",
                    f"{floored} of {d} directions of the features' spread are below what the "
                    "noise alone could make: the fit is shrunk there (raise epsilon, pool more "
                    "rows)",
                )
            )
        return NoiseReport(
            None,
            warnings,
            mechanism="distributed Skellam noise on the encoded moments of [x, y]",
            post_processing="eigenvalues of the noisy centered X'X floored at "
            f"{FLOOR_FACTOR:g} sqrt(d) sigma (1 + max mean(x)^2): {floored} of {d} raised (the "
            f"fit is shrunk in those directions); the RSS kept at least {FLOOR_FACTOR:g} "
            "sqrt(d + 1) sigma (1 + max mean^2) (1 + |beta|^2) and S_yy at least the RSS; the "
            "noisy row count rounded to whole rows",
            note=f"features clipped to L2 norm {c:g} and labels to [-{b:g}, {b:g}] at each "
            "owner; every owner charged its ledger; std_errors exclude the noise (see "
            "noise_std_errors)",
        )

    def preview(self, plan: Any, rows: int | None) -> dict[str, Any]:
        return noise_preview(plan, rows)

    def preview_lines(self, doc: Mapping[str, Any], rows: int | None) -> list[str]:
        lines = [
            f"each released moment carries noise of std {doc['noise_std_per_value']:.4g} "
            f"(epsilon {doc['epsilon']:g}, delta {doc['delta']:g}, features clipped to "
            f"{doc['row_norm_bound']:g}, labels to +/-{doc['label_bound']:g})"
        ]
        if rows is None:
            return lines
        for term, err in doc["std_error"].items():
            lines.append(f"  {term}: +/- {err:.4g} (1 std, from the noise)")
        lines.append(
            "  (for features spread as far as the clipping allows, means and coefficients "
            "near 0: less spread is noisier)"
        )
        return lines

    def describe(self, spec: LinregSpec) -> str:
        return f"linear regression of {spec.label_column} on {len(spec.features)} feature(s)"

    def preview_data(
        self, spec: LinregSpec, columns: dict[str, np.ndarray], rng: np.random.Generator
    ) -> tuple[dict[str, np.ndarray], str]:
        """The preview's label depends on the features: half its variance explained by them,
        in equal parts (a label independent of them would make every coefficient 0, and the
        preview would call each one noise whatever epsilon)."""
        x = np.column_stack([columns[f] for f in spec.features])
        y = columns[spec.label_column]
        sd_x = np.maximum(x.std(axis=0), 1e-300)
        sd_y, mean_y = float(y.std()), float(y.mean())
        d = len(spec.features)
        beta = sd_y * math.sqrt(EXPLAINED / d) / sd_x
        noise = rng.normal(0.0, sd_y * math.sqrt(1 - EXPLAINED), size=len(y))
        label = mean_y + (x - x.mean(axis=0)) @ beta + noise
        return columns | {spec.label_column: label}, (
            f"{spec.label_column} = its mean + a linear function of the features explaining "
            f"{EXPLAINED:.0%} of its variance in equal parts + normal noise"
        )


PROTOCOL = registry.register(SecureSumProtocol(Linreg()))
