"""`synthesize` as one call: read, encode, build the DP model, generate, write atomically.

The engine is chosen as anonymize chooses it (:mod:`leteo_fed.anonymize.engines.choice`); both engines
feed the same driver-side model (:mod:`model`) with the same exact aggregates, so they write the
same table for the same seed and config. Nothing is written until everything has been
computed; then the synthetic table, report.html (the page for the data holder) and report.json
are moved into the output folder (each by an atomic rename), report.json last.
"""

from __future__ import annotations

import os
import secrets
import shutil
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from leteo_fed import __version__
from leteo_fed.anonymize.engines.choice import choose
from leteo_fed.anonymize.inputs import input_format
from leteo_fed.errors import ConfigError
from leteo_fed.fileio import atomic_write_json
from leteo_fed.report.synthetic import synthetic_release
from leteo_fed.synth.config import SynthConfig, load
from leteo_fed.synth.encoding import read_local
from leteo_fed.synth.generation import generate
from leteo_fed.synth.marginal_generation import generate_marginals
from leteo_fed.synth.marginals import MarginalModel, build_marginals
from leteo_fed.synth.model import Aggregator, SynthModel, build, rng
from leteo_fed.synth.report import build_report, warnings_for

RELEASE_NAME = "synthetic"
REPORT_NAME = "report.json"
PAGE_NAME = "report.html"
HOLDOUT_STREAM = 0x686F6C64  # the seed's stream that draws the held-out rows ("hold")


def split_holdout(table: pa.Table, share: float, seed: int) -> tuple[pa.Table, pa.Table]:
    """(rows the model sees, held-out rows): a seeded random `share` of the rows held out."""
    n = table.num_rows
    held = np.zeros(n, dtype=bool)
    held[rng(seed, HOLDOUT_STREAM).permutation(n)[: int(round(share * n))]] = True
    return table.filter(pa.array(~held)), table.filter(pa.array(held))


def _aggregator(
    path: str, fmt: str, engine: str, config: SynthConfig, table: pa.Table | None = None
) -> tuple[Aggregator, dict[str, dict[str, int]], int]:
    if engine == "local":
        from leteo_fed.synth.encoding import encode_table
        from leteo_fed.synth.local_engine import LocalAggregator

        encoded = encode_table(read_local(path, fmt) if table is None else table, config)
        return LocalAggregator(encoded, config), encoded.clipped, encoded.rows
    from leteo_fed import extras

    extras.require("pyspark")
    from leteo_fed.anonymize.engines.spark.job import read_input
    from leteo_fed.data.spark_stats import get_spark
    from leteo_fed.synth.spark_engine import SparkAggregator, encode_frame

    frame, clipped = encode_frame(read_input(get_spark(), path, fmt), config)
    agg = SparkAggregator(frame, config)
    return agg, clipped, int(agg.frame.count())


def _publish(src: Path, dst: Path) -> None:
    """Move src to dst; an existing folder (Parquet) is swapped out and removed after."""
    if dst.is_dir() and not dst.is_symlink():
        old = dst.with_name(f"{dst.name}.old-{uuid.uuid4().hex[:12]}")
        os.replace(dst, old)
        os.replace(src, dst)
        shutil.rmtree(old, ignore_errors=True)
    else:
        os.replace(src, dst)


def write_release(table: Any, folder: Path, release_format: str) -> tuple[Path, Path]:
    """Stage the table in a hidden sibling inside `folder`; returns (staged, final path)."""
    from leteo_fed.anonymize.engines.local.io import write_csv, write_parquet

    folder.mkdir(parents=True, exist_ok=True)
    staging = folder / f".synthesize-{uuid.uuid4().hex[:12]}"
    staging.mkdir()
    staged = staging / f"{RELEASE_NAME}.{release_format}"
    if release_format == "csv":
        write_csv(table, staged)
    else:
        write_parquet(table, staged)
    return staged, folder / staged.name


