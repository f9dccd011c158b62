"""Federated cross-tabulation: the protocol math without a network (against `pandas.crosstab`
on the pooled rows), the refusals, the DP post-processing and the CLI's parsing, then through
real processes (CSP, aggregator, three owners over mTLS, a 2048-bit key) and the CLI."""

from __future__ import annotations

import dataclasses
import json
import math
import re
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.csv as pacsv
import pytest

from leteo_fed.encoding.packing import pack, slot_totals, unpack
from leteo_fed.errors import ConfigError, DataError, LeteoError, ProtocolError
from leteo_fed.privacy.verify import add_owner_noise
from leteo_fed.protocols import crosstab as ct
from leteo_fed.protocols import crosstab_grid as grid
from leteo_fed.protocols import noisy_counts
from leteo_fed.protocols.dp_facts import encoding_facts
from leteo_fed.protocols.requests import Common, DpRequest
from leteo_fed.protocols.round_types import Outcome
from leteo_fed.transport.codec import to_dict
from leteo_fed.transport.rounds import result_from_proto, result_to_proto

REGIONS = ("north", "south", "east", "west")
PLANS = ("basic", "plus=1", "<pro>")  # values may hold '=' and '<'
AGE_EDGES = (18.0, 30.0, 45.0, 65.0, 120.0)


class Table:
    def __init__(self, data: dict[str, Any]) -> None:
        self.data = data

    def matrix(self, columns) -> np.ndarray:
        return np.column_stack([np.asarray(self.data[c], dtype=np.float64) for c in columns])

    def labels(self, column: str) -> list[str]:
        values = list(self.data[column])
        if any(v is None for v in values):
            raise DataError(f"label column '{column}' has missing value(s)", field=column)
        return [str(v) for v in values]


@dataclasses.dataclass
class Site:
    data: dict[str, Any]
    is_local: bool = True
    uses_spark: bool = False

    def read(self, columns) -> Table:
        return Table(self.data)


def _sites(sizes=(300, 200, 250), seed: int = 5) -> list[dict[str, np.ndarray]]:
    """Three sites; the first holds no 'west' and no '<pro>' (its share still counts them)."""
    rng = np.random.default_rng(seed)
    out = []
    for i, n in enumerate(sizes):
        regions = REGIONS[:3] if i == 0 else REGIONS
        plans = PLANS[:2] if i == 0 else PLANS
        out.append(
            {
                "region": rng.choice(regions, n),
                "plan": rng.choice(plans, n, p=[0.6, 0.4] if i == 0 else [0.5, 0.3, 0.2]),
                "age": np.round(rng.uniform(18, 90, n), 0),  # whole ages: edges are hit exactly
            }
        )
    return out


def _pooled(parts: list[dict[str, np.ndarray]]) -> pd.DataFrame:
    return pd.DataFrame({k: np.concatenate([p[k] for p in parts]) for k in parts[0]})


COLUMNS = {
    "region": ct.CrosstabColumn("region", domain=REGIONS),
    "plan": ct.CrosstabColumn("plan", domain=PLANS),
    "age": ct.CrosstabColumn("age", edges=AGE_EDGES),
}


def reference(df: pd.DataFrame, names: list[str]) -> pd.DataFrame:
    """`pandas.crosstab` of the pooled rows, reindexed to the whole grid (first column down,
    the others across), numeric columns binned [a, b) by pandas.cut."""
    keys, grids = [], []
    for n in names:
        c = COLUMNS[n]
        if c.is_numeric:
            binned = pd.cut(df[n], list(c.edges), right=False, labels=c.labels())
            keys.append(binned.rename(n))
        else:
            keys.append(df[n])
        grids.append(c.labels())
    if len(names) == 1:
        ref = pd.crosstab(keys[0], "count", dropna=False)
        return ref.reindex(index=grids[0], fill_value=0)
    across = keys[1] if len(names) == 2 else keys[1:]
    ref = pd.crosstab(keys[0], across, dropna=False)
    columns = (
        pd.Index(grids[1], name=names[1])
        if len(names) == 2
        else pd.MultiIndex.from_product(grids[1:], names=names[1:])
    )
    return ref.reindex(index=grids[0], columns=columns, fill_value=0)


