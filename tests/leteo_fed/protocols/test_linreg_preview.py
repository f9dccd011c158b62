"""`leteo-fed linreg --dry-run`: the preview's coefficient errors are the errors a DP round has.

Repeated releases through the protocol's own code: three owners compute their shares
(`share_values`, as the owner agent does) and add their Skellam shares (`add_owner_noise`); the
aggregator's decoding and post-processed fit (`fit_from_totals`) give the intercept and the
coefficients. The standard deviation of each term's error over 300 repetitions must match the
preview's first-order standard error (at the true covariance, coefficients and means) within
20%: with 300 repetitions the estimate of a standard deviation has a relative standard error of
about 4%. Seeded data, within the clip bounds (nothing clipped).
"""

from __future__ import annotations

import json

import numpy as np
import pytest
from round_harness import statistic_totals

from leteo_fed.privacy.verify import add_owner_noise
from leteo_fed.protocols import linreg as lr
from leteo_fed.protocols import linreg_fit as lf
from leteo_fed.protocols.requests import Common, DpRequest

REPEATS = 300
FEATURES = ("a", "b", "c")


class Table:
    def __init__(self, z: np.ndarray) -> None:
        self.z = z

    def matrix(self, columns) -> np.ndarray:
        index = {n: j for j, n in enumerate((*FEATURES, "y"))}
        return self.z[:, [index[c] for c in columns]]


class Site:
    is_local, uses_spark = True, False

    def __init__(self, z: np.ndarray) -> None:
        self.z = z

    def read(self, columns) -> Table:
        return Table(self.z)


@pytest.mark.parametrize("ridge", [0.0, 5000.0])
def test_the_preview_matches_the_measured_error_of_the_coefficients(ridge):
    rng = np.random.default_rng(31)
    cov = np.array([[4.0, 1.2, 0.3], [1.2, 3.0, 0.2], [0.3, 0.2, 2.0]])
    x = rng.multivariate_normal([0.5, -0.3, 0.2], cov, size=20000)
    y = 0.5 + x @ np.array([0.8, -0.5, 1.2]) + rng.normal(0.0, 1.0, size=len(x))
    keep = (np.linalg.norm(x, axis=1) <= 8.0) & (np.abs(y) <= 8.0)  # nothing clipped
    x, y = x[keep], y[keep]
    plan = lr.PROTOCOL.plan(
        lr.LinregRequest(features=FEATURES, label_column="y", ridge=ridge),
        Common(n_invited=3, min_owners=3, dp=DpRequest(1.0, 1e-6, 8.0)),
    )
    rnd = lr.PROTOCOL.next_round(plan, None, 1)
    enc = plan.encoding
    z = np.column_stack([x, y])
    shares = [
        lr.PROTOCOL.share_values(rnd.spec, enc, rnd.dp, Site(part), {})
        for part in np.array_split(z, 3)
    ]
    sigma = plan.dp.noise_std(3, enc.scale_bits)

    def terms(totals: list[int], noisy: bool) -> tuple[np.ndarray, lf.Fit]:
        fit = lr.fit_from_totals(
            statistic_totals(lr.Linreg(), rnd.spec, totals, enc), 3, ridge, noisy, sigma
        )
        return np.r_[fit.intercept, fit.coefficients], fit

    exact, fit = terms([sum(v) for v in zip(*shares, strict=True)], False)
    errors, floored = [], 0
    for _ in range(REPEATS):
        noisy = [add_owner_noise(s, plan.dp) for s in shares]
        got, noisy_fit = terms([sum(v) for v in zip(*noisy, strict=True)], True)
        errors.append(got - exact)
        floored += noisy_fit.floored
    measured = np.std(np.array(errors), axis=0)
    preview = lr.noise_preview(
        plan,
        rows=len(x),
        feature_cov=np.cov(x.T, bias=True),
        coefficients=fit.coefficients,
        feature_means=x.mean(axis=0),
        label_mean=float(y.mean()),
    )
    expected = np.array([preview["std_error"][t] for t in ("intercept", *FEATURES)])
    print(f"ridge {ridge:g}: measured {measured}, preview {expected}, ratio {measured / expected}")
    np.testing.assert_allclose(measured, expected, rtol=0.2)
    assert floored == 0  # the eigenvalue floor never touched X'X here: first order applies
    # the result's own noise errors (the delta method at the released fit) say the same
    reported = lf.noise_errors(fit.a_inverse, fit.coefficients, fit.mean, fit.n, sigma)
    np.testing.assert_allclose(reported, expected, rtol=1e-6)
    assert not any(c["drowned"] for c in preview["signal_checks"])


def test_linreg_dry_run_prints_the_preview_and_contacts_nobody(capsys):
    from leteo_fed.cli.main import main

    argv = ["linreg", "--features", "a,b", "--label-column", "y"]
    argv += ["--aggregator", "127.0.0.1:1", "--insecure"]
    dp = ["--dp-epsilon", "1", "--row-norm-bound", "4", "--label-bound", "6"]
    assert main([*argv, *dp, "--dry-run", "--rows", "20000"]) == 0
    out, err = capsys.readouterr()
    doc = json.loads(out)
    assert set(doc["std_error"]) == {"intercept", "a", "b"} and doc["label_bound"] == 6.0
    assert doc["noise_std_per_value"] > 0 and doc["quorum"] == 3
    assert "a: +/-" in err and "noise check passes" in err
    assert main([*argv, "--dry-run"]) == 2
    assert "give --dp-epsilon" in capsys.readouterr().err


class Contacted(Exception):
    """Raised by the stand-in client: the command got past the noise gate."""


def test_a_buried_regression_is_refused_before_contacting_anyone(capsys, monkeypatch):
    """At the policy's fewest rows (30) the row count's noise buries it: exit 2 before any
    owner is invited; --accept-noise, or a row estimate it fits, goes on to the aggregator."""
    from leteo_fed.cli import statistics as cli
    from leteo_fed.cli.main import main

    def client(args):
        raise Contacted

    monkeypatch.setattr(cli, "analyst_client", client)
    argv = ["linreg", "--features", "a,b", "--label-column", "y", "--no-plot"]
    argv += ["--dp-epsilon", "1", "--row-norm-bound", "4", "--aggregator", "127.0.0.1:1"]
    argv += ["--insecure"]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "refused before any budget is spent" in err and "row count +/-" in err
    with pytest.raises(Contacted):
        main([*argv, "--accept-noise"])
    with pytest.raises(Contacted):
        main([*argv, "--rows", "100000"])
