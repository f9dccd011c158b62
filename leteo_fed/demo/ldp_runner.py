"""`leteo-fed ldp simulate` and `leteo-fed demo ldp`: LDP estimates next to the truth."""

from __future__ import annotations

import dataclasses
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from leteo_fed import defaults
from leteo_fed.client import RoundOptions
from leteo_fed.data import sources
from leteo_fed.demo.cluster import (
    LocalCluster,
    OwnerSpec,
    check_stop,
    stop_on_signals,
)
from leteo_fed.demo.runner import Progress, analyst_session, natural_order, write_site_files
from leteo_fed.errors import ConfigError, DataError
from leteo_fed.fileio import atomic_save_figure, atomic_write_json
from leteo_fed.protocols import ldp_collection
from leteo_fed.protocols.ldp_collection import LdpRequest


@dataclass
class LdpOptions:
    data: Path
    column: str
    mechanism: str
    epsilon: float
    bounds: tuple[float, float] | None = None
    domain: list[str] | None = None
    seed: int | None = None
    out: Path = Path("out/ldp")
    owners: int = 3
    consistency: bool = False
    insecure: bool = False


def _column_values(table, column: str, frequency: bool):
    if column not in table.column_names:
        raise DataError(f"column '{column}' is not in the data", field=column)
    if frequency:
        return sources.label_strings(table, column)
    return sources.to_matrix(table, [column])[:, 0]


def _request(opts: LdpOptions, values, frequency: bool) -> ldp_collection.LdpRequest:
    request = ldp_collection.LdpRequest(
        column=opts.column,
        mechanism=opts.mechanism,
        epsilon=opts.epsilon,
        consistency=opts.consistency,
    )
    if frequency:
        domain = tuple(opts.domain or sorted(set(values), key=natural_order))
        return dataclasses.replace(request, domain=domain)
    if opts.bounds is None:
        raise ConfigError(f"--bounds LO,HI is required for {opts.mechanism}", field="bounds")
    lower, upper = opts.bounds
    return dataclasses.replace(request, lower=lower, upper=upper)


def _truth(values, spec: ldp_collection.LdpSpec, frequency: bool) -> dict:
    if frequency:
        counts = {v: 0 for v in spec.domain}
        for v in values:
            counts[v] = counts.get(v, 0) + 1
        return {"true_counts": counts}
    return {"true_mean": float(np.mean(values))}


def simulate(opts: LdpOptions) -> dict:
    """Perturb and estimate in one process: plan epsilon before asking real owners."""
    frequency = opts.mechanism in ldp_collection.frequency.FREQUENCY_MECHANISMS
    table = sources.read_table(str(opts.data))
    values = _column_values(table, opts.column, frequency)
    spec = ldp_collection.spec_from_request(_request(opts, values, frequency))
    rng = np.random.default_rng(opts.seed)
    start = time.perf_counter()
    encoded = ldp_collection.encode_column(values, spec)
    acc = ldp_collection.new_accumulator(spec)
    for chunk in ldp_collection.perturb_chunks(encoded, spec, rng):
        acc.fold(acc.partial(chunk))
    doc = acc.result(opts.consistency)
    doc["seconds"] = time.perf_counter() - start
    doc["seed"] = opts.seed
    doc["mode"] = "simulation (one process)"
    doc.update(_truth(values, spec, frequency))
    out = Path(opts.out)
    atomic_write_json(out if out.suffix == ".json" else out / "ldp.json", doc)
    return doc


def run_demo(opts: LdpOptions) -> dict:
    say = Progress()
    stop_on_signals()
    if not 1 <= opts.owners <= defaults.DEMO_MAX_OWNERS:
        raise ConfigError(
            f"--owners must be in 1..{defaults.DEMO_MAX_OWNERS} (one process each; for more, "
            f"leteo-fed simulate), got {opts.owners}",
            field="owners",
        )
    frequency = opts.mechanism in ldp_collection.frequency.FREQUENCY_MECHANISMS
    table = sources.read_table(str(opts.data))
    values = _column_values(table, opts.column, frequency)
    request = _request(opts, values, frequency)
    spec = ldp_collection.spec_from_request(request)
    say(
        f"data: {opts.data}; {table.num_rows} rows; column {opts.column}; {opts.mechanism} at epsilon {opts.epsilon:g}"
    )
    out = Path(opts.out)
    out.mkdir(parents=True, exist_ok=True)
    workdir = Path(tempfile.mkdtemp(prefix="run-", dir=out))
    owners = [
        OwnerSpec(name, path) for name, path in write_site_files(table, opts.owners, 7, workdir)
    ]
    cluster = LocalCluster(workdir, owners, insecure=opts.insecure)
    with analyst_session(cluster, opts.owners, say, "each with a privacy ledger") as (client, _):
        params = (
            LdpRequest(
                column=spec.column,
                mechanism=spec.mechanism,
                epsilon=spec.epsilon,
                domain=tuple(spec.domain),
                lower=request.lower if not frequency else None,
                upper=request.upper if not frequency else None,
                consistency=opts.consistency,
            ),
            RoundOptions(min_owners=opts.owners),
        )
        result = client.run(*params).to_dict()
        say(f"round {result['round_id']}: {result['n']} reports from {', '.join(result['owners'])}")
    check_stop()
    result.update(_truth(values, spec, frequency))
    atomic_write_json(out / "ldp.json", result)
    plot = out / "ldp_estimates.png"
    plot_estimates(result, plot)
    say(f"wrote {out / 'ldp.json'} and {plot}")
    return result


def plot_estimates(result: dict, path: Path) -> None:
    """Bar chart of true vs estimated counts, error bars at two standard errors."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 4.8), dpi=110)
    if "estimates" in result:
        labels = list(result["estimates"])
        x = np.arange(len(labels))
        ax.bar(x - 0.2, [result["true_counts"][k] for k in labels], 0.4, label="true")
        ax.bar(
            x + 0.2,
            [result["estimates"][k] for k in labels],
            0.4,
            yerr=[2 * result["std_errors"][k] for k in labels],
            capsize=3,
            label="LDP estimate ± 2 s.e.",
        )
        ax.set_xticks(x, labels, rotation=45, ha="right")
        ax.set_ylabel("count")
    else:
        ax.bar([0], [result["true_mean"]], 0.4, label="true mean")
        ax.bar(
            [0.5],
            [result["mean"]],
            0.4,
            yerr=[2 * result["std_error"]],
            capsize=3,
            label="LDP estimate ± 2 s.e.",
        )
        ax.set_xticks([0, 0.5], ["true", "estimate"])
        ax.set_ylabel(result["column"])
    ax.set_title(f"{result['mechanism'].upper()} at ε = {result['epsilon']:g}, n = {result['n']}")
    ax.legend()
    fig.tight_layout()
    atomic_save_figure(fig, path)