def _cells(plan) -> int:
    """The cells of a plan's grid."""
    return math.prod(grid.grid_shape(plan.spec.columns))


def run_round(
    request: ct.CrosstabRequest, sites: list[Site], dp: DpRequest | None = None, rng=None
) -> dict:
    """The result document of `typed_round`."""
    return typed_round(request, sites, dp, rng).to_dict()


def typed_round(
    request: ct.CrosstabRequest, sites: list[Site], dp: DpRequest | None = None, rng=None
) -> ct.CrosstabResult:
    """The engine's loop without a network: plan, shares (noised as owners do), the slot-wise
    sum, finish; the result as the analyst receives it."""
    protocol = ct.PROTOCOL
    plan = protocol.plan(request, Common(n_invited=len(sites), min_owners=len(sites), dp=dp))
    rnd = protocol.next_round(plan, None, 1)
    enc = rnd.share_encoding
    shares = []
    for s in sites:
        protocol.check(rnd.spec, enc, rnd.dp, s)
        values = protocol.share_values(rnd.spec, enc, rnd.dp, s, {})
        assert len(values) == _cells(plan)  # zero-filled: every cell, whatever the site holds
        shares.append(add_owner_noise(values, rnd.dp) if rnd.dp is not None else values)
    layout = enc.layout(2048)
    packed = [pack(v, layout) for v in shares]
    summed = [sum(col) for col in zip(*packed, strict=True)]
    outcome = Outcome("r1", rnd, [], {f"site-{i}": {} for i in range(len(sites))}, {})
    outcome.totals = slot_totals(unpack(summed, rnd.n_values, layout), len(sites), layout)
    outcome.encoding = encoding_facts(enc, layout, rnd.n_values, 2048)
    result = protocol.finish_round(plan, None, outcome).result
    typed: ct.CrosstabResult = result_from_proto(result_to_proto(result))
    assert typed.to_dict() == to_dict(typed)
    return typed


@pytest.mark.parametrize(
    "names", [["region"], ["age"], ["region", "plan"], ["plan", "age", "region"]]
)
def test_the_sum_of_the_shares_equals_pandas_crosstab_on_the_pooled_rows(names):
    parts = _sites()
    request = ct.CrosstabRequest(columns=tuple(COLUMNS[n] for n in names))
    typed = typed_round(request, [Site(p) for p in parts])
    result = typed.to_dict()
    ref = reference(_pooled(parts), names)
    assert result["counts"] == ref.to_numpy().tolist()
    got = typed.to_pandas()
    assert got.to_numpy().tolist() == ref.to_numpy().tolist()
    assert list(got.index) == list(ref.index)
    if len(names) > 1:
        assert list(got.columns) == list(ref.columns)
    # margins and n are the table's sums
    for n in names:
        assert result["margins"][n] == _pooled_margin(_pooled(parts), n).tolist(), n
    assert result["n"] == 750 and result["cells"] == math.prod(COLUMNS[n].size for n in names)
    assert result["columns"] == names and result["dp"] is None
    assert result["outside"].startswith("refused")
    assert set(result["edges"]) == {n for n in names if COLUMNS[n].is_numeric}


def _pooled_margin(df: pd.DataFrame, name: str) -> np.ndarray:
    c = COLUMNS[name]
    if c.is_numeric:
        return np.histogram(df[name], bins=np.array(c.edges))[0]  # ages < 120: [a, b) bins
    return df[name].value_counts().reindex(list(c.domain), fill_value=0).to_numpy()


