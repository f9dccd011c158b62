"""Analyst commands made from declared statistics: one per `SecureSumStatistic`, built-in or
installed as a plugin, with nothing written per statistic.

A command's own flags come from its request dataclass, one per field (`--field-name`; a tuple
of columns is comma-separated). A field's metadata may say more: `help`, `metavar` and
`required` of its flag; or `flags`, the flags it is read from instead (name -> argparse
keywords, `type` a callable or a field type as above; flags shared by several fields are added
once) and `build`, the callable making the field's value from those flags' values (by name).
The flags every secure-sum command shares (aggregator, quorum, deadline, encoding, owners, DP,
the noise preview, TLS, the output folder) are added here once. `--dry-run`, the noise check
before a real DP round, the result file and the statistic's figure (`jobs.PLOTTERS`, by its
result's wire name, with `--no-plot`) work the same way for every statistic.

A statistic names parameters, never flags: the command's description, the dry run's lines and
the notes printed after a result (a statistic's optional `notes(result)`, e.g. a multi-round
job that did not converge) have every parameter in backticks (`max_iterations`) rewritten to
this command's flag (`cli.flags`). A statistic may also word the shared flags' help: its
`round_help` (the quorum's and the deadline's, e.g. "of each iteration" for a multi-round job)
and `noise_of` (what `--dry-run` previews the noise of).
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib
import sys
import typing
from collections.abc import Callable
from pathlib import Path
from typing import Any

from leteo_fed import extras
from leteo_fed.cli.flags import flag_map, name_flags
from leteo_fed.cli.noise import add_noise_flags, check_locally, print_preview, print_verdict
from leteo_fed.cli.options import (
    SubParsers,
    add_aggregator_address,
    add_dp_flags,
    add_result_output,
    add_round_flags,
    add_tls,
    analyst_client,
    csv_list,
    set_handler,
)
from leteo_fed.cli.round_output import round_options, run_and_write


def command_name(statistic_name: str) -> str:
    return statistic_name.replace("_", "-")


def flag(field_name: str) -> str:
    return "--" + field_name.replace("_", "-")


def _field_type(hint: Any) -> tuple[Any, dict[str, Any]]:
    """argparse keywords for a request field of type `hint`."""
    origin = typing.get_origin(hint)
    if origin is tuple:
        item = typing.get_args(hint)[0]
        if item is str:
            return csv_list, {"metavar": "A,B,..."}
        return (lambda text: [item(v) for v in csv_list(text)]), {"metavar": "V,V,..."}
    if hint is bool:
        return None, {"action": "store_true"}
    if hint in (int, float, str):
        return hint, {}
    raise TypeError(f"a request field of type {hint} has no command-line form")


def _flag_keywords(spec: dict[str, Any]) -> dict[str, Any]:
    """argparse keywords of a declared flag: its `type` may be a field type."""
    kwargs = dict(spec)
    hint = kwargs.get("type")
    if hint is not None and (typing.get_origin(hint) is tuple or hint in (int, float, str)):
        convert, more = _field_type(hint)
        kwargs = more | kwargs | {"type": convert}
    return kwargs


def add_request_flags(p: argparse.ArgumentParser, request_type: type) -> None:
    """The flags of the statistic's request: one per field, or the field's own `flags`."""
    hints = typing.get_type_hints(request_type)
    added: set[str] = set()
    for f in dataclasses.fields(request_type):
        for name, spec in f.metadata.get("flags", {}).items():
            if name not in added:
                added.add(name)
                p.add_argument(flag(name), dest=f"flag_{name}", **_flag_keywords(spec))
        if "flags" in f.metadata:
            continue
        convert, kwargs = _field_type(hints[f.name])
        default = f.default if f.default is not dataclasses.MISSING else None
        text = f.metadata.get("help", f.name.replace("_", " "))
        if convert is not None:
            kwargs["type"] = convert
            if default not in (None, (), "", 0, 0.0):
                text += f" (default: {default})"
        if "action" not in kwargs:
            kwargs.setdefault("metavar", f.metadata.get("metavar", f.name.upper()))
        if f.metadata.get("required"):
            kwargs["required"] = True
        p.add_argument(flag(f.name), dest=f"request_{f.name}", help=text, **kwargs)


def request_from_args(request_type: type, args: argparse.Namespace) -> Any:
    values = {}
    for f in dataclasses.fields(request_type):
        if "flags" in f.metadata:
            given = {n: getattr(args, f"flag_{n}") for n in f.metadata["flags"]}
            values[f.name] = f.metadata["build"](**given)
            continue
        given = getattr(args, f"request_{f.name}")
        if given is None:
            continue
        values[f.name] = tuple(given) if isinstance(given, list) else given
    return request_type(**values)


def plotter(statistic: Any) -> Callable[[dict, Path], None] | None:
    """The figure of the statistic's result (`jobs.PLOTTERS`, by its wire name), if any."""
    from leteo_fed.cli.jobs import PLOTTERS

    wire = getattr(statistic.result_type, "wire", None)
    if statistic.plot_file is None or wire not in PLOTTERS:
        return None
    module, name = PLOTTERS[wire]
    return getattr(importlib.import_module(module), name)


