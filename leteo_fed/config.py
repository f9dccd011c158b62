"""Owner-agent configuration: one TOML file per site.

Example::

    site_id = "site-1"
    mode = "outbound"                  # outbound (default): this agent connects out to the
                                       # aggregator and takes invitations over that connection;
                                       # inbound: the aggregator dials `advertise`
    listen = "127.0.0.1:50061"         # optional in outbound mode (Health only, for probes);
                                       # required in inbound mode (where this agent serves)
    advertise = "site-1:50061"         # inbound mode: how the aggregator reaches it
    results_dir = "results"            # published results land here (optional)
    audit_log = "audit-site-1.jsonl"   # every invitation, decision and upload (this default)

    [data]
    path = "data/site-1.csv"           # CSV, Parquet, or any Spark-readable URI
    format = "csv"                     # optional: csv | parquet (default: from the extension)
    label_column = "diagnosis"         # optional
    engine = "auto"                    # auto | numpy | spark
    # or, instead of path/format, a database (the [sql] extra; numpy engine):
    # url = "postgresql://leteo@db:5432/sis"   # or "sqlite:///site-1.db"; never a password
    # query = "SELECT age, score FROM students"  # or: table = "students"
    # password_env = "SIS_DB_PASSWORD"           # or: password_file = "secrets/sis" (chmod 600)

    [peers]
    aggregator = "aggregator:50052"
    csp = "csp:50051"                  # or, with a threshold key, no csp and:
    # [keyholders]                     # every holder of the key; any `threshold` decrypt
    # addresses = ["h1:50061", "h2:50061", "h3:50061"]
    # threshold = 2

    [tls]
    dir = "certs"                      # ca.crt, site-1.crt, site-1.key; or ca/cert/key paths
    insecure = false

    [privacy]                          # optional: needed to take part in DP rounds
    ledger = "privacy-ledger.json"     # persistent record of every epsilon/delta spent
    epsilon_total = 5.0
    delta_total = 1e-5

    [crypto]                           # optional
    randomizer = "short-exponent"      # or "fixed-base": full-length exponents (no assumption
                                       # beyond DCR), about twice the encryption time

    [policy]                           # what the site agrees to; see docs/owner-config.md
    columns = ["age", "score"]         # required: nothing is shared until listed
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import tomllib

from leteo_fed.crypto.threshold import MAX_HOLDERS
from leteo_fed.data.sql import SqlSource, sql_source
from leteo_fed.defaults import DEFAULT_MIN_ROWS
from leteo_fed.errors import ConfigError, DataError
from leteo_fed.privacy import bounds as bounds_of
from leteo_fed.privacy.bounds import ColumnBounds
from leteo_fed.transport.certs import Party, check_site_id
from leteo_fed.transport.grpc_io import TlsConfig

ENGINES = ("auto", "numpy", "spark")
_SQL_KEYS = {"url", "query", "table", "password_env", "password_file"}
SPARK_AUTO_BYTES = 512 * 1024 * 1024  # local files above this go through Spark under "auto"


@dataclass(frozen=True)
class DataSourceConfig:
    path: str  # "" for a database source
    format: str | None = None
    label_column: str | None = None
    engine: str = "auto"
    sql: SqlSource | None = None  # `url` and `query` / `table` (leteo_fed.data.sql)

    def describe(self) -> str:
        """Where the rows come from, for logs (a database URL carries no password)."""
        return self.sql.describe() if self.sql is not None else self.path


@dataclass(frozen=True)
class PrivacyConfig:
    ledger: Path
    epsilon_total: float
    delta_total: float
    period_days: float | None = None  # a new budget period starts once the current is this old
    accountant: str = "rdp"  # "rdp" (Renyi composition) or "basic" (epsilons and deltas add up)


ANY = "*"


@dataclass(frozen=True)
class OwnerPolicy:
    """What this site agrees to take part in (`[policy]`); every refusal names its rule.

    The defaults are what a data protection officer can sign without reading further: no column
    is shared until listed, no release without DP, a quorum that hides the site among at least
    two others, at least 10 rows, one non-DP release of a column over another set of owners a
    month, and three refusals for the site's data per analyst a month."""

    protocols: tuple[str, ...] = (ANY,)  # round labels: pca, dca, lda, mdr, kmeans, ldp, ...
    columns: tuple[str, ...] = ()  # columns a round may read; none until the site lists them
    min_other_owners: int = 2  # the round's quorum must include this many other sites
    non_dp: tuple[str, ...] = ()  # round labels whose results may be released without DP
    non_dp_repeats: int = 1  # the same non-DP query at most this often per window (0: no limit)
    non_dp_window_days: float = 30.0
    data_refusals: int = 3  # refusals for the site's data per analyst and window (0: no limit)
    analysts: tuple[str, ...] = (ANY,)  # analysts (certificate names) who may start rounds here
    min_rows: int = DEFAULT_MIN_ROWS  # this site takes part only with at least this many rows
    request_max_age_hours: float = 24.0  # an analyst's signed request is valid this long


