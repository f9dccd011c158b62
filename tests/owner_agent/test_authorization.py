"""The owner's check of the analyst's signed request against the round the aggregator relays.

Real certificates (two independent PKIs made with `transport.certs`), real requests signed as the
client signs them, and round specs planned as the aggregator plans them; the aggregator's lies
are specs planned from another request than the one it relays. No network.
"""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path

import pytest

from leteo_fed.errors import LeteoError
from leteo_fed.proto import leteo_pb2 as pb
from leteo_fed.protocols import registry
from leteo_fed.protocols.crosstab import CrosstabColumn, CrosstabRequest
from leteo_fed.protocols.kmeans_round import KmeansRequest
from leteo_fed.protocols.ldp_collection import FeatureDomain, LdpRequest
from leteo_fed.protocols.linreg import LinregRequest
from leteo_fed.protocols.logreg import LogregRequest
from leteo_fed.protocols.moments_round import LabelClasses, MomentsRequest
from leteo_fed.protocols.naive_bayes import NaiveBayesBound, NaiveBayesRequest
from leteo_fed.protocols.quantiles import QuantilesRequest
from leteo_fed.protocols.weighted_stats import WeightedStatsRequest
from leteo_fed.transport import membership
from leteo_fed.transport.certs import create_pki
from leteo_fed.transport.grpc_io import TlsConfig
from leteo_fed.transport.rounds import (
    Invitation,
    common_from_proto,
    invitation_from_proto,
    member_copy,
    request_from_proto,
    request_to_proto,
    spec_to_proto,
)
from leteo_fed.transport.signing import ROUND_REQUEST, Signer
from owner_agent.authorization import (
    MAX_CLOCK_SKEW_SECONDS,
    Authorization,
    SignedRequests,
    authorize,
    verify_request,
)

NAMES = ["sl", "sw", "pl", "pw"]
SITES = ["site-1", "site-2", "site-3"]
SITE = "site-1"  # the owner checking