def run_job(
    input_path: str,
    config_path: Path,
    out_dir: Path,
    *,
    epsilon: float | None = None,
    seed: int | None = None,
    engine: str | None = None,
    rows: int | None = None,
    input_fmt: str | None = None,
    release_format: str = "csv",
    command: list[str] | None = None,
    progress: Callable[[str], None] | None = None,
    holdout: float | None = None,
    seed_source: str | None = None,
) -> tuple[dict[str, Any], SynthModel | MarginalModel]:
    """Run the synthesizer; returns (the report as written, the model for later measures).

    ``holdout`` (in process only): that share of the input rows, drawn with the seed, is kept
    out of the model and used to measure disclosure (holder_only.disclosure)."""
    say = progress or (lambda _msg: None)
    t0 = time.perf_counter()
    config = load(config_path)
    if config.method == "marginals":
        from leteo_fed import extras

        extras.require("mbi")  # before anything is read
    if epsilon is not None:
        config = config.with_epsilon(epsilon)
    if rows is not None and (isinstance(rows, bool) or rows < 0):
        raise ConfigError(f"--rows must be an integer >= 0, got {rows!r}", field="rows")
    if seed is None:
        seed = secrets.randbits(63)
    elif seed < 0:
        raise ConfigError(f"--seed must be >= 0, got {seed}", field="seed")
    if holdout is not None and not 0 < holdout <= 0.5:
        raise ConfigError(f"--holdout must be in (0, 0.5], got {holdout}", field="holdout")
    fmt = input_format(input_path, input_fmt)
    choice = choose(engine or config.engine, input_path, fmt, types=False)
    if holdout is not None and choice.used != "local":
        raise ConfigError(
            "--holdout measures against rows held in memory: it needs the in-process engine "
            f"(--engine local); this input runs on {choice.used}",
            field="holdout",
        )
    timings: dict[str, float] = {}
    say(f"reading and encoding {input_path} ({choice.used} engine)")
    real = held = None
    if choice.used == "local":
        real = read_local(input_path, fmt)
        if holdout is not None:
            real, held = split_holdout(real, holdout, seed)
    agg, clipped, input_rows = _aggregator(input_path, fmt, choice.used, config, real)
    timings["read_encode"] = time.perf_counter() - t0
    t = time.perf_counter()
    model: SynthModel | MarginalModel
    try:
        if config.method == "marginals":
            say("building the DP model (1-way marginals, a DP tree of 2-way ones, Private-PGM)")
            model = build_marginals(agg, config, seed)
        else:
            say("building the DP model (grouping, histograms, cluster statistics)")
            model = build(agg, config, seed)
    finally:
        close = getattr(agg, "close", None)
        if close is not None:
            close()
    timings["model"] = time.perf_counter() - t
    t = time.perf_counter()
    if isinstance(model, MarginalModel):
        say(f"drawing rows along the tree of {len(model.edges)} marginals")
        table = generate_marginals(model, config, seed, rows)
    else:
        if model.found is not None:
            joined = "; ".join(", ".join(g) for g in model.groups if len(g) > 1) or "none"
            above = [" x ".join(p) for p in model.picks or []]
            spent = model.budget["grouping"]
            say(
                f"DP grouping (epsilon {spent['epsilon']:.3g} of {spent['planned_epsilon']:.3g}"
                f" planned, {spent['pair_picks']['picks_made']} of "
                f"{spent['pair_picks']['picks']} picks made): {len(above)} pair(s) above the "
                "noise"
                + (f" ({', '.join(above)})" if above else "")
                + f", {len(model.found) - len(model.groups)} merge(s) that add no noise; "
                f"columns grouped: {joined}"
            )
        say(f"generating rows for {len(model.groups)} groups")
        table = generate(model, config, seed, rows)
    timings["generate"] = time.perf_counter() - t
    t = time.perf_counter()
    say(f"writing {table.num_rows} rows")
    staged, final = write_release(table, out_dir, release_format)
    timings["write"] = time.perf_counter() - t
    timings["total"] = time.perf_counter() - t0
    report = build_report(
        config,
        model,
        rows_written=table.num_rows,
        requested_rows=rows,
        engine=choice.as_dict(),
        timings=timings,
        output=str(final),
        release_format=release_format,
        command=command or [],
        seed=seed,
        clipped=clipped,
        input_rows=input_rows,
        warnings=warnings_for(table, config, model),
    )
    for warning in report["warnings"]:
        say(f"WARNING: {warning}")
    marginals = None
    if real is not None:  # the real rows fit in memory: measure the table against them
        say("measuring the synthetic table against the real rows (for the data holder)")
        from leteo_fed.synth.evaluation import Graded, evaluate, marginal_shares

        graded = Graded.of(real, config), Graded.of(table, config)
        report["holder_only"]["utility"] = evaluate(*graded, config)
        marginals = marginal_shares(*graded, config)
        if held is not None:
            say(f"measuring disclosure against {held.num_rows} held-out rows")
            report["holder_only"]["disclosure"] = disclosure_of(table, real, held, config, seed)
    parameters = _parameters(config, config_path, command or [], seed, seed_source)
    if holdout is not None:
        parameters["holdout"] = {"value": holdout, "source": "command line"}
    page = synthetic_release(report, parameters, marginals, __version__).page()
    try:
        _publish(staged, final)
        page.write(out_dir / PAGE_NAME)
        atomic_write_json(out_dir / REPORT_NAME, report)
    finally:
        shutil.rmtree(staged.parent, ignore_errors=True)
    return report, model


