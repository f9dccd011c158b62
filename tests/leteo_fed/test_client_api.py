"""The analyst API without a network: a request dataclass and `RoundOptions` make the signed
request's body; the protocol says how long to wait and where the CLI writes its result."""

from __future__ import annotations

import pytest

from leteo_fed import defaults
from leteo_fed.cli.jobs import result_file
from leteo_fed.client import RoundOptions, output_file, protocol_of, round_request
from leteo_fed.errors import DataError
from leteo_fed.protocols.crosstab import CrosstabColumn, CrosstabRequest
from leteo_fed.protocols.kmeans_round import KmeansRequest
from leteo_fed.protocols.ldp_collection import LdpRequest
from leteo_fed.protocols.linreg import LinregRequest
from leteo_fed.protocols.logreg import LogregRequest
from leteo_fed.protocols.moments_round import LabelClasses, MomentsRequest
from leteo_fed.protocols.naive_bayes import NaiveBayesDomain, NaiveBayesRequest
from leteo_fed.protocols.quantiles import QuantilesRequest
from leteo_fed.protocols.weighted_stats import WeightedStatsRequest
from leteo_fed.transport import membership
from leteo_fed.transport.rounds import common_from_proto, request_from_proto

REQUESTS = [
    MomentsRequest(method="pca", features=("a", "b"), components=1),
    MomentsRequest(method="lda", features=("a", "b"), groupings=(LabelClasses("y", ("0", "1")),)),
    KmeansRequest(k=2, centers=(0.0, 0.0, 1.0, 1.0), iterations=4, features=("a", "b")),
    WeightedStatsRequest(features=("a",)),
    LinregRequest(features=("a",), label_column="y"),
    CrosstabRequest(columns=(CrosstabColumn("c", domain=("x", "y")),)),
    LdpRequest(column="c", mechanism="grr", epsilon=1.0, domain=("x", "y")),
    QuantilesRequest(features=("a",), lower=0.0, upper=1.0, percentiles=(50.0,), bins=16),
    LogregRequest(features=("a",), label_column="y", positive_class="1", max_iterations=6),
    NaiveBayesRequest(
        features=("a", "c"),
        domains=(NaiveBayesDomain("c", ("x", "y")),),
        label_column="y",
        classes=("0", "1"),
        var_smoothing=1e-6,
        alpha=0.5,
    ),
]


@pytest.mark.parametrize("request_", REQUESTS, ids=lambda r: type(r).__name__)
def test_a_request_round_trips_through_the_signed_message(request_):
    options = RoundOptions(min_owners=3, deadline_seconds=42.0, owners=("s1", "s2", "s3"))
    msg = round_request(request_, options)
    protocol, back = request_from_proto(msg)
    assert protocol is protocol_of(request_) and back == request_
    # the named owners are signed as their Merkle root and count (the list travels beside)
    assert msg.n_owners == 3 and msg.owners_root == membership.root(["s1", "s2", "s3"])
    assert msg.min_owners == 3 and msg.deadline_seconds == 42.0
    assert not msg.HasField("dp_epsilon")  # no DP unless asked
    assert common_from_proto(msg, 3).dp is None


def test_counting_protocols_need_no_row_norm_bound_for_dp():
    """crosstab and quantiles clip nothing (a row adds counts): a DP request naming no bound
    gets theirs (1); the others still refuse one without a bound, by name."""
    from leteo_fed.errors import DataError

    for request_ in (REQUESTS[5], REQUESTS[7]):
        msg = round_request(request_, RoundOptions(dp_epsilon=1.0))
        assert msg.row_norm_bound == 1.0
        assert common_from_proto(msg, 3).dp.row_norm_bound == 1.0
    msg = round_request(REQUESTS[3], RoundOptions(dp_epsilon=1.0))  # weighted stats
    with pytest.raises(DataError, match="row_norm_bound"):
        common_from_proto(msg, 3)


def test_the_options_carry_a_dp_release():
    options = RoundOptions(dp_epsilon=1.5, dp_delta=1e-7, row_norm_bound=2.0, scale_bits=12)
    msg = round_request(REQUESTS[0], options)
    common = common_from_proto(msg, 3)
    assert common.dp is not None and (common.dp.epsilon, common.dp.delta) == (1.5, 1e-7)
    assert common.dp.row_norm_bound == 2.0 and common.scale_bits == 12
    # the defaults: every owner, the protocol's quorum and encoding, the default deadline
    plain = round_request(REQUESTS[0])
    assert plain.deadline_seconds == defaults.DEFAULT_DEADLINE_SECONDS
    assert (plain.min_owners, plain.scale_bits, plain.n_owners, plain.owners_root) == (0, 0, 0, b"")


