"""`leteo-fed`: one command for every party and job.

This module builds the top parser, lets each command family (one module each) add its
sub-commands, and turns errors into exit codes. Each family sets `handler` on its parsers: the
`run(args) -> int` that executes the command.

Start-up stays cheap: a command line that names a command imports only the family that defines
it (:data:`FAMILIES`), and a family's module imports its implementation only when the command
runs. The parser of that command is the one the whole tree holds, so its `--help` and its errors
are the same; `leteo-fed --help` (no command) builds the whole tree.

Exit codes: 0 success; 2 bad input, a refused request or a missing optional extra (one readable
line on stderr); 1 a failure of the run itself (a peer unreachable, a round that ended without a
result).
"""

from __future__ import annotations

import argparse
import gc
import importlib
import logging
import shlex
import sys

from leteo_fed import __version__, extras
from leteo_fed.cli import flags
from leteo_fed.cli.options import SubParsers, join_negative_values
from leteo_fed.demo.parent import die_with_parent_if_asked
from leteo_fed.errors import LeteoError, PeerUnavailable

DESCRIPTION = """\
LETEO-Fed: privacy-preserving analytics across many data owners.

Three services cooperate over mutually authenticated gRPC (mTLS):
  csp         holds the Paillier secret key; decrypts only blinded aggregates
  aggregator  runs rounds for the data user; adds encrypted shares, blinds, unblinds
  owner       one per site, next to the data; sends only encrypted statistics

Quick start (everything on this machine, separate processes, fresh certificates):
  leteo-fed demo pca --out out/demo-pca
"""


# The built-in statistics' commands and the protocol module that declares each: a command line
# naming one imports that module alone (a plugin's command builds the whole tree, the registry
# finding it). tests/leteo_fed/cli/test_startup.py checks this against the registry.
STATISTIC_COMMANDS: dict[str, str] = {
    "pca": "moments_round",
    "dca": "moments_round",
    "stats": "weighted_stats",
    "correlation": "correlation",
    "linreg": "linreg",
    "logreg": "logreg",
    "crosstab": "crosstab",
    "quantiles": "quantiles",
    "naive-bayes": "naive_bayes",
    "kmeans": "kmeans_round",
}

# The command families in `--help` order: (module in leteo_fed.cli, its function, what the
# function is given: the top-level sub-commands, the `demo` group or both, or the sub-commands
# and the protocol module of the statistic named; the top-level commands it adds). `demo` is a group main adds.
DEMO = "demo"
FAMILIES: tuple[tuple[str, str, str, tuple[str, ...]], ...] = (
    ("services", "add_parsers", "sub", ("certs", "csp", "aggregator", "owner")),
    ("keyholders", "add_parsers", "sub", ("keys", "keyholder")),
    ("rounds", "add_demo_parsers", "demo", (DEMO,)),  # demo pca, demo dca
    ("ldp", "add_parsers", "sub+demo", ("ldp", DEMO)),  # ldp simulate, ldp collect; demo ldp
    ("anonymize", "add_parser", "sub", ("anonymize",)),
    ("bench", "add_parser", "sub", ("bench",)),
    ("kmeans", "add_parsers", "demo", (DEMO,)),  # demo kmeans
    ("dp_kmeans", "add_parser", "sub", ("dp-kmeans",)),
    ("synthesize", "add_parser", "sub", ("synthesize",)),
    # one command per declared statistic, built-in (STATISTIC_COMMANDS) or plugin
    ("statistics", "add_parsers", "sub+command", tuple(STATISTIC_COMMANDS)),
    ("jobs", "add_parsers", "sub", ("jobs", "result")),
    ("health", "add_parser", "sub", ("health",)),
    ("simulate", "add_parser", "sub", ("simulate",)),
)
COMMANDS = frozenset(c for *_, commands in FAMILIES for c in commands)


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The whole command tree; the order of registration is the order `--help` lists.

    With `command` (one of :data:`COMMANDS`), only the families that add it are imported and
    registered: that command's parser is the one the whole tree holds."""
    parser = argparse.ArgumentParser(
        prog="leteo-fed",
        description=DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"leteo-fed {__version__}")
    parser.add_argument(
        "--log-level",
        default="INFO",
        choices=["DEBUG", "INFO", "WARNING", "ERROR"],
        help="log verbosity",
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    demo: SubParsers | None = None
    for module, function, given, commands in FAMILIES:
        if command is not None and command not in commands:
            continue
        if given in ("demo", "sub+demo") and demo is None:  # the group, in its place
            demo = sub.add_parser(
                DEMO, help="run a complete local deployment end to end"
            ).add_subparsers(dest="action", required=True, metavar="DEMO")
        add = getattr(importlib.import_module(f"leteo_fed.cli.{module}"), function)
        if given == "sub":
            add(sub)
        elif given == "sub+command":  # the module declaring the command named, if built in
            add(sub, STATISTIC_COMMANDS.get(command or ""))
        elif given == "demo":
            add(demo)
        else:
            add(sub, demo)
    return parser


def command_parser(command: str) -> argparse.ArgumentParser:
    """The parser of one top-level command (what its flags are, e.g. for `flags.flag_map`)."""
    parser = build_parser(command if command in COMMANDS else None)
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction) and command in action.choices:
            return action.choices[command]
    raise KeyError(f"no command {command!r}")


