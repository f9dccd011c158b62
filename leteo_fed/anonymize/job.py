"""The data steward's anonymization job: read, check, pseudonymize, anonymize, write, measure.

Everything that can be refused is refused before the algorithm runs (bad config, unknown column,
missing values, a value outside its hierarchy, a short or exposed HMAC key). The output is first
written to a temporary sibling of the target, measured there, and only moved into place when the
suppression limit and every configured privacy model hold on it, so a failed job leaves no output
behind. Two engines do the work (:mod:`engines.choice` picks one): :mod:`engines.spark.job`,
where rows never reach the driver, and :mod:`engines.local.job`, in process for inputs that fit
in memory. Both hand back a measured release in the staging folder (:mod:`engines.base`); the
policy below (limits, report, publishing) is one.
"""

from __future__ import annotations

import math
import shutil
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from leteo_fed import __version__, extras
from leteo_fed.anonymize.engines.base import AnonymizationFailed, JobInput, Staged
from leteo_fed.anonymize.engines.choice import EngineChoice, choose, load_engine
from leteo_fed.anonymize.inputs import FORMATS, input_format
from leteo_fed.anonymize.models.config import AnonymizationConfig, load_config
from leteo_fed.anonymize.output import Output, default_report_path, publish, remove
from leteo_fed.errors import ConfigError, DataError
from leteo_fed.fileio import atomic_write_json

Progress = Callable[[str], None]

__all__ = [
    "FORMATS",
    "AnonymizationFailed",
    "JobInput",
    "Output",
    "Staged",
    "default_report_path",
    "input_format",
    "run_job",
    "stderr_progress",
]


def stderr_progress(line: str) -> None:
    """Default progress sink: one plain line per step on stderr."""
    print(line, file=sys.stderr, flush=True)


def _check_release(measured: dict[str, Any], config: AnonymizationConfig) -> None:
    rows = measured["rows"]
    allowed = math.floor(config.suppression_limit * rows["in"] + 1e-9)
    if rows["suppressed"] > allowed:
        raise DataError(
            f"{rows['suppressed']} of {rows['in']} rows would be suppressed; "
            f"anonymization.suppression_limit = {config.suppression_limit} allows {allowed}",
            field="anonymization.suppression_limit",
        )


def _failed_models(measured: dict[str, Any]) -> list[str]:
    privacy = measured["privacy"]
    bad = [] if privacy["k_anonymity"]["holds"] else ["k-anonymity"]
    for model in ("l_diversity", "t_closeness"):
        bad += [f"{model}[{c}]" for c, e in privacy[model].items() if e["holds"] is False]
    return bad


def plan_job(
    input_path: str | Path,
    config_path: str | Path,
    out_path: str | Path,
    input_fmt: str | None = None,
    engine: str | None = None,
) -> tuple[JobInput, EngineChoice]:
    """Everything checked before any row is read: config, key, paths, format, engine."""
    config = load_config(config_path)
    hierarchies = config.load_hierarchies()
    out = Output.of(out_path)
    if Path(str(input_path)).absolute() == out.path:
        raise ConfigError(f"--out {out.path} is the input; write the release somewhere else")
    fmt = input_format(str(input_path), input_fmt)
    key = None
    if config.identifiers.pseudonymize:
        from leteo_fed.anonymize.keys import load_key

        key = load_key(config.identifiers)
    choice = choose(engine or config.engine, str(input_path), fmt)
    if choice.used == "spark":
        extras.require("pyspark")
    return JobInput(str(input_path), fmt, config, hierarchies, key, out), choice


