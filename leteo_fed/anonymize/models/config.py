"""Anonymization job configuration (TOML), validated up front so a bad job fails before Spark starts.

Every error is a :class:`~leteo_fed.errors.ConfigError` whose ``field`` names the offending key
(``anonymization.k``, ``quasi_identifier[1].hierarchy``, ...). Relative paths are resolved against
the directory of the config file, so a config can be moved together with its hierarchies.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import tomllib

from leteo_fed.anonymize.models.risk import DEFAULT_THRESHOLD, check_threshold
from leteo_fed.errors import ConfigError

if TYPE_CHECKING:
    from leteo_fed.anonymize.models.hierarchy import Hierarchy

ALGORITHMS = ("mondrian", "tds")
ENGINES = ("auto", "local", "spark")
INFO_GAINS = ("entropy", "squared_distance")
QI_TYPES = ("numeric", "categorical")
L_VARIANTS = ("distinct", "entropy", "recursive")
T_DISTANCES = ("ordered", "equal", "hierarchical")

_TOP_KEYS = {"anonymization", "quasi_identifier", "sensitive", "identifiers"}
_ANON_KEYS = {"algorithm", "k", "suppression_limit", "info_gain", "engine", "risk_threshold"}
_QI_KEYS = {"column", "type", "hierarchy"}
_SENS_KEYS = {"column", "l_diversity", "t_closeness", "hierarchy"}
_L_KEYS = {"variant", "l", "c"}
_T_KEYS = {"t", "distance"}
_ID_KEYS = {"drop", "pseudonymize", "key_env", "key_file"}


@dataclass(frozen=True)
class QuasiIdentifier:
    """A column an attacker may link on; generalized to an interval or a hierarchy label."""

    column: str
    type: str  # "numeric" | "categorical"
    hierarchy: Path | None = None


@dataclass(frozen=True)
class LDiversity:
    """Per-class diversity requirement on one sensitive column."""

    variant: str  # "distinct" | "entropy" | "recursive"
    l: int  # noqa: E741 - the model's name
    c: float | None = None  # recursive (c, l) only


@dataclass(frozen=True)
class TCloseness:
    """Per-class distribution closeness; ``distance=None`` lets the checker pick by column type."""

    t: float
    distance: str | None = None  # "ordered" | "equal" | "hierarchical"


@dataclass(frozen=True)
class SensitiveAttribute:
    """A column released as is but protected by l-diversity and/or t-closeness."""

    column: str
    l_diversity: LDiversity | None = None
    t_closeness: TCloseness | None = None
    hierarchy: Path | None = None  # for hierarchical t-closeness distance


@dataclass(frozen=True)
class Identifiers:
    """Direct identifiers: dropped, or replaced by a keyed HMAC pseudonym."""

    drop: tuple[str, ...] = ()
    pseudonymize: tuple[str, ...] = ()
    key_env: str | None = None
    key_file: Path | None = None


@dataclass(frozen=True)
class AnonymizationConfig:
    """A validated anonymization job."""

    algorithm: str
    k: int
    suppression_limit: float
    info_gain: str
    quasi_identifiers: tuple[QuasiIdentifier, ...]
    sensitive: tuple[SensitiveAttribute, ...] = ()
    identifiers: Identifiers = field(default_factory=Identifiers)
    source: Path | None = None
    engine: str = "auto"  # where the job runs: auto | local | spark (see anonymize.engine)
    risk_threshold: float = DEFAULT_THRESHOLD  # a record is at risk above it (report's `risk`)

    @property
    def qi_columns(self) -> list[str]:
        return [q.column for q in self.quasi_identifiers]

    def load_hierarchies(self) -> dict[str, Hierarchy]:
        """Parse every hierarchy file referenced by a QI or sensitive column, keyed by column."""
        from leteo_fed.anonymize.models.hierarchy import Hierarchy

        out: dict[str, Hierarchy] = {}
        specs: tuple[QuasiIdentifier | SensitiveAttribute, ...] = (
            *self.quasi_identifiers,
            *self.sensitive,
        )
        for spec in specs:
            if spec.hierarchy is not None:
                out[spec.column] = Hierarchy.from_csv(spec.hierarchy, spec.column)
        return out


def _check_keys(table: dict[str, Any], allowed: set[str], where: str) -> None:
    unknown = sorted(set(table) - allowed)
    if unknown:
        key = f"{where}.{unknown[0]}" if where else unknown[0]
        raise ConfigError(f"unknown key '{key}' (allowed: {sorted(allowed)})", field=key)


def _table(value: Any, where: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise ConfigError(f"'{where}' must be a table, got {type(value).__name__}", field=where)
    return value


def _str(table: dict[str, Any], key: str, where: str, *, required: bool = True) -> str | None:
    name = f"{where}.{key}"
    if key not in table:
        if required:
            raise ConfigError(f"missing required key '{name}'", field=name)
        return None
    value = table[key]
    if not isinstance(value, str) or not value.strip():
        raise ConfigError(f"'{name}' must be a non-empty string, got {value!r}", field=name)
    return value


def _choice(
    table: dict[str, Any],
    key: str,
    where: str,
    choices: tuple[str, ...],
    default: str | None = None,
) -> str:
    name = f"{where}.{key}"
    if key not in table and default is not None:
        return default
    value = _str(table, key, where)
    if value not in choices:
        raise ConfigError(f"'{name}' must be one of {list(choices)}, got {value!r}", field=name)
    return value


def _number(value: Any, name: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ConfigError(f"'{name}' must be a finite number, got {value!r}", field=name)
    return float(value)


def _int(value: Any, name: str, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ConfigError(f"'{name}' must be an integer, got {value!r}", field=name)
    if value < minimum:
        raise ConfigError(f"'{name}' must be >= {minimum}, got {value}", field=name)
    return value


def _path(table: dict[str, Any], key: str, where: str, base: Path) -> Path | None:
    raw = _str(table, key, where, required=False)
    if raw is None:
        return None
    path = (base / raw).resolve()
    if not path.is_file():
        raise ConfigError(f"'{where}.{key}': file not found: {path}", field=f"{where}.{key}")
    return path


def _str_list(table: dict[str, Any], key: str, where: str) -> tuple[str, ...]:
    name = f"{where}.{key}"
    value = table.get(key, [])
    if not isinstance(value, list) or not all(isinstance(v, str) and v.strip() for v in value):
        raise ConfigError(f"'{name}' must be a list of column names, got {value!r}", field=name)
    return tuple(value)


def _l_diversity(value: Any, where: str) -> LDiversity:
    doc = _table(value, where)
    _check_keys(doc, _L_KEYS, where)
    variant = _choice(doc, "variant", where, L_VARIANTS)
    if "l" not in doc:
        raise ConfigError(f"missing required key '{where}.l'", field=f"{where}.l")
    l_value = _int(doc["l"], f"{where}.l", 2)
    c: float | None = None
    if variant == "recursive":
        if "c" not in doc:
            raise ConfigError(
                f"'{where}.c' is required for the recursive variant", field=f"{where}.c"
            )
        c = _number(doc["c"], f"{where}.c")
        if c <= 0:
            raise ConfigError(f"'{where}.c' must be > 0, got {c}", field=f"{where}.c")
    elif "c" in doc:
        raise ConfigError(
            f"'{where}.c' only applies to the recursive variant, not {variant!r}",
            field=f"{where}.c",
        )
    return LDiversity(variant, l_value, c)


def _t_closeness(value: Any, where: str, has_hierarchy: bool) -> TCloseness:
    doc = _table(value, where)
    _check_keys(doc, _T_KEYS, where)
    if "t" not in doc:
        raise ConfigError(f"missing required key '{where}.t'", field=f"{where}.t")
    t = _number(doc["t"], f"{where}.t")
    if not 0 < t <= 1:
        raise ConfigError(f"'{where}.t' must be in (0, 1], got {t}", field=f"{where}.t")
    distance = _choice(doc, "distance", where, T_DISTANCES) if "distance" in doc else None
    if distance == "hierarchical" and not has_hierarchy:
        raise ConfigError(
            f"'{where}.distance' = 'hierarchical' needs a 'hierarchy' on the sensitive column",
            field=f"{where}.distance",
        )
    return TCloseness(t, distance)


def load_config(path: str | Path) -> AnonymizationConfig:
    """Read and validate an anonymization TOML file."""
    path = Path(path)
    try:
        doc = tomllib.loads(path.read_text())
    except FileNotFoundError as exc:
        raise ConfigError(f"config file not found: {path}") from exc
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path} is not valid TOML: {exc}") from exc
    return parse_config(doc, path.resolve().parent, source=path)


def parse_config(
    doc: dict[str, Any], base: Path, *, source: Path | None = None
) -> AnonymizationConfig:
    """Validate an already-parsed TOML document; paths are resolved against ``base``."""
    _check_keys(doc, _TOP_KEYS, "")

    if "anonymization" not in doc:
        raise ConfigError("missing required table '[anonymization]'", field="anonymization")
    anon = _table(doc["anonymization"], "anonymization")
    _check_keys(anon, _ANON_KEYS, "anonymization")
    algorithm = _choice(anon, "algorithm", "anonymization", ALGORITHMS)
    if "k" not in anon:
        raise ConfigError("missing required key 'anonymization.k'", field="anonymization.k")
    k = _int(anon["k"], "anonymization.k", 2)
    limit = _number(anon.get("suppression_limit", 0.0), "anonymization.suppression_limit")
    if not 0 <= limit < 1:
        raise ConfigError(
            f"'anonymization.suppression_limit' must be in [0, 1), got {limit}",
            field="anonymization.suppression_limit",
        )
    info_gain = _choice(anon, "info_gain", "anonymization", INFO_GAINS, default="entropy")
    engine = _choice(anon, "engine", "anonymization", ENGINES, default="auto")
    risk_threshold = check_threshold(
        _number(anon.get("risk_threshold", DEFAULT_THRESHOLD), "anonymization.risk_threshold"),
        "anonymization.risk_threshold",
    )

    raw_qis = doc.get("quasi_identifier")
    if not isinstance(raw_qis, list) or not raw_qis:
        raise ConfigError(
            "at least one [[quasi_identifier]] table is required", field="quasi_identifier"
        )
    seen: dict[str, str] = {}

    def claim(column: str, where: str) -> None:
        if column in seen:
            raise ConfigError(
                f"column {column!r} in '{where}' is already used by '{seen[column]}'",
                field=where,
            )
        seen[column] = where

    qis: list[QuasiIdentifier] = []
    for i, raw in enumerate(raw_qis):
        where = f"quasi_identifier[{i}]"
        q = _table(raw, where)
        _check_keys(q, _QI_KEYS, where)
        column = _str(q, "column", where)
        assert column is not None
        claim(column, f"{where}.column")
        qi_type = _choice(q, "type", where, QI_TYPES)
        hierarchy = _path(q, "hierarchy", where, base)
        if qi_type == "categorical" and hierarchy is None:
            raise ConfigError(
                f"'{where}' (column {column!r}) is categorical and needs a 'hierarchy' file",
                field=f"{where}.hierarchy",
            )
        qis.append(QuasiIdentifier(column, qi_type, hierarchy))

    raw_sens = doc.get("sensitive", [])
    if not isinstance(raw_sens, list):
        raise ConfigError("'sensitive' must be an array of tables [[sensitive]]", field="sensitive")
    sensitive: list[SensitiveAttribute] = []
    for i, raw in enumerate(raw_sens):
        where = f"sensitive[{i}]"
        s = _table(raw, where)
        _check_keys(s, _SENS_KEYS, where)
        column = _str(s, "column", where)
        assert column is not None
        claim(column, f"{where}.column")
        hierarchy = _path(s, "hierarchy", where, base)
        ld = _l_diversity(s["l_diversity"], f"{where}.l_diversity") if "l_diversity" in s else None
        tc = (
            _t_closeness(s["t_closeness"], f"{where}.t_closeness", hierarchy is not None)
            if "t_closeness" in s
            else None
        )
        sensitive.append(SensitiveAttribute(column, ld, tc, hierarchy))

    ids = _table(doc.get("identifiers", {}), "identifiers")
    _check_keys(ids, _ID_KEYS, "identifiers")
    drop = _str_list(ids, "drop", "identifiers")
    pseudo = _str_list(ids, "pseudonymize", "identifiers")
    for j, column in enumerate(drop):
        claim(column, f"identifiers.drop[{j}]")
    for j, column in enumerate(pseudo):
        claim(column, f"identifiers.pseudonymize[{j}]")
    key_env = _str(ids, "key_env", "identifiers", required=False)
    key_file = _path(ids, "key_file", "identifiers", base)
    if key_env is not None and key_file is not None:
        raise ConfigError(
            "give only one of 'identifiers.key_env' and 'identifiers.key_file'",
            field="identifiers.key_env",
        )
    if pseudo and key_env is None and key_file is None:
        raise ConfigError(
            "'identifiers.pseudonymize' needs an HMAC key source: "
            "'identifiers.key_env' or 'identifiers.key_file'",
            field="identifiers.pseudonymize",
        )

    return AnonymizationConfig(
        algorithm=algorithm,
        k=k,
        suppression_limit=limit,
        info_gain=info_gain,
        quasi_identifiers=tuple(qis),
        sensitive=tuple(sensitive),
        identifiers=Identifiers(drop, pseudo, key_env, key_file),
        source=source,
        engine=engine,
        risk_threshold=risk_threshold,
    )
