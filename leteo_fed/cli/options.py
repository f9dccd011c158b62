"""Argument helpers shared by every command family.

One definition per flag, so `--deadline`, `--owners` or the TLS group read, default and validate
the same in every command, and every default shown in a help text comes from
:mod:`leteo_fed.defaults`. Nothing here imports more than argparse; the TLS configuration (gRPC)
is built lazily, when a command runs.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from leteo_fed.defaults import (
    CSP_SPARK_CIPHERTEXTS,
    DEFAULT_AGGREGATOR_ADDRESS,
    DEFAULT_DEADLINE_SECONDS,
    DEFAULT_DP_DELTA,
    DEFAULT_KEY_BITS,
    DEFAULT_QUORUM,
    DEFAULT_VALUE_BOUND,
    DEMO_MAX_OWNERS,
    DEMO_OWNERS,
    MIN_QUORUM,
)

if TYPE_CHECKING:
    from leteo_fed.client import AnalystClient
    from leteo_fed.transport.grpc_io import TlsConfig

Container = argparse._ActionsContainer  # a parser or an argument group
SubParsers = argparse._SubParsersAction

DP_GROUP_TITLE = "differential privacy (distributed Skellam noise added by the owners)"


def host_port(text: str) -> str:
    """An address to dial, `host:port` (a name, an IPv4 or a bracketed IPv6 host; port
    1-65535): a missing port is a usage error naming the flag (exit 2), not a failed dial."""
    return _address(text, lowest_port=1)


def listen_address(text: str) -> str:
    """An address to listen on, `host:port` (port 0: any free port)."""
    return _address(text, lowest_port=0)


def _address(text: str, lowest_port: int) -> str:
    host, colon, port = text.rpartition(":")
    bare = host[1:-1] if host.startswith("[") and host.endswith("]") else host
    ok = (
        bool(colon)
        and 0 < len(bare) <= 253
        and all(c.isascii() and (c.isalnum() or c in "-._:") for c in bare)
        and (":" not in bare or bare != host)  # an IPv6 host needs its brackets
        and port.isascii()
        and port.isdigit()
        and lowest_port <= int(port) <= 65535
    )
    if not ok:
        shown = text if len(text) <= 60 else text[:60] + "..."
        raise argparse.ArgumentTypeError(
            f"must be host:port with a port {lowest_port}-65535, got {shown!r}"
        )
    return text


def positive_int(text: str) -> int:
    """A count of at least 1 (a bad one is a usage error naming the flag, exit 2)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a whole number, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def show(value: float) -> str:
    """A default as help texts write it: 120, 1e6, 1e-6 (not 120.0, 1e+06, 1e-06)."""
    mantissa, _, exponent = f"{value:g}".partition("e")
    return f"{mantissa}e{int(exponent)}" if exponent else mantissa


DP_DELTA_DEFAULT = f"default: {show(DEFAULT_DP_DELTA)}"


# ---------------------------------------------------------------- argument types


def csv_list(text: str) -> list[str]:
    items = [s.strip() for s in text.split(",") if s.strip()]
    if not items:
        raise argparse.ArgumentTypeError("expected a comma-separated list")
    return items


def host_ports(text: str) -> list[str]:
    """A comma-separated list of distinct addresses to dial, each `host:port`."""
    items = [host_port(item) for item in csv_list(text)]
    if len(set(items)) != len(items):
        raise argparse.ArgumentTypeError("an address is listed twice")
    return items


def bounds(text: str) -> tuple[float, float]:
    try:
        lo, hi = (float(v) for v in text.split(","))
    except ValueError as exc:
        raise argparse.ArgumentTypeError("expected LO,HI") from exc
    return lo, hi


# ---------------------------------------------------------------- transport security


