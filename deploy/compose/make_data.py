"""Write the compose sites' data: scikit-learn's breast cancer set split into three parts.

Each site gets a disjoint, seeded share of the 569 rows (a horizontal split, as in
`leteo-fed demo pca`): columns are the 30 features with spaces replaced by '_', plus
`diagnosis` ('malignant' or 'benign'). Output: data/site-N/site-N.csv next to this file.

    python deploy/compose/make_data.py            # regenerate the committed CSVs
"""

from __future__ import annotations

import argparse
import csv
from pathlib import Path

import numpy as np
from sklearn.datasets import load_breast_cancer

HERE = Path(__file__).resolve().parent
SITES = ("site-1", "site-2", "site-3")
SEED = 7  # the same seed and split as `leteo-fed demo pca`


def split_rows(n_rows: int, parts: int, seed: int) -> list[np.ndarray]:
    order = np.random.default_rng(seed).permutation(n_rows)
    return [np.sort(chunk) for chunk in np.array_split(order, parts)]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=HERE / "data", help="output folder")
    parser.add_argument("--seed", type=int, default=SEED, help=f"split seed (default: {SEED})")
    args = parser.parse_args(argv)

    bunch = load_breast_cancer()
    header = [n.replace(" ", "_") for n in bunch.feature_names] + ["diagnosis"]
    labels = np.asarray(bunch.target_names)[bunch.target]
    for site, rows in zip(SITES, split_rows(len(bunch.data), len(SITES), args.seed), strict=True):
        path = args.out / site / f"{site}.csv"
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("w", newline="") as fh:
            writer = csv.writer(fh, lineterminator="\n")
            writer.writerow(header)
            for i in rows:
                writer.writerow([repr(float(v)) for v in bunch.data[i]] + [str(labels[i])])
        print(f"wrote {len(rows)} rows to {path}")


if __name__ == "__main__":
    main()