def command_of(argv: list[str]) -> str | None:
    """The top-level command a command line names, if it names a known one (else None: the
    whole tree is built, for `--help`, `--version` and every error about the command word)."""
    i = 0
    while i < len(argv):
        token = argv[i]
        if token == "--":
            return None
        if not token.startswith("-"):
            return token if token in COMMANDS else None
        if "=" not in token and len(token) > 2 and "--log-level".startswith(token):
            i += 1  # --log-level (or an abbreviation) takes the next word
        i += 1
    return None


def _run(args: argparse.Namespace, parser: argparse.ArgumentParser | None = None) -> int:
    """The command's handler, with every anticipated failure turned into one line and a code.
    A bad input's line names the command's flags where the library names a parameter
    (`dp_epsilon` is `--dp-epsilon` for `pca`, `--epsilon` for `kmeans`: `cli.flags`), and
    so do the fixes and previews it prints (`flags.say`)."""
    token = flags.speak_for(flags.command_parser(parser, args)) if parser is not None else None
    try:
        return _handle(args, parser)
    finally:
        if token is not None:
            flags.stop_speaking(token)


def _handle(args: argparse.Namespace, parser: argparse.ArgumentParser | None) -> int:
    try:
        return args.handler(args)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except PeerUnavailable as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    except LeteoError as exc:
        if _round_failed(exc):  # the round ended without a result: a failure of the run
            print(f"error: {exc}", file=sys.stderr)
            return 1
        said = str(exc)
        if parser is not None:
            said = flags.for_command(parser, args, said, exc.field)
        print(f"error: {said}", file=sys.stderr)
        return 2
    except ModuleNotFoundError as exc:  # an extra's package imported deep inside a run
        message = extras.explain(exc)
        if message is None:
            raise
        print(f"error: {message}", file=sys.stderr)
        return 2


def _round_failed(exc: LeteoError) -> bool:
    """Whether `exc` is the analyst client's RoundFailed. Only a command that loaded the client
    can have raised it, so the others need not import the client (and its protocols) to ask."""
    client = sys.modules.get("leteo_fed.client")
    return client is not None and isinstance(exc, client.RoundFailed)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    parser = build_parser(command_of(argv))
    args = parser.parse_args(join_negative_values(parser, argv))
    args.command_line = shlex.join(["leteo-fed", *argv])  # release reports: how to reproduce
    die_with_parent_if_asked()
    logging.basicConfig(
        level=getattr(logging, args.log_level),
        format="%(asctime)s %(name)s %(levelname)s %(message)s",
        stream=sys.stderr,
    )
    logging.getLogger("py4j").setLevel(logging.WARNING)
    return _run(args, parser)


def console() -> int:
    """`main` as a process's whole life (the `leteo-fed` script, `python -m leteo_fed`).

    The interpreter's exit collects garbage over every object the command ever made: 0.2 s for
    a process that imported pandas, 0.6 s with scikit-learn, on every service stop and every
    command. Nothing here relies on a collector-run finalizer (files are closed and state is
    written when the work ends), so the objects are frozen out of those last collections."""
    try:
        return main()
    finally:
        gc.freeze()


if __name__ == "__main__":
    raise SystemExit(console())