@dataclass(frozen=True)
class KeyHoldersConfig:
    """`[keyholders]`: the holders of a threshold key, pinned by the site's data protection
    officer: the agent takes a key only when `threshold` of them return it identically, shared
    among exactly these holders with exactly this threshold."""

    addresses: tuple[str, ...]
    threshold: int

    @property
    def holders(self) -> int:
        return len(self.addresses)


OUTBOUND, INBOUND = "outbound", "inbound"  # who opens the connection: the owner, the aggregator
OWNER_MODES = (OUTBOUND, INBOUND)
OWNER_RANDOMIZERS = ("short-exponent", "fixed-base")


@dataclass(frozen=True)
class OwnerConfig:
    site_id: str
    listen: str  # "" = serve nothing (outbound mode only)
    advertise: str
    data: DataSourceConfig
    aggregator: str
    csp: str  # "" when `keyholders` decrypt instead
    tls: TlsConfig
    results_dir: Path | None = None
    privacy: PrivacyConfig | None = None
    audit_log: Path | None = None  # JSON lines of every invitation, decision and upload
    policy: OwnerPolicy = OwnerPolicy()
    mode: str = OUTBOUND
    randomizer: str = "short-exponent"  # Paillier randomizer (leteo_fed.crypto.paillier)
    # `[bounds]`: the public bounds this site publishes for its columns; a DP request with
    # narrower ones (its values get clipped) is noted in the audit log
    published_bounds: tuple[ColumnBounds, ...] = ()
    keyholders: KeyHoldersConfig | None = None  # a threshold key's holders, instead of `csp`

    @property
    def outbound(self) -> bool:
        return self.mode == OUTBOUND


_TOP_KEYS = {
    "site_id",
    "mode",
    "listen",
    "advertise",
    "results_dir",
    "audit_log",
    "data",
    "peers",
    "tls",
    "privacy",
    "policy",
    "crypto",
    "bounds",
    "keyholders",
}
_POLICY_KEYS = {
    "protocols",
    "columns",
    "min_other_owners",
    "non_dp",
    "non_dp_repeats",
    "non_dp_window_days",
    "data_refusals",
    "analysts",
    "min_rows",
    "request_max_age_hours",
}


def _names(table: dict[str, Any], key: str, default: tuple[str, ...]) -> tuple[str, ...]:
    value = table.get(key, list(default))
    if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
        raise ConfigError(f"'policy.{key}' must be a list of names", field=f"policy.{key}")
    return tuple(value)


def _count(table: dict[str, Any], key: str, default: int, minimum: int) -> int:
    value = table.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ConfigError(
            f"'policy.{key}' must be an integer >= {minimum}, got {value!r}", field=f"policy.{key}"
        )
    return value


def _positive(table: dict[str, Any], key: str, default: float) -> float:
    value = table.get(key, default)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value < math.inf:
        raise ConfigError(f"'policy.{key}' must be a positive number", field=f"policy.{key}")
    return float(value)


