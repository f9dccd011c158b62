"""Naive Bayes on categorical data under local DP (Yilmaz, Al-Rubaie, Chang, DSAA 2020).

Protocol
--------
k classes, n categorical features, feature i with n_i values. Every user (row) has a label
c in [0, k) and one value a_i in [0, n_i) per feature. There are n + 1 report types:

- ``PRIOR``: the user reports c through a frequency oracle over [0, k);
- feature i (the type is named after the feature): the user reports the PAIR code
  v_i = a_i * k + c through a frequency oracle over [0, k * n_i). Encoding the pair in one value
  keeps the feature-label link that the conditionals need.

Each user is assigned ONE report type uniformly at random (``client_reports``; equivalently the
server splits the users into n + 1 groups) and sends one report at the full ε. The assignment
does not depend on the data, and whatever the type, the reported value is a function of the
user's record passed through an ε-LDP oracle, so for any two records x, x' and any output y,
Pr[y | x] / Pr[y | x'] <= e^ε: the report is ε-LDP for the WHOLE record (features and label).
Sending all n + 1 reports would instead cost (n + 1)ε by composition; the price of sending one is
that each quantity is estimated from about N / (n + 1) users.

Server side
-----------
For each type t with n_t reports the oracle gives unbiased counts Ê_t (``FrequencyOracle``).
They are scaled by the group's sampling fraction, Ê_t * N / n_t with N = Σ_t n_t, so every
type estimates population counts; then, as post-processing (no privacy cost, but biased), counts
below ``floor`` (default 1: negative estimates are set to 1, the usual textbook smoothing) are
raised to it:

    P(C = j)          = Ẽ_j / Σ_h Ẽ_h                (prior group)
    P(F_i = x | C = j) = Ẽ_{x k + j} / Σ_h Ẽ_{h k + j}  (feature-i group)

and ``predict`` takes argmax_j log P(C = j) + Σ_i log P(F_i = x_i | C = j). The unscaled
per-type estimates (with their exact variance) are kept in ``estimates_`` for diagnostics.

Values are strings from declared, public domains (``feature_domains``, ``classes``); any other
value, a missing column or a null is refused with a ``DataError`` naming the column.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from leteo_fed.errors import DataError
from leteo_fed.ldp._checks import check_count
from leteo_fed.ldp.frequency import FrequencyEstimate, FrequencyOracle, make_oracle

PRIOR = "__prior__"  # report type of the class-prior group; not allowed as a feature name
LABEL_FIELD = "label"  # DataError field for bad labels


class _Domain:
    """A declared domain of strings with vectorised string -> code lookup."""

    def __init__(self, name: str, values: Sequence[str], *, minimum: int) -> None:
        if isinstance(values, (str, bytes)) or not isinstance(values, Sequence):
            raise DataError(f"domain of {name!r} must be a list of strings", field=name)
        vals = list(values)
        if len(vals) < minimum:
            raise DataError(
                f"domain of {name!r} must have at least {minimum} value(s), got {len(vals)}",
                field=name,
            )
        if not all(isinstance(v, str) for v in vals):
            raise DataError(f"domain of {name!r} must contain only strings", field=name)
        if len(set(vals)) != len(vals):
            raise DataError(f"domain of {name!r} has duplicate values", field=name)
        self.name = name
        self.values = np.array(vals, dtype=str)
        self._order = np.argsort(self.values, kind="stable")
        self._sorted = self.values[self._order]

    def __len__(self) -> int:
        return int(self.values.size)

    def encode(self, column: Any) -> np.ndarray:
        """Codes in [0, len) for a 1-D column of strings; DataError naming the column otherwise."""
        arr = _as_string_array(column, self.name)
        if arr.size == 0:
            return np.zeros(0, dtype=np.int64)
        pos = np.minimum(np.searchsorted(self._sorted, arr), len(self) - 1)
        ok = self._sorted[pos] == arr
        if not ok.all():
            bad = arr[~ok]
            raise DataError(
                f"column {self.name!r}: value {str(bad[0])!r} is not in the declared domain "
                f"({bad.size} such value(s))",
                field=self.name,
            )
        return self._order[pos].astype(np.int64)


class LdpNaiveBayes:
    """Categorical naive Bayes trained from ε-LDP reports (one report per user, see module doc).

    ``mechanism`` is any name accepted by ``make_oracle`` (grr, sue, oue, she, the, olh);
    ``oracle_options`` (theta / g) are passed through to every oracle. ``floor`` (> 0) is the
    smallest population count kept after estimation (post-processing smoothing).

    Client side: ``client_reports``. Server side: ``summarize`` (chunkable) then
    ``fit_from_reports``, or ``fit`` directly on the reports. Then ``predict`` /
    ``predict_log_proba`` / ``predict_proba``.
    """

    def __init__(
        self,
        mechanism: str,
        epsilon: float,
        feature_domains: Mapping[str, Sequence[str]],
        classes: Sequence[str],
        *,
        floor: float = 1.0,
        **oracle_options: Any,
    ) -> None:
        if not isinstance(feature_domains, Mapping) or not feature_domains:
            raise DataError(
                "feature_domains must be a non-empty mapping {feature: [values]}",
                field="feature_domains",
            )
        self.classes = _Domain(LABEL_FIELD, classes, minimum=2)
        self.domains: dict[str, _Domain] = {}
        for name, values in feature_domains.items():
            if not isinstance(name, str) or not name:
                raise DataError(f"feature names must be non-empty strings, got {name!r}")
            if name == PRIOR:
                raise DataError(f"{PRIOR!r} is reserved for the prior report type", field=name)
            self.domains[name] = _Domain(name, values, minimum=1)
        try:
            fl = float(floor)
        except (TypeError, ValueError):
            fl = math.nan
        if not (math.isfinite(fl) and fl > 0):
            raise DataError(f"floor must be a finite number > 0, got {floor!r}", field="floor")
        self.floor = fl
        k = len(self.classes)
        self.oracles: dict[str, FrequencyOracle] = {
            PRIOR: make_oracle(mechanism, epsilon, k, **oracle_options)
        }
        for name, dom in self.domains.items():
            self.oracles[name] = make_oracle(mechanism, epsilon, k * len(dom), **oracle_options)
        self.mechanism = self.oracles[PRIOR].name
        self.epsilon = self.oracles[PRIOR].epsilon
        # fitted state
        self.class_log_prior_: np.ndarray | None = None
        self.feature_log_prob_: dict[str, np.ndarray] = {}  # name -> (n_i, k) log P(x | c)
        self.estimates_: dict[str, FrequencyEstimate] = {}  # unscaled, per report type
        self.group_sizes_: dict[str, int] = {}

    # ------------------------------------------------------------------ metadata
    @property
    def features(self) -> list[str]:
        return list(self.domains)

    @property
    def report_types(self) -> list[str]:
        """``[PRIOR, *features]``: the n + 1 groups a user can be assigned to."""
        return [PRIOR, *self.domains]

    @property
    def classes_(self) -> np.ndarray:
        return self.classes.values.copy()

    # ------------------------------------------------------------------ encoding
    def encode(self, rows: Any) -> np.ndarray:
        """(m, n_features) int64 codes, columns in ``features`` order.

        ``rows`` is a mapping {feature: 1-D array of strings} or a pyarrow Table / RecordBatch
        (anything with ``column_names`` and ``column(name)``); extra columns are ignored.
        """
        cols = [dom.encode(_get_column(rows, name)) for name, dom in self.domains.items()]
        sizes = {c.size for c in cols}
        if len(sizes) != 1:
            raise DataError("feature columns have different lengths", field="rows")
        return np.stack(cols, axis=1)

    def encode_labels(self, labels: Any) -> np.ndarray:
        """Class codes in [0, k) (index into ``classes_``)."""
        return self.classes.encode(labels)

    # ------------------------------------------------------------------ client side
    def client_reports(
        self, rows: Any, labels: Any, rng: np.random.Generator
    ) -> list[tuple[str, np.ndarray]]:
        """Simulate the users: assign each row one report type uniformly, encode, perturb.

        Returns ``[(report_type, reports), ...]`` in ``report_types`` order (a type with no user
        gets an empty report array). Each user contributes exactly one report, produced at the
        full ε: ε-LDP for the whole record (module docstring). Vectorised per type.
        """
        if not isinstance(rng, np.random.Generator):
            raise DataError("rng must be a numpy.random.Generator", field="rng")
        x = self.encode(rows)
        y = self.encode_labels(labels)
        if x.shape[0] != y.shape[0]:
            raise DataError(f"{x.shape[0]} rows but {y.shape[0]} labels", field=LABEL_FIELD)
        k = len(self.classes)
        types = self.report_types
        assignment = rng.integers(0, len(types), size=y.shape[0])
        out: list[tuple[str, np.ndarray]] = []
        for t, rtype in enumerate(types):
            sel = assignment == t
            values = y[sel] if t == 0 else x[sel, t - 1] * k + y[sel]
            out.append((rtype, self.oracles[rtype].perturb(values, rng)))
        return out

    # ------------------------------------------------------------------ server side
    def summarize(self, report_type: str, reports: np.ndarray) -> tuple[str, np.ndarray, int]:
        """``(report_type, support, n)`` for one chunk of reports; supports add up over chunks."""
        oracle = self._oracle(report_type)
        r = np.asarray(reports)
        support = oracle.support(r)
        return report_type, support, int(r.shape[0]) if r.ndim else 0

    def fit(self, reports: Iterable[tuple[str, np.ndarray]]) -> LdpNaiveBayes:
        """Fit from ``[(report_type, reports), ...]`` (several chunks per type allowed)."""
        return self.fit_from_reports(self.summarize(t, r) for t, r in reports)

    def fit_from_reports(self, summaries: Iterable[tuple[str, np.ndarray, int]]) -> LdpNaiveBayes:
        """Fit from ``[(report_type, support, n), ...]``; chunks of the same type are summed.

        Every report type must have at least one report. Estimates are scaled by N / n_t,
        clipped below at ``floor`` and normalised (module docstring).
        """
        supports: dict[str, np.ndarray] = {}
        counts: dict[str, int] = {}
        for item in summaries:
            try:
                rtype, support, n = item
            except (TypeError, ValueError):
                raise DataError(
                    "each summary must be (report_type, support, n)", field="reports"
                ) from None
            oracle = self._oracle(rtype)
            s = np.asarray(support, dtype=np.float64)
            if s.shape != (oracle.d,) or not np.all(np.isfinite(s)):
                raise DataError(
                    f"support for {rtype!r} must be a finite array of shape ({oracle.d},)",
                    field=rtype,
                )
            supports[rtype] = supports.get(rtype, 0.0) + s
            counts[rtype] = counts.get(rtype, 0) + check_count(n, minimum=0, field=rtype)
        missing = [t for t in self.report_types if counts.get(t, 0) == 0]
        if missing:
            raise DataError(f"no reports for report type(s) {missing}", field=missing[0])
        total = sum(counts.values())
        k = len(self.classes)
        estimates: dict[str, FrequencyEstimate] = {}
        smoothed: dict[str, np.ndarray] = {}
        for rtype in self.report_types:
            est = self.oracles[rtype].estimate(supports[rtype], counts[rtype])
            estimates[rtype] = est
            scaled = est.counts * (total / counts[rtype])  # population-count scale
            smoothed[rtype] = np.maximum(scaled, self.floor)  # post-processing
        prior = smoothed[PRIOR]
        self.class_log_prior_ = np.log(prior) - np.log(prior.sum())
        self.feature_log_prob_ = {}
        for name, dom in self.domains.items():
            table = smoothed[name].reshape(len(dom), k)  # [value, class] (code = value * k + c)
            self.feature_log_prob_[name] = np.log(table) - np.log(table.sum(axis=0))
        self.estimates_ = estimates
        self.group_sizes_ = dict(counts)
        return self

    # ------------------------------------------------------------------ prediction
    def joint_log_likelihood(self, rows: Any) -> np.ndarray:
        """(m, k): log P(C = j) + Σ_i log P(F_i = x_i | C = j)."""
        if self.class_log_prior_ is None:
            raise DataError("the model is not fitted yet: call fit first", field="model")
        x = self.encode(rows)
        jll = np.tile(self.class_log_prior_, (x.shape[0], 1))
        for i, name in enumerate(self.domains):
            jll += self.feature_log_prob_[name][x[:, i], :]
        return jll

    def predict_log_proba(self, rows: Any) -> np.ndarray:
        """(m, k) normalised log posteriors, columns in ``classes_`` order."""
        jll = self.joint_log_likelihood(rows)
        from scipy.special import logsumexp  # prediction only: owners never load it

        return jll - logsumexp(jll, axis=1, keepdims=True)

    def predict_proba(self, rows: Any) -> np.ndarray:
        return np.exp(self.predict_log_proba(rows))

    def predict(self, rows: Any) -> np.ndarray:
        """Predicted class labels (strings from ``classes``)."""
        return self.classes.values[np.argmax(self.joint_log_likelihood(rows), axis=1)]

    def conditional(self, feature: str) -> np.ndarray:
        """(n_i, k) estimated P(F = x | C = j) for one feature (columns sum to 1)."""
        if feature not in self.feature_log_prob_:
            raise DataError(f"unknown or unfitted feature {feature!r}", field=feature)
        return np.exp(self.feature_log_prob_[feature])

    # ------------------------------------------------------------------ helpers
    def _oracle(self, report_type: Any) -> FrequencyOracle:
        if not isinstance(report_type, str) or report_type not in self.oracles:
            raise DataError(
                f"unknown report type {report_type!r}; expected one of {self.report_types}",
                field="report_type",
            )
        return self.oracles[report_type]


def _get_column(rows: Any, name: str) -> Any:
    if hasattr(rows, "column_names") and hasattr(rows, "column"):  # pyarrow Table / RecordBatch
        if name not in rows.column_names:
            raise DataError(f"missing column {name!r}", field=name)
        col = rows.column(name)
        if getattr(col, "null_count", 0):
            raise DataError(f"column {name!r} has {col.null_count} null value(s)", field=name)
        return np.asarray(col.to_pylist(), dtype=object)
    if isinstance(rows, Mapping):
        if name not in rows:
            raise DataError(f"missing column {name!r}", field=name)
        return rows[name]
    raise DataError(
        "rows must be a mapping {column: array} or a pyarrow Table / RecordBatch", field="rows"
    )


def _as_string_array(column: Any, name: str) -> np.ndarray:
    """A 1-D numpy unicode array; DataError naming the column for anything that is not strings."""
    arr = np.asarray(column)
    if arr.ndim != 1:
        raise DataError(f"column {name!r} must be 1-D, got shape {arr.shape}", field=name)
    if arr.size == 0:
        return np.zeros(0, dtype=str)
    if arr.dtype.kind == "U":
        return arr
    if arr.dtype.kind in ("O", "T"):
        is_str = np.fromiter((isinstance(v, str) for v in arr), dtype=bool, count=arr.size)
        if not is_str.all():
            bad = arr[~is_str][0]
            raise DataError(
                f"column {name!r} must hold strings, found {bad!r} "
                f"({int((~is_str).sum())} non-string value(s))",
                field=name,
            )
        return arr.astype(str)
    raise DataError(f"column {name!r} must hold strings, got dtype {arr.dtype}", field=name)


__all__ = ["LABEL_FIELD", "PRIOR", "LdpNaiveBayes"]
