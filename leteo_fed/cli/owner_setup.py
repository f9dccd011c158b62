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

from leteo_fed.cli.options import SubParsers, host_port, host_ports, positive_int, set_handler
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
        type=host_port,
        help=f"aggregator host:port (default: {DEFAULT_AGGREGATOR_ADDRESS})",
    )
    custody = p.add_mutually_exclusive_group()
    custody.add_argument(
        "--csp",
        default=DEFAULT_CSP_ADDRESS,
        type=host_port,
        help=f"CSP host:port (default: {DEFAULT_CSP_ADDRESS})",
    )
    custody.add_argument(
        "--keyholders",
        type=host_ports,
        default=None,
        metavar="ADDR1,ADDR2,...",
        help="instead of a CSP, every holder of a threshold key (with --threshold)",
    )
    p.add_argument(
        "--threshold",
        type=positive_int,
        default=None,
        metavar="T",
        help="with --keyholders: how many holders decrypt together (a majority of them)",
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
        "key, expiry), the aggregator and the CSP or every key holder (a standard gRPC health "
        "check over mTLS; for key holders also that the configured threshold of them return "
        "the identical key), "
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
        help="this site's privacy budget: show it, raise or lower it, or renew it",
        description="Show the privacy ledger's current period (accountant, spent, reserved, "
        "left); raise or lower the budget (`set`); or renew it (`new-period`): the current "
        "ledger is archived read-only beside it and the new period starts with nothing spent. "
        "Every change is recorded in the site's audit log (who, when, old and new totals, "
        "reason). Each has a privacy meaning: see docs/owner-config.md, 'Changing a budget'.",
    ).add_subparsers(dest="budget_action", required=True, metavar="ACTION")
    for action, text, more in (
        ("show", "the current period and what is left", ""),
        (
            "set",
            "raise or lower this period's budget (ledger and config together, audited)",
            " Raising weakens the guarantee to every person whose data the site holds to the "
            "new total; lowering is refused below what this period has already spent (under "
            "its accountant). The config's [privacy] epsilon_total and delta_total are "
            "rewritten (comments kept), so the agent starts afterwards; a running agent takes "
            "the new totals at its next round.",
        ),
        (
            "new-period",
            "archive this period and start the next (also after the config's totals were "
            "edited: the new period takes them)",
            " A person whose data is used in both periods is protected only at the sum of the "
            "two totals.",
        ),
    ):
        q = budget.add_parser(
            action, help=text, description=text[0].upper() + text[1:] + "." + more
        )
        q.add_argument("--config", type=Path, required=True, help="owner TOML config file")
        q.add_argument("--json", action="store_true", help="print JSON")
        if action == "set":
            q.add_argument(
                "--epsilon-total", type=float, required=True, help="the new epsilon total"
            )
            q.add_argument(
                "--delta-total",
                type=float,
                default=None,
                help="the new delta total (default: unchanged)",
            )
            q.add_argument(
                "--reason", required=True, help="why (recorded in the audit log with your name)"
            )
        if action == "new-period":
            q.add_argument("--reason", default="started by hand", help="recorded in the audit log")
        set_handler(q, run_budget)


