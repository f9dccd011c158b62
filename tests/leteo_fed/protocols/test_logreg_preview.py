"""`leteo-fed logreg --dry-run`: the preview's coefficient errors are the errors a DP job has.

Repeated DP jobs through the protocol's own code: three owners compute their shares at each
iteration's coefficients (`share_values`, as the owner agent does) and add their Skellam shares
(drawn from one seeded generator, as `add_owner_noise` draws them); the aggregator's Newton step
(`finish_round`) gives the next coefficients. The standard deviation of each term's error over
300 jobs must match the preview's first-order error sigma sqrt(diag(H^-2)) within 20%: with 300
repetitions the estimate of a standard deviation has a relative standard error of about 4%, and
the preview's H (rows x p (1 - p) E[x~ x~^T] at the base rate) is within a few percent of the
data's for coefficients this small (p stays within 0.35..0.65 for most rows). Seeded data
within the clip bound (nothing clipped).
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from leteo_fed.privacy.mechanisms import Skellam
from leteo_fed.protocols import logreg as lg
from leteo_fed.protocols import logreg_results
from leteo_fed.protocols.dp_facts import encoding_facts
from leteo_fed.protocols.requests import Common, DpRequest
from leteo_fed.protocols.round_types import Outcome

REPEATS = 300
FEATURES = ("a", "b")


class Table:
    def __init__(self, x: np.ndarray, labels: np.ndarray) -> None:
        self.x, self.y = x, labels

    def matrix(self, columns) -> np.ndarray:
        return self.x[:, [FEATURES.index(c) for c in columns]]

    def labels(self, column: str) -> list[str]:
        return list(self.y)


class Site:
    is_local, uses_spark = True, False

    def __init__(self, x: np.ndarray, labels: np.ndarray) -> None:
        self.table = Table(x, labels)

    def read(self, columns) -> Table:
        return self.table


def _job(plan, sites, rng: np.random.Generator | None) -> tuple[np.ndarray, dict]:
    """One job: every iteration's shares (noised with `rng`, if given), summed, stepped."""
    protocol = lg.PROTOCOL
    state = protocol.start(plan, "job", ["s1", "s2", "s3"])
    index = 1
    while True:
        rnd = protocol.next_round(plan, state, index)
        enc = rnd.share_encoding
        shares = []
        for s in sites:
            v = protocol.share_values(rnd.spec, enc, rnd.dp, s, {})
            if rng is not None:
                z = Skellam(rnd.dp.mu).owner_share(rnd.dp.quorum).sample(len(v), rng)
                v = [a + int(e) for a, e in zip(v, z.tolist(), strict=True)]
            shares.append(v)
        outcome = Outcome(f"job-it{index}", rnd, [], {"s1": {}, "s2": {}, "s3": {}}, {})
        outcome.totals = [sum(col) for col in zip(*shares, strict=True)]
        outcome.encoding = encoding_facts(enc, enc.layout(2048), rnd.n_values, 2048)
        step = protocol.finish_round(plan, state, outcome)
        if step.done:
            doc = step.result.to_dict()
            return np.array([doc["coefficients"][t] for t in doc["terms"]]), doc
        index += 1


def test_the_preview_matches_the_measured_error_of_the_coefficients():
    rng = np.random.default_rng(41)
    cov = np.array([[1.0, 0.3], [0.3, 0.8]])
    x = rng.multivariate_normal([0.4, -0.3], cov, size=30000)
    x = x[np.linalg.norm(x, axis=1) <= 4.0]  # nothing clipped
    p = 1.0 / (1.0 + np.exp(-(0.1 + x @ np.array([0.3, -0.25]))))
    labels = np.where(rng.uniform(size=len(x)) < p, "1", "0")
    sites = [Site(x[i::3], labels[i::3]) for i in range(3)]
    request = lg.LogregRequest(
        features=FEATURES, label_column="y", positive_class="1", max_iterations=4
    )
    plan = lg.PROTOCOL.plan(
        request, Common(n_invited=3, min_owners=3, dp=DpRequest(2.0, 1e-6, 4.0))
    )
    exact, exact_doc = _job(plan, sites, None)  # the same rounds without noise
    assert exact_doc["iterations"][-1]["max_step"] < 1e-6  # 4 steps from 0 reach the optimum
    noise_rng = np.random.default_rng(42)
    errors, reported = [], []
    for _ in range(REPEATS):
        got, doc = _job(plan, sites, noise_rng)
        errors.append(got - exact)
        reported.append([doc["noise_std_errors"][t] for t in doc["terms"]])
    measured = np.std(np.array(errors), axis=0)
    preview = logreg_results.noise_preview(
        plan,
        rows=len(x),
        feature_cov=np.cov(x.T, bias=True),
        feature_means=x.mean(axis=0),
        positive_rate=float(np.mean(labels == "1")),
    )
    expected = np.array([preview["std_error"][t] for t in ("intercept", *FEATURES)])
    print(f"measured {measured}, preview {expected}, ratio {measured / expected}")
    np.testing.assert_allclose(measured, expected, rtol=0.2)
    # each result's own noise errors (at its noisy Hessian) say the same
    np.testing.assert_allclose(np.mean(reported, axis=0), measured, rtol=0.2)
    assert not any(c["drowned"] for c in preview["signal_checks"])
    assert preview["epsilon"] == 2.0 and preview["accountant"] == "rdp"
    assert 0.5 < preview["epsilon_per_iteration"] < 2.0  # T alone compose to 2 by RDP


