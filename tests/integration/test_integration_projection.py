"""Projection-only mode through real processes: the aggregator learns only directions and
eigenvalues; the CSP learns a secretly rotated aggregate (its spectrum, no feature direction)."""

from __future__ import annotations

import json

import numpy as np
import pytest
from integration_helpers import write_parts
from sklearn.datasets import load_wine

from leteo_fed.client import AnalystClient, RoundOptions
from leteo_fed.demo.cluster import LocalCluster, OwnerSpec
from leteo_fed.encoding.packing import slot_totals, unpack
from leteo_fed.protocols import discriminant, moments, pca, rotation
from leteo_fed.protocols.moments_round import LabelClasses, MomentsRequest
from leteo_fed.protocols.moments_round import encoding as moments_encoding

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def wine_cluster(tmp_path_factory):
    bunch = load_wine()
    names = [n.replace("/", "_") for n in bunch.feature_names]
    x = bunch.data
    work = tmp_path_factory.mktemp("projection")
    cols = names + ["cultivar"]
    data = np.column_stack([x, bunch.target])
    parts = write_parts(data, cols, 3, work / "data")
    owners = [OwnerSpec(f"site-{i + 1}", p) for i, p in enumerate(parts)]
    with LocalCluster(work / "run", owners, csp_transcript=True) as cluster:
        with AnalystClient(
            cluster.addresses["aggregator"], cluster.tls("analyst", "analyst")
        ) as client:
            client.wait_for_owners(3)
            yield cluster, client, x, bunch.target, names


def _transcript(path):
    return {r["round_id"]: r for r in map(json.loads, path.read_text().splitlines())}


def test_projection_only_pca_and_dca_match_pooled(wine_cluster):
    cluster, client, x, y, names = wine_cluster
    res = client.run(
        MomentsRequest(features=tuple(names), components=3, projection_only=True),
        RoundOptions(min_owners=3),
    ).to_dict()
    evals, comps, _ = pca.reference_pca(x, 3)
    np.testing.assert_allclose(res["eigenvalues"], evals, rtol=1e-9)
    assert np.all(np.abs(np.sum(np.array(res["components"]).T * comps, axis=0)) >= 1 - 1e-9)
    assert res["mode"] == "projection-only" and res["n_samples"] is None and "mean" not in res

    classes = ("0", "1", "2")
    res = client.run(
        MomentsRequest(
            features=tuple(names),
            method="dca",
            groupings=tuple(LabelClasses(c, tuple(k)) for c, k in (("cultivar", classes),)),
            projection_only=True,
        ),
        RoundOptions(min_owners=3),
    ).to_dict()
    evals, comps = discriminant.reference(x, [y], "dca", 2)
    np.testing.assert_allclose(res["eigenvalues"], evals, rtol=1e-8)
    assert np.all(np.abs(np.sum(np.array(res["components"]).T * comps, axis=0)) >= 1 - 1e-8)


def test_transcripts_show_what_each_party_learned(wine_cluster):
    cluster, client, x, y, names = wine_cluster
    normal = client.run(
        MomentsRequest(features=tuple(names), components=2), RoundOptions(min_owners=3)
    ).to_dict()
    hidden = client.run(
        MomentsRequest(features=tuple(names), components=2, projection_only=True),
        RoundOptions(min_owners=3),
    ).to_dict()
    agg_log = _transcript(cluster.workdir / "aggregator-transcript.jsonl")
    csp_log = _transcript(cluster.workdir / "csp-transcript.jsonl")

    # Normal mode: the aggregator holds the aggregate totals (this is what the test can catch).
    assert "aggregate_totals" in agg_log[normal["round_id"]]
    # Projection-only: it holds only eigenvalues and rotated directions, never an aggregate.
    seen = agg_log[hidden["round_id"]]
    assert set(seen) == {"round_id", "mode", "eigenvalues", "rotated_components"}
    assert len(seen["eigenvalues"]) == 2 and np.array(seen["rotated_components"]).shape == (
        2,
        len(names),
    )

    # The CSP decrypted a rotated aggregate: its R' differs from the true R, with the same spectrum.
    record = csp_log[hidden["round_id"]]
    assert record["mode"] == "projection"
    d = len(names)
    enc = moments_encoding(rotation_dimension=d, max_owners=3)  # slots sized for 3 invited
    layout = enc.layout(2048)
    nv = moments.n_values(d, [moments.ALL_ROWS])
    slots = unpack([int(p, 16) for p in record["plaintexts"]], nv, layout)
    agg = moments.decode_totals(
        slot_totals(slots, 3, layout), d, [moments.ALL_ROWS], enc.scale_bits
    )
    r_seen = np.array(agg.r, dtype=float) / 2.0**enc.scale_bits
    r_true = x.T @ x
    assert np.max(np.abs(r_seen - r_true)) > 0.01 * np.max(np.abs(r_true))  # not the true matrix
    np.testing.assert_allclose(
        np.linalg.eigvalsh(r_seen), np.linalg.eigvalsh(r_true), rtol=1e-8, atol=1e-6
    )
    # ... and a fresh rotation per round: the same data gives a different R' next time
    again = client.run(
        MomentsRequest(features=tuple(names), components=2, projection_only=True),
        RoundOptions(min_owners=3),
    ).to_dict()
    record2 = _transcript(cluster.workdir / "csp-transcript.jsonl")[again["round_id"]]
    assert record2["plaintexts"] != record["plaintexts"]


def test_rotation_helpers_refuse_bad_input():
    from leteo_fed.errors import DataError

    omega = rotation.random_rotation(4)
    np.testing.assert_allclose(omega @ omega.T, np.eye(4), atol=1e-12)
    with pytest.raises(DataError, match="entries"):
        rotation.rotation_from_wire(omega.ravel()[:-1].tolist(), 4)
    with pytest.raises(DataError, match="not orthogonal"):
        rotation.rotation_from_wire((2 * omega).ravel().tolist(), 4)
    bad = omega.ravel().tolist()
    bad[0] = float("nan")
    with pytest.raises(DataError, match="non-finite"):
        rotation.rotation_from_wire(bad, 4)
