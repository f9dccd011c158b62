"""Analyst commands made from declared statistics: one per `SecureSumStatistic`, built-in or
installed as a plugin, with nothing written per statistic.

A command's own flags come from its request dataclass, one per field (`--field-name`; a tuple
of columns is comma-separated; a field's `metadata["help"]` is its help); the flags every
secure-sum command shares (aggregator, quorum, deadline, encoding, owners, DP, the noise
preview, TLS, the output folder) are added here once. `--dry-run`, the noise check before a
real DP round and the result file work the same way for every statistic.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import typing
from pathlib import Path
from typing import Any

from leteo_fed.cli.noise import add_noise_flags, check_locally, print_preview, print_verdict
from leteo_fed.cli.options import (
    SubParsers,
    add_aggregator_address,
    add_dp_flags,
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


def add_request_flags(p: argparse.ArgumentParser, request_type: type) -> None:
    """One flag per field of the statistic's request."""
    hints = typing.get_type_hints(request_type)
    for f in dataclasses.fields(request_type):
        convert, kwargs = _field_type(hints[f.name])
        default = f.default if f.default is not dataclasses.MISSING else None
        text = f.metadata.get("help", f.name.replace("_", " "))
        if convert is not None:
            kwargs["type"] = convert
            if default not in (None, (), "", 0, 0.0):
                text += f" (default: {default})"
        if "action" not in kwargs:
            kwargs.setdefault("metavar", f.name.upper())
        p.add_argument(flag(f.name), dest=f"request_{f.name}", help=text, **kwargs)


def request_from_args(request_type: type, args: argparse.Namespace) -> Any:
    values = {}
    for f in dataclasses.fields(request_type):
        given = getattr(args, f"request_{f.name}")
        if given is None:
            continue
        values[f.name] = tuple(given) if isinstance(given, list) else given
    return request_type(**values)


def add_parser(sub: SubParsers, protocol: Any) -> None:
    """The command of one statistic (`protocol`: its `SecureSumProtocol`)."""
    statistic = protocol.statistic
    name = statistic.command or command_name(statistic.name)
    result_file = protocol.result_file(statistic.name)
    out = Path("out") / name
    p = sub.add_parser(
        name,
        help=statistic.help or f"the {statistic.name} statistic across the owners",
        description=statistic.description or statistic.help,
    )
    add_aggregator_address(p)
    add_request_flags(p, statistic.request_type)
    add_round_flags(p)
    p.add_argument(
        "--out",
        type=Path,
        default=out,
        help=f"output folder: writes OUT/{result_file} (default: {out})",
    )
    add_dp_flags(p, bounds=statistic.takes_bounds)
    add_noise_flags(p, "each released figure")
    add_tls(p, "analyst", "analyst")
    set_handler(p, lambda args: run(protocol, args))


def run(protocol: Any, args: argparse.Namespace) -> int:
    statistic = protocol.statistic
    request = request_from_args(statistic.request_type, args)
    options = round_options(args)

    def dry_run(plan: Any, rows: int | None) -> int:
        return print_noise(protocol, plan, rows)

    stop = check_locally(
        request, options, protocol.noise_preview, args, dry_run, plan_without_dp=True
    )
    if stop is not None:
        return stop
    summary = statistic.summary or ("round_id", "owners")
    run_and_write(args, request, options, analyst_client, summary)
    return 0


def print_noise(protocol: Any, plan: Any, rows: int | None) -> int:
    """`--dry-run` without public bounds: the noise of every released value and, at --rows,
    each block's total against its largest value; nothing is sent."""
    doc = print_preview(plan, protocol.noise_preview, rows)
    sigma = plan.dp.noise_std(plan.dp.quorum, plan.encoding.scale_bits)
    print(
        f"each released value carries noise of std {sigma:.4g} (epsilon "
        f"{doc['epsilon']:g}, delta {doc['delta']:g}, rows clipped to {doc['row_norm_bound']:g})",
        file=sys.stderr,
    )
    if rows is None:
        print("give --rows N for the expected error of each released figure", file=sys.stderr)
    for figure, error in (doc.get("expected_error") or {}).items():
        print(f"  {figure} +/- {error:.4g} (1 std)", file=sys.stderr)
    print_verdict(doc)
    return 0


def add_parsers(sub: SubParsers) -> None:
    """A command for every declared statistic, built-in or installed as a plugin."""
    from leteo_fed.protocols import registry

    for protocol in registry.statistics():
        add_parser(sub, protocol)


def command_names() -> set[str]:
    """The commands `add_parsers` adds (they come from the registry, not `main.FAMILIES`)."""
    from leteo_fed.protocols import registry

    return {p.statistic.command or command_name(p.statistic.name) for p in registry.statistics()}