def run_init(args: argparse.Namespace) -> int:
    from leteo_fed.config import load_keyholders
    from leteo_fed.errors import ConfigError
    from leteo_fed.fileio import atomic_write_bytes
    from leteo_fed.transport.certs import check_site_id
    from owner_agent.config_template import render

    check_site_id(args.site_id)
    if (args.keyholders is None) != (args.threshold is None):
        raise ConfigError("owner init: --keyholders and --threshold go together", field="threshold")
    if args.keyholders is not None:  # the table's own checks, named as in the config
        load_keyholders({"addresses": args.keyholders, "threshold": args.threshold})
    text = render(
        args.site_id,
        args.data or f"data/{args.site_id}.csv",
        args.aggregator,
        args.csp,
        args.tls_dir,
        args.keyholders or (),
        args.threshold or 0,
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
    from owner_agent.budget_period import (
        audit_log,
        open_as_recorded,
        set_totals,
        stored_totals,
    )

    config = load_owner_config(args.config)
    audit = audit_log(config)
    privacy = config.privacy
    if privacy is None:
        raise ConfigError("this site has no [privacy] section: no budget", field="privacy")
    closed_doc, change_doc = None, None
    if args.budget_action == "set":
        delta = args.delta_total
        if delta is None:  # unchanged: what the ledger records (the config may have been edited)
            delta = (
                stored_totals(privacy.ledger)[1] if privacy.ledger.exists() else privacy.delta_total
            )
        change = set_totals(args.config, config, audit, args.epsilon_total, delta, args.reason)
        change_doc = {
            "epsilon_total_old": change.old.epsilon,
            "delta_total_old": change.old.delta,
            "epsilon_total_new": change.new.epsilon,
            "delta_total_new": change.new.delta,
            "reason": args.reason,
        }
        if not args.json:
            print(
                f"budget changed from epsilon {change.old.epsilon:g}, delta {change.old.delta:g} "
                f"to epsilon {change.new.epsilon:g}, delta {change.new.delta:g} in the ledger "
                f"and in {args.config} (recorded in {audit.path})",
                file=sys.stderr,
            )
    ledger = open_as_recorded(config, audit)
    if args.budget_action == "new-period":
        # the new period takes the config's totals (an edited config is reconciled here)
        closed = ledger.new_period(args.reason, totals=(privacy.epsilon_total, privacy.delta_total))
        closed_doc = {
            "closed_period": closed.period.number,
            "started": closed.period.started,
            "ended": closed.ended,
            "epsilon_spent": closed.spent.epsilon,
            "delta_spent": closed.spent.delta,
            "accountant": closed.accountant,
            "archive": str(closed.archive),
        }
        if not args.json:
            print(
                f"period {closed.period.number} closed (epsilon {closed.spent.epsilon:g}, "
                f"delta {closed.spent.delta:g} spent, {closed.accountant} accountant), archived "
                f"read-only in {closed.archive}; period {closed.period.number + 1} starts with "
                f"the whole budget (epsilon {ledger.epsilon_total:g}, delta "
                f"{ledger.delta_total:g}, {ledger.accountant} accountant)",
                file=sys.stderr,
            )
    period, spent, reserved, left = (
        ledger.period(),
        ledger.spent(),
        ledger.reserved(),
        ledger.remaining(),
    )
    accountant = ledger.accountant
    doc = {
        "period": period.number,
        "started": period.started,
        "period_days": privacy.period_days,
        "accountant": accountant,
        "configured_accountant": ledger.configured_accountant,
        "epsilon_total": ledger.epsilon_total,
        "delta_total": ledger.delta_total,
        "epsilon_spent": spent.epsilon,
        "delta_spent": spent.delta,
        "epsilon_reserved": reserved.epsilon,
        "epsilon_left": left.epsilon,
        "delta_left": left.delta,
        "ledger": str(ledger.path),
        "closed": closed_doc,
        "changed": change_doc,
    }
    if args.json:
        print(json.dumps(doc))
    else:
        how = (
            f"Renyi composition at delta {ledger.delta_total:g}"
            if accountant == "rdp"
            else "basic composition: epsilons and deltas add up"
        )
        later = (
            f"; the next period uses the {ledger.configured_accountant} accountant"
            if ledger.configured_accountant != accountant
            else ""
        )
        print(
            f"period {period.number} since {period.started[:19]} ({accountant} accountant, "
            f"{how}{later}): epsilon {spent.epsilon:g} spent, {reserved.epsilon:g} reserved, "
            f"{left.epsilon:g} of {ledger.epsilon_total:g} left; delta {left.delta:g} of "
            f"{ledger.delta_total:g} left ({ledger.path})"
        )
    return 0