@pytest.fixture(scope="module")
def pki(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("pki")
    create_pki(folder, [*SITES, "site-x"])
    return folder


@pytest.fixture(scope="module")
def foreign_pki(tmp_path_factory) -> Path:
    """Another deployment's authorities: its analyst is certified, but not by ours."""
    folder = tmp_path_factory.mktemp("foreign")
    create_pki(folder, ["site-1"])
    return folder


@pytest.fixture(scope="module")
def analysts_ca(pki) -> bytes:
    ca = TlsConfig.from_dir(pki, SITE, "owner").role_ca("analyst")
    assert ca is not None
    return ca


def signer(folder: Path, name: str) -> Signer:
    return Signer.from_pem(
        (folder / f"{name}.crt").read_bytes(), (folder / f"{name}.key").read_bytes()
    )


def moments(**common) -> pb.RoundRequest:
    common.setdefault("owners", SITES)
    common.setdefault("min_owners", 3)
    return request_to_proto(
        "moments", MomentsRequest(method="pca", features=tuple(NAMES)), **common
    )


def dp(**more) -> dict:
    return {"dp_epsilon": 1.0, "dp_delta": 1e-6, "row_norm_bound": 10.0, **more}


def sign(request: pb.RoundRequest, by: Signer | None, issued: float | None = None) -> pb.Signed:
    """As `AnalystClient._start` signs (None: without TLS, unsigned)."""
    request.nonce = "n-" + str(time.monotonic_ns())
    request.issued_unix = time.time() if issued is None else issued
    body = request.SerializeToString(deterministic=True)
    return by.sign(body, ROUND_REQUEST) if by is not None else pb.Signed(body=body)


def relay(
    signed: pb.Signed | None,
    planned: pb.RoundRequest | None = None,
    *,
    invited: list[str] | None = None,
    job_id: str = "job-1",
    round_id: str = "",
    min_owners: int | None = None,
    index: int = 1,
) -> Invitation:
    """The RoundSpec the aggregator sends: planned from `planned` (default: the signed request),
    relaying `signed`, decoded as the owner decodes it."""
    if planned is None:
        assert signed is not None
        planned = pb.RoundRequest.FromString(signed.body)
    invited = sorted(SITES if invited is None else invited)
    protocol, payload = request_from_proto(planned)
    plan = protocol.plan(payload, common_from_proto(planned, len(invited)))
    state = protocol.start(plan, job_id, invited)
    rnd = protocol.next_round(plan, state, 1)
    for i in range(2, index + 1):  # a later iteration of a multi-round job
        rnd = protocol.next_round(plan, state, i)
    layout = rnd.encoding.layout(2048) if rnd.encoding is not None else None
    default_id = f"{job_id}-it{index}" if protocol.multi_round else job_id
    msg = spec_to_proto(
        round_id or default_id,
        protocol,
        rnd,
        "key" if layout is not None else "",
        time.time() + 60,
        layout,
        plan.min_owners if min_owners is None else min_owners,
        job_id,
        signed,
        membership.root(invited),
        len(invited),
    )
    # this site's proof; a set without it gets another member's (which cannot verify)
    msg = member_copy(msg, invited, SITE if SITE in invited else invited[0])
    return invitation_from_proto(msg, 2048)


def check(
    inv: Invitation,
    ca: bytes | None,
    requests: SignedRequests | None = None,
    max_age_hours: float = 24.0,
    now: float | None = None,
) -> Authorization:
    """What the owner does before anything is read: verify, then authorize."""
    auth = verify_request(inv.authorization, ca)
    now = now or time.time()
    authorize(inv, auth, SITE, max_age_hours, requests or SignedRequests(), now, key_bits=2048)
    return auth


def refusal(inv: Invitation, ca: bytes | None, **kw) -> str:
    with pytest.raises(LeteoError) as err:
        check(inv, ca, **kw)
    reason = str(err.value)
    assert reason.startswith(("authorization: ", "spec: ")), reason
    return reason


# ------------------------------------------------------------------ honest rounds pass

GEO = LdpRequest(
    column=NAMES[0],
    columns=tuple(NAMES[:2]),
    mechanism="geo",
    epsilon=0.5,
    box_lower=(0.0, 0.0),
    box_upper=(10.0, 10.0),
    box_fit="resample",
)
NAIVE_BAYES = LdpRequest(
    mechanism="oue",
    epsilon=1.0,
    label_column="species",
    classes=("a", "b"),
    features=(FeatureDomain("color", ("red", "blue")), FeatureDomain("size", ("s", "l"))),
)

HONEST = {
    "pca": lambda: moments(),
    "pca-dp": lambda: moments(**dp()),
    "lda": lambda: request_to_proto(
        "moments",
        MomentsRequest(
            method="lda",
            features=tuple(NAMES),
            groupings=(LabelClasses("species", ("a", "b", "c")),),
        ),
        owners=SITES,
        min_owners=3,
    ),
    "projection": lambda: request_to_proto(
        "moments",
        MomentsRequest(method="pca", features=tuple(NAMES), projection_only=True),
        owners=SITES,
        min_owners=3,
    ),
    "kmeans-dp": lambda: request_to_proto(
        "kmeans",
        KmeansRequest(k=2, centers=(0.0,) * 4 + (1.0,) * 4, iterations=4, features=tuple(NAMES)),
        min_owners=3,
        **dp(),
    ),
    "ldp": lambda: request_to_proto(
        "ldp",
        LdpRequest(column="species", mechanism="oue", epsilon=2.0, domain=("a", "b")),
        min_owners=1,
    ),
    "ldp-geo": lambda: request_to_proto("ldp", GEO, min_owners=1),
    "ldp-naive-bayes": lambda: request_to_proto("ldp", NAIVE_BAYES, min_owners=1),
    "weighted_stats-dp": lambda: request_to_proto(
        "weighted_stats",
        WeightedStatsRequest(features=tuple(NAMES), weight_column="w", weight_bound=2.0),
        owners=SITES,
        min_owners=3,
        **dp(),
    ),
    "crosstab-dp": lambda: request_to_proto(
        "crosstab",
        CrosstabRequest(
            columns=(
                CrosstabColumn("species", domain=("a", "b", "c")),
                CrosstabColumn(NAMES[0], edges=(0.0, 1.0, 2.0)),
            )
        ),
        owners=SITES,
        min_owners=3,
        **dp(row_norm_bound=1.0),
    ),
    "quantiles-dp": lambda: request_to_proto(
        "quantiles",
        QuantilesRequest(features=tuple(NAMES[:2]), lower=-10.0, upper=10.0, bins=32),
        owners=SITES,
        min_owners=3,
        **dp(row_norm_bound=1.0),
    ),
    "naive-bayes-dp": lambda: request_to_proto(
        "naive_bayes",
        NaiveBayesRequest(
            features=tuple(NAMES),
            label_column="species",
            classes=("a", "b", "c"),
            bounds=(NaiveBayesBound(NAMES[0], -10.0, 10.0),),
        ),
        owners=SITES,
        min_owners=3,
        **dp(),
    ),
    "linreg-dp": lambda: request_to_proto(
        "linreg",
        LinregRequest(features=tuple(NAMES[:-1]), label_column=NAMES[-1], ridge=2.0),
        owners=SITES,
        min_owners=3,
        **dp(),
    ),
    "logreg-dp": lambda: request_to_proto(
        "logreg",
        LogregRequest(
            features=tuple(NAMES), label_column="species", positive_class="a", max_iterations=4
        ),
        owners=SITES,
        min_owners=3,
        **dp(),
    ),
}


@pytest.mark.parametrize("name", sorted(HONEST))
def test_an_honest_round_is_authorized_and_names_its_analyst(name, pki, analysts_ca):
    inv = relay(sign(HONEST[name](), signer(pki, "analyst")))
    auth = check(inv, analysts_ca)
    assert auth.analyst == "analyst"
    assert len(auth.digest) == 64


def test_later_kmeans_iterations_take_the_aggregators_centers_within_bounds(pki, analysts_ca):
    """Iteration 2's centers come from earlier results no owner can verify: any k x d centers
    within the bound are accepted (and counted as a release by the policy); iteration 1's must
    be the signed ones."""
    signed = sign(HONEST["kmeans-dp"](), signer(pki, "analyst"))
    first = relay(signed, job_id="km", index=1)
    moved = pb.RoundSpec()
    moved.CopyFrom(first.message)
    moved.kmeans.centers[0] = 0.5
    inv = invitation_from_proto(moved, 2048)
    assert "'kmeans.centers'" in refusal(inv, analysts_ca)
    moved.round_id, moved.kmeans.iteration = "km-it2", 2
    check(invitation_from_proto(moved, 2048), analysts_ca)
    del moved.kmeans.centers[-1]  # not k x d
    assert "centers" in refusal(invitation_from_proto(moved, 2048), analysts_ca)


def test_later_logreg_iterations_take_the_aggregators_coefficients_within_bounds(pki, analysts_ca):
    """Iteration 1 is at the signed coefficients 0; later ones at the aggregator's, accepted
    with d + 1 finite values within the signed bound; no iteration past max_iterations."""
    signed = sign(HONEST["logreg-dp"](), signer(pki, "analyst"))
    first = relay(signed, job_id="lg", index=1)
    moved = pb.RoundSpec()
    moved.CopyFrom(first.message)
    moved.logreg.coefficients[1] = 0.5
    assert "'logreg.coefficients'" in refusal(invitation_from_proto(moved, 2048), analysts_ca)
    moved.round_id, moved.logreg.iteration = "lg-it2", 2
    check(invitation_from_proto(moved, 2048), analysts_ca)
    moved.logreg.coefficients[1] = 1001.0  # beyond the default bound of 1000
    assert "beyond the bound" in refusal(invitation_from_proto(moved, 2048), analysts_ca)
    moved.logreg.coefficients[1] = 0.5
    moved.round_id, moved.logreg.iteration = "lg-it5", 5
    assert "round 5 of a job the analyst allowed 4" in refusal(
        invitation_from_proto(moved, 2048), analysts_ca
    )


def test_without_tls_the_binding_is_still_checked_but_nobody_is_named(pki):
    inv = relay(sign(moments(), None))
    assert check(inv, None).analyst is None
    planned = request_to_proto("moments", MomentsRequest(features=("sl", "secret")), owners=SITES)
    assert "'moments.features'" in refusal(relay(sign(moments(), None), planned), None)


# ------------------------------------------------------------------ the signature


def test_a_tampered_request_is_refused(pki, analysts_ca):
    signed = sign(moments(), signer(pki, "analyst"))
    changed = pb.RoundRequest.FromString(signed.body)
    changed.moments.features.append("salary")
    signed.body = changed.SerializeToString(deterministic=True)
    reason = refusal(relay(signed), analysts_ca)
    assert "signature does not match" in reason


def test_a_request_signed_by_another_role_is_refused(pki, analysts_ca):
    """An owner's (or the aggregator's) certificate is not an analyst's, whichever CA made it."""
    for name in ("site-2", "aggregator"):
        reason = refusal(relay(sign(moments(), signer(pki, name))), analysts_ca)
        assert reason.startswith("authorization: the round request"), reason
        assert "analyst" in reason


def test_an_analyst_certified_by_another_authority_is_refused(foreign_pki, analysts_ca):
    reason = refusal(relay(sign(moments(), signer(foreign_pki, "analyst"))), analysts_ca)
    assert "not issued by the analysts' certificate authority" in reason


def test_an_unsigned_or_missing_request_is_refused_with_tls(pki, analysts_ca):
    assert "is not signed" in refusal(relay(sign(moments(), None)), analysts_ca)
    missing = relay(None, moments())
    assert "carries no round request" in refusal(missing, analysts_ca)
    garbage = pb.Signed(body=b"\xff\xff\xff")
    assert "not a round request" in refusal(relay(garbage, moments()), None)


def test_a_stale_or_future_request_is_refused(pki, analysts_ca):
    me = signer(pki, "analyst")
    day = 24 * 3600
    old = relay(sign(moments(), me, issued=time.time() - day - 60))
    assert "signed 24.0 hours ago" in refusal(old, analysts_ca)
    assert "request_max_age_hours" in refusal(old, analysts_ca)
    check(old, analysts_ca, max_age_hours=48)  # a site may accept older requests
    future = relay(sign(moments(), me, issued=time.time() + 2 * MAX_CLOCK_SKEW_SECONDS))
    assert "in the future" in refusal(future, analysts_ca)
    skewed = relay(sign(moments(), me, issued=time.time() + MAX_CLOCK_SKEW_SECONDS / 2))
    check(skewed, analysts_ca)
    undated = relay(sign(moments(), me, issued=0.0))
    assert "no time of signing" in refusal(undated, analysts_ca)


# ------------------------------------------------------------------ one request, one job


def test_a_request_replayed_to_another_job_is_refused(pki, analysts_ca):
    requests = SignedRequests()
    signed = sign(moments(), signer(pki, "analyst"))
    check(relay(signed, job_id="job-1"), analysts_ca, requests)
    reason = refusal(relay(signed, job_id="job-2"), analysts_ca, requests=requests)
    assert "replayed authorization" in reason and "job-1" in reason
    # the binding survives a restart: it is rebuilt from the audit log's invitation events
    auth = verify_request(signed, analysts_ca)
    events = [
        {
            "event": "invitation",
            "round_id": "job-1",
            "job_id": "job-1",
            "request_digest": auth.digest,
        }
    ]
    assert "replayed authorization" in refusal(
        relay(signed, job_id="job-3"), analysts_ca, requests=SignedRequests(events)
    )


def test_a_job_takes_no_more_budget_than_its_request(pki, analysts_ca):
    """A k-means job of 4 iterations (epsilon 1/4 each): the aggregator cannot run a fifth
    round on the same request, and a declined round gives its charge back."""
    requests = SignedRequests()
    signed = sign(HONEST["kmeans-dp"](), signer(pki, "analyst"))
    for i in range(1, 5):
        check(relay(signed, job_id="km", index=i), analysts_ca, requests)
    beyond = relay(signed, job_id="km", round_id="km-it5", index=4)
    assert "round 5 of a job the analyst allowed 4" in refusal(beyond, analysts_ca)
    fifth = relay(signed, job_id="km", round_id="km-it4-r2", index=4)  # a resumed iteration
    assert "already took epsilon 1" in refusal(fifth, analysts_ca, requests=requests)
    requests.release("km-it4")  # the owner declined iteration 4 after all
    check(fifth, analysts_ca, requests)


def test_the_budget_taken_is_rebuilt_from_the_audit_log(pki, analysts_ca):
    signed = sign(moments(**dp()), signer(pki, "analyst"))
    digest = verify_request(signed, analysts_ca).digest
    events = [
        {
            "event": "invitation",
            "round_id": "r1",
            "job_id": "job-1",
            "request_digest": digest,
            "epsilon": 1.0,
            "delta": 1e-6,
        },
        {"event": "decision", "round_id": "r1", "accepted": True},
    ]
    again = relay(signed, job_id="job-1")
    assert "already took epsilon 1" in refusal(again, analysts_ca, requests=SignedRequests(events))
    events[1]["accepted"] = False  # a declined round took nothing
    check(again, analysts_ca, SignedRequests(events))


# ------------------------------------------------------------------ the round is the request


def test_a_round_of_another_protocol_is_refused(pki, analysts_ca):
    signed = sign(moments(), signer(pki, "analyst"))
    other = request_to_proto(
        "weighted_stats", WeightedStatsRequest(features=tuple(NAMES)), owners=SITES, min_owners=3
    )
    reason = refusal(relay(signed, other), analysts_ca)
    assert reason == "spec: field 'payload' is weighted_stats; the analyst asked for moments"


def test_any_other_column_set_or_role_is_refused(pki, analysts_ca):
    """More columns, fewer columns, a feature used as a label: the round must be the request."""
    signed = sign(moments(), signer(pki, "analyst"))
    wider = request_to_proto(
        "moments", MomentsRequest(features=(*NAMES, "income")), owners=SITES, min_owners=3
    )
    assert "'moments.features'" in refusal(relay(signed, wider), analysts_ca)
    labelled = request_to_proto(  # a label column slipped in as a grouping
        "moments",
        MomentsRequest(
            method="lda", features=tuple(NAMES), groupings=(LabelClasses("hiv", ("0", "1")),)
        ),
        owners=SITES,
        min_owners=3,
    )
    reason = refusal(relay(signed, labelled), analysts_ca)
    assert "'moments.method'" in reason and "'moments.groupings'" in reason
    fewer = request_to_proto(
        "moments", MomentsRequest(features=("sl", "sw")), owners=SITES, min_owners=3
    )
    assert "'moments.features'" in refusal(relay(signed, fewer), analysts_ca)


def test_any_other_quorum_is_refused(pki, analysts_ca):
    signed = sign(moments(), signer(pki, "analyst"))
    for quorum in (2, 4):
        reason = refusal(relay(signed, moments(min_owners=quorum)), analysts_ca)
        assert "'min_owners'" in reason, reason


def test_an_owner_outside_the_request_is_refused(pki, analysts_ca):
    signed = sign(moments(owners=["site-1", "site-2", "site-3"]), signer(pki, "analyst"))
    outside = relay(signed, invited=["site-1", "site-2", "site-x"])
    assert "is not the set of owners the analyst's request names" in refusal(outside, analysts_ca)
    # fewer owners than named (a subset the aggregator picks) is another set too
    fewer = relay(signed, invited=["site-1", "site-2"], min_owners=3)
    assert "is not the set of owners the analyst's request names" in refusal(fewer, analysts_ca)
    without_me = relay(signed, invited=["site-2", "site-3"], min_owners=3)
    assert "does not include this site" in refusal(without_me, analysts_ca)
    anyone = sign(moments(owners=[]), signer(pki, "analyst"))  # no list: every registered owner
    check(relay(anyone, invited=[*SITES, "site-x"]), analysts_ca)


def test_dp_must_be_as_asked(pki, analysts_ca):
    me = signer(pki, "analyst")
    asked_dp = sign(moments(**dp()), me)
    assert "'dp'" in refusal(relay(asked_dp, moments()), analysts_ca)
    for other in (dp(dp_epsilon=2.0), dp(dp_delta=1e-5), dp(dp_epsilon=0.5)):
        assert "'dp." in refusal(relay(asked_dp, moments(**other)), analysts_ca)
    no_dp = sign(moments(), me)  # a budget nobody asked to spend
    assert "'dp'" in refusal(relay(no_dp, moments(**dp())), analysts_ca)


def test_kmeans_counts_every_iteration_against_the_request(pki, analysts_ca):
    """Per-iteration epsilon x iterations must fit the request: 2 iterations at epsilon 1 each
    are not the request of epsilon 1 over 4 iterations."""
    asked = HONEST["kmeans-dp"]()
    signed = sign(asked, signer(pki, "analyst"))
    greedy = request_to_proto(
        "kmeans",
        KmeansRequest(k=2, centers=(0.0,) * 4 + (1.0,) * 4, iterations=2, features=tuple(NAMES)),
        min_owners=3,
        **dp(dp_epsilon=2.0),
    )
    assert "'dp.epsilon'" in refusal(relay(signed, greedy), analysts_ca)


def test_ldp_epsilon_must_be_as_asked(pki, analysts_ca):
    signed = sign(HONEST["ldp"](), signer(pki, "analyst"))
    louder = request_to_proto(
        "ldp",
        LdpRequest(column="species", mechanism="oue", epsilon=4.0, domain=("a", "b")),
        min_owners=1,
    )
    assert "'ldp.epsilon'" in refusal(relay(signed, louder), analysts_ca)


@pytest.mark.parametrize(
    ("honest", "relayed", "field"),
    [
        (GEO, dataclasses.replace(GEO, box_fit="remap"), "'ldp.box_fit'"),  # twice the rate
        (GEO, dataclasses.replace(GEO, bins=7), "'ldp.bins'"),
        (
            NAIVE_BAYES,
            dataclasses.replace(NAIVE_BAYES, classes=("b", "a")),  # swapped class codes
            "'ldp.classes'",
        ),
        (
            NAIVE_BAYES,
            dataclasses.replace(NAIVE_BAYES, features=NAIVE_BAYES.features[::-1]),
            "'ldp.features[0].name'",
        ),
    ],
)
def test_ldp_geo_and_naive_bayes_rounds_must_be_as_asked(honest, relayed, field, pki, analysts_ca):
    signed = sign(request_to_proto("ldp", honest, min_owners=1), signer(pki, "analyst"))
    other = request_to_proto("ldp", relayed, min_owners=1)
    assert field in refusal(relay(signed, other), analysts_ca)


def test_every_protocol_names_its_request_columns():
    """The request side of `columns`, on the protocols' own requests (conformance checks that
    every planned round stays within them)."""
    assert registry.get("moments").request_columns(
        MomentsRequest(features=("a",), groupings=(LabelClasses("y", ("0", "1")),))
    ) == ["a", "y"]
    assert registry.get("kmeans").request_columns(KmeansRequest(features=("a", "b"))) == ["a", "b"]
    assert registry.get("ldp").request_columns(LdpRequest(column="a", columns=("a", "b"))) == [
        "a",
        "b",
    ]
    assert registry.get("weighted_stats").request_columns(
        WeightedStatsRequest(features=("a",), weight_column="w")
    ) == ["a", "w"]


def test_slots_sized_for_fewer_owners_than_invited_are_refused():
    """The plan sizes slots for the invited owners; a spec inviting more (whose sum could
    overflow a slot into the next) is refused when it is decoded."""
    planned = moments()
    protocol, payload = request_from_proto(planned)
    plan = protocol.plan(payload, common_from_proto(planned, len(SITES)))
    rnd = protocol.next_round(plan, protocol.start(plan, "job-1", SITES), 1)
    assert rnd.encoding is not None and rnd.encoding.max_owners == len(SITES)
    layout = rnd.encoding.layout(2048)

    def spec(invited: list[str]) -> pb.RoundSpec:
        deadline = time.time() + 60
        root = membership.root(sorted(invited))
        return spec_to_proto(
            "job-1", protocol, rnd, "key", deadline, layout, 3, "job-1", None, root, len(invited)
        )

    with pytest.raises(LeteoError, match="slots hold the sum of 3 shares, but 4 owners"):
        invitation_from_proto(spec([*SITES, "site-4"]), 2048)
    assert invitation_from_proto(spec(SITES), 2048).encoding.max_owners == 3