def add_tls(p: argparse.ArgumentParser, default_name: str, role: str) -> None:
    """The mTLS flags of a party; `role` is what its certificate must say it is."""
    g = p.add_argument_group("transport security")
    g.add_argument(
        "--tls-dir",
        type=Path,
        default=Path(os.environ.get("LETEO_TLS_DIR") or "certs"),
        help="folder with ca.crt, the *-ca.crt authorities, NAME.crt and NAME.key from "
        "`leteo-fed certs` (default: $LETEO_TLS_DIR, else ./certs)",
    )
    g.add_argument(
        "--name",
        default=default_name,
        help=f"this party's certificate name (default: {default_name})",
    )
    g.add_argument(
        "--insecure",
        action="store_true",
        help="plaintext gRPC with NO authentication: local experiments only",
    )
    p.set_defaults(role=role)


def tls_config(args: argparse.Namespace) -> TlsConfig:
    """The TLS settings of `add_tls`, read when the command runs (imports gRPC)."""
    from leteo_fed.transport.grpc_io import TlsConfig

    if args.insecure:
        return TlsConfig.insecure_as(args.name, args.role)
    return TlsConfig.from_dir(args.tls_dir, args.name, args.role)


# ---------------------------------------------------------------- jobs against running services


def add_aggregator_address(p: Container) -> None:
    default = os.environ.get("LETEO_AGGREGATOR") or DEFAULT_AGGREGATOR_ADDRESS
    p.add_argument(
        "--aggregator",
        default=default,
        type=host_port,
        help=f"aggregator address host:port (default: $LETEO_AGGREGATOR, else {default})",
    )


def analyst_client(args: argparse.Namespace) -> AnalystClient:
    """The analyst's client for a command: it prints the job id the moment the aggregator took
    the job (first, before any waiting), and rides through an aggregator restart."""
    from leteo_fed.client import AnalystClient

    def announce(job_id: str) -> None:
        print(f"job {job_id}", file=sys.stderr, flush=True)

    return AnalystClient(args.aggregator, tls_config(args), on_job=announce)


def add_features(p: Container) -> None:
    p.add_argument(
        "--features", type=csv_list, required=True, help="comma-separated feature columns"
    )


def add_quorum(p: Container, what: str) -> None:
    """`--min-owners` of an encrypted job: one share alone would reveal its owner's statistics."""
    p.add_argument(
        "--min-owners",
        type=int,
        default=0,
        help=f"{what} (>= {MIN_QUORUM}; default: {DEFAULT_QUORUM}, or every invited owner if "
        f"fewer: what the owners' default policy asks)",
    )


def add_deadline(p: Container, what: str) -> None:
    p.add_argument(
        "--deadline",
        type=float,
        default=DEFAULT_DEADLINE_SECONDS,
        help=f"{what} (default: {show(DEFAULT_DEADLINE_SECONDS)})",
    )


def add_value_bound(p: Container) -> None:
    """0 asks for the protocol's default bound."""
    p.add_argument(
        "--value-bound",
        type=float,
        default=0.0,
        help=f"declared max |x| (default: {show(DEFAULT_VALUE_BOUND)})",
    )


def add_owner_filter(p: Container) -> None:
    p.add_argument(
        "--owners", type=csv_list, default=[], help="invite only these sites (default: all)"
    )


def add_round_flags(
    p: Container,
    quorum: str = "owners needed for a result",
    deadline: str | None = "round deadline in seconds",
    scale_default: str = "",
    value_bound: bool = True,
) -> None:
    """The flags of every secure-sum round: its quorum, deadline, fixed point, value bound and
    which sites are invited (`deadline` None: the command sets its own)."""
    add_quorum(p, quorum)
    if deadline is not None:
        add_deadline(p, deadline)
    if value_bound:
        add_value_bound(p)
    tail = f" (default: {scale_default})" if scale_default else ""
    p.add_argument("--scale-bits", type=int, default=0, help=f"fixed-point fraction bits{tail}")
    add_owner_filter(p)


