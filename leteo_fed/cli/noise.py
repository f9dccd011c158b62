"""See the DP noise before paying for it: `--dry-run`, `--rows` and `--accept-noise`.

Every DP command plans its round locally, exactly as the aggregator and the owners will, from
public parameters only. `--dry-run` prints the noise of every released value and the expected
error of the results, then exits without contacting anyone. A real round whose noise would
exceed the largest value a released statistic can take is refused here, before anyone is
invited and so before any site charges its budget, unless `--accept-noise` is given.
"""

from __future__ import annotations

import argparse
import errno
import json
import os
import sys
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from leteo_fed.cli.flags import say
from leteo_fed.cli.options import Container
from leteo_fed.errors import ConfigError

Preview = Callable[[Any, int | None], dict]  # (plan, rows) -> the protocol's preview document


def add_noise_flags(p: Container, what: str) -> None:
    p.add_argument(
        "--dry-run",
        action="store_true",
        help=f"with DP: print the noise of every released value and the expected error of "
        f"{what}, then exit without contacting anyone (no budget is spent)",
    )
    p.add_argument(
        "--rows",
        type=int,
        default=None,
        help="your estimate of the pooled row count: for --dry-run's expected errors (they "
        "scale as 1/rows) and for the noise check of a real DP round (default: the fewest rows "
        "the owners' default policy admits)",
    )
    p.add_argument(
        "--accept-noise",
        action="store_true",
        help="run a DP round even when its noise would exceed the largest value a released "
        "statistic can take (refused otherwise, before any budget is spent)",
    )


def plan_for_preview(msg: Any, owners: Sequence[str], min_owners: int, epsilon_flag: str) -> Any:
    """The plan of a request (`pb.RoundRequest`) made locally, exactly as the aggregator and
    the owners will make it: nothing is sent."""
    from leteo_fed.defaults import DEFAULT_QUORUM
    from leteo_fed.transport.rounds import plan_request

    if not msg.HasField("dp_epsilon"):
        raise ConfigError(f"`dry_run` previews the DP noise: give {epsilon_flag}")
    invited = len(owners) or max(min_owners, DEFAULT_QUORUM)
    return plan_request(msg, invited)[1]


def check_locally(
    request: Any,
    options: Any,
    preview: Preview,
    args: argparse.Namespace,
    dry_run: Callable[[Any, int | None], int],
    epsilon_flag: str = "`dp_epsilon`",
    plan_without_dp: bool = False,
) -> int | None:
    """Before a command contacts anyone: plan its request locally, exactly as the aggregator
    and the owners will. `--dry-run` prints the preview (its exit code is returned); a DP round
    the noise would bury is refused (ConfigError); with `plan_without_dp` a non-DP request is
    planned too, so a bad one is refused here (as is a DP flag without epsilon). None: go on
    and run it."""
    if not args.dry_run and getattr(args, "out", None) is not None:
        check_writable_folder(args.out)
    dp_flags = (options.dp_delta, options.row_norm_bound)
    dp_given = any(v is not None for v in dp_flags) or bool(options.bounds)
    if not (args.dry_run or options.dp_epsilon is not None or plan_without_dp or dp_given):
        return None
    from leteo_fed.client import round_request
    from leteo_fed.defaults import DEFAULT_QUORUM
    from leteo_fed.transport.rounds import plan_request

    msg = round_request(request, options)
    if not (args.dry_run or options.dp_epsilon is not None):
        plan_request(msg, len(options.owners) or max(options.min_owners, DEFAULT_QUORUM))
        return None
    plan = plan_for_preview(msg, options.owners, options.min_owners, epsilon_flag)
    if getattr(getattr(plan, "dp", None), "bounds", ()):  # bounded: simulate the release
        doc = bounded_preview(request, plan, args)
        if args.dry_run:
            print(json.dumps(doc))
            print_bounded_preview(doc)
            return 0
        for name in doc["noise_buries"]:
            print(
                f"warning: the preview expects {name} to be noise "
                f"(+/- {doc['expected_error'][name]:.3g}; see --dry-run)",
                file=sys.stderr,
            )
    elif args.dry_run:
        return dry_run(plan, args.rows)
    refuse_drowned_round(plan, preview, args)
    return None


def bounded_preview(request: Any, plan: Any, args: argparse.Namespace) -> dict:
    """The simulated preview of a release with public bounds (`release_preview.preview_release`)
    at the analyst's --rows (or the policy's floor), under the stated assumption."""
    from leteo_fed.cli.round_output import assumption_from_args
    from leteo_fed.privacy.noise_gate import rows_to_assume
    from leteo_fed.protocols import registry
    from leteo_fed.protocols.release_preview import preview_release

    rows, basis = rows_to_assume(args.rows, plan.dp.quorum)
    doc = preview_release(registry.for_request(request), plan, rows, assumption_from_args(args))
    if isinstance(doc.get("assumption"), str):
        doc["assumption"] = say(doc["assumption"])
    return {
        "epsilon": plan.dp.epsilon,
        "delta": plan.dp.delta,
        "quorum": plan.dp.quorum,
        "bounds": [str(b) for b in plan.dp.bounds],
        "rows_basis": say(basis),
        **doc,
    }


