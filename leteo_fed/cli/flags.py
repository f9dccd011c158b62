"""Errors name what the user typed: a parameter name becomes the command's flag.

The library (protocols, privacy, the client) names parameters as the Python API spells them
(`dp_epsilon`, `row_norm_bound`, `bounds`; `LeteoError.field`). At the CLI boundary each
command knows its own flags, so `main` rewrites an error's message with them before printing
it: `dp_epsilon must be finite ...` is `--dp-epsilon must be finite ...` for `pca` and
`--epsilon must be finite ...` for `kmeans`. The protocol code keeps naming parameters.

A parameter maps to the flag of this command that
- is spelled like it (`row_norm_bound` -> `--row-norm-bound`), or has it as an alias
  (`kmeans --epsilon, --dp-epsilon`: the first spelling, `--epsilon`, is the one named);
- else stores into it (argparse's dest: `--rounds` for `rounds`);
- else is its CLI counterpart in `ALIASES` (`deadline_seconds` is `--deadline`, `bounds`
  is `--bounds` whose dest is `column_bounds`, `dp_epsilon` is kmeans' `--epsilon`).
A parameter the command has no flag for is left as it is.

What is rewritten: a parameter in backticks (`bounds`: how library code names a one-word
parameter unambiguously), any identifier with an underscore standing as a word of its own
(dp_epsilon; not a quoted column name, a config key such as policy.min_rows or a flag),
`param (--flag)` said once as the flag, and the error's own `field` where the message first
names it as a word.
"""

from __future__ import annotations

import argparse
import contextvars
import re

# parameter (as the Python API spells it) -> the dests of the flags that set it, in order
ALIASES: dict[str, tuple[str, ...]] = {
    "dp_epsilon": ("dp_epsilon", "epsilon"),
    "dp_delta": ("dp_delta", "delta"),
    "deadline_seconds": ("deadline",),
    "bounds": ("column_bounds", "bounds"),
    "iterations": ("rounds",),
}

# an identifier with an underscore (dp_epsilon, row_norm_bound) standing as a word of its own:
# not part of a flag (--x_y), a config key (policy.min_rows), a quoted name ('a_b') or COL=LO
_IDENTIFIER = re.compile(r"(?<![\w.'\"`-])([a-z][a-z0-9]*(?:_[a-z0-9]+)+)(?![\w'\"`=-])")
# `row_norm_bound (--row-norm-bound)`: a parameter followed by its flag in parentheses
_WITH_FLAG = re.compile(r"(?<![\w.'\"`-])([a-z][a-z0-9_]*) \((--[a-z0-9-]+)\)")
_BACKTICKED = re.compile(r"`([a-z][a-z0-9_]*)`")


def command_parser(parser: argparse.ArgumentParser, args: argparse.Namespace):
    """The parser of the (sub-)command `args` was parsed by: `pca`, `ldp collect`, ..."""
    current = parser
    while True:
        subs = [a for a in current._actions if isinstance(a, argparse._SubParsersAction)]
        if not subs:  # argparse offers no public walk of its tree
            return current
        chosen = getattr(args, subs[0].dest, None)
        if chosen is None or chosen not in subs[0].choices:
            return current
        current = subs[0].choices[chosen]


def flag_map(parser: argparse.ArgumentParser) -> dict[str, str]:
    """{parameter or dest: the flag this command names it by} for every long option."""
    by_spelling: dict[str, str] = {}
    by_dest: dict[str, str] = {}
    for action in parser._actions:
        longs = [o for o in action.option_strings if o.startswith("--")]
        if not longs or action.dest == "help":
            continue
        for option in longs:
            by_spelling.setdefault(option[2:].replace("-", "_"), longs[0])
        by_dest.setdefault(action.dest, longs[0])
    flags = {**by_dest, **by_spelling}
    for parameter, dests in ALIASES.items():
        if parameter in by_spelling:
            continue
        for dest in dests:
            if dest in by_dest:
                flags[parameter] = by_dest[dest]
                break
    return flags


def name_flags(message: str, field: str | None, flags: dict[str, str]) -> str:
    """`message` with the parameters it names replaced by this command's flags (see above)."""

    def collapse(m: re.Match) -> str:
        flag = flags.get(m.group(1))
        return flag if flag is not None else m.group(0)

    out = _WITH_FLAG.sub(collapse, message)
    out = _BACKTICKED.sub(collapse, out)
    out = _IDENTIFIER.sub(lambda m: flags.get(m.group(1), m.group(1)), out)
    flag = flags.get(field) if field else None
    if flag is not None and not re.search(rf"{re.escape(flag)}(?![\w-])", out):
        # a one-word parameter (bounds, features, epsilon): its first mention as a word
        word = re.compile(rf"(?<![\w.'\"`-]){re.escape(field or '')}(?![\w'\"`=-])")
        out = word.sub(flag, out, count=1)
    return out


def name_backticked(text: str, flags: dict[str, str]) -> str:
    """`text` with its backticked parameters (and `param (--flag)`) named by these flags: the
    rewrite for texts a command prints (help, previews), which, unlike an error, may hold
    other identifiers with underscores (JSON keys) that must stay as they are."""

    def collapse(m: re.Match) -> str:
        flag = flags.get(m.group(1))
        return flag if flag is not None else m.group(0)

    return _BACKTICKED.sub(collapse, _WITH_FLAG.sub(collapse, text))


# the flags of the command being run (`main` sets them): what `say` names parameters by
_SPEAKING: contextvars.ContextVar[dict[str, str] | None] = contextvars.ContextVar(
    "flags", default=None
)


def speak_for(parser: argparse.ArgumentParser) -> contextvars.Token:
    """Name parameters by this command's flags in what `say` is given from now on."""
    return _SPEAKING.set(flag_map(parser))


def stop_speaking(token: contextvars.Token) -> None:
    _SPEAKING.reset(token)


def say(text: str) -> str:
    """A text the library wrote for the analyst (a fix, a preview's line), as the running
    command's user reads it: its backticked parameters named by their flags."""
    return name_backticked(text, _SPEAKING.get() or {})


def name_help(parser: argparse.ArgumentParser) -> None:
    """A command built from a declaration: its description and each flag's help, written
    with backticked parameters, name this command's flags."""
    flags = flag_map(parser)
    if parser.description:
        parser.description = name_backticked(parser.description, flags)
    for action in parser._actions:
        if isinstance(action.help, str):
            action.help = name_backticked(action.help, flags)


def for_command(
    parser: argparse.ArgumentParser, args: argparse.Namespace, message: str, field: str | None
) -> str:
    """The error message of the command `args` runs, naming its flags."""
    return name_flags(message, field, flag_map(command_parser(parser, args)))
