"""`leteo-fed`: one command for every party and job.

This module builds the top parser, lets each command family (one module each) add its
sub-commands, and turns errors into exit codes. Each family sets `handler` on its parsers: the
`run(args) -> int` that executes the command.

Exit codes: 0 success; 2 bad input, a refused request or a missing optional extra (one readable
line on stderr); 1 a failure of the run itself (a peer unreachable, a round that ended without a
result).
"""

from __future__ import annotations

import argparse
import logging
import shlex
import sys

from leteo_fed import __version__, extras
from leteo_fed.cli import (
    anonymize,
    bench,
    dp_kmeans,
    flags,
    health,
    jobs,
    kmeans,
    ldp,
    logreg,
    naive_bayes,
    rounds,
    services,
    simulate,
    statistics,
    synthesize,
)
from leteo_fed.cli.options import join_negative_values
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


def build_parser() -> argparse.ArgumentParser:
    """The whole command tree; the order of registration is the order `--help` lists."""
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
    services.add_parsers(sub)  # certs, csp, aggregator, owner
    rounds.add_parsers(sub)  # pca, dca
    demo = sub.add_parser("demo", help="run a complete local deployment end to end").add_subparsers(
        dest="action", required=True, metavar="DEMO"
    )
    rounds.add_demo_parsers(demo)  # demo pca, demo dca
    ldp.add_parsers(sub, demo)  # demo ldp; ldp simulate, ldp collect
    anonymize.add_parser(sub)
    bench.add_parser(sub)
    kmeans.add_parsers(sub, demo)  # kmeans; demo kmeans
    dp_kmeans.add_parser(sub)
    synthesize.add_parser(sub)
    logreg.add_parser(sub)
    naive_bayes.add_parser(sub)
    statistics.add_parsers(sub)  # stats, correlation, crosstab, ... and every plugin statistic
    jobs.add_parsers(sub)  # jobs, result
    health.add_parser(sub)
    simulate.add_parser(sub)
    return parser


def _run(args: argparse.Namespace, parser: argparse.ArgumentParser | None = None) -> int:
    """The command's handler, with every anticipated failure turned into one line and a code.
    A bad input's line names the command's flags where the library names a parameter
    (`dp_epsilon` is `--dp-epsilon` for `pca`, `--epsilon` for `kmeans`: `cli.flags`)."""
    from leteo_fed.client import RoundFailed

    try:
        return args.handler(args)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except (PeerUnavailable, RoundFailed) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    except LeteoError as exc:
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


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    argv = sys.argv[1:] if argv is None else list(argv)
    args = parser.parse_args(join_negative_values(parser, argv))
    args.command_line = shlex.join(["leteo-fed", *argv])  # release reports: how to reproduce
    # Imports gRPC, so only once the command line is known to run something (not for --help).
    from leteo_fed.demo.cluster import die_with_parent_if_asked

    die_with_parent_if_asked()
    logging.basicConfig(
        level=getattr(logging, args.log_level),
        format="%(asctime)s %(name)s %(levelname)s %(message)s",
        stream=sys.stderr,
    )
    logging.getLogger("py4j").setLevel(logging.WARNING)
    return _run(args, parser)


if __name__ == "__main__":
    raise SystemExit(main())
