"""The simulation's pure pieces: who stops, how owners are split, options, data, the table."""

from __future__ import annotations

import numpy as np
import pytest

from leteo_fed.errors import ConfigError
from leteo_fed.simulation import data
from leteo_fed.simulation.driver import SimOptions, accuracy, split, stopping_sites
from leteo_fed.simulation.report import table


def test_stopping_sites_are_a_seeded_share_of_the_invited() -> None:
    invited = data.site_ids(1000)[:500]
    stops = stopping_sites(invited, 0.1, seed=7)
    assert len(stops) == 50 and set(stops) <= set(invited)
    assert stops == stopping_sites(invited, 0.1, seed=7)
    assert stops != stopping_sites(invited, 0.1, seed=8)
    assert stopping_sites(invited, 0.0, seed=7) == []


def test_split_covers_every_site_once_and_interleaves() -> None:
    sites = data.site_ids(10)
    parts = split(sites, 3)
    assert sorted(s for p in parts for s in p) == sites
    assert [len(p) for p in parts] == [4, 3, 3]
    assert parts[1][0] == sites[1]  # the first invited sites spread over every worker


def test_options_defaults_and_refusals() -> None:
    assert SimOptions(owners=100).workers() == 1
    assert SimOptions(owners=1000).workers() == 4
    assert SimOptions(owners=10_000, processes=6).workers() == 6
    assert SimOptions(owners=3, processes=8).workers() == 3
    assert SimOptions(owners=100, invite=40).invited() == 40
    assert SimOptions(owners=100).invited() == 100
    with pytest.raises(ConfigError):
        SimOptions(owners=10, stop_fraction=1.0).check()
    with pytest.raises(ConfigError):
        SimOptions(owners=0).check()


def test_site_ids_sort_in_order() -> None:
    ids = data.site_ids(12_000)
    assert ids == sorted(ids) and len(set(ids)) == 12_000 and ids[0] == "site-00001"


def test_owner_files_hold_exactly_the_pooled_rows(tmp_path) -> None:
    sites = data.site_ids(3)
    paths, pooled = data.write_owner_data(tmp_path, sites, rows=5, d=4, seed=2)
    back = np.vstack([np.loadtxt(paths[s], delimiter=",", skiprows=1) for s in sites])
    assert back.shape == (15, 4)
    assert np.array_equal(back, pooled)  # 17 digits: the same floats


def test_accuracy_accepts_numpy_pca_and_refuses_a_perturbed_one() -> None:
    from leteo_fed.protocols import pca

    pooled = np.vstack(list(data.owner_blocks(4, 30, 3, seed=5)))
    evals, comps, mean = pca.reference_pca(pooled, 3)
    doc = {
        "n_samples": len(pooled),
        "eigenvalues": list(evals),
        "components": comps.T.tolist(),
        "mean": list(mean),
    }
    assert accuracy(doc, pooled)["within_tolerance"]
    off = dict(doc, eigenvalues=list(evals * (1 + 1e-7)))
    assert not accuracy(off, pooled)["within_tolerance"]
    assert not accuracy(dict(doc, n_samples=len(pooled) - 1), pooled)["within_tolerance"]