def test_bins_are_left_closed_and_labelled():
    age = ct.CrosstabColumn("age", edges=(0.0, 18.0, 65.0))
    site = Site({"age": np.array([0.0, 17.999, 18.0, 64.0, 65.0 - 1e-9])})
    cells, n = grid.cell_indices(site.read([]), (age,), drop_outside=False)
    assert cells.tolist() == [0, 0, 1, 1, 1] and n == 5
    assert age.labels() == ["[0, 18)", "[18, 65)"]
    assert ct.CrosstabColumn("x", edges=(-1e20, 0.5, 2.0)).labels() == [
        "[-1e+20, 0.5)",
        "[0.5, 2)",
    ]
    for outside in (65.0, -1.0):  # the last edge is in no bin; nor is anything below the first
        with pytest.raises(DataError) as err:
            grid.cell_indices(Site({"age": np.array([outside])}).read([]), (age,), False)
        assert err.value.rule == "classes"


def test_values_outside_the_grid_refuse_a_non_dp_round_and_are_dropped_in_a_dp_round():
    region = COLUMNS["region"]
    age = ct.CrosstabColumn("age", edges=(18.0, 65.0))
    data = {"region": np.array(["north", "mars", "south"]), "age": np.array([20.0, 30.0, 99.0])}
    with pytest.raises(DataError) as err:
        grid.cell_indices(Table(data), (region, age), drop_outside=False)
    assert err.value.rule == "classes" and "'mars'" in str(err.value)
    cells, n = grid.cell_indices(Table(data), (region, age), drop_outside=True)
    assert cells.tolist() == [0] and n == 3  # mars and 99 are in no cell
    # missing values refuse the round in both modes (rule values)
    for column, bad in (("region", None), ("age", math.nan)):
        gap = {k: list(v) for k, v in data.items()}
        gap[column][0] = bad
        for drop in (False, True):
            with pytest.raises(DataError) as err:
                grid.cell_indices(Table(gap), (region, age), drop_outside=drop)
            assert err.value.rule == "values", column


def test_numbers_read_as_labels_match_a_domain_of_their_text():
    grade = ct.CrosstabColumn("grade", domain=("1", "2", "3"))
    site = Site({"grade": np.array([1, 3, 3, 2])})
    cells, _ = grid.cell_indices(site.read([]), (grade,), drop_outside=False)
    assert cells.tolist() == [0, 2, 2, 1]


@pytest.mark.parametrize(
    ("columns", "match"),
    [
        ((), "1 to 3 columns"),
        (tuple(ct.CrosstabColumn(f"c{i}", domain=("a",)) for i in range(4)), "1 to 3 columns"),
        ((ct.CrosstabColumn("a", domain=("x",)), ct.CrosstabColumn("a", domain=("y",))), "once"),
        ((ct.CrosstabColumn("", domain=("x",)),), "named"),
        ((ct.CrosstabColumn("a"),), "either a domain"),
        ((ct.CrosstabColumn("a", domain=("x",), edges=(0.0, 1.0)),), "either a domain"),
        ((ct.CrosstabColumn("a", domain=("x", "x")),), "distinct"),
        ((ct.CrosstabColumn("a", domain=("x", "")),), "non-empty"),
        ((ct.CrosstabColumn("a", edges=(1.0,)),), "at least 2"),
        ((ct.CrosstabColumn("a", edges=(0.0, 2.0, 1.0)),), "strictly increasing"),
        ((ct.CrosstabColumn("a", edges=(0.0, 0.0)),), "strictly increasing"),
        ((ct.CrosstabColumn("a", edges=(0.0, math.nan)),), "finite"),
        ((ct.CrosstabColumn("a", edges=(0.0, math.inf)),), "finite"),
        ((ct.CrosstabColumn("a", edges=(-math.inf, 0.0)),), "finite"),
        (
            tuple(ct.CrosstabColumn(n, edges=tuple(map(float, range(23)))) for n in "abc"),
            "10648 cells \\(22 x 22 x 22\\); at most 10000",
        ),
    ],
)
def test_plan_refuses_a_bad_grid_by_name(columns, match):
    with pytest.raises(DataError, match=match) as err:
        ct.PROTOCOL.plan(ct.CrosstabRequest(columns=columns), Common(n_invited=3))
    assert err.value.field == "columns"