def add_parser(sub: SubParsers, protocol: Any) -> None:
    """The command of one statistic (`protocol`: its `SecureSumProtocol`)."""
    statistic = protocol.statistic
    name = statistic.command or command_name(statistic.name)
    result_file = protocol.result_file(statistic.name)
    out = Path("out") / name
    description = statistic.description or statistic.help
    p = sub.add_parser(
        name,
        help=statistic.help or f"the {statistic.name} statistic across the owners",
        description=description,
        formatter_class=argparse.RawDescriptionHelpFormatter
        if "\n" in description
        else argparse.HelpFormatter,
    )
    add_aggregator_address(p)
    add_request_flags(p, statistic.request_type)
    counts = statistic.fixed_row_norm_bound is not None  # a round of counts: nothing to bound
    wording = dict(zip(("quorum", "deadline"), getattr(statistic, "round_help", ()), strict=False))
    add_round_flags(p, value_bound=not counts, **wording)
    if statistic.plot_file:
        add_result_output(p, out, result_file, statistic.plot_file)
    else:
        p.add_argument(
            "--out",
            type=Path,
            default=out,
            help=f"output folder: writes OUT/{result_file} (default: {out})",
        )
    add_dp_flags(p, bounds=statistic.takes_bounds, clips=not counts)
    add_noise_flags(p, getattr(statistic, "noise_of", "each released figure"))
    add_tls(p, "analyst", "analyst")
    flags = flag_map(p)
    p.description = name_flags(description, None, flags)
    set_handler(p, lambda args: run(protocol, args, flags))


def run(protocol: Any, args: argparse.Namespace, flags: dict[str, str] | None = None) -> int:
    statistic = protocol.statistic
    plot = plotter(statistic)
    if plot is not None and not args.no_plot and not args.dry_run:
        extras.require("matplotlib")  # the figure, before any round is started
    request = request_from_args(statistic.request_type, args)
    options = round_options(args)

    def dry_run(plan: Any, rows: int | None) -> int:
        return print_noise(protocol, plan, rows, flags or {})

    stop = check_locally(
        request, options, protocol.noise_preview, args, dry_run, plan_without_dp=True
    )
    if stop is not None:
        return stop
    summary = statistic.summary or ("round_id", "owners")
    result = run_and_write(args, request, options, analyst_client, summary, plot, note_plot=True)
    notes = getattr(statistic, "notes", None)
    for note in notes(result) if notes is not None else ():
        print(name_flags(note, None, flags or {}), file=sys.stderr)
    return 0


def print_noise(
    protocol: Any, plan: Any, rows: int | None, flags: dict[str, str] | None = None
) -> int:
    """`--dry-run` without public bounds: the noise of every released value and, at --rows,
    each figure's expected error (or what the statistic says of its own preview); nothing is
    sent."""
    doc = print_preview(plan, protocol.noise_preview, rows)
    lines = protocol.statistic.preview_lines(doc, rows)
    if lines is None:
        sigma = plan.dp.noise_std(plan.dp.quorum, plan.encoding.scale_bits)
        lines = [
            f"each released value carries noise of std {sigma:.4g} (epsilon "
            f"{doc['epsilon']:g}, delta {doc['delta']:g}, rows clipped to "
            f"{doc['row_norm_bound']:g})"
        ]
        if rows is None:
            lines.append("give --rows N for the expected error of each released figure")
        for figure, error in (doc.get("expected_error") or {}).items():
            lines.append(f"  {figure} +/- {error:.4g} (1 std)")
    for line in lines:
        print(name_flags(line, None, flags or {}), file=sys.stderr)
    print_verdict(doc)
    return 0


def add_parsers(sub: SubParsers) -> None:
    """A command for every declared statistic, built-in or installed as a plugin, except one
    whose command a family registered before this one writes by hand (`main.FAMILIES`; k-means:
    its initial centers from a file or a public box, its demo)."""
    from leteo_fed.protocols import registry

    for protocol in registry.statistics():
        statistic = protocol.statistic
        if (statistic.command or command_name(statistic.name)) not in sub.choices:
            add_parser(sub, protocol)


def command_names() -> set[str]:
    """The commands of the declared statistics (they come from the registry, not
    `main.FAMILIES`; a family may write one of them by hand)."""
    from leteo_fed.protocols import registry

    return {p.statistic.command or command_name(p.statistic.name) for p in registry.statistics()}