def load_policy(doc: Any) -> OwnerPolicy:
    """The `[policy]` table, every key checked (defaults: `OwnerPolicy()`)."""
    if not isinstance(doc, dict):
        raise ConfigError("'policy' must be a table", field="policy")
    unknown = sorted(set(doc) - _POLICY_KEYS)
    if unknown:
        raise ConfigError(f"unknown key 'policy.{unknown[0]}'", field=f"policy.{unknown[0]}")
    d = OwnerPolicy()
    return OwnerPolicy(
        protocols=_names(doc, "protocols", d.protocols),
        columns=_names(doc, "columns", d.columns),
        min_other_owners=_count(doc, "min_other_owners", d.min_other_owners, 1),
        non_dp=_names(doc, "non_dp", d.non_dp),
        non_dp_repeats=_count(doc, "non_dp_repeats", d.non_dp_repeats, 0),
        non_dp_window_days=_positive(doc, "non_dp_window_days", d.non_dp_window_days),
        data_refusals=_count(doc, "data_refusals", d.data_refusals, 0),
        analysts=_names(doc, "analysts", d.analysts),
        min_rows=_count(doc, "min_rows", d.min_rows, 1),
        request_max_age_hours=_positive(doc, "request_max_age_hours", d.request_max_age_hours),
    )


def _require(table: dict[str, Any], key: str, where: str, kind: type = str) -> Any:
    if key not in table:
        raise ConfigError(f"missing required key '{where}{key}'", field=f"{where}{key}")
    value = table[key]
    if not isinstance(value, kind):
        raise ConfigError(
            f"'{where}{key}' must be a {kind.__name__}, got {type(value).__name__}",
            field=f"{where}{key}",
        )
    return value


_DATA_KEYS = {"path", "format", "label_column", "engine", *_SQL_KEYS}
_PRIVACY_KEYS = {"ledger", "epsilon_total", "delta_total", "period_days", "accountant"}
# every key an owner's TOML may hold, per table ("" = the top level)
OWNER_KEYS: dict[str, set[str]] = {
    "": _TOP_KEYS,
    "data": _DATA_KEYS,
    "peers": {"aggregator", "csp"},
    "tls": {"dir", "ca", "cert", "key", "insecure"},
    "privacy": _PRIVACY_KEYS,
    "policy": _POLICY_KEYS,
    "crypto": {"randomizer"},
    "keyholders": {"addresses", "threshold"},
}


def unknown_keys(doc: dict[str, Any]) -> list[tuple[str, str]]:
    """(key, problem) for every key the owner's TOML should not hold, in every table, with the
    closest known key when there is one: a typo is named as such, not as a bad value."""
    import difflib

    found = []
    for table, known in OWNER_KEYS.items():
        values = doc if not table else doc.get(table, {})
        if not isinstance(values, dict):
            continue
        for key in sorted(set(values) - known):
            name = f"{table}.{key}" if table else key
            close = difflib.get_close_matches(key, sorted(known), n=1, cutoff=0.6)
            hint = f" (did you mean '{close[0]}'?)" if close else ""
            found.append((name, f"unknown key '{name}'{hint}"))
    return found


def load_data_source(data: dict[str, Any], base: Path) -> DataSourceConfig:
    """The `[data]` table: a file (`path`) or a database (`url`), never both."""
    unknown = sorted(set(data) - _DATA_KEYS)
    if unknown:
        raise ConfigError(f"unknown key 'data.{unknown[0]}'", field=f"data.{unknown[0]}")
    engine = data.get("engine", "auto")
    if engine not in ENGINES:
        raise ConfigError(
            f"'data.engine' must be one of {ENGINES}, got {engine!r}", field="data.engine"
        )
    label = data.get("label_column")
    if label is not None and (not isinstance(label, str) or not label):
        raise ConfigError("'data.label_column' must be a column name", field="data.label_column")
    if "url" in data:
        if "path" in data:
            raise ConfigError(
                "[data] reads a file ('data.path') or a database ('data.url'), not both",
                field="data.url",
            )
        if "format" in data:
            raise ConfigError(
                "'data.format' is for files; a database source ('data.url') has none",
                field="data.format",
            )
        if engine == "spark":
            raise ConfigError(
                "'data.engine' = \"spark\" cannot read 'data.url' yet: database sources are "
                'read with the numpy engine (engine = "auto" or "numpy")',
                field="data.engine",
            )
        return DataSourceConfig("", None, label, engine, sql_source(data, base))
    for key in sorted(_SQL_KEYS & set(data)):
        raise ConfigError(
            f"'data.{key}' is for a database source, which needs 'data.url'", field=f"data.{key}"
        )
    if "path" not in data:
        raise ConfigError(
            "missing required key 'data.path' (a file; or 'data.url' for a database)",
            field="data.path",
        )
    raw_path = _require(data, "path", "data.")
    data_path = raw_path if "://" in raw_path else str((base / raw_path).resolve())
    return DataSourceConfig(data_path, data.get("format"), label, engine)