FLAGS = {"epsilon": "--epsilon", "seed": "--seed", "rows": "--rows", "engine": "--engine"}


def disclosure_of(
    synthetic: pa.Table, train: pa.Table, held: pa.Table, config: SynthConfig, seed: int
) -> dict[str, Any]:
    """Distance to closest record and the distance-based membership attack (holder only),
    against as many rows the model saw (a seeded sample) as were held out: equal sets, so a
    generator that does not memorise has a DCR share near 0.5 and the attack a 50/50 prior."""
    from leteo_fed.synth.disclosure import Schema, measure

    schema = Schema(
        numeric={c.name: (c.lo, c.hi) for c in config.columns if c.kind == "numeric"},
        categorical={c.name: c.categories for c in config.columns if c.kind == "categorical"},
    )

    def columns(t: pa.Table) -> dict[str, np.ndarray]:
        return {c.name: t.column(c.name).to_numpy(zero_copy_only=False) for c in config.columns}

    pick = np.sort(rng(seed, HOLDOUT_STREAM, 1).permutation(train.num_rows)[: held.num_rows])
    seen = train.take(pa.array(pick))
    out = measure(columns(synthetic), columns(seen), columns(held), schema, epsilon=config.epsilon)
    out["computed_on"] = (
        f"{seen.num_rows} of the rows the model saw (a seeded sample) and {held.num_rows} "
        "held-out rows (NOT covered by epsilon: for the data holder only)"
    )
    return out


def _parameters(
    config: SynthConfig,
    config_path: Path,
    command: list[str],
    seed: int,
    seed_source: str | None = None,
) -> dict[str, dict[str, Any]]:
    """Every parameter of the release with where it came from (the page's provenance table)."""
    given = {t.split("=", 1)[0] for t in command if t.startswith("--")}
    where = f"config {config_path}"

    def entry(name: str, value: Any) -> dict[str, Any]:
        flag = FLAGS.get(name)
        return {"value": value, "source": "command line" if flag in given else where}

    out = {"method": entry("method", config.method), "epsilon": entry("epsilon", config.epsilon)}
    if config.method == "marginals":
        out["marginal_shares"] = entry("marginal_shares", config.marginal_shares)
    else:
        out["k"] = entry("k", config.k)
        out["groups"] = entry(
            "groups", "dp" if config.groups is None else [list(g) for g in config.groups]
        )
        out["group_split"] = entry("group_split", config.group_split)
        out["shares"] = entry("shares", config.shares)
        out["max_cells"] = entry("max_cells", config.max_cells)
    out["label"] = entry("label", config.label)
    out["classes"] = entry("classes", list(config.classes) if config.label else None)
    out["engine"] = entry("engine", config.engine)
    if seed_source is None:
        seed_source = "command line" if "--seed" in given else "drawn at random (not given)"
    out["seed"] = {"value": seed, "source": seed_source}
    return out