def add_out_folder(p: Container, default: Path) -> None:
    p.add_argument("--out", type=Path, default=default, help=f"output folder (default: {default})")


def add_result_output(p: Container, default: Path, result_file: str, plot_file: str) -> None:
    """`--out DIR` and `--no-plot` of a command that writes one result and its figure."""
    p.add_argument(
        "--out",
        type=Path,
        default=default,
        help=f"output folder: writes OUT/{result_file} and OUT/{plot_file} (default: {default})",
    )
    p.add_argument(
        "--no-plot",
        action="store_true",
        help=f"write no {plot_file} (the plot needs the [plots] extra)",
    )


# ---------------------------------------------------------------- differential privacy


def add_row_norm_bound(g: Container, epsilon_flag: str) -> None:
    g.add_argument(
        "--row-norm-bound",
        type=float,
        default=None,
        help=f"DP: every row is clipped to this L2 norm (required with {epsilon_flag})",
    )


def add_dp_flags(p: argparse.ArgumentParser, bounds: bool = False, clips: bool = True) -> None:
    """`--dp-epsilon`, `--dp-delta`, `--row-norm-bound` of a moment round (PCA, DCA, ...);
    with `bounds`, the public per-column bounds and the preview's hints too; without `clips`
    (a round of counts clips nothing), the budget alone."""
    g = p.add_argument_group(DP_GROUP_TITLE)
    g.add_argument(
        "--dp-epsilon", type=float, default=None, help="release the statistics (epsilon, delta)-DP"
    )
    g.add_argument("--dp-delta", type=float, default=None, help=f"DP delta ({DP_DELTA_DEFAULT})")
    if not clips:
        return
    if not bounds:
        add_row_norm_bound(g, "--dp-epsilon")
        return
    add_bounds_flags(g)


def add_bounds_flags(g: Container) -> None:
    """Public bounds per column (data in natural units) and what the preview may assume."""
    g.add_argument(
        "--bounds",
        action="append",
        default=[],
        dest="column_bounds",
        metavar="COL=LO,HI",
        help="DP: public bounds of a numeric column, in its natural units (repeat per column; "
        "from a codebook, never from the data): owners clip each value to them, so the "
        "release needs no rescaled data. Wider than the data costs accuracy, narrower clips "
        "it (the result says how many rows were clipped)",
    )
    g.add_argument(
        "--codebook",
        type=Path,
        default=None,
        metavar="FILE",
        help="DP: a public codebook (TOML `age = [17, 90]` or JSON) with bounds per column; "
        "--bounds overrides it column by column",
    )
    g.add_argument(
        "--row-norm-bound",
        type=float,
        default=None,
        help="DP, for experts: every row is clipped to this L2 norm (with --bounds: in the "
        "scaled [-1, 1] units, default sqrt(columns); without --bounds: required, in the data's "
        "units)",
    )
    g.add_argument(
        "--expect-std",
        action="append",
        default=[],
        metavar="COL=S",
        help="the preview's assumption: the standard deviation you expect of a column "
        "(default: a sixth of its bounds' width)",
    )
    g.add_argument(
        "--expect-mean",
        action="append",
        default=[],
        metavar="COL=M",
        help="the preview's assumption: the mean you expect of a column (default: the middle "
        "of its bounds)",
    )


# ---------------------------------------------------------------- local demos


def add_demo_owners(p: Container) -> None:
    p.add_argument(
        "--owners",
        type=int,
        default=DEMO_OWNERS,
        help=f"number of owner agents, one process each (default: {DEMO_OWNERS}; at most "
        f"{DEMO_MAX_OWNERS}: leteo-fed simulate runs thousands)",
    )