def print_bounded_preview(doc: dict) -> None:
    out = sys.stderr
    print(
        f"preview at epsilon {doc['epsilon']:g}, delta {doc['delta']:g}, "
        f"{doc['assumed_rows']} rows ({doc['rows_basis']}); nothing was sent",
        file=out,
    )
    print(f"assumed: {doc['assumption']}", file=out)
    print("expected figures +/- the DP noise's std:", file=out)
    for name, value in doc["expected_figures"].items():
        print(f"  {name}: {value:.6g} +/- {doc['expected_error'][name]:.3g}", file=out)
    for name in doc["noise_buries"]:
        print(f"warning: the noise would bury {name}", file=out)
    if not doc["noise_buries"]:
        print("no figure is expected to be buried by the noise", file=out)


def noise_check(plan: Any, preview: Preview, rows: int | None) -> dict:
    """The check a real round meets: the statistics the noise buries at the analyst's row
    estimate (or the policy's floor), and the message that refuses it."""
    from leteo_fed.privacy.noise_gate import (
        SECURE_SUM_FIXES,
        SignalCheck,
        drowned,
        refusal,
        rows_to_assume,
    )

    assumed, basis = rows_to_assume(rows, preview(plan, None)["quorum"])
    doc = preview(plan, assumed)
    fields = ("statistic", "expected_error", "largest_signal")
    buried = drowned(SignalCheck(*(c[f] for f in fields)) for c in doc.get("signal_checks", ()))
    fixes = doc.get("fixes") or SECURE_SUM_FIXES
    return {
        "rows": assumed,
        "rows_basis": say(basis),
        "refused_without_accept_noise": bool(buried),
        "buried": [c.to_dict() for c in buried],
        "message": say(refusal(buried, assumed, basis, fixes)) if buried else "",
    }


def refuse_drowned_round(plan: Any, preview: Preview, args: argparse.Namespace) -> None:
    """Before a real DP round: refuse it (ConfigError, exit 2) if its noise buries a released
    statistic, unless --accept-noise; then say so and go on."""
    from leteo_fed.errors import ConfigError

    check = noise_check(plan, preview, args.rows)
    if not check["refused_without_accept_noise"]:
        return
    if not args.accept_noise:
        raise ConfigError(check["message"], field="accept_noise")
    names = ", ".join(c["statistic"] for c in check["buried"])
    print(
        f"warning: --accept-noise: at {check['rows']} rows the noise buries {names}",
        file=sys.stderr,
    )


def print_preview(plan: Any, preview: Preview, rows: int | None) -> dict:
    """`--dry-run`: the preview as JSON on stdout, with the noise check a real round would
    meet under `noise_check`; the command adds its own lines, then `print_verdict`."""
    doc = preview(plan, rows)
    doc["noise_check"] = noise_check(plan, preview, rows)
    if "fixes" in doc:
        doc["fixes"] = [say(fix) for fix in doc["fixes"]]
    if isinstance(doc.get("assumption"), str):
        doc["assumption"] = say(doc["assumption"])
    print(json.dumps(doc))
    return doc


def print_verdict(doc: dict) -> None:
    check = doc["noise_check"]
    if check["refused_without_accept_noise"]:
        print(f"a real round would be {check['message']}", file=sys.stderr)
    else:
        print(
            f"the noise check passes at {check['rows']} rows ({check['rows_basis']})",
            file=sys.stderr,
        )


def check_writable_folder(path: Path, flag: str = "--out") -> None:
    """This process may write into the folder (or create it): checked before a command
    contacts anyone, so an output that cannot be written is one line, before any round starts
    or any budget is spent (ConfigError naming the flag). Nothing is left behind: a missing
    folder is not created here, its nearest existing parent is checked instead."""
    folder = Path(path)
    existing = folder
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    try:
        if not existing.is_dir():
            raise NotADirectoryError(errno.ENOTDIR, os.strerror(errno.ENOTDIR))
        if existing == folder:
            fd, probe = tempfile.mkstemp(prefix=".write-check.", dir=folder)
            os.close(fd)
            os.unlink(probe)
        elif not os.access(existing, os.W_OK | os.X_OK):
            raise PermissionError(errno.EACCES, os.strerror(errno.EACCES))
    except OSError as exc:
        raise ConfigError(
            f"{flag} {folder}: cannot write there ({exc.strerror or exc})", field=flag.lstrip("-")
        ) from None
