"""`make bench`: a thin wrapper around :mod:`leteo_fed.bench.share_bench`.

The measurements live in the package so that ``leteo-fed bench pca`` works from an installed
package; this script takes the same options::

    .venv/bin/python benchmarks/bench_pca_share.py                   # PCA, d = 8..50, 1024 + 2048
    .venv/bin/python benchmarks/bench_pca_share.py --method dca
    .venv/bin/python benchmarks/bench_pca_share.py --features 50 --key-bits 2048
    .venv/bin/python benchmarks/bench_pca_share.py --quick           # smoke run: d = 8, 1024-bit

See ``leteo_fed/bench/share_bench.py`` for what each column measures.
"""

from __future__ import annotations

import sys

from leteo_fed.bench.share_bench import main

if __name__ == "__main__":
    sys.exit(main())
