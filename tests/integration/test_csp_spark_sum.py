"""A CSP that sums a round's shares on Spark, run as a deployment runs it: the same PCA as the
pooled rows, and nothing of the spilled shares left behind."""

from __future__ import annotations

import tempfile
from pathlib import Path

import numpy as np
import pytest
from integration_helpers import assert_matches_numpy, write_parts
from sklearn.datasets import load_breast_cancer

from leteo_fed.client import AnalystClient, RoundOptions
from leteo_fed.data.sources import read_matrix
from leteo_fed.demo.cluster import LocalCluster, OwnerSpec
from leteo_fed.protocols.moments_round import MomentsRequest

pytestmark = pytest.mark.slow


def test_a_round_summed_on_spark_equals_pooled_pca(tmp_path):
    pytest.importorskip("pyspark")
    bunch = load_breast_cancer()
    names = [str(n).replace(" ", "_") for n in bunch.feature_names][:6]
    x = bunch.data[:, :6]
    parts = write_parts(x, names, 3, tmp_path / "data")
    owners = [OwnerSpec(f"site-{i}", part) for i, part in enumerate(parts, start=1)]
    # every round is "very large": the CSP spills its shares and sums them on Spark
    cluster = LocalCluster(tmp_path, owners, csp_args=["--spark-ciphertext-threshold", "1"])
    with cluster:
        with AnalystClient(
            cluster.addresses["aggregator"], cluster.tls("analyst", "analyst")
        ) as client:
            client.wait_for_owners(3)
            doc = client.run(
                MomentsRequest(features=tuple(names), components=3), RoundOptions(min_owners=3)
            ).to_dict()
        log = (cluster.logs / "csp.log").read_text()
    pooled = np.vstack([read_matrix(str(p), names) for p in parts])
    assert_matches_numpy(doc, pooled, 3)
    assert "ciphertexts checked and summed" in log and "(spark)" in log
    spills = Path(tempfile.gettempdir()).glob(f"leteo-csp-{doc['round_id']}-*")
    assert not list(spills)  # the spilled shares went with the round
