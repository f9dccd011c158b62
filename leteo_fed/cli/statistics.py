"""Analyst commands made from declared statistics: one per `SecureSumStatistic`, built-in or
installed as a plugin, with nothing written per statistic.

A command's own flags come from its request dataclass, one per field (`--field-name`; a tuple
of columns is comma-separated; an optional `X | None` field is an X flag that may be left out).
A field's metadata may say more: `help`, `metavar`, `choices` and `required` of its flag; or
`flags`, the flags it is read from instead (name -> argparse keywords, `type` a callable or a
field type as above; flags shared by several fields are added once; None: a flag every command
has, e.g. `dp_epsilon`, read and not added; a spec's `aliases`, the other names the flag is
spelled by) and `build`, the callable making the field's value from those flags' values (by
name; a parameter named like another field of the request is given that field's value). With
`sets` (field names) the build returns a dict: the field's value and those fields' (they get no
flag of their own; e.g. k-means' `k` and `centers` from `init` FILE.json or from `init_bounds`
and `init_seed`). `written`, a callable of the same flags' values, returns fields added to the
result file the command writes (e.g. how the initial centers were chosen: `result["init"]`). A statistic with several commands
(`statistic.Command`, e.g. `pca` and `dca` of the moments) has each one's flags less the
fields it sets itself or omits, with its own defaults.
The flags every secure-sum command shares (aggregator, quorum, deadline, encoding, owners, DP,
the noise preview, TLS, the output folder) are added here once. `--dry-run`, the noise check
before a real DP round, the result file and the statistic's figure (`jobs.PLOTTERS`, by its
result's wire name, with `--no-plot`) work the same way for every statistic.

A statistic names parameters, never flags: the command's description, the dry run's lines and
the notes printed after a result (a statistic's optional `notes(result)`, e.g. a multi-round
job that did not converge) have every parameter in backticks (`max_iterations`) rewritten to
this command's flag (`cli.flags`). A statistic may also word the shared flags' help: its
`round_help` (the quorum's and the deadline's, e.g. "of each iteration" for a multi-round job)
and `noise_of` (what `--dry-run` previews the noise of), and spell a shared flag otherwise
(`spellings`: k-means' `dp_epsilon` is `--epsilon`, also `--dp-epsilon`).
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib
import inspect
import sys
import types
import typing
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from leteo_fed import extras
from leteo_fed.cli.flags import name_help, say
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

if typing.TYPE_CHECKING:
    from leteo_fed.protocols.statistic import Command


def command_name(statistic_name: str) -> str:
    return statistic_name.replace("_", "-")


def flag(field_name: str) -> str:
    return "--" + field_name.replace("_", "-")


def _field_type(hint: Any) -> tuple[Any, dict[str, Any]]:
    """argparse keywords for a request field of type `hint`."""
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):  # X | None: the flag may be left out
        kinds = [a for a in typing.get_args(hint) if a is not type(None)]
        if len(kinds) == 1:
            return _field_type(kinds[0])
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


def add_request_flags(
    p: argparse.ArgumentParser, request_type: type, command: Command | None = None
) -> None:
    """The flags of the statistic's request: one per field, or the field's own `flags`; a
    `command` of several offers none for the fields it sets or omits, and has its defaults."""
    hints = typing.get_type_hints(request_type)
    added: set[str] = set()
    skip = set(command.fixed) | set(command.omit) if command is not None else set()
    skip |= _set_by_builds(request_type)
    defaults = dict(command.defaults) if command is not None else {}
    for f in dataclasses.fields(request_type):
        if f.name in skip:
            continue
        for name, spec in f.metadata.get("flags", {}).items():
            if spec is not None and name not in added:
                added.add(name)
                kwargs = _flag_keywords(spec)
                names = [flag(n) for n in (name, *kwargs.pop("aliases", ()))]
                if kwargs.get("action") in (None, "store", "append"):
                    kwargs.setdefault("metavar", name.upper())  # not the dest's flag_ prefix
                p.add_argument(*names, dest=f"flag_{name}", **kwargs)
        if "flags" in f.metadata:
            continue
        convert, kwargs = _field_type(hints[f.name])
        default = f.default if f.default is not dataclasses.MISSING else None
        if f.name in defaults:
            default = kwargs["default"] = defaults[f.name]
        if "choices" in f.metadata:
            kwargs["choices"] = f.metadata["choices"]
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


def _set_by_builds(request_type: type) -> set[str]:
    """The fields another field's `build` sets too (its `sets`): they have no flag."""
    return {n for f in dataclasses.fields(request_type) for n in f.metadata.get("sets", ())}