def load_keyholders(doc: Any) -> KeyHoldersConfig:
    """The `[keyholders]` table: at least 2 distinct addresses, a threshold that is a majority
    of them (2 <= threshold <= holders, threshold > holders / 2)."""
    if not isinstance(doc, dict):
        raise ConfigError("'keyholders' must be a table", field="keyholders")
    unknown = sorted(set(doc) - OWNER_KEYS["keyholders"])
    if unknown:
        raise ConfigError(
            f"unknown key 'keyholders.{unknown[0]}'", field=f"keyholders.{unknown[0]}"
        )
    addresses = _require(doc, "addresses", "keyholders.", list)
    for address in addresses:
        host, _, port = address.rpartition(":") if isinstance(address, str) else ("", "", "")
        if not (host and port.isascii() and port.isdigit() and 0 < int(port) < 65536):
            raise ConfigError(
                f"'keyholders.addresses' must be a list of host:port strings, got {address!r}",
                field="keyholders.addresses",
            )
    if not 2 <= len(addresses) <= MAX_HOLDERS:
        raise ConfigError(
            f"'keyholders.addresses' must list every holder of the key, 2 to {MAX_HOLDERS}, "
            f"got {len(addresses)}",
            field="keyholders.addresses",
        )
    if len(set(addresses)) != len(addresses):
        twice = next(a for a in addresses if addresses.count(a) > 1)
        raise ConfigError(
            f"'keyholders.addresses' lists {twice} twice", field="keyholders.addresses"
        )
    t = _require(doc, "threshold", "keyholders.", int)
    m = len(addresses)
    if isinstance(t, bool) or not 2 <= t <= m:
        raise ConfigError(
            f"'keyholders.threshold' must be in 2..{m} (the holders listed), got {t!r}",
            field="keyholders.threshold",
        )
    if 2 * t <= m:
        raise ConfigError(
            f"'keyholders.threshold' = {t} of {m} holders is not a majority: two disjoint sets "
            f"of {t} holders could each decrypt a different sum of one round; use at least "
            f"{m // 2 + 1}",
            field="keyholders.threshold",
        )
    return KeyHoldersConfig(tuple(addresses), t)