def add_key_size_flags(p: Container, key_bits_help: str | None = "Paillier modulus size") -> None:
    """`--key-bits` (unless `key_bits_help` is None) and `--insecure-small-key`: a key below the
    secure size only on explicit request."""
    if key_bits_help is not None:
        p.add_argument(
            "--key-bits",
            type=int,
            default=DEFAULT_KEY_BITS,
            help=f"{key_bits_help} (default: {DEFAULT_KEY_BITS})",
        )
    p.add_argument(
        "--insecure-small-key",
        action="store_true",
        help=f"allow keys below {DEFAULT_KEY_BITS} bits (tests and experiments only)",
    )


def add_spark_sum_flag(p: Container) -> None:
    """From how many ciphertexts in a round the CSP (or a key holder) sums shares on Spark."""
    p.add_argument(
        "--spark-ciphertext-threshold",
        type=int,
        default=CSP_SPARK_CIPHERTEXTS,
        metavar="N",
        help="rounds expecting N or more ciphertexts (shares x ciphertexts per share) are "
        "summed on Spark from spill files (the [spark] extra; SPARK_MASTER, default local); "
        "smaller ones on every core of this host (0: never Spark; default: "
        f"{CSP_SPARK_CIPHERTEXTS})",
    )


def add_demo_key_flags(p: Container) -> None:
    """A demo's fresh Paillier key, or a threshold key split among holders."""
    add_key_size_flags(p, "Paillier key size")
    p.add_argument(
        "--keyholders",
        type=int,
        default=0,
        metavar="M",
        help="split the key among M key holders instead of one CSP: a threshold key dealt "
        "for the demo, any --threshold of them decrypt (docs/threshold-keys.md; default: 0, "
        "one CSP)",
    )
    p.add_argument(
        "--threshold",
        type=int,
        default=0,
        metavar="T",
        help="with --keyholders: how many holders decrypt together, more than M / 2 "
        "(default: the smallest majority)",
    )


def add_demo_insecure(p: Container, what: str = "run the demo") -> None:
    p.add_argument("--insecure", action="store_true", help=f"{what} without TLS (not recommended)")


def set_handler(p: argparse.ArgumentParser, run: Callable[[argparse.Namespace], int]) -> None:
    """The function `main` calls for this command: `run(args) -> exit code`."""
    p.set_defaults(handler=run)


# a number or comma-separated numbers whose first starts with a minus sign: -1,1  -3.5  -1e-3,2
_NEGATIVE_VALUE = re.compile(r"^-(\d|\.\d)[\d.eE+-]*(,[-+]?(\d|\.\d)[\d.eE+-]*)*$")


def _value_options(parser: argparse.ArgumentParser) -> set[str]:
    """Long options, in the whole command tree, that take exactly one value."""
    found: set[str] = set()
    for action in parser._actions:  # argparse offers no public walk of its tree
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                found |= _value_options(sub)
        elif action.option_strings and action.nargs is None and action.const is None:
            found.update(o for o in action.option_strings if o.startswith("--"))
    return found


def join_negative_values(parser: argparse.ArgumentParser, argv: list[str]) -> list[str]:
    """`--bounds -1,1` as `--bounds=-1,1`: argparse would read a value that starts with a
    minus sign (and is not a plain number) as an option and refuse the command line."""
    options = _value_options(parser)
    out: list[str] = []
    i = 0
    while i < len(argv):
        token = argv[i]
        if token == "--":  # the rest is positional
            out += argv[i:]
            break
        if token in options and i + 1 < len(argv) and _NEGATIVE_VALUE.match(argv[i + 1]):
            out.append(f"{token}={argv[i + 1]}")
            i += 2
            continue
        out.append(token)
        i += 1
    return out


def given_on_command_line(command_line: str | None) -> set[str]:
    """The option names (as argparse dests: --n-public -> n_public) a recorded command line
    gave, so a report can say which parameters the user chose and which were defaults."""
    import shlex

    if not command_line:
        return set()
    return {
        token[2:].split("=", 1)[0].replace("-", "_")
        for token in shlex.split(command_line)
        if token.startswith("--")
    }