def test_plan_refuses_a_value_bound_and_takes_no_row_norm_from_the_request():
    request = ct.CrosstabRequest(columns=(COLUMNS["region"],))
    with pytest.raises(DataError) as err:
        ct.PROTOCOL.plan(request, Common(n_invited=3, value_bound=10.0))
    assert err.value.field == "value_bound"
    plan = ct.PROTOCOL.plan(
        request, Common(n_invited=3, min_owners=3, dp=DpRequest(1.0, 1e-6, 50.0))
    )
    assert plan.dp.row_norm_bound == 1.0  # a row is one count in one cell
    assert plan.encoding.scale_bits == plan.encoding.count_scale_bits == 16
    same = ct.PROTOCOL.plan(request, Common(n_invited=3, min_owners=3, dp=DpRequest(1.0, 1e-6, 1)))
    assert same.dp == plan.dp and same.encoding == plan.encoding


def test_the_owner_refuses_an_under_noised_or_forged_spec():
    request = ct.CrosstabRequest(columns=(COLUMNS["region"], COLUMNS["age"]))
    plan = ct.PROTOCOL.plan(
        request, Common(n_invited=3, min_owners=3, dp=DpRequest(1.0, 1e-6, 1.0))
    )
    rnd = ct.PROTOCOL.next_round(plan, None, 1)
    site = Site(_sites()[0])
    ct.PROTOCOL.check(rnd.spec, rnd.encoding, rnd.dp, site)
    with pytest.raises(ProtocolError, match="more than the announced"):
        ct.PROTOCOL.check(
            rnd.spec, rnd.encoding, dataclasses.replace(rnd.dp, mu=rnd.dp.mu / 2), site
        )
    # a spec with more cells than the noise was accounted for: more noise room is needed
    wider = ct.CrosstabSpec((COLUMNS["region"], COLUMNS["plan"], COLUMNS["age"]))
    with pytest.raises(ProtocolError):
        ct.PROTOCOL.check(wider, dataclasses.replace(rnd.encoding, noise_bound=1), rnd.dp, site)
    with pytest.raises(ProtocolError, match="slot offset"):
        forged = dataclasses.replace(rnd.encoding, data_bound=rnd.encoding.data_bound // 2)
        ct.PROTOCOL.check(rnd.spec, forged, rnd.dp, site)
    with pytest.raises(ProtocolError, match="same scale"):
        ct.PROTOCOL.check(
            rnd.spec, dataclasses.replace(rnd.encoding, count_scale_bits=0), None, site
        )


def test_sensitivity_is_one_count_in_one_cell_by_brute_force():
    """Every row of a site removed in turn, out-of-grid rows included (DP drops them): the
    share changes by exactly F in one coordinate, or not at all."""
    f = 16
    request = ct.CrosstabRequest(columns=(COLUMNS["region"], COLUMNS["age"]))
    plan = ct.PROTOCOL.plan(
        request, Common(n_invited=3, min_owners=3, dp=DpRequest(1.0, 1e-6, 1.0))
    )
    rnd = ct.PROTOCOL.next_round(plan, None, 1)
    data = _sites((120,))[0]
    data["region"][:3] = "mars"
    data["age"][3:5] = [5.0, 17.0]  # below the first edge
    full = np.array(ct.PROTOCOL.share_values(rnd.spec, rnd.encoding, rnd.dp, Site(data), {}))
    changes = set()
    for i in range(len(data["age"])):
        part = Site({k: np.delete(v, i) for k, v in data.items()})
        diff = full - np.array(ct.PROTOCOL.share_values(rnd.spec, rnd.encoding, rnd.dp, part, {}))
        l1, l2 = float(np.abs(diff).sum()), float(np.linalg.norm(diff))
        assert l1 <= plan.sensitivity.l1 and l2 <= plan.sensitivity.l2
        changes.add(l1)
    assert changes == {0.0, float(2**f)} and plan.sensitivity.l1 == plan.sensitivity.l2 == 2**f


def test_the_projection_is_the_least_squares_non_negative_table_with_the_total():
    rng = np.random.default_rng(1)
    for _ in range(200):
        y = rng.normal(2.0, 5.0, size=rng.integers(1, 40))
        total = float(max(round(y.sum()), 0))
        x = noisy_counts.nonnegative_projection(y, total)
        assert np.all(x >= 0) and math.isclose(x.sum(), total, abs_tol=1e-9)
        if total > 0:  # KKT: x = max(y - theta, 0) with y - theta <= 0 wherever x = 0
            theta = float(np.mean((y - x)[x > 0]))
            np.testing.assert_allclose(x, np.maximum(y - theta, 0.0), atol=1e-9)
        counts = noisy_counts.round_keeping_total(x, int(total))
        assert counts.sum() == total and np.all(counts >= 0)
        assert np.all(np.abs(counts - x) < 1 + 1e-9)
    assert noisy_counts.nonnegative_projection(np.array([-3.0, -1.0]), 0.0).tolist() == [0.0, 0.0]


def test_dp_counts_are_non_negative_integers_consistent_with_their_margins():
    parts = _sites((40, 30, 30))  # few rows: many cells near 0, where the noise goes negative
    names = ["region", "plan", "age"]
    request = ct.CrosstabRequest(columns=tuple(COLUMNS[n] for n in names))
    result = run_round(request, [Site(p) for p in parts], DpRequest(1.0, 1e-6, 1.0))
    table = np.array(result["counts"]).reshape([COLUMNS[n].size for n in names])
    assert table.min() >= 0 and result["n"] == table.sum()
    for j, n in enumerate(names):
        others = tuple(a for a in range(3) if a != j)
        assert result["margins"][n] == table.sum(axis=others).tolist()
    dp = result["dp"]
    assert dp["row_norm_bound"] == 1.0 and dp["sensitivity_l1"] == 2**16
    assert 4 < dp["noise_std_per_value"] < 5  # epsilon 1, delta 1e-6: ~4.5 counts per cell
    assert result["outside"].startswith("dropped")
    # the noisy total is within a few of its standard deviations of the truth
    assert abs(result["n"] - 100) <= 6 * dp["noise_std_per_value"] * math.sqrt(table.size)


# ------------------------------------------------------------------ the command line


def test_domain_and_edges_split_on_the_first_equals_sign():
    from leteo_fed.cli.flags import flag_map, name_backticked
    from leteo_fed.cli.main import command_parser
    from leteo_fed.protocols.crosstab_grid import column_values

    crosstab_flags = flag_map(command_parser("crosstab"))

    def build_request(columns, domains, edges):  # the command's --columns, --domain, --edges
        return ct.CrosstabRequest(columns=grid.columns_from_flags(columns, domains, edges))

    assert column_values("plan=basic,plus=1, <pro>") == ("plan", ["basic", "plus=1", "<pro>"])
    assert column_values("x=a==b") == ("x", ["a==b"])
    for bad in ("plan", "=a,b", "plan=", "plan=a,,b"):
        with pytest.raises(Exception, match="COL=|empty value"):
            column_values(bad)
    request = build_request(
        ["plan", "age"], [("plan", ["basic", "plus=1"])], [("age", ["-1e3", "18", "120.5"])]
    )
    assert request.columns == (
        ct.CrosstabColumn("plan", domain=("basic", "plus=1")),
        ct.CrosstabColumn("age", edges=(-1000.0, 18.0, 120.5)),
    )
    for columns, domains, edges, match in (
        (["a"], [], [], "needs a --domain or --edges"),
        (["a"], [("a", ["x"])], [("a", ["1", "2"])], "more than one"),
        (["a"], [("a", ["x"]), ("b", ["y"])], [], "not in --columns: b"),
        (["a=b"], [("a", ["b"])], [], "cannot contain '='"),
        (["a"], [], [("a", ["1", "two"])], "must be numbers"),
    ):
        with pytest.raises(ConfigError) as refused:
            build_request(columns, domains, edges)
        # as the crosstab command says it (the library names parameters, the CLI its flags)
        assert re.search(match, name_backticked(str(refused.value), crosstab_flags))


def test_dry_run_prints_the_noise_of_every_cell_and_contacts_nobody(capsys):
    from leteo_fed.cli.main import main

    argv = ["crosstab", "--columns", "plan,age", "--domain", "plan=basic,plus=1,<pro>"]
    argv += ["--edges", "age=18,30,45,65,120", "--aggregator", "127.0.0.1:1", "--insecure"]
    assert main([*argv, "--dp-epsilon", "1", "--dry-run", "--rows", "5000"]) == 0
    out, err = capsys.readouterr()
    doc = json.loads(out)
    assert doc["cells"] == 12 and doc["quorum"] == 3 and doc["row_norm_bound"] == 1.0
    assert doc["noise_std_of_row_count"] == pytest.approx(doc["noise_std_per_cell"] * math.sqrt(12))
    assert set(doc["noise_std_of_margins"]) == {"plan", "age"}
    assert not doc["noise_check"]["refused_without_accept_noise"]
    assert "each of the 12 cell counts carries noise" in err
    assert main([*argv, "--dry-run"]) == 2
    assert "give --dp-epsilon" in capsys.readouterr().err


def test_a_buried_dp_table_is_refused_before_contacting_anyone(capsys, monkeypatch):
    """Many cells at the policy's fewest rows: the row count's noise exceeds it."""
    from leteo_fed import extras as cli_extras
    from leteo_fed.cli import statistics as cli
    from leteo_fed.cli.main import main

    class Contacted(Exception):
        pass

    def client(args):
        raise Contacted

    monkeypatch.setattr(cli, "analyst_client", client)
    edges = ",".join(str(v) for v in range(0, 101))
    argv = ["crosstab", "--columns", "x", "--edges", f"x={edges}", "--dp-epsilon", "1"]
    argv += ["--aggregator", "127.0.0.1:1", "--insecure"]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "refused before any budget is spent" in err and "row count +/-" in err
    with pytest.raises(Contacted):
        main([*argv, "--accept-noise"])
    with pytest.raises(Contacted):
        main([*argv, "--rows", "100000"])
    # the plot's extra is checked before any round: refused without it, unless --no-plot
    real = cli_extras.installed
    monkeypatch.setattr(cli_extras, "installed", lambda p: p != "matplotlib" and real(p))
    assert main([*argv, "--rows", "100000"]) == 2
    assert "[plots]" in capsys.readouterr().err
    with pytest.raises(Contacted):
        main([*argv, "--rows", "100000", "--no-plot"])


def test_the_plot_is_a_png(tmp_path):
    from leteo_fed.cli.plots import plot_counts

    parts = _sites()
    names = ["region", "plan", "age"]
    request = ct.CrosstabRequest(columns=tuple(COLUMNS[n] for n in names))
    for dp in (None, DpRequest(1.0, 1e-6, 1.0)):
        result = run_round(request, [Site(p) for p in parts], dp)
        path = tmp_path / f"plot-{dp is not None}.png"
        plot_counts(result, path)
        assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


# ------------------------------------------------------------------ through real processes


def _write_sites(tmp_path, parts) -> list:
    paths = []
    for i, p in enumerate(parts, start=1):
        path = tmp_path / f"site-{i}.csv"
        pacsv.write_csv(pa.table({k: list(v) for k, v in p.items()}), path)
        paths.append(path)
    return paths


@pytest.mark.slow
def test_crosstab_through_the_services_and_the_cli(tmp_path):
    from leteo_fed.cli.main import main
    from leteo_fed.client import AnalystClient, RoundFailed, RoundOptions
    from leteo_fed.demo.cluster import LocalCluster, OwnerSpec

    parts = _sites((900, 700, 800))
    paths = _write_sites(tmp_path, parts)
    pooled = _pooled(parts)
    owners = [OwnerSpec(f"site-{i}", p) for i, p in enumerate(paths, start=1)]
    with LocalCluster(tmp_path / "run", owners, privacy_budget=(10.0, 1e-4)) as cluster:
        client = AnalystClient(cluster.addresses["aggregator"], cluster.tls("analyst", "analyst"))
        client.wait_for_owners(3)
        names = ["region", "plan", "age"]
        request = ct.CrosstabRequest(columns=tuple(COLUMNS[n] for n in names))
        result = client.run(request, RoundOptions(min_owners=3)).to_dict()
        assert result["counts"] == reference(pooled, names).to_numpy().tolist()
        assert result["n"] == len(pooled) and result["owners"] == ["site-1", "site-2", "site-3"]
        assert result["encoding"]["paillier_bits"] == 2048 and result["dp"] is None

        # a domain that lacks a value some site holds: refused (rule classes), nothing released
        short = ct.CrosstabRequest(columns=(ct.CrosstabColumn("region", domain=REGIONS[:3]),))
        with pytest.raises(RoundFailed, match="classes"):
            client.run(short, RoundOptions(min_owners=3, deadline_seconds=30)).to_dict()

        base = [
            "crosstab",
            "--aggregator",
            cluster.addresses["aggregator"],
            "--tls-dir",
            str(cluster.certs),
            "--min-owners",
            "3",
        ]
        grid = ["--columns", "region,plan", "--domain", f"region={','.join(REGIONS)}"]
        grid += ["--domain", f"plan={','.join(PLANS)}"]
        out = tmp_path / "plain"
        assert main([*base, *grid, "--out", str(out)]) == 0
        doc = json.loads((out / "result.json").read_text())
        assert doc["counts"] == reference(pooled, ["region", "plan"]).to_numpy().tolist()
        assert (out / "crosstab.png").read_bytes()[:4] == b"\x89PNG"

        # DP, one numeric column binned: every owner's ledger is charged once
        dp_grid = ["--columns", "age,region", "--edges", "age=18,30,45,65,120"]
        dp_grid += ["--domain", f"region={','.join(REGIONS)}"]
        out = tmp_path / "dp"
        argv = [*base, *dp_grid, "--dp-epsilon", "2", "--rows", "2400", "--out", str(out)]
        argv.append("--no-plot")
        assert main(argv) == 0
        doc = json.loads((out / "result.json").read_text())
        exact = reference(pooled, ["age", "region"]).to_numpy()
        got = np.array(doc["counts"])
        sigma = doc["dp"]["noise_std_per_value"]
        assert doc["dp"]["epsilon"] == 2.0 and 0 < sigma < 5
        assert got.min() >= 0 and doc["n"] == got.sum()
        assert doc["margins"]["age"] == got.sum(axis=1).tolist()
        assert doc["margins"]["region"] == got.sum(axis=0).tolist()
        assert np.abs(got - exact).max() <= 6 * sigma + 1
        assert not (out / "crosstab.png").exists()
        # `leteo-fed result` writes the same result again, and the plot the command left out
        job_id = client.jobs(limit=1)[0].job_id
        again = tmp_path / "again"
        assert main(["result", job_id, *base[1:5], "--out", str(again)]) == 0
        assert json.loads((again / "result.json").read_text())["counts"] == doc["counts"]
        assert (again / "crosstab.png").read_bytes()[:4] == b"\x89PNG"
        for i in range(1, 4):
            path = cluster.workdir / "config" / "ledgers" / f"site-{i}.json"
            ledger = json.loads(path.read_text())
            assert [e["epsilon"] for e in ledger["spends"]] == [2.0]
        client.close()


def test_an_outside_value_is_refused_through_the_protocol_object():
    parts = _sites()
    parts[1]["region"][0] = "mars"
    request = ct.CrosstabRequest(columns=(COLUMNS["region"],))
    with pytest.raises(LeteoError):
        run_round(request, [Site(p) for p in parts])
    # a DP round drops it: the other rows are counted
    result = run_round(request, [Site(p) for p in parts], DpRequest(8.0, 1e-6, 1.0))
    assert abs(result["n"] - 749) < 30
