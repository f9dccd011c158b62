"""report.json of a synthetic release: what was released, the guarantee, and how to redo it.

`build_report` is a pure function of the release's pieces, so the HTML report and the risk
measures (distance to closest record, membership inference) can be added beside it later. Every
top-level field except `holder_only` derives from the public config and the DP model; the
`holder_only` section is for the data holder: the seed and the command with it (the seed
determines the noise: publishing it voids the guarantee), the exact clipped counts and input row
count, and what depends on the input's size without noise (the engine choice and its reason,
which quote the input's bytes, and the timings).
"""

from __future__ import annotations

from typing import Any

from leteo_fed.synth.config import SynthConfig
from leteo_fed.synth.marginals import MarginalModel
from leteo_fed.synth.model import SynthModel
from leteo_fed.synth.partition import cell_count

REPORT_VERSION = 1


def column_spec(config: SynthConfig) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for c in config.columns:
        if c.kind == "numeric":
            out.append(
                {
                    "name": c.name,
                    "type": "numeric",
                    "bounds": [c.lo, c.hi],
                    "integer": c.integer,
                    "bins": c.bins,
                    "edges": list(c.edges) or None,
                }
            )
        else:
            out.append({"name": c.name, "type": "categorical", "categories": list(c.categories)})
    return out


def constant_columns(table: Any, config: SynthConfig) -> list[str]:
    """Released columns that hold one value only (their correlations are undefined)."""
    import pyarrow.compute as pc

    if table.num_rows < 2:
        return []
    return [c.name for c in config.columns if pc.count_distinct(table.column(c.name)).as_py() < 2]


def noise_dominated(config: SynthConfig, model: SynthModel | MarginalModel) -> list[str]:
    """The parts of the model whose DP noise outweighs the records they describe: cells x
    noise scale above the (noisy) records per class. Reads only public values and the release."""
    n = max(min(model.class_sizes, default=0.0), 0.0)
    out = []
    if isinstance(model, MarginalModel):
        for col in model.columns:
            cells = col.levels * len(model.class_sizes)
            if cells * model.first_sd > n * len(model.class_sizes):
                out.append(f"{col.name} ({cells} cells x noise {model.first_sd:.3g})")
        return out
    for gi, names in enumerate(model.groups):
        cells = cell_count([config.column(c) for c in names])
        b = 1.0 / model.budget["groups"][gi]["histogram"]["epsilon"]
        if cells * b > n:
            out.append(f"{names} ({cells} cells x noise {b:.3g})")
    return out


def warnings_for(table: Any, config: SynthConfig, model: SynthModel | MarginalModel) -> list[str]:
    """What a user must know about the table before using it (printed and in report.json)."""
    out = [
        f"column {name!r} is constant in the synthetic table: the DP histogram of its group "
        "supports one level only (too little signal for its bins at this epsilon: give it "
        "fewer bins, or more epsilon); its correlations are undefined"
        for name in constant_columns(table, config)
    ]
    noisy = noise_dominated(config, model)
    if noisy:
        n = min(model.class_sizes, default=0.0)
        out.append(
            f"the DP noise outweighs the data in {len(noisy)} part(s) of the model, against "
            f"about {max(n, 0):.0f} records per class: {'; '.join(noisy)}. Their synthetic "
            "columns carry little of the real structure (a classifier trained on them can do "
            "worse than the majority rate): use fewer bins or columns, more epsilon, or more "
            "rows"
        )
    if (
        isinstance(model, SynthModel)
        and model.provenance == "dp"
        and len(config.columns) > 1
        and all(len(g) == 1 for g in model.found or model.groups)
    ):
        out.append(
            f'groups = "dp" found no association above the noise of its release (epsilon '
            f"{model.budget['grouping']['epsilon']:.3g} for {len(config.columns)} columns): "
            + (
                "every column is its own group, so the columns are independent given the class"
                if len(model.groups) == len(config.columns)
                else "the only groups are merges that add no histogram noise, so the other "
                "columns are independent given the class"
            )
            + " in the synthetic table. Name the groups you know in `groups`, or use method = "
            '"marginals", which measures the pairs it selects'
        )
    return out


