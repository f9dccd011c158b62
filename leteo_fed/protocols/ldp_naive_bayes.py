"""LDP naive Bayes as a report statistic: class priors and P(value | class) per feature.

Each owner draws, per record, one report type at random (the label, or one feature's value
jointly with the label) and perturbs it with the round's frequency oracle (GRR, OUE, OLH;
`leteo_fed.ldp.naive_bayes`, after Yilmaz et al. 2020): one report per record at the full
epsilon. A report travels as one row, its type first (`nb_report_rows`). The aggregator folds
the support of every report type and fits the model at the end; the standard errors, the
preview and the warnings are in `ldp_naive_bayes_noise`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np

from leteo_fed.errors import DataError, ProtocolError
from leteo_fed.ldp.naive_bayes import LdpNaiveBayes
from leteo_fed.privacy.budget import check_epsilon
from leteo_fed.privacy.noise_gate import ReleaseWarning, SignalCheck
from leteo_fed.protocols import ldp_naive_bayes_noise as nb_noise
from leteo_fed.protocols.ldp_noise import Expectation, finish
from leteo_fed.protocols.ldp_spec import (
    CHUNK_REPORTS,
    FeatureDomain,
    LdpRequest,
    LdpSpec,
    NbConditional,
)
from leteo_fed.protocols.reports import ReportFacts, ReportStatistic, facts, register
from leteo_fed.protocols.results import result_type

NB_ORACLES = ("grr", "oue", "olh")  # frequency oracles whose reports carry a type
MAX_NB_FEATURES = 254  # the report type travels in the first byte of an OUE report
NAIVE_BAYES_LABEL = "ldp_naive_bayes"  # the round label (owner policies, jobs) of naive Bayes


@result_type
@dataclass(frozen=True, kw_only=True)
class LdpNaiveBayesResult(ReportFacts):
    """An LDP naive Bayes model: class priors, P(value | class) per feature, reports per type."""

    wire: ClassVar[str] = "ldp_naive_bayes"
    classes: list[str]
    features: list[str]
    priors: dict[str, float]
    conditionals: dict[str, NbConditional]
    report_counts: dict[str, int]

    def std_errors(self) -> dict:
        """{"priors": {class: std error}, "conditionals": {feature: {class: [std error per
        value]}}}: the delta method over the oracle's covariance at the released figures
        (post-processing; `ldp_naive_bayes_noise.nb_std_errors`)."""
        return nb_noise.nb_std_errors_of(self.to_dict())

    def table(self) -> tuple[dict[str, list], list, str]:
        """A row per (feature, value): P(value | class) for each class."""
        index: list = []
        cols: dict[str, list] = {"feature": [], "value": [], **{c: [] for c in self.classes}}
        for name in self.features:
            cond = self.conditionals[name]
            for i, value in enumerate(cond.values):
                index.append(f"{name}={value}")
                cols["feature"].append(name)
                cols["value"].append(value)
                for c in self.classes:
                    cols[c].append(cond.by_class[c][i])
        return cols, index, "feature_value"


def naive_bayes_model(spec: LdpSpec) -> LdpNaiveBayes:
    """The (unfitted) model a naive Bayes round's public parameters define."""
    return LdpNaiveBayes(
        spec.mechanism,
        spec.epsilon,
        {f.name: list(f.values) for f in spec.features},
        list(spec.classes),
    )


def nb_report_rows(spec: LdpSpec, per_type: list[tuple[str, np.ndarray]], rng) -> np.ndarray:
    """The owner's wire form of `LdpNaiveBayes.client_reports`: one row per record, its type
    first (see NbAccumulator), rows shuffled so their order says nothing about the records'."""
    model = naive_bayes_model(spec)
    width = 1 + max(o.d for o in model.oracles.values())
    blocks = []
    for t, (_, reports) in enumerate(per_type):
        r = np.asarray(reports)
        if spec.mechanism == "oue":
            block = np.zeros((len(r), width), dtype=np.uint8)
            block[:, 0] = t
            if len(r):
                block[:, 1 : 1 + r.shape[1]] = r
        else:
            body = r.reshape(len(r), -1).astype(np.int64)
            block = np.column_stack([np.full(len(r), t, dtype=np.int64), body])
        blocks.append(block)
    out = np.concatenate(blocks)
    return out[rng.permutation(len(out))]


