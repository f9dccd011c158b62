"""`leteo-fed aggregator owners [remove SITE ...]`: the aggregator operator's view of the sites.

Listing works with an analyst's or the aggregator's certificate; removing needs the
aggregator's own (its operator). A removed site is no longer invited; one that is still
running registers again when it reconnects, so remove sites that went away for good.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import time

from leteo_fed.cli.options import SubParsers, add_aggregator_address, add_tls, set_handler


def add_parsers(actions: SubParsers) -> None:
    p = actions.add_parser(
        "owners",
        help="list the sites the aggregator knows, or remove some",
        description="List the owners the aggregator knows: how each is reached, whether it is "
        "connected, when it was last heard from, and whether it is idle (not heard from for "
        "longer than the aggregator's --idle-owner-days: no longer invited unless an analyst "
        "names it). `owners remove SITE ...` forgets sites that went away for good (the "
        "aggregator's own certificate: --name aggregator).",
    )
    p.add_argument(
        "remove",
        nargs="*",
        metavar="remove SITE",
        help="`remove` followed by the sites to forget",
    )
    add_aggregator_address(p)
    p.add_argument("--json", action="store_true", help="print JSON")
    add_tls(p, "aggregator", "aggregator")
    p.add_argument(
        "--role",
        choices=["aggregator", "analyst"],
        default="aggregator",
        help="the role of --name's certificate: an analyst may list, only the aggregator's "
        "operator may remove (default: aggregator)",
    )
    set_handler(p, run)


def run(args: argparse.Namespace) -> int:
    from leteo_fed.cli.options import tls_config
    from leteo_fed.client import AnalystClient
    from leteo_fed.errors import ConfigError

    words = list(args.remove)
    if words and (words[0] != "remove" or len(words) < 2):
        raise ConfigError("usage: leteo-fed aggregator owners [remove SITE ...]")
    with AnalystClient(args.aggregator, tls_config(args), patience=0) as client:
        owners = client.remove_owners(words[1:]) if words else client.owner_listing()
    rows = [
        {
            "site_id": o.site_id,
            "mode": o.mode,
            "connected": o.connected,
            "last_seen": dt.datetime.fromtimestamp(o.last_seen_unix, dt.timezone.utc).isoformat(
                timespec="seconds"
            )
            if o.last_seen_unix
            else None,
            "idle": o.idle,
            "address": o.address,
        }
        for o in owners
    ]
    if args.json:
        print(json.dumps(rows))
        return 0
    now = time.time()
    table = [("site", "mode", "connected", "last seen", "invited by default")]
    for o in owners:
        ago = _ago(now - o.last_seen_unix) if o.last_seen_unix else "-"
        table.append(
            (
                o.site_id,
                o.mode,
                "yes" if o.connected else "no",
                ago,
                "no (idle)" if o.idle else "yes",
            )
        )
    widths = [max(len(r[i]) for r in table) for i in range(len(table[0]))]
    for r in table:
        print("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip())
    return 0


def _ago(seconds: float) -> str:
    if seconds < 2:
        return "now"
    for unit, size in (("d", 86400), ("h", 3600), ("min", 60)):
        if seconds >= size:
            return f"{seconds / size:.0f} {unit} ago"
    return f"{seconds:.0f} s ago"