def _flag_values(f: dataclasses.Field, args: argparse.Namespace) -> dict[str, Any]:
    """The values of a field's declared `flags`, by name."""
    return {
        n: getattr(args, n if spec is None else f"flag_{n}")
        for n, spec in f.metadata["flags"].items()
    }


def _call(
    function: Callable[..., Any], given: dict[str, Any], values: dict[str, Any], request_type: type
) -> Any:
    """`function` of the flags' values it names, a parameter named like a request field given
    that field's value."""
    taken = {}
    for name in inspect.signature(function).parameters:
        taken[name] = (
            given[name] if name in given else values.get(name, _default(request_type, name))
        )
    return function(**taken)


def request_from_args(
    request_type: type, args: argparse.Namespace, command: Command | None = None
) -> Any:
    fixed = dict(command.fixed) if command is not None else {}
    omit = set(command.omit) if command is not None else set()
    values: dict[str, Any] = dict(fixed)
    built = []
    set_by_builds = _set_by_builds(request_type)
    for f in dataclasses.fields(request_type):
        if f.name in fixed or f.name in omit or f.name in set_by_builds:
            continue
        if "flags" in f.metadata:
            built.append(f)
            continue
        given = getattr(args, f"request_{f.name}")
        if given is None:
            continue
        values[f.name] = tuple(given) if isinstance(given, list) else given
    for f in built:  # after the plain fields: a build may take their values
        value = _call(f.metadata["build"], _flag_values(f, args), values, request_type)
        if f.metadata.get("sets"):
            values.update(value)
        else:
            values[f.name] = value
    return request_type(**values)


def written_from_args(request_type: type, args: argparse.Namespace, request: Any) -> dict:
    """The fields the request's `written` callables add to the result file."""
    values = {f.name: getattr(request, f.name) for f in dataclasses.fields(request_type)}
    out: dict[str, Any] = {}
    for f in dataclasses.fields(request_type):
        if "written" in f.metadata:
            given = _flag_values(f, args)
            out.update(_call(f.metadata["written"], given, values, request_type))
    return out


def respell(p: argparse.ArgumentParser, spellings: Mapping[str, tuple[str, ...]]) -> None:
    """The flags of the shared parameters a statistic spells otherwise (`spellings`)."""
    for action in p._actions:  # argparse offers no public way to rename an option
        names = spellings.get(action.dest)
        if names is None:
            continue
        for option in action.option_strings:
            p._option_string_actions.pop(option, None)
        action.option_strings = [flag(n) for n in names]
        if action.metavar is None and action.nargs is None:
            action.metavar = names[0].upper()
        for option in action.option_strings:
            p._option_string_actions[option] = action


def _default(request_type: type, name: str) -> Any:
    field = next(f for f in dataclasses.fields(request_type) if f.name == name)
    return field.default if field.default is not dataclasses.MISSING else None


def plotter(statistic: Any) -> Callable[[dict, Path], None] | None:
    """The figure of the statistic's result (`jobs.PLOTTERS`, by its wire name), if any."""
    from leteo_fed.cli.jobs import PLOTTERS

    wire = getattr(statistic.result_type, "wire", None)
    if statistic.plot_file is None or wire not in PLOTTERS:
        return None
    module, name = PLOTTERS[wire]
    return getattr(importlib.import_module(module), name)


def commands(statistic: Any) -> list[Command | None]:
    """The statistic's commands: its declared ones, else one (None) from its name and help."""
    return list(statistic.commands) or [None]


def _default_name(statistic: Any) -> str:
    return statistic.command or command_name(statistic.name)