def test_logreg_dry_run_prints_the_preview_and_contacts_nobody(capsys):
    from leteo_fed.cli.main import main

    argv = ["logreg", "--features", "a,b", "--label-column", "y", "--positive-class", "1"]
    argv += ["--aggregator", "127.0.0.1:1", "--insecure"]
    dp = ["--dp-epsilon", "2", "--row-norm-bound", "4", "--max-iterations", "5"]
    assert main([*argv, *dp, "--dry-run", "--rows", "20000"]) == 0
    out, err = capsys.readouterr()
    doc = json.loads(out)
    assert set(doc["std_error"]) == {"intercept", "a", "b"} and doc["iterations"] == 5
    assert 0.4 < doc["epsilon_per_iteration"] < 2.0 and doc["quorum"] == 3
    assert "a: +/-" in err and "noise check passes" in err
    assert main([*argv, "--dry-run"]) == 2
    assert "give --dp-epsilon" in capsys.readouterr().err


class Contacted(Exception):
    """Raised by the stand-in client: the command got past the noise gate."""


def test_a_buried_logistic_regression_is_refused_before_contacting_anyone(capsys, monkeypatch):
    """At the policy's fewest rows (30) the noise buries the row count: exit 2 before any
    owner is invited; --accept-noise, or a row estimate it fits, goes on to the aggregator."""
    from leteo_fed.cli import statistics as cli
    from leteo_fed.cli.main import main

    def client(args):
        raise Contacted

    monkeypatch.setattr(cli, "analyst_client", client)
    argv = ["logreg", "--features", "a,b", "--label-column", "y", "--positive-class", "1"]
    argv += ["--no-plot", "--dp-epsilon", "1", "--row-norm-bound", "4"]
    argv += ["--aggregator", "127.0.0.1:1", "--insecure"]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "refused before any budget is spent" in err and "row count +/-" in err
    with pytest.raises(Contacted):
        main([*argv, "--accept-noise"])
    with pytest.raises(Contacted):
        main([*argv, "--rows", "1000000"])


def test_a_bad_request_is_refused_before_contacting_anyone(capsys):
    from leteo_fed.cli.main import main

    argv = ["logreg", "--features", "a,b", "--label-column", "y", "--positive-class", "1"]
    argv += ["--no-plot", "--max-iterations", "500", "--aggregator", "127.0.0.1:1", "--insecure"]
    assert main(argv) == 2
    assert "--max-iterations must be in 1..100" in capsys.readouterr().err


def test_the_cli_states_the_protocol_defaults():
    import argparse

    from leteo_fed.cli.main import build_parser

    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    text = " ".join(sub.choices["logreg"].format_help().split())
    assert f"(default: {lg.DEFAULT_MAX_ITERATIONS}, at most {lg.MAX_ITERATIONS})" in text
    assert f"(default: {lg.DEFAULT_TOLERANCE:g})" in text
    assert f"(default: {lg.DEFAULT_COEFFICIENT_BOUND:g})" in text


def test_the_preview_refuses_what_it_cannot_preview_naming_the_field():
    from leteo_fed.errors import DataError

    request = lg.LogregRequest(features=FEATURES, label_column="y", positive_class="1")
    plain = lg.PROTOCOL.plan(request, Common(n_invited=3))
    dp = lg.PROTOCOL.plan(request, Common(n_invited=3, dp=DpRequest(1.0, 1e-6, 2.0)))
    for plan, kwargs, field in (
        (plain, {"rows": 1000}, "dp_epsilon"),
        (dp, {"rows": 3}, "rows"),
        (dp, {"rows": 1000, "positive_rate": 1.0}, "positive_rate"),
    ):
        with pytest.raises(DataError) as err:
            logreg_results.noise_preview(plan, **kwargs)
        assert err.value.field == field