def nb_predict(result: dict, rows: dict[str, Sequence[str]]) -> list[str]:
    """Classify rows {feature: values} with a naive Bayes result document (argmax of the log
    prior plus the log conditionals); a value outside a feature's domain is a DataError."""
    classes = list(result["classes"])
    jll = np.log(np.array([result["priors"][c] for c in classes]))[None, :]
    total = None
    for name in result["features"]:
        cond = result["conditionals"][name]
        if isinstance(cond, NbConditional):  # the accumulator's document, before JSON
            cond = {"values": cond.values, "by_class": cond.by_class}
        index = {v: i for i, v in enumerate(cond["values"])}
        if name not in rows:
            raise DataError(f"the rows lack feature column {name!r}", field=name)
        codes = np.array([index.get(str(v), -1) for v in rows[name]], dtype=np.int64)
        if np.any(codes < 0):
            bad = next(str(v) for v, c in zip(rows[name], codes, strict=True) if c < 0)
            raise DataError(f"column {name!r}: value {bad!r} is not in its domain", field=name)
        table = np.log(np.array([cond["by_class"][c] for c in classes]).T)  # (values, classes)
        part = table[codes]
        total = part if total is None else total + part
    scores = jll if total is None else total + jll
    return [classes[i] for i in np.argmax(scores, axis=1)]


# {report type: (support, reports of that type)} of one batch, and its reports
NbContribution = tuple[int, dict[str, tuple[np.ndarray, int]]]


@dataclass
class NbAccumulator:
    """Per report type, the running support of a naive Bayes round's reports.

    A report is one row: its type (0 = the prior, i = feature i) then the oracle's report of
    that type: GRR (type, value), OLH (type, seed, hashed value), OUE (type, bits..., zero
    padding to the widest type) as uint8. Chunks are validated before they are folded; only
    the supports are kept (so there is nothing to spill to Spark).
    """

    spec: LdpSpec
    n: int = 0
    engine: str = "numpy"
    supports: dict[str, np.ndarray] = field(default_factory=dict)
    counts: dict[str, int] = field(default_factory=dict)
    _model: Any = field(default=None, repr=False)
    keeps_points: ClassVar[bool] = True  # supports per type are kept in memory

    def __post_init__(self) -> None:
        self._model = naive_bayes_model(self.spec)

    def check(self, reports: np.ndarray) -> None:
        self.partial(reports)

    def partial(self, reports: np.ndarray) -> NbContribution:
        model: LdpNaiveBayes = self._model
        types = model.report_types
        r = np.asarray(reports)
        width = {"grr": 2, "olh": 3}.get(self.spec.mechanism)
        if width is None:  # oue
            width = 1 + max(o.d for o in model.oracles.values())
            ok = r.dtype == np.uint8 and r.ndim == 2 and r.shape[1] == width
        else:
            ok = r.ndim == 2 and r.shape[1] == width and np.issubdtype(r.dtype, np.integer)
        if not ok:
            raise ProtocolError(
                f"naive Bayes {self.spec.mechanism} reports must be rows of {width} integers "
                "(the report type first)"
            )
        kind = r[:, 0].astype(np.int64)
        if r.size and (kind.min() < 0 or kind.max() >= len(types)):
            raise ProtocolError(f"a naive Bayes report type outside [0, {len(types)})")
        parts: dict[str, tuple[np.ndarray, int]] = {}
        for t, rtype in enumerate(types):
            rows = r[kind == t, 1:]
            oracle = model.oracles[rtype]
            if self.spec.mechanism == "grr":
                values = rows[:, 0].astype(np.int64)
                if values.size and (values.min() < 0 or values.max() >= oracle.d):
                    raise ProtocolError(f"a {rtype} report outside [0, {oracle.d})")
                support = oracle.support(values)
            elif self.spec.mechanism == "olh":
                support = oracle.support(rows.astype(np.int64))  # checks seeds and ranges
            else:
                if rows.size and (rows.max() > 1 or np.any(rows[:, oracle.d :])):
                    raise ProtocolError(f"a {rtype} report that is not {oracle.d} bits")
                support = oracle.support(np.ascontiguousarray(rows[:, : oracle.d]))
            parts[rtype] = (np.asarray(support, dtype=np.float64), int(rows.shape[0]))
        return len(r), parts

    def fold(self, part: NbContribution) -> None:
        n, parts = part
        self.n += n
        for rtype, (support, count) in parts.items():
            self.supports[rtype] = self.supports.get(rtype, 0.0) + support
            self.counts[rtype] = self.counts.get(rtype, 0) + count

    def add(self, n: int, contribution: Any, engine: str) -> None:
        raise ProtocolError("naive Bayes rounds keep their supports in memory")

    def result(self, consistency: bool = False) -> dict:
        spec = self.spec
        doc = facts(spec, self.n, column=spec.label_column)
        model: LdpNaiveBayes = self._model
        model.fit_from_reports(
            (t, self.supports.get(t, np.zeros(model.oracles[t].d)), self.counts.get(t, 0))
            for t in model.report_types
        )
        classes = list(spec.classes)
        prior = np.exp(model.class_log_prior_)  # type: ignore[arg-type]
        conditionals = {}
        for f in spec.features:
            table = model.conditional(f.name)  # (values, classes)
            conditionals[f.name] = NbConditional(
                f.values, {c: table[:, j].tolist() for j, c in enumerate(classes)}
            )
        return {
            **doc,
            "engine": self.engine,
            "estimator": (
                "one report per record, its type (the prior or one feature) drawn uniformly; "
                "unbiased counts per type scaled by N / n_type, floored at 1 and normalised "
                "(Yilmaz et al. 2020)"
            ),
            "classes": classes,
            "features": [f.name for f in spec.features],
            "priors": dict(zip(classes, map(float, prior), strict=True)),
            "conditionals": conditionals,
            "report_counts": {t: int(self.counts.get(t, 0)) for t in model.report_types},
        }