def _structure(
    config: SynthConfig, model: SynthModel | MarginalModel, classes: list[Any]
) -> dict[str, Any]:
    """The released model's shape: groups and clusters, or the DP tree of marginals."""
    if isinstance(model, MarginalModel):
        return {
            "k": None,
            "groups": None,
            "clusters": [],
            "tree": {"provenance": "dp", "edges": model.edge_names},
            "class_sizes": {
                str(name): round(float(size), 3)
                for name, size in zip(classes, model.class_sizes, strict=True)
            },
        }
    clusters = [
        {
            "class": classes[c],
            "group": gi,
            "clusters": int(m.counts.shape[0]),
            "noisy_rows": float(m.counts.sum()),
        }
        for (c, gi), m in sorted(model.models.items())
    ]
    return {
        "k": config.k,
        "groups": {
            "provenance": model.provenance,
            "columns": model.groups,
            "found_by_release": model.found,
            "picks": model.picks,
        },
        "clusters": clusters,
        "tree": None,
        "class_sizes": {
            str(name): round(size, 3) for name, size in zip(classes, model.class_sizes, strict=True)
        },
    }


def _guarantee(config: SynthConfig) -> str:
    if config.delta > 0:
        how = (
            f"({config.epsilon:g}, {config.delta:g})-differential privacy (Gaussian and "
            "exponential mechanisms composed in zCDP)"
        )
    elif config.method == "marginals":
        how = f"{config.epsilon:g}-differential privacy (pure: Laplace and exponential mechanisms)"
    else:
        how = f"{config.epsilon:g}-differential privacy (pure, Laplace mechanism)"
    public = "bounds, domains, grid" + ("" if config.method == "marginals" else ", k")
    return (
        f"{how} for the synthetic table and every field of this report outside holder_only, "
        f"under add/remove of one record; the config ({public}) is public"
    )


def _row_rule(config: SynthConfig, requested_rows: int | None) -> str:
    if config.method == "marginals":
        return (
            "round(the fitted model's total), drawn from the model"
            if requested_rows is None
            else "the requested total, drawn from the model"
        )
    if requested_rows is None:
        return "round(noisy class size) per class"
    return "the requested total, split across classes in proportion to their noisy sizes"


def _method_parameters(config: SynthConfig) -> dict[str, Any]:
    if config.method == "marginals":
        return {"marginal_shares": config.marginal_shares}
    return {
        "max_cells": config.max_cells,
        "shares": config.shares,
        "group_split": config.group_split,
        "grouping_share": config.grouping_share if config.groups is None else None,
        "grouping_cut": config.grouping_cut if config.groups is None else None,
    }


def build_report(
    config: SynthConfig,
    model: SynthModel | MarginalModel,
    *,
    rows_written: int,
    requested_rows: int | None,
    engine: dict[str, Any],
    timings: dict[str, float],
    output: str,
    release_format: str,
    command: list[str],
    seed: int,
    clipped: dict[str, dict[str, int]],
    input_rows: int | None,
    warnings: list[str] | None = None,
) -> dict[str, Any]:
    """The report dict (JSON-ready)."""
    classes = list(config.classes) if config.label is not None else [None]
    return {
        "kind": "synthesize",
        "report_version": REPORT_VERSION,
        "method": config.method,
        "epsilon": config.epsilon,
        "delta": config.delta,
        "guarantee": _guarantee(config),
        "budget": model.budget,
        **_structure(config, model, classes),
        "columns": column_spec(config),
        "label": (
            {"column": config.label, "classes": list(config.classes)}
            if config.label is not None
            else None
        ),
        "parameters": {
            **_method_parameters(config),
            "rows": requested_rows,
            "row_count_rule": _row_rule(config, requested_rows),
        },
        "output": {"path": output, "format": release_format, "rows": rows_written},
        "warnings": list(warnings or []),
        "holder_only": {
            "note": "NOT covered by epsilon; remove this section before publishing the report",
            "engine": engine,
            "timings_seconds": {k: round(v, 4) for k, v in timings.items()},
            "seed": seed,
            "input_rows": input_rows,
            "clipped": clipped,
            "command": command,
        },
    }
