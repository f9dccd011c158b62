"""The initial centers of a federated k-means job: chosen without looking at the data.

Either the analyst's own (`load_centers`: a JSON file `{"centers": [[...], ...]}`, k rows of d
values) or drawn uniformly in a public box with a seeded generator (`random_centers`); both are
checked by `validate_centers` (the job's k, d and value bound), as owners check every
iteration's centers.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from leteo_fed.errors import ConfigError, DataError

MAX_K = 1024


def validate_centers(
    values: Sequence[float] | np.ndarray,
    k: int,
    d: int,
    value_bound: float | None = None,
    field: str = "centers",
) -> np.ndarray:
    """k x d float64 centers (from a flat row-major list or a 2-D array), or DataError naming
    the field: k >= 1, the right shape, every value finite and (if given) |c| <= value_bound."""
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or not 1 <= k <= MAX_K:
        raise DataError(f"k must be an integer in 1..{MAX_K}, got {k!r}", field="k")
    if d < 1:
        raise DataError("the job has no features", field="features")
    try:
        arr = np.asarray(values, dtype=np.float64)
    except (TypeError, ValueError):
        raise DataError(f"{field} must be numbers", field=field) from None
    if arr.ndim == 1:
        if arr.size != k * d:
            raise DataError(
                f"{field} has {arr.size} values; k x d = {k} x {d} = {k * d} expected",
                field=field,
            )
        arr = arr.reshape(k, d)
    elif arr.shape != (k, d):
        raise DataError(
            f"{field} has shape {'x'.join(map(str, arr.shape))}; {k} x {d} (k x features) expected",
            field=field,
        )
    if not np.all(np.isfinite(arr)):
        j, i = np.argwhere(~np.isfinite(arr))[0]
        raise DataError(
            f"{field}: center {j} has a NaN or infinite value at feature {i}", field=field
        )
    if value_bound is not None:
        top = float(np.abs(arr).max())
        if top > value_bound:
            raise DataError(
                f"{field}: |c| = {top:.6g} is above the job's value bound {value_bound:.6g}",
                field=field,
            )
    return arr.copy()


def random_centers(
    k: int, lower: Sequence[float] | float, upper: Sequence[float] | float, d: int, seed: int
) -> np.ndarray:
    """k centers drawn uniformly in the public box [lower, upper]^d with a seeded generator.

    Data-independent: it looks only at public bounds, so choosing the initial centers costs no
    privacy. (Uniform draws can leave clusters empty when the data fill a small part of the box;
    an empty cluster then keeps its center.)"""
    lo = np.broadcast_to(np.asarray(lower, dtype=np.float64), (d,))
    hi = np.broadcast_to(np.asarray(upper, dtype=np.float64), (d,))
    if not (np.all(np.isfinite(lo)) and np.all(np.isfinite(hi)) and np.all(lo < hi)):
        raise DataError("initial-center bounds must be finite with lower < upper", field="init")
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or not 1 <= k <= MAX_K:
        raise DataError(f"k must be an integer in 1..{MAX_K}, got {k!r}", field="k")
    rng = np.random.default_rng(seed)
    return lo + (hi - lo) * rng.random((k, d))


def centers_from_document(doc: object, field: str = "init") -> np.ndarray:
    """`{"centers": [[...], ...]}` -> a k x d array (shape and finiteness checked; bounds and the
    job's k and d are checked by `validate_centers`)."""
    if not isinstance(doc, dict) or "centers" not in doc:
        raise DataError(f'{field}: expected a JSON object {{"centers": [[...], ...]}}', field=field)
    rows = doc["centers"]
    if not isinstance(rows, list) or not rows or not all(isinstance(r, list) for r in rows):
        raise DataError(f"{field}: 'centers' must be a non-empty list of lists", field=field)
    widths = {len(r) for r in rows}
    if len(widths) != 1 or 0 in widths:
        raise DataError(
            f"{field}: every center needs the same, non-zero number of values", field=field
        )
    for r in rows:
        for v in r:
            if isinstance(v, bool) or not isinstance(v, (int, float)):
                raise DataError(f"{field}: center values must be numbers, got {v!r}", field=field)
    arr = np.array(rows, dtype=np.float64)
    if not np.all(np.isfinite(arr)):
        raise DataError(f"{field}: centers contain NaN or infinite values", field=field)
    return arr


def load_centers(path) -> np.ndarray:
    """Initial centers from a JSON file (see `centers_from_document`)."""
    try:
        with open(path, encoding="utf-8") as fh:
            doc = json.load(fh)
    except OSError as exc:
        raise DataError(f"cannot read {path}: {exc.strerror}", field="init") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise DataError(f"{path} is not valid JSON: {exc}", field="init") from None
    return centers_from_document(doc, field=str(path))


# --------------------------------------------------------------------------------------------
# the analyst's choice: a file or a seeded public box (the `kmeans` request's `k` and `centers`)

DEFAULT_K = 3  # without `init`; the demo's iris set has three species
# how a result file records centers drawn in the public box (the value result files hold)
UNIFORM_SOURCE = "uniform in the public box init_bounds, seeded"


def initial_centers(
    k: int | None,
    init: Path | None,
    init_bounds: tuple[float, float] | None,
    init_seed: int,
    features: tuple[str, ...],
) -> dict[str, Any]:
    """The job's `k` and flat `centers`: from the JSON file `init`, or drawn uniformly in the
    public box `init_bounds` with `init_seed` (`k` of them, default `DEFAULT_K`); never from
    the data (ConfigError naming the parameter)."""
    if k is not None and k < 1:
        raise ConfigError(f"`k` must be at least 1, got {k}", field="k")
    if init is not None and init_bounds is not None:
        raise ConfigError("pass either `init` or `init_bounds`, not both", field="init")
    d = len(features)
    if init is not None:
        centers = load_centers(init)
        if k is not None and k != centers.shape[0]:
            raise ConfigError(f"`k` {k} but {init} holds {centers.shape[0]} centers", field="k")
        if centers.shape[1] != d:
            raise ConfigError(
                f"{init} has centers of dimension {centers.shape[1]}; `features` names {d}",
                field="init",
            )
    elif init_bounds is not None:
        lo, hi = init_bounds
        centers = random_centers(k or DEFAULT_K, lo, hi, d, init_seed)
    else:
        raise ConfigError(
            "pass `init` FILE.json or `init_bounds` LO,HI: the initial centers are chosen "
            "without looking at the data",
            field="init",
        )
    flat = tuple(float(v) for row in centers.tolist() for v in row)
    return {"k": centers.shape[0], "centers": flat}


def init_record(
    init: Path | None, init_bounds: tuple[float, float] | None, init_seed: int
) -> dict[str, Any]:
    """How the initial centers were chosen, for the result file (`result["init"]`)."""
    if init is not None:
        return {"init": {"source": "file", "path": str(init)}}
    lo, hi = init_bounds or (None, None)
    return {"init": {"source": UNIFORM_SOURCE, "bounds": [lo, hi], "seed": init_seed}}