def add_parser(sub: SubParsers, protocol: Any, command: Command | None = None) -> None:
    """A command of one statistic (`protocol`: its `SecureSumProtocol`; `command`: which of
    the statistic's `commands`, None: its only one)."""
    statistic = protocol.statistic
    if command is None:
        name = _default_name(statistic)
        result_file = protocol.result_file(statistic.name)
        description = statistic.description or statistic.help
        text, previews = statistic.help, statistic.noise_of
    else:  # its jobs are labelled by its name
        name, result_file = command.name, protocol.result_file(command.name)
        description = command.description or command.help
        text, previews = command.help, command.previews
    out = Path("out") / name
    p = sub.add_parser(
        name,
        help=text or f"the {statistic.name} statistic across the owners",
        description=description,
        formatter_class=argparse.RawDescriptionHelpFormatter
        if "\n" in description
        else argparse.HelpFormatter,
    )
    add_aggregator_address(p)
    add_request_flags(p, statistic.request_type, command)
    counts = statistic.fixed_row_norm_bound is not None  # a round of counts: nothing to bound
    wording = {k: v for k, v in zip(("quorum", "deadline"), statistic.round_help, strict=True) if v}
    scale = f"{statistic.default_scale_bits}; DP {statistic.dp_default_scale_bits}"
    if counts:
        scale = f"whole counts; DP {statistic.dp_default_scale_bits}"
    add_round_flags(p, value_bound=not counts, scale_default=scale, **wording)
    if statistic.plot_file:
        add_result_output(p, out, result_file, statistic.plot_file)
    else:
        p.add_argument(
            "--out",
            type=Path,
            default=out,
            help=f"output folder: writes OUT/{result_file} (default: {out})",
        )
    clips = not counts and not statistic.clips_itself  # else no bound to give: a budget alone
    add_dp_flags(p, bounds=statistic.takes_bounds, clips=clips)
    add_noise_flags(p, previews)
    add_tls(p, "analyst", "analyst")
    respell(p, statistic.spellings)
    name_help(p)  # the declaration names parameters; its command's user reads flags
    set_handler(p, lambda args: run(protocol, args, command))


def run(protocol: Any, args: argparse.Namespace, command: Command | None = None) -> int:
    statistic = protocol.statistic
    plot = plotter(statistic)
    if plot is not None and not args.no_plot and not args.dry_run:
        extras.require("matplotlib")  # the figure, before any round is started
    request = request_from_args(statistic.request_type, args, command)
    given = {}
    if statistic.clips_itself and args.dp_epsilon is not None:
        given["row_norm_bound"] = statistic.implied_row_norm_bound(request)
    options = round_options(args, **given)
    previews = command.previews if command is not None else statistic.noise_of

    def dry_run(plan: Any, rows: int | None) -> int:
        return print_noise(protocol, plan, rows, previews)

    stop = check_locally(
        request, options, protocol.noise_preview, args, dry_run, plan_without_dp=True
    )
    if stop is not None:
        return stop
    summary = statistic.summary or ("round_id", "owners")
    written = written_from_args(statistic.request_type, args, request)
    result = run_and_write(
        args,
        request,
        options,
        analyst_client,
        summary,
        plot,
        prepare=(lambda result: result | written) if written else None,
        note_plot=True,
    )
    for note in statistic.notes(result):
        print(say(note), file=sys.stderr)
    return 0


def print_noise(
    protocol: Any, plan: Any, rows: int | None, previews: str = "each released figure"
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
        for figure, error in (doc.get("expected_error") or {}).items():
            lines.append(f"  {figure} +/- {error:.4g} (1 std)")
    if rows is None:
        lines.append(f"give `rows` N for the expected error of {previews}")
    for line in lines:
        print(say(line), file=sys.stderr)
    print_verdict(doc)
    return 0


def add_parsers(sub: SubParsers, module: str | None = None) -> None:
    """A command for every declared statistic, built-in or installed as a plugin, except one
    whose command a family registered before this one writes by hand (`main.FAMILIES`); with
    `module` (the protocol module of a built-in statistic the command line names,
    `main.STATISTIC_COMMANDS`), only that module's commands."""
    from leteo_fed.protocols import registry

    if module is not None:
        protocols = [importlib.import_module(f"leteo_fed.protocols.{module}").PROTOCOL]
    else:
        protocols = registry.statistics()
    for protocol in protocols:
        for each in commands(protocol.statistic):
            name = each.name if each is not None else _default_name(protocol.statistic)
            if name not in sub.choices:  # a command a family writes by hand stays
                add_parser(sub, protocol, each)


def command_names() -> set[str]:
    """The commands of the declared statistics (they come from the registry, not
    `main.FAMILIES`; a family may write one of them by hand)."""
    from leteo_fed.protocols import registry

    names = set()
    for p in registry.statistics():
        for command in commands(p.statistic):
            names.add(
                command.name if command else p.statistic.command or command_name(p.statistic.name)
            )
    return names
