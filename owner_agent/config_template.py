"""`leteo-fed owner init`: a commented site config whose defaults work with the analyst's.

The defaults are the owner policy's (what a data protection officer can sign): DP required,
a quorum that hides the site among at least two others (the analyst's default quorum of 3
satisfies it), and no column shared until the site lists it. `policy.columns` is left empty on
purpose: `owner check` says so until the site fills it in.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from leteo_fed.config import OwnerPolicy
from leteo_fed.defaults import DEFAULT_AGGREGATOR_ADDRESS, DEFAULT_CSP_ADDRESS, DEFAULT_QUORUM


def _q(text: str) -> str:
    return json.dumps(text)  # a JSON string is a TOML basic string


def render(
    site_id: str = "site-1",
    data: str = "data/site-1.csv",
    aggregator: str = DEFAULT_AGGREGATOR_ADDRESS,
    csp: str = DEFAULT_CSP_ADDRESS,
    tls_dir: str = "certs",
    keyholders: Sequence[str] = (),
    threshold: int = 0,
) -> str:
    """The site's config; with `keyholders` (and their `threshold`) a threshold key's holders
    take the CSP's place."""
    p = OwnerPolicy()
    return f"""\
# LETEO-Fed owner agent: the configuration of one site (docs/owner-config.md).
# Check it with `leteo-fed owner check --config THIS_FILE`, then start the agent with
# `leteo-fed owner serve --config THIS_FILE`. Relative paths are read from this file's folder.

site_id = {_q(site_id)}              # the CN of this site's certificate (tls.dir/{site_id}.crt)
mode = "outbound"                    # the site connects out to the aggregator; it opens no port
audit_log = {_q(f"audit-{site_id}.jsonl")}    # every invitation, decision, upload and result

[data]
path = {_q(data)}            # a CSV or Parquet file (or a Spark URI: hdfs://, s3a://)
# label_column = "grade"             # the class label, if analysts may group by one
# A database instead of `path` (the [sql] extra: pip install 'leteo-fed[sql]'):
# url = "postgresql://leteo@db.example:5432/sis"
# query = "SELECT age, score, grade FROM students"   # or: table = "students"
# password_env = "SIS_DB_PASSWORD"   # or: password_file = "/run/secrets/sis" (chmod 600)

[peers]
aggregator = {_q(aggregator)}      # the analysts' aggregator (this site connects to it)
{_key_custody(csp, keyholders, threshold)}
[tls]
dir = {_q(tls_dir)}                         # ca.crt, the *-ca.crt authorities, {site_id}.crt, {site_id}.key

[policy]
# Columns a round may read. EMPTY ON PURPOSE: no column is shared until you list it, e.g.
# columns = ["age", "score", "grade"]. `owner check` reports it until you do.
columns = []
protocols = ["*"]                    # or some of: pca, dca, lda, mdr, kmeans, ldp, ldp_naive_bayes, weighted_stats, linreg, crosstab, quantiles, logreg, naive_bayes, correlation
analysts = ["*"]                     # analysts (certificate names) who may start rounds here
# Every round needs this many other sites in its quorum; analysts ask for a quorum of
# {DEFAULT_QUORUM} by default, which satisfies {p.min_other_owners}.
min_other_owners = {p.min_other_owners}
min_rows = {p.min_rows}                        # take part only with at least this many rows
non_dp = []                          # protocols whose results may be released WITHOUT DP (none)
non_dp_repeats = {p.non_dp_repeats}                   # such releases per column and window (see the docs)
non_dp_window_days = {p.non_dp_window_days:g}
data_refusals = {p.data_refusals}                    # refusals for this site's data per analyst and window
request_max_age_hours = {p.request_max_age_hours:g}         # an analyst's signed request stays valid this long

[privacy]
# The privacy budget of this data set: every DP or LDP round charges it once.
ledger = {_q(f"privacy-ledger-{site_id}.json")}
epsilon_total = 5.0
delta_total = 1e-5
"""


def _key_custody(csp: str, keyholders: Sequence[str], threshold: int) -> str:
    """`peers.csp`, or the `[keyholders]` table of a threshold key (after `[peers]`' last key:
    a table ends the one before it)."""
    if not keyholders:
        return f"""\
csp = {_q(csp)}             # the crypto service provider
# With a threshold key, no csp: its holders instead, every one (any `threshold` decrypt; the
# site takes a key only when that many of them return it identically):
# [keyholders]
# addresses = ["keyholder-1:50061", "keyholder-2:50061", "keyholder-3:50061"]
# threshold = 2
"""
    addresses = ", ".join(_q(a) for a in keyholders)
    return f"""\
# the secret key is shared among these key holders, any `threshold` of whom decrypt; the site
# takes a key only when that many of them return it identically (docs/owner-config.md)
[keyholders]
addresses = [{addresses}]
threshold = {threshold}
"""