def test_an_object_that_is_no_request_is_refused_naming_the_requests():
    with pytest.raises(DataError, match="MomentsRequest"):
        round_request({"features": ["a"]})


def test_the_protocol_says_how_long_a_job_may_take():
    kmeans = REQUESTS[2]
    assert protocol_of(kmeans).job_timeout(kmeans, 60.0) == 4 * 90.0  # every iteration's round
    default = KmeansRequest(k=2, centers=(0.0, 0.0, 1.0, 1.0), features=("a", "b"))
    assert protocol_of(default).job_timeout(default, 60.0) == 10 * 90.0
    assert protocol_of(REQUESTS[0]).job_timeout(REQUESTS[0], 60.0) == 60.0
    logreg = REQUESTS[8]
    assert protocol_of(logreg).job_timeout(logreg, 60.0) == 6 * 90.0  # every iteration's round


def _command_help(name: str) -> str:
    """The `--help` text of a command (a generated one names its files from the protocol)."""
    import argparse

    from leteo_fed.cli.main import build_parser

    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return " ".join(sub.choices[name].format_help().split())


def test_the_protocol_names_the_result_files_the_cli_writes():
    assert [output_file(r) for r in REQUESTS] == [
        "pca.json",
        "dca.json",
        "kmeans.json",
        "stats.json",
        "result.json",
        "result.json",
        "ldp.json",
        "result.json",
        "result.json",
        "result.json",
    ]
    # `leteo-fed result JOB` by the job's label
    labels = (
        "pca",
        "dca",
        "lda",
        "mdr",
        "kmeans",
        "weighted_stats",
        "linreg",
        "crosstab",
        "quantiles",
        "ldp",
        "logreg",
        "naive_bayes",
    )
    assert [result_file(label) for label in labels] == [
        "pca.json",
        "dca.json",
        "dca.json",
        "dca.json",
        "kmeans.json",
        "stats.json",
        "result.json",
        "result.json",
        "result.json",
        "ldp.json",
        "result.json",
        "result.json",
    ]
    assert result_file("") == "result.json"
    # the commands' help names the same files
    linreg = _command_help("linreg")
    assert (
        protocol_of(REQUESTS[4]).plot_file == "coefficients.png"
        and "OUT/coefficients.png" in linreg
    )
    assert output_file(REQUESTS[4]) == "result.json" and "OUT/result.json" in linreg
    crosstab = _command_help("crosstab")
    assert protocol_of(REQUESTS[5]).plot_file == "crosstab.png" and "OUT/crosstab.png" in crosstab
    assert output_file(REQUESTS[5]) == "result.json" and "OUT/result.json" in crosstab
    quantiles = _command_help("quantiles")
    assert (
        protocol_of(REQUESTS[7]).plot_file == "quantiles.png" and "OUT/quantiles.png" in quantiles
    )
    assert output_file(REQUESTS[7]) == "result.json" and "OUT/result.json" in quantiles
    from leteo_fed.cli import logreg

    assert protocol_of(REQUESTS[8]).plot_file == logreg.RESULT_PNG == "coefficients.png"
    assert output_file(REQUESTS[8]) == logreg.RESULT_JSON
    naive_bayes = _command_help("naive-bayes")
    assert (
        protocol_of(REQUESTS[9]).plot_file == "naive_bayes.png"
        and "OUT/naive_bayes.png" in naive_bayes
    )
    assert output_file(REQUESTS[9]) == "result.json" and "OUT/result.json" in naive_bayes


def test_geo_and_naive_bayes_requests_through_the_analyst_api():
    """Both ride in LdpRequest: the signed message carries every new field; naive Bayes writes
    result.json (by request and by its job label), geo ldp.json, as the commands do."""
    from leteo_fed.cli import ldp
    from leteo_fed.protocols.ldp_collection import FeatureDomain

    geo = LdpRequest(
        column="x",
        columns=("x", "y"),
        mechanism="geo",
        epsilon=0.5,
        box_lower=(0.0, 0.0),
        box_upper=(1.0, 1.0),
        box_fit="resample",
        bins=8,
    )
    nb = LdpRequest(
        mechanism="olh",
        epsilon=1.0,
        label_column="y",
        classes=("0", "1"),
        features=(FeatureDomain("a", ("p", "q")),),
    )
    for request_ in (geo, nb):
        protocol, back = request_from_proto(round_request(request_, RoundOptions(min_owners=3)))
        assert protocol is protocol_of(request_) and back == request_
    assert output_file(geo) == "ldp.json"
    assert output_file(nb) == result_file("ldp_naive_bayes") == ldp.NB_RESULT == "result.json"