def load_owner_config(path: str | Path) -> OwnerConfig:
    path = Path(path)
    try:
        doc = tomllib.loads(path.read_text())
    except FileNotFoundError as exc:
        raise ConfigError(f"config file not found: {path}") from exc
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path} is not valid TOML: {exc}") from exc
    unknown = unknown_keys(doc)
    if unknown:
        problems = "; ".join(text for _, text in unknown)
        raise ConfigError(f"{path}: {problems}", field=unknown[0][0])
    base = path.parent

    site_id = _require(doc, "site_id", "")
    check_site_id(site_id)
    mode = doc.get("mode", OUTBOUND)
    if mode not in OWNER_MODES:
        raise ConfigError(f"'mode' must be one of {OWNER_MODES}, got {mode!r}", field="mode")
    if mode == INBOUND:
        listen = _require(doc, "listen", "")
    else:
        listen = doc.get("listen", "")
        if not isinstance(listen, str):
            raise ConfigError("'listen' must be a string host:port", field="listen")
    advertise = doc.get("advertise", listen)
    if not isinstance(advertise, str):
        raise ConfigError("'advertise' must be a string host:port", field="advertise")

    source = load_data_source(_require(doc, "data", "", dict), base)

    peers = _require(doc, "peers", "", dict)
    aggregator = _require(peers, "aggregator", "peers.")
    keyholders = load_keyholders(doc["keyholders"]) if "keyholders" in doc else None
    if keyholders is not None and "csp" in peers:
        raise ConfigError(
            "'peers.csp' and [keyholders] are alternatives: the key is held by one CSP or "
            "shared among key holders; keep one",
            field="peers.csp",
        )
    if keyholders is None and "csp" not in peers:
        raise ConfigError(
            "missing required key 'peers.csp' (or a [keyholders] table for a threshold key)",
            field="peers.csp",
        )
    csp = "" if keyholders is not None else _require(peers, "csp", "peers.")

    tls_doc = doc.get("tls", {})
    if not isinstance(tls_doc, dict):
        raise ConfigError("'tls' must be a table", field="tls")
    identity = Party(site_id, "owner")
    insecure = tls_doc.get("insecure", False)
    if not isinstance(insecure, bool):
        raise ConfigError(
            f"'tls.insecure' must be true or false (unquoted), got {insecure!r}",
            field="tls.insecure",
        )
    if insecure:
        tls = TlsConfig(identity, insecure=True)
    elif "dir" in tls_doc:
        tls = TlsConfig.from_dir(base / tls_doc["dir"], site_id, "owner")
    elif {"ca", "cert", "key"} <= set(tls_doc):
        tls = TlsConfig(
            identity, base / tls_doc["ca"], base / tls_doc["cert"], base / tls_doc["key"]
        )
    else:
        raise ConfigError(
            "[tls] needs 'dir', or 'ca', 'cert' and 'key', or insecure = true", field="tls"
        )
    results = doc.get("results_dir")
    if results is not None and not isinstance(results, str):
        raise ConfigError("'results_dir' must be a string path", field="results_dir")
    audit = doc.get("audit_log", f"audit-{site_id}.jsonl")
    if not isinstance(audit, str) or not audit:
        raise ConfigError("'audit_log' must be a string path", field="audit_log")
    privacy = None
    if "privacy" in doc:
        p = _require(doc, "privacy", "", dict)
        eps = p.get("epsilon_total")
        delta = p.get("delta_total", 0.0)
        if not isinstance(eps, (int, float)) or isinstance(eps, bool) or not eps > 0:
            raise ConfigError(
                "'privacy.epsilon_total' must be a positive number", field="privacy.epsilon_total"
            )
        if not isinstance(delta, (int, float)) or isinstance(delta, bool) or not 0 <= delta < 1:
            raise ConfigError(
                "'privacy.delta_total' must be in [0, 1)", field="privacy.delta_total"
            )
        period = p.get("period_days")
        if period is not None and (
            isinstance(period, bool) or not isinstance(period, (int, float)) or not period > 0
        ):
            raise ConfigError(
                "'privacy.period_days' must be a positive number of days",
                field="privacy.period_days",
            )
        accountant = p.get("accountant", "rdp")
        if accountant not in ("rdp", "basic"):
            raise ConfigError(
                f'\'privacy.accountant\' must be "rdp" or "basic", got {accountant!r}',
                field="privacy.accountant",
            )
        privacy = PrivacyConfig(
            base / _require(p, "ledger", "privacy."),
            float(eps),
            float(delta),
            float(period) if period is not None else None,
            accountant,
        )
    crypto = doc.get("crypto", {})
    if not isinstance(crypto, dict):
        raise ConfigError("'crypto' must be a table", field="crypto")
    unknown_crypto = sorted(set(crypto) - {"randomizer"})
    if unknown_crypto:
        raise ConfigError(
            f"unknown key 'crypto.{unknown_crypto[0]}'", field=f"crypto.{unknown_crypto[0]}"
        )
    randomizer = crypto.get("randomizer", "short-exponent")
    if randomizer not in OWNER_RANDOMIZERS:
        raise ConfigError(
            f"'crypto.randomizer' must be one of {OWNER_RANDOMIZERS}, got {randomizer!r}",
            field="crypto.randomizer",
        )
    published = doc.get("bounds", {})
    if not isinstance(published, dict):
        raise ConfigError("'bounds' must be a table of column = [lower, upper]", field="bounds")
    try:
        published_bounds = bounds_of.from_mapping(published, "[bounds]")
    except DataError as exc:
        raise ConfigError(str(exc), field="bounds") from None
    return OwnerConfig(
        published_bounds=published_bounds,
        privacy=privacy,
        site_id=site_id,
        listen=listen,
        advertise=advertise,
        data=source,
        aggregator=aggregator,
        csp=csp,
        tls=tls,
        results_dir=(base / results) if results else None,
        audit_log=base / audit,
        policy=load_policy(doc.get("policy", {})),
        mode=mode,
        randomizer=randomizer,
        keyholders=keyholders,
    )
