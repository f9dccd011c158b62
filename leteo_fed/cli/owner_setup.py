"""`leteo-fed owner init` and `leteo-fed owner check`: set up a site before it goes live.

`init` writes a commented config whose defaults work with the analyst's; `check` verifies
everything the agent needs (keys, data source, certificate, peers, budget, port) without
registering anywhere, and prints a table (exit 0) or one line per problem (exit 2). The agent
itself runs the same data, certificate and port checks at start-up.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from leteo_fed.cli.options import SubParsers, set_handler
from leteo_fed.defaults import DEFAULT_AGGREGATOR_ADDRESS, DEFAULT_CSP_ADDRESS


def add_parsers(owner: SubParsers) -> None:
    p = owner.add_parser(
        "init",
        help="write a commented site config (stdout, or --out)",
        description="Write a commented owner config whose defaults work with the analyst's "
        "defaults (DP required, quorum, outbound connection). policy.columns is left empty on "
        "purpose: list the columns this site shares, then run `owner check`.",
    )
    p.add_argument("--out", type=Path, default=None, help="write here (default: stdout)")
    p.add_argument("--site-id", default="site-1", help="this site's id (default: site-1)")
    p.add_argument("--data", default=None, help="the data file (default: data/SITE.csv)")
    p.add_argument(
        "--aggregator",
        default=DEFAULT_AGGREGATOR_ADDRESS,
        help=f"aggregator host:port (default: {DEFAULT_AGGREGATOR_ADDRESS})",
    )
    p.add_argument(
        "--csp", default=DEFAULT_CSP_ADDRESS, help=f"CSP host:port (default: {DEFAULT_CSP_ADDRESS})"
    )
    p.add_argument("--tls-dir", default="certs", help="certificate folder (default: certs)")
    p.add_argument("--force", action="store_true", help="replace an existing --out file")
    set_handler(p, run_init)

    p = owner.add_parser(
        "check",
        help="verify a site config before going live (exit 0, or 2 with the problems)",
        description="Check a site without registering anywhere: every key (unknown keys "
        "named), the data source (reachable, the policy's columns present and numeric or a "
        "label, no missing values, at least min_rows rows), the certificate (role, authority, "
        "key, expiry), the aggregator and the CSP (a standard gRPC health check over mTLS), "
        "the budget left and the port. Exit 0 with a summary table, or 2 with one line per "
        "problem.",
    )
    p.add_argument("--config", type=Path, required=True, help="owner TOML config file")
    p.add_argument(
        "--offline", action="store_true", help="do not contact the aggregator and the CSP"
    )
    p.add_argument("--json", action="store_true", help="print the findings as JSON")
    set_handler(p, run_check)

    budget = owner.add_parser(
        "budget",
        help="this site's privacy budget: show it, or start a new budget period",
        description="Show the privacy ledger's current period (spent, reserved, left), or "
        "start a new budget period: the current ledger is archived read-only beside it and the "
        "new period starts with nothing spent; the site's audit log records it. Renewing a "
        "budget has a privacy cost: see docs/owner-config.md, 'Budget periods'.",
    ).add_subparsers(dest="budget_action", required=True, metavar="ACTION")
    for action, text in (
        ("show", "the current period and what is left"),
        ("new-period", "archive this period and start the next"),
    ):
        q = budget.add_parser(action, help=text, description=text)
        q.add_argument("--config", type=Path, required=True, help="owner TOML config file")
        q.add_argument("--json", action="store_true", help="print JSON")
        if action == "new-period":
            q.add_argument("--reason", default="started by hand", help="recorded in the audit log")
        set_handler(q, run_budget)


def run_init(args: argparse.Namespace) -> int:
    from leteo_fed.errors import ConfigError
    from leteo_fed.fileio import atomic_write_bytes
    from leteo_fed.transport.certs import check_site_id
    from owner_agent.config_template import render

    check_site_id(args.site_id)
    text = render(
        args.site_id,
        args.data or f"data/{args.site_id}.csv",
        args.aggregator,
        args.csp,
        args.tls_dir,
    )
    if args.out is None:
        sys.stdout.write(text)
        return 0
    if args.out.exists() and not args.force:
        raise ConfigError(f"{args.out} exists: pass --force to replace it", field="out")
    atomic_write_bytes(args.out, text.encode(), mode=0o600)
    print(
        f"wrote {args.out}: list the shared columns in [policy] columns, then run "
        f"`leteo-fed owner check --config {args.out}`",
        file=sys.stderr,
    )
    return 0


def run_check(args: argparse.Namespace) -> int:
    from owner_agent.site_check import check_site, problems

    _, findings = check_site(args.config, contact_peers=not args.offline)
    bad = problems(findings)
    if args.json:
        rows = [
            {"check": f.check, "ok": f.ok, "warning": f.warning, "detail": f.detail}
            for f in findings
        ]
        print(json.dumps({"ok": not bad, "findings": rows}))
    elif bad:
        for f in bad:
            print(f"problem: {f.line()}", file=sys.stderr)
    else:
        width = max(len(f.check) for f in findings)
        for f in findings:
            mark = "warn" if f.warning else "ok"
            print(f"{mark:4}  {f.check:{width}}  {f.detail}")
    return 2 if bad else 0


def run_budget(args: argparse.Namespace) -> int:
    from leteo_fed.config import load_owner_config
    from leteo_fed.errors import ConfigError
    from owner_agent.budget_period import audit_log, open_ledger

    config = load_owner_config(args.config)
    ledger = open_ledger(config, audit_log(config))
    if ledger is None:
        raise ConfigError("this site has no [privacy] section: no budget", field="privacy")
    closed_doc = None
    if args.budget_action == "new-period":
        closed = ledger.new_period(args.reason)
        closed_doc = {
            "closed_period": closed.period.number,
            "started": closed.period.started,
            "ended": closed.ended,
            "epsilon_spent": closed.spent.epsilon,
            "delta_spent": closed.spent.delta,
            "archive": str(closed.archive),
        }
        if not args.json:
            print(
                f"period {closed.period.number} closed (epsilon {closed.spent.epsilon:g}, "
                f"delta {closed.spent.delta:g} spent), archived read-only in {closed.archive}; "
                f"period {closed.period.number + 1} starts with the whole budget",
                file=sys.stderr,
            )
    period, spent, reserved, left = (
        ledger.period(),
        ledger.spent(),
        ledger.reserved(),
        ledger.remaining(),
    )
    doc = {
        "period": period.number,
        "started": period.started,
        "period_days": config.privacy.period_days if config.privacy else None,
        "epsilon_total": ledger.epsilon_total,
        "delta_total": ledger.delta_total,
        "epsilon_spent": spent.epsilon,
        "delta_spent": spent.delta,
        "epsilon_reserved": reserved.epsilon,
        "epsilon_left": left.epsilon,
        "delta_left": left.delta,
        "ledger": str(ledger.path),
        "closed": closed_doc,
    }
    if args.json:
        print(json.dumps(doc))
    else:
        print(
            f"period {period.number} since {period.started[:19]}: epsilon {spent.epsilon:g} "
            f"spent, {reserved.epsilon:g} reserved, {left.epsilon:g} of "
            f"{ledger.epsilon_total:g} left; delta {left.delta:g} of {ledger.delta_total:g} "
            f"left ({ledger.path})"
        )
    return 0
