"""Optional extras: which install extra brings which package, and a readable refusal without it.

The base install serves the CSP, the aggregator and the owner agents; Spark jobs, figures and
benchmarks need extras. A command checks its extras before it starts any work, so a missing one
is one line naming the pip command instead of a traceback halfway through a run.
"""

from __future__ import annotations

import importlib.util

from leteo_fed.errors import LeteoError

EXTRA_OF = {
    "pyspark": "spark",
    "pandas": "spark",
    "matplotlib": "plots",
    "sklearn": "demo",  # the demos' built-in data sets
    "phe": "bench",
    "mbi": "synth",
    "adbc_driver_manager": "sql",
    "adbc_driver_postgresql": "sql",
    "adbc_driver_sqlite": "sql",
}


class MissingExtra(LeteoError):
    """A command needs a package of an optional extra that is not installed."""


def hint(extra: str) -> str:
    return f"this needs the [{extra}] extra: pip install 'leteo-fed[{extra}]'"


def installed(package: str) -> bool:
    try:
        return importlib.util.find_spec(package) is not None
    except (ImportError, ValueError):  # a broken or blocked install counts as missing
        return False


def require(*packages: str) -> None:
    """Refuse (exit 2) unless every package is importable, naming the extra to install."""
    for package in packages:
        if not installed(package):
            raise MissingExtra(f"{hint(EXTRA_OF[package])} (no module named {package!r})")


def explain(exc: ModuleNotFoundError) -> str | None:
    """The install hint for an import of an extra's package that failed mid-run, else None."""
    top = (exc.name or "").partition(".")[0]
    return f"{hint(EXTRA_OF[top])} (no module named {exc.name!r})" if top in EXTRA_OF else None


def pandas():  # -> the pandas module (untyped: pandas is optional)
    """pandas, imported on first use (MissingExtra naming the extra without it)."""
    require("pandas")
    import pandas

    return pandas