def test_table_names_every_measured_figure() -> None:
    report = {
        "options": {"owners": 10, "key_bits": 2048},
        "workers": 2,
        "certificates_seconds": 0.5,
        "connect": {
            "seconds": 2.0,
            "owners_per_second": 5.0,
            "aggregator_cpu_ms_per_owner": 3.0,
            "aggregator_rss_kib_per_owner": 200.0,
            "aggregator": {"rss_mib": 80.0, "peak_rss_mib": 90.0},
        },
        "round": {
            "invited": 10,
            "quorum": 9,
            "stopped": 1,
            "state": "COMPLETED",
            "submitted": 9,
            "round_seconds": 1.5,
            "timings": {
                "collect_seconds": 1.0,
                "answer_p50_seconds": 0.1,
                "answer_p99_seconds": 0.2,
                "answer_max_seconds": 0.3,
                "csp_verify_seconds": 0.01,
                "csp_sum_seconds": 0.001,
                "csp_decrypt_seconds": 0.002,
            },
            "aggregator_cpu_ms_per_owner": 4.0,
            "csp_cpu_seconds": 0.2,
            "workers_cpu_seconds": 1.0,
            "bytes_per_owner": {
                "round_spec": 1400,
                "share_statement": 900,
                "ciphertexts": 512,
                "published_status": 800,
            },
            "accuracy": {
                "max_rel_eigenvalue_error": 1e-13,
                "max_mean_error": 2e-13,
                "within_tolerance": True,
            },
        },
    }
    text = table(report)
    for figure in (
        "all owners connected  ",
        "answer latency p50 / p99 / max",
        "0.100 s / 0.200 s / 0.300 s",
        "10 / 9 / 1",
        "1400 / 900 / 512 / 800",
        "within 1e-9",
        "aggregator RSS per connected owner",
    ):
        assert figure in text, figure


def test_holder_timings_and_their_table() -> None:
    """A threshold round's figures: each holder's phases by index, the aggregator's round trip,
    proof checks and combination, and the holders' CPU, in place of the CSP's."""
    from leteo_fed.simulation.driver import holder_timings

    agg = {"holder_round_trip_seconds": 0.5, "verify_proofs_seconds": 0.2, "combine_seconds": 0.01}
    csp = {"holders_valid": 3.0, "holders_wrong": 0.0, "holders_failed": 1.0}
    csp |= {"verify_seconds": 0.03, "sum_seconds": 0.004, "partial_seconds": 0.1}
    csp |= {"prove_seconds": 0.12}
    for i in (1, 2, 10):
        for phase in ("verify", "sum", "partial", "prove", "check", "round_trip"):
            csp[f"holder_{i}_{phase}_seconds"] = i / 100
    csp["holder_at_127.0.0.1:7_round_trip_seconds"] = 0.9
    t = holder_timings(agg, csp)
    assert list(t["holders"]) == ["1", "2", "10", "at_127.0.0.1:7"]
    assert t["holders"]["10"]["round_trip"] == 0.1 and t["holders_partial_seconds"] == 0.1
    assert t["holders"]["at_127.0.0.1:7"] == {"round_trip": 0.9}
    assert t["combine_seconds"] == 0.01 and t["holders_valid"] == 3.0
    report = {
        "options": {"owners": 10, "key_bits": 2048, "keyholders": [5, 3]},
        "workers": 1,
        "round": {
            "invited": 10,
            "quorum": 10,
            "stopped": 0,
            "state": "COMPLETED",
            "submitted": 10,
            "round_seconds": 1.5,
            "timings": {
                "collect_seconds": 1.0,
                "answer_p50_seconds": 0.1,
                "answer_p99_seconds": 0.2,
                "answer_max_seconds": 0.3,
                **t,
            },
            "aggregator_cpu_ms_per_owner": 4.0,
            "keyholders_cpu_seconds": {"keyholder-2": 0.25, "keyholder-10": 0.5},
            "workers_cpu_seconds": 1.0,
            "bytes_per_owner": {
                "round_spec": 1400,
                "share_statement": 900,
                "ciphertexts": 512,
                "published_status": 800,
            },
        },
        "processes": {
            "workers": {"cpu_seconds": 1.0, "rss_mib": 100.0, "peak_rss_mib": 120.0},
            "keyholder-10": {"cpu_seconds": 1.0, "rss_mib": 70.0, "peak_rss_mib": 81.0},
            "keyholder-2": {"cpu_seconds": 1.0, "rss_mib": 70.0, "peak_rss_mib": 80.0},
        },
    }
    text = table(report)
    for figure in (
        "2048 bits, 5 key holders, any 3 decrypt",
        "3 valid, 1 failed",
        "0.500 s / 0.200 s / 0.010 s",
        "holder 10 verify / sum / partial / prove",
        "0.25 / 0.50 s",
        "80 / 81 MiB",
    ):
        assert figure in text, figure
    assert "CSP" not in text
