"""What every one-result analyst command does once its request is checked: run it with live
progress, draw its plot, write its result.json (last: its presence means the job finished),
print a one-line JSON summary."""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

from leteo_fed.cli.flags import say
from leteo_fed.cli.progress import ProgressPrinter

MAX_WARNING_LINES = 10  # the terminal's warnings; the result file holds every one


def round_options(args: argparse.Namespace, **given: Any) -> Any:
    """The RoundOptions of the flags every analyst command shares (quorum, deadline, owners,
    encoding, DP); `given` overrides one a command names otherwise or does not have."""
    from leteo_fed.client import RoundOptions

    values: dict[str, Any] = {
        "min_owners": args.min_owners,
        "deadline_seconds": args.deadline,
        "owners": tuple(args.owners),
        "scale_bits": args.scale_bits,
        "value_bound": getattr(args, "value_bound", 0.0),
        "dp_epsilon": getattr(args, "dp_epsilon", None),
        "dp_delta": getattr(args, "dp_delta", None),
        "row_norm_bound": getattr(args, "row_norm_bound", None),
        "bounds": bounds_from_args(args),
    }
    return RoundOptions(**(values | given))


def bounds_from_args(args: argparse.Namespace) -> tuple:
    """`--codebook` then `--bounds` (each overriding the codebook's column)."""
    from leteo_fed.privacy import bounds

    given = [bounds.parse_bound(t) for t in getattr(args, "column_bounds", None) or []]
    book = getattr(args, "codebook", None)
    return bounds.merged(given, bounds.load_codebook(book) if book else ())


def assumption_from_args(args: argparse.Namespace) -> Any:
    """The preview's assumption: `--expect-mean` / `--expect-std` hints, else the default."""
    from leteo_fed.errors import ConfigError
    from leteo_fed.protocols.dp_release import Assumption

    def pairs(flag: str, items: list[str]) -> dict[str, float]:
        out = {}
        for item in items:
            name, sep, value = item.partition("=")
            try:
                out[name.strip()] = float(value)
            except ValueError:
                raise ConfigError(f"{flag} takes COL=NUMBER, got {item!r}") from None
            if not sep:
                raise ConfigError(f"{flag} takes COL=NUMBER, got {item!r}")
        return out

    return Assumption(
        pairs("--expect-mean", getattr(args, "expect_mean", []) or []),
        pairs("--expect-std", getattr(args, "expect_std", []) or []),
    )


@contextlib.contextmanager
def quiet_noise_warnings() -> Iterator[None]:
    """The Python API's NoiseWarnings are the CLI's own `warning:` lines (print_release_truth),
    printed once, after the result."""
    import warnings

    from leteo_fed.privacy.noise_gate import NoiseWarning

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", NoiseWarning)
        yield


def figure_order(name: str) -> tuple:
    """Figures in reading order: the wire's maps keep none (intercept first, numbers as
    numbers)."""
    kind, _, rest = name.partition(" ")
    return (kind, rest != "intercept", int(rest) if rest.isdigit() else 0, rest)


def print_release_truth(result: dict) -> None:
    """After a DP release: each figure with its noise, then a warning line per figure the
    noise or clipping buries (stderr; the same is in the result file under dp)."""
    dp = result.get("dp") or {}
    figures, noise = dp.get("figures") or {}, dp.get("figure_noise_std") or {}
    if figures:
        print("released figures (value +/- the DP noise's std):", file=sys.stderr)
        for name, value in sorted(figures.items(), key=lambda kv: figure_order(kv[0])):
            e = noise.get(name)
            tail = f" +/- {e:.3g}" if e is not None else ""
            print(f"  {name}: {value:.6g}{tail}", file=sys.stderr)
    if dp.get("clipped_rows") is not None:
        std = dp.get("noise_std_per_value") or dp.get("noise_std_count_with_quorum")
        tail = f" +/- {std:.2g} (noise)" if std else ""
        print(
            f"rows with a value clipped to the public bounds: {dp['clipped_rows']:.0f}{tail}",
            file=sys.stderr,
        )
    found = dp.get("warnings") or []
    for w in found[:MAX_WARNING_LINES]:
        print(f"warning: {say(w['message'])}", file=sys.stderr)
    if len(found) > MAX_WARNING_LINES:
        print(
            f"warning: and {len(found) - MAX_WARNING_LINES} more figures buried by the noise "
            "(every one under dp.warnings in the result file)",
            file=sys.stderr,
        )


def run_and_write(
    args: argparse.Namespace,
    request: Any,
    options: Any,
    connect: Callable[[argparse.Namespace], Any],
    summary: Sequence[str],
    plot: Callable[[dict, Path], None] | None = None,
    prepare: Callable[[dict], dict] | None = None,
    note_plot: bool = False,
) -> dict:
    """`connect` is the command module's `analyst_client` (looked up there, so tests can
    replace it); `prepare` reorders the result before it is written; `note_plot` records the
    plot's path in the result."""
    from leteo_fed.fileio import atomic_write_json
    from leteo_fed.protocols import registry

    protocol = registry.for_request(request)
    progress = ProgressPrinter()
    with connect(args) as client, quiet_noise_warnings():
        result = client.run(request, options, on_tick=progress.tick).to_dict()
    progress.done()
    if prepare is not None:
        result = prepare(result)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    written = [out / protocol.output_file(request)]
    if plot is not None and protocol.plot_file and not args.no_plot:
        plot(result, out / protocol.plot_file)
        if note_plot:
            result["plot"] = str(out / protocol.plot_file)
        written.append(out / protocol.plot_file)
    atomic_write_json(written[0], result)
    print(json.dumps({k: result[k] for k in summary}))
    print_release_truth(result)
    print(f"wrote {' and '.join(str(p) for p in written)}", file=sys.stderr)
    return result
