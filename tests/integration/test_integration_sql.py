"""Federated PCA through real processes where every site reads its rows from its own
PostgreSQL database (three databases on the session's test server, each with its own login
and password): the result equals NumPy PCA on the pooled rows.

The sites read their databases three ways: a query with a password from the environment, a
view by name with a password file, and a query that lists its columns. Rows a site's query
leaves out (withdrawn consent, with absurd values) never reach the result, and a column a
site's query does not expose is declined by that site alone ("columns")."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest
from integration_helpers import assert_matches_numpy
from sklearn.datasets import load_breast_cancer

from leteo_fed.client import AnalystClient, RoundOptions
from leteo_fed.demo.cluster import LocalCluster, OwnerSpec
from leteo_fed.protocols.moments_round import MomentsRequest
from owner_agent.audit import read as audit_read

pytestmark = pytest.mark.slow
pytest.importorskip("adbc_driver_postgresql", reason="needs the [sql] extra")

SITES = ("site-1", "site-2", "site-3")


def _database(i: int) -> tuple[str, str, str]:
    """(database, login, password) of site i."""
    return f"hospital{i}", f"reader{i}", f"pw-{i}-{'x' * i}:@/"  # characters a URL must escape


def _load(server, i: int, part: np.ndarray, names: list[str], rng) -> None:
    """The site's `patients` table: its rows plus withdrawn ones, a postcode, an id, a view."""
    database, login, password = _database(i)
    server.create_database(database, login, password)
    n_withdrawn = 5
    x = np.vstack([part, np.full((n_withdrawn, part.shape[1]), 1e6)])  # never to be read
    n = len(x)
    table = pa.table(
        {
            "patient_id": [f"p{i}-{r}" for r in range(n)],
            **{name: x[:, j] for j, name in enumerate(names)},
            "diagnosis": rng.choice(["benign", "malignant"], n).tolist(),
            "postcode": pa.array(rng.integers(1000, 9999, n), pa.int32()),
            "withdrawn": [False] * len(part) + [True] * n_withdrawn,
        }
    )
    with server.connect(database, login, password) as conn, conn.cursor() as cur:
        cur.adbc_ingest("patients", table, mode="create")
        listed = ", ".join(f'"{c}"' for c in ["patient_id", *names, "diagnosis"])
        cur.execute(f"CREATE VIEW consented AS SELECT {listed} FROM patients WHERE NOT withdrawn")


@pytest.fixture(scope="module")
def deployment(postgres, tmp_path_factory):
    bunch = load_breast_cancer()
    names = [str(n).replace(" ", "_") for n in bunch.feature_names]
    x = bunch.data.astype(float)
    rng = np.random.default_rng(21)
    parts = [x[np.sort(idx)] for idx in np.array_split(rng.permutation(len(x)), 3)]
    for i, part in enumerate(parts, start=1):
        _load(postgres, i, part, names, rng)
    work = tmp_path_factory.mktemp("sql-deployment")
    secret = work / "secrets" / "site-2"
    secret.parent.mkdir()
    secret.write_text(_database(2)[2] + "\n")
    secret.chmod(0o600)
    listed = ", ".join(["patient_id", *names, "postcode"])
    sources = {
        "site-1": 'query = "SELECT * FROM patients WHERE NOT withdrawn"\n'
        'password_env = "HOSPITAL_DB_PASSWORD"',
        "site-2": f'table = "consented"\npassword_file = "{secret}"',
        "site-3": f'query = "SELECT {listed} FROM patients WHERE withdrawn = false;"\n'
        'password_env = "HOSPITAL_DB_PASSWORD"',
    }
    owners = []
    for i, site in enumerate(SITES, start=1):
        database, login, password = _database(i)
        data = f'url = "{postgres.url(database, login)}"\n{sources[site]}'
        env = {"HOSPITAL_DB_PASSWORD": password} if "password_env" in data else {}
        owners.append(OwnerSpec(site, data=data, env=env))
    with LocalCluster(work, owners) as cluster:
        client = AnalystClient(cluster.addresses["aggregator"], cluster.tls("analyst", "analyst"))
        client.wait_for_owners(3)
        yield cluster, client, parts, names
        client.close()


def test_pca_over_three_postgres_sites_equals_numpy(deployment):
    cluster, client, parts, names = deployment
    k = 4
    result = client.run(
        MomentsRequest(features=tuple(names), components=k),
        RoundOptions(min_owners=3, deadline_seconds=120),
    ).to_dict()
    assert result["owners"] == list(SITES)
    assert_matches_numpy(result, np.vstack(parts), k)  # no withdrawn row was read
    for site in SITES:
        sent = [
            e
            for e in audit_read(cluster.workdir / "config" / f"audit-{site}.jsonl")
            if e["event"] == "sent"
        ]
        assert sent and sent[-1]["columns"] == names
    log = (cluster.logs / "site-2.log").read_text()
    assert "postgresql://reader2@127.0.0.1" in log and "(table consented)" in log
    for i in (1, 2, 3):  # no password in any owner's log or config
        secret = _database(i)[2]
        for site in SITES:
            assert secret not in (cluster.logs / f"{site}.log").read_text()
            assert secret not in (cluster.workdir / "config" / f"{site}.toml").read_text()


def test_a_column_outside_a_sites_query_is_declined_by_that_site(deployment):
    """site-2's view has no postcode: it declines ("columns", checked with LIMIT 0 before any
    row is read); the others' queries expose it and the round goes on with them."""
    cluster, client, parts, names = deployment
    features = [names[0], "postcode"]
    result = client.run(
        MomentsRequest(features=tuple(features), components=2),
        RoundOptions(min_owners=2, deadline_seconds=120),
    ).to_dict()
    assert result["owners"] == ["site-1", "site-3"]
    assert (
        result["declined"]["site-2"]
        == "columns: a column the round reads is not in this site's data"
    )
    decision = [
        e
        for e in audit_read(cluster.workdir / "config" / "audit-site-2.jsonl")
        if e["event"] == "decision" and not e.get("accepted", True)
    ]
    assert "column 'postcode' is not in postgresql://reader2@" in decision[-1]["detail"]
    assert result["n_samples"] == len(parts[0]) + len(parts[2])
