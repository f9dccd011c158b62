"""Federated DCA / LDA / MDR through real processes, mTLS and 2048-bit Paillier, checked against
the same computation on the pooled rows (per-class centering with NumPy, SciPy's eigh)."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pyarrow as pa
import pyarrow.csv as pacsv
import pytest
from sklearn.datasets import load_digits, load_wine

from leteo_fed.client import AnalystClient, RoundFailed, RoundOptions
from leteo_fed.demo.cluster import LocalCluster, OwnerSpec
from leteo_fed.protocols import discriminant
from leteo_fed.protocols.moments_round import LabelClasses, MomentsRequest

pytestmark = pytest.mark.slow

TOL = 1e-8  # generalized eigenvalues (relative) and 1 - |cos| of directions


def _wine_table():
    bunch = load_wine()
    names = [n.replace("/", "_") for n in bunch.feature_names]
    cols = {n: bunch.data[:, i] for i, n in enumerate(names)}
    cols["cultivar"] = bunch.target
    # a privacy attribute for MDR: high or low alcohol (a real column, binarized)
    alcohol = bunch.data[:, names.index("alcohol")]
    cols["strong"] = np.where(alcohol > np.median(alcohol), "yes", "no")
    return pa.table(cols), names


def _check(result: dict, x: np.ndarray, labels: list[np.ndarray], method: str) -> None:
    k = len(result["components"])
    evals, comps = discriminant.reference(x, labels, method, k)
    np.testing.assert_allclose(result["eigenvalues"], evals, rtol=TOL)
    cos = np.abs(np.sum(np.array(result["components"]).T * comps, axis=0))
    assert np.all(cos >= 1 - TOL), cos
    np.testing.assert_allclose(np.linalg.norm(result["components"], axis=1), 1.0, atol=1e-12)


@pytest.mark.parametrize("method", ["dca", "lda", "mdr"])
def test_demo_dca_methods_on_external_csv(tmp_path, method):
    table, names = _wine_table()
    data = tmp_path / "wine.csv"
    pacsv.write_csv(table, data)
    out = tmp_path / method
    args = [
        "demo",
        "dca",
        "--data",
        str(data),
        "--label-column",
        "cultivar",
        "--method",
        method,
        "--features",
        ",".join(names),
        "--owners",
        "4",
        "--out",
        str(out),
    ]
    if method == "mdr":
        args += ["--privacy-label-column", "strong"]
    proc = subprocess.run(
        [sys.executable, "-m", "leteo_fed", *args], capture_output=True, text=True, timeout=420
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads((out / "dca.json").read_text())
    for key in (
        "method",
        "components",
        "eigenvalues",
        "classes",
        "features",
        "n_samples",
        "owners",
        "timings",
    ):
        assert key in result
    assert result["method"] == method and result["classes"] == ["0", "1", "2"]
    assert result["features"] == names and len(result["owners"]) == 4 and result["n_samples"] == 178
    assert len(result["components"]) == 2  # K - 1
    x = np.column_stack([table.column(n).to_numpy() for n in names])
    labels = [table.column("cultivar").to_numpy()]
    if method == "mdr":
        labels.append((table.column("strong").to_numpy(zero_copy_only=False) == "yes").astype(int))
    _check(result, x, labels, method)
    assert (out / "dca_scatter.png").stat().st_size > 10_000


def test_single_class_owners_and_label_errors(tmp_path):
    """Each owner holds one digit class only (single-class data owners) yet sends all-class shares;
    LDA on digits (64 features, singular S_W handled by the documented ridge)."""
    bunch = load_digits()
    x, y = bunch.data.astype(float), bunch.target
    names = [f"px{i}" for i in range(64)]
    owners, parts = [], []
    for site, classes in enumerate([(0, 1, 2), (3, 4, 5), (6, 7), (8, 9)], start=1):
        rows = np.isin(y, classes)
        path = tmp_path / f"digits-{site}.csv"
        pacsv.write_csv(
            pa.table({**{n: x[rows, i] for i, n in enumerate(names)}, "digit": y[rows]}), path
        )
        owners.append(OwnerSpec(f"site-{site}", path))
        parts.append(rows)
    classes = tuple(str(c) for c in range(10))
    with LocalCluster(tmp_path / "run", owners) as cluster:
        with AnalystClient(
            cluster.addresses["aggregator"], cluster.tls("analyst", "analyst")
        ) as client:
            client.wait_for_owners(4)
            result = client.run(
                MomentsRequest(
                    features=tuple(names),
                    method="lda",
                    groupings=tuple(LabelClasses(c, tuple(k)) for c, k in (("digit", classes),)),
                ),
                RoundOptions(min_owners=4),
            ).to_dict()
            assert len(result["components"]) == 9 and result["n_samples"] == len(x)
            _check(result, x, [y], "lda")
            # no share header tells the aggregator a site's row count
            assert all("rows" not in t for t in result["timings"]["owners"].values())
            # a label outside the declared classes: owners decline naming the rule, not the value
            with pytest.raises(RoundFailed) as err:
                client.run(
                    MomentsRequest(
                        features=tuple(names),
                        method="dca",
                        groupings=tuple(
                            LabelClasses(c, tuple(k)) for c, k in (("digit", classes[:9]),)
                        ),
                    ),
                    RoundOptions(min_owners=4),
                ).to_dict()
            assert "classes: a value is outside the round's declared classes" in str(err.value)
            assert "'9'" not in str(err.value)
            # a label column that does not exist
            with pytest.raises(RoundFailed) as err:
                client.run(
                    MomentsRequest(
                        features=tuple(names),
                        method="dca",
                        groupings=tuple(
                            LabelClasses(c, tuple(k)) for c, k in (("nope", ("a", "b")),)
                        ),
                    ),
                    RoundOptions(min_owners=2),
                ).to_dict()
            assert "columns: a column the round reads is not in this site's data" in str(err.value)