def run_job(
    input_path: str | Path,
    config_path: str | Path,
    out_path: str | Path,
    report_path: str | Path | None = None,
    progress: Progress | None = stderr_progress,
    input_fmt: str | None = None,
    engine: str | None = None,
    command: str | None = None,
) -> dict[str, Any]:
    """Anonymize ``input_path`` per the TOML at ``config_path``; returns the report (also written).

    ``engine`` (auto, local, spark) overrides the config's ``anonymization.engine``;
    ``command`` (the command line) goes into the report as the way to reproduce it. Beside the
    JSON report goes its HTML page (same name, ``.html``). Raises
    ConfigError / DataError / KeyStoreError / MissingExtra (bad input, nothing written) or
    :class:`AnonymizationFailed` (the release missed its own privacy models; the report is
    written with ``published: false`` but the output is not).
    """
    say = progress or (lambda _line: None)
    t0 = time.perf_counter()
    job, choice = plan_job(input_path, config_path, out_path, input_fmt, engine)
    report_file = Path(report_path) if report_path is not None else default_report_path(job.out)
    say(f"engine: {choice.used} ({choice.reason})")
    release = load_engine(choice.used)
    staging = job.out.staging()
    try:
        staged = release(job, staging, say)
        _check_release(staged.measured, job.config)
        failed = _failed_models(staged.measured)
        report = _report(staged, job, choice, report_file, published=not failed)
        report["parameters"] = _parameters(job.config, engine)
        report["reproduce"] = command
        if failed:
            _write_reports(report_file, report)
            raise AnonymizationFailed(
                f"the release does not meet {', '.join(failed)}; nothing published "
                f"(report: {report_file})"
            )
        publish(staged.written, staging, job.out)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    report["timings_s"]["total"] = time.perf_counter() - t0
    try:
        _write_reports(report_file, report)
    except BaseException:
        remove(job.out.path)
        raise
    return report


def _write_reports(report_file: Path, report: dict[str, Any]) -> None:
    """The JSON, then the page a data protection officer reads (same name, .html)."""
    from leteo_fed.report.anonymization import anonymization_page

    atomic_write_json(report_file, report)
    anonymization_page(report).write(report_file.with_suffix(".html"))


def _parameters(config: AnonymizationConfig, engine: str | None) -> dict[str, Any]:
    """Every parameter of the release with where it came from."""
    source = f"config {config.source}" if config.source else "config"

    def entry(value: Any, where: str = source) -> dict[str, Any]:
        return {"value": value, "source": where}

    sensitive = {
        s.column: {
            "l_diversity": None
            if s.l_diversity is None
            else {"variant": s.l_diversity.variant, "l": s.l_diversity.l, "c": s.l_diversity.c},
            "t_closeness": None
            if s.t_closeness is None
            else {"t": s.t_closeness.t, "distance": s.t_closeness.distance},
            "hierarchy": str(s.hierarchy) if s.hierarchy else None,
        }
        for s in config.sensitive
    }
    return {
        "algorithm": entry(config.algorithm),
        "k": entry(config.k),
        "suppression_limit": entry(config.suppression_limit),
        "info_gain": entry(config.info_gain),
        "risk_threshold": entry(config.risk_threshold),
        "quasi_identifiers": entry(
            {
                q.column: {"type": q.type, "hierarchy": str(q.hierarchy) if q.hierarchy else None}
                for q in config.quasi_identifiers
            }
        ),
        "sensitive": entry(sensitive),
        "engine": entry(engine, "command line") if engine else entry(config.engine),
    }


def _report(
    staged: Staged,
    job: JobInput,
    choice: EngineChoice,
    report_file: Path,
    *,
    published: bool,
) -> dict[str, Any]:
    measured, config, stats = staged.measured, job.config, staged.stats
    rows = dict(measured["rows"])
    rows["suppression_limit"] = config.suppression_limit
    ids = config.identifiers
    return {
        "leteo_fed_version": __version__,
        "job": {
            "algorithm": config.algorithm,
            "config": str(config.source) if config.source else None,
            "input": job.path,
            "input_format": job.fmt,
            "output": str(job.out.path),
            "output_format": job.out.fmt,
            "engine": choice.as_dict(),
            "published": published,
            "report": str(report_file),
        },
        "measured_on": staged.measured_on + " (not taken from the algorithm)",
        "rows": rows,
        "classes": measured["classes"],
        "privacy": measured["privacy"],
        "information_loss": measured["information_loss"],
        "risk": measured["risk"],
        "identifiers": {
            "dropped": list(ids.drop),
            "pseudonymized": list(ids.pseudonymize),
            "pseudonym": "HMAC-SHA256, lowercase hex" if ids.pseudonymize else None,
        },
        "algorithm_stats": {
            "rounds": int(stats.rounds),
            "partitions": int(stats.n_partitions),
            "rows": int(stats.n_rows),
            "suppressed": int(stats.n_suppressed),
        },
        "timings_s": dict(staged.timings),
    }