class NaiveBayesReports(ReportStatistic):
    kind = "naive_bayes"
    mechanisms = NB_ORACLES
    labelled = True
    marks = ("priors",)
    label = NAIVE_BAYES_LABEL

    def spec(self, request: LdpRequest) -> LdpSpec:
        """One report per record, of a type drawn at random (ldp/naive_bayes.py)."""
        if request.column or request.columns or request.domain:
            raise DataError(
                "naive Bayes takes label_column, classes and features (not column, columns or "
                "domain)",
                field="column",
            )
        if request.lower is not None or request.upper is not None or request.box_lower:
            raise DataError("naive Bayes takes categorical features, not bounds", field="lower")
        if request.box_fit or request.bins or request.consistency:
            raise DataError(
                "box_fit, bins and consistency do not apply to naive Bayes", field="box_fit"
            )
        if not request.features:
            raise DataError(
                "naive Bayes needs at least one feature and its values", field="features"
            )
        if len(request.features) > MAX_NB_FEATURES:
            raise DataError(f"at most {MAX_NB_FEATURES} features", field="features")
        names = [f.name for f in request.features]
        if len(set(names)) != len(names):
            raise DataError("features names a column twice", field="features")
        if request.label_column in names:
            raise DataError("the label column cannot also be a feature", field="label_column")
        eps = check_epsilon(request.epsilon)
        spec = LdpSpec(
            column=request.label_column,
            mechanism=request.mechanism,
            epsilon=eps,
            label_column=request.label_column,
            classes=tuple(request.classes),
            features=tuple(FeatureDomain(f.name, tuple(f.values)) for f in request.features),
        )
        naive_bayes_model(spec)  # validates the domains, classes and oracle
        return spec

    def mechanism(self, spec: LdpSpec) -> LdpNaiveBayes:
        """The unfitted model: one oracle per report type."""
        return naive_bayes_model(spec)

    def columns(self, spec: LdpSpec) -> list[str]:
        return [*(f.name for f in spec.features), spec.label_column]

    def describe(self, spec: LdpSpec) -> str:
        names = ", ".join(f.name for f in spec.features)
        return f"naive Bayes on {names} with label {spec.label_column}, one report per record"

    def reports(
        self, spec: LdpSpec, table: Any, rng: np.random.Generator
    ) -> tuple[int, list[np.ndarray]]:
        model = naive_bayes_model(spec)
        rows = {f.name: table.labels(f.name) for f in spec.features}
        try:
            per_type = model.client_reports(rows, table.labels(spec.label_column), rng)
        except DataError as exc:  # a value outside the public classes or a feature's domain
            raise DataError(str(exc), field=exc.field, rule="classes") from exc
        wire = nb_report_rows(spec, per_type, rng)
        return len(wire), [wire[i : i + CHUNK_REPORTS] for i in range(0, len(wire), CHUNK_REPORTS)]

    def accumulator(self, spec: LdpSpec) -> NbAccumulator:
        return NbAccumulator(spec)

    def result_type(self, spec: LdpSpec) -> type[LdpNaiveBayesResult]:
        return LdpNaiveBayesResult

    def preview(self, doc: dict, spec: LdpSpec, rows: int | None, expect: Expectation) -> dict:
        doc["kind"] = "naive_bayes"
        if rows is None:
            return doc
        figures, assumption = nb_noise.nb_preview(naive_bayes_model(spec), spec, rows, expect)
        checks = [SignalCheck(f["figure"], f["expected_std"], 1.0) for f in figures]
        return finish(doc, rows, figures, assumption, checks)

    def release_warnings(self, doc: Mapping[str, Any]) -> list[ReleaseWarning]:
        return nb_noise.nb_warnings(doc)


NAIVE_BAYES = register(NaiveBayesReports())
