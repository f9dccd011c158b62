"""The aggregator's side of a threshold key: which key m holders agree on, how each holder's
answer is judged, and rounds against in-process holders that compute real partial decryptions
and proofs (tests/keyholder_standin.py), some of them down, refusing or lying.

Small keys (512 bits, 3 of 5) keep it quick; the rules do not depend on the size."""

from __future__ import annotations

import logging

import pytest
from keyholder_standin import start_standins

from aggregator.rounds.reveal import Share
from aggregator.rounds.threshold_sum import (
    VALID,
    WRONG,
    ThresholdSecureSum,
    check_reply,
    share_product,
)
from leteo_fed.crypto import threshold
from leteo_fed.crypto.paillier import Encryptor, int_to_bytes
from leteo_fed.errors import PeerUnavailable, ProtocolError
from leteo_fed.proto import leteo_pb2 as pb
from leteo_fed.transport.grpc_io import TlsConfig
from leteo_fed.transport.messages import proof_to_proto
from leteo_fed.transport.statements import ciphertext_digest
from leteo_fed.transport.threshold_keys import (
    HolderAnswer,
    agreed_key,
    require_agreed_key,
)

VALUES = {"site-1": [1, 2, 3], "site-2": [10, 20, 30], "site-3": [100, 200, 300]}
SUMS = [111, 222, 333]


@pytest.fixture(scope="module")
def dealt():
    return threshold.deal(512, 5, 3)


@pytest.fixture(scope="module")
def other():
    """Another 3-of-5 key (other holders, or a minority's attempt at one)."""
    return threshold.deal(512, 5, 3)[0]


@pytest.fixture(scope="module")
def shares(dealt) -> list[Share]:
    key, _ = dealt
    enc = Encryptor(key.public, randomizer="textbook")
    out = []
    for site, values in VALUES.items():
        statement = pb.Signed(body=pb.ShareStatement(site_id=site).SerializeToString())
        out.append(
            Share(site, statement, pb.ShareStatement(site_id=site), b"", enc.encrypt_many(values))
        )
    return out


def _aggregator(addresses: list[str], grace: float = 2.0) -> ThresholdSecureSum:
    tls = TlsConfig.insecure_as("aggregator", "aggregator")
    channels = {a: tls.channel(a, peer="keyholder") for a in addresses}
    return ThresholdSecureSum(channels, None, grace=grace)


def _round(dealt, shares, behaviours, round_id="r1", grace=2.0):
    """Open and decrypt one round: (plaintexts, holder timings, aggregator timings)."""
    key, key_shares = dealt
    holders = start_standins(key_shares, behaviours)
    agg = _aggregator(holders.addresses, grace)
    try:
        assert agg.public_key() == key.public
        agg.open(round_id, key.key_id, 3, "blinded")
        timings: dict[str, float] = {}
        plaintexts, by_holder = agg.decrypt_sum(
            round_id, key.key_id, shares, 3, timings, sorted(VALUES)
        )
        return plaintexts, by_holder, timings
    finally:
        agg.close()
        holders.stop()


# ---------------------------------------------------------------------- the key agreement rule


def test_a_key_is_taken_when_t_holders_return_it_identically(dealt, other) -> None:
    key, _ = dealt
    same = [HolderAnswer(f"h{i}", key, i) for i in (1, 2, 3)]
    assert agreed_key(same, holders=5) == key
    assert agreed_key(same[:2], holders=5) is None  # 2 < t = 3
    # two holders answering another key do not outvote three
    minority = [HolderAnswer("h4", other, 4), HolderAnswer("h5", other, 5)]
    assert agreed_key(same + minority, holders=5) == key
    assert agreed_key(same, holders=5, key_id=key.key_id) == key
    assert agreed_key(same, holders=5, key_id=other.key_id) is None
    # m is pinned by the holders listed, t by an owner's configuration
    assert agreed_key(same, holders=4) is None
    assert agreed_key(same, holders=5, threshold=3) == key
    assert agreed_key(same, holders=5, threshold=4) is None


def test_a_key_of_the_same_modulus_with_other_verification_keys_is_another_key(dealt) -> None:
    key, _ = dealt
    forged = threshold.ThresholdKey(
        key.public, key.threshold, key.holders, key.v, (*key.verification[:-1], key.v)
    )
    answers = [HolderAnswer("h1", key, 1), HolderAnswer("h2", key, 2)]
    answers.append(HolderAnswer("h3", forged, 3))
    assert agreed_key(answers, holders=5) is None
    with pytest.raises(PeerUnavailable) as err:  # two holders did not answer: they may agree
        require_agreed_key(answers, 5, unanswered=["h4", "h5"])
    assert "at most 2 agree" in str(err.value) and "h4: no answer" in str(err.value)


def test_without_an_agreement_every_holders_answer_is_named(dealt, other) -> None:
    key, _ = dealt
    answers = [
        HolderAnswer("h1", key, 1),
        HolderAnswer("h2", key, 2),
        HolderAnswer("h3", other, 3),
        HolderAnswer("h4", other, 4),
        HolderAnswer("h5", problem="UNAVAILABLE: connection refused"),
    ]
    with pytest.raises(PeerUnavailable) as err:  # h5 could still tip it
        require_agreed_key(answers, 5)
    text = str(err.value)
    assert f"h1: key {key.key_id}" in text and f"h3: key {other.key_id}" in text
    assert "h5: UNAVAILABLE: connection refused" in text
    answers[4] = HolderAnswer("h5", other, 5)  # 2 against 3 of another key: no one can tip it
    assert require_agreed_key(answers, 5) == other
    with pytest.raises(ProtocolError, match="3 of 5"):  # an owner pinned t = 3, m = 5
        require_agreed_key(answers[:4], 5, threshold=3)


# ---------------------------------------------------------------------- judging one answer


def _answer(key_share, product, partials, contributors, context, index=None):
    width = key_share.key.public.ciphertext_bytes
    batch = pb.PartialDecryptionBatch(
        partials=[int_to_bytes(p, width) for p in partials],
        index=key_share.index if index is None else index,
        sum_digest=ciphertext_digest(product, width),
        contributors=contributors,
        partial_seconds=0.5,
    )
    proof_to_proto(threshold.prove(key_share, product, partials, context), batch)
    return [batch]


def test_an_answer_is_valid_only_with_its_proof_the_sum_and_the_shares_sent(dealt, shares) -> None:
    key, key_shares = dealt
    holder = key_shares[1]
    context = threshold.proof_context("r1", key.key_id)
    product = share_product(key.public, shares)
    partials = threshold.partial_decrypt(holder, product)
    sites = sorted(VALUES)

    def judge(batches, announced=2):
        return check_reply(key, context, product, shares, "h2", announced, batches)

    good = judge(_answer(holder, product, partials, sites, context))
    assert good.verdict == VALID and good.index == 2 and good.partials == partials
    assert good.timings["partial_seconds"] == 0.5
    squared = [partials[0] ** 2 % key.public.n_square, *partials[1:]]
    bad = judge(_answer(holder, product, squared, sites, context))
    assert bad.verdict == WRONG and "proof does not verify" in bad.reason and bad.index == 2
    other_round = threshold.proof_context("r2", key.key_id)
    assert judge(_answer(holder, product, partials, sites, other_round)).verdict == WRONG
    fewer = judge(_answer(holder, product, partials, sites[:2], context))
    assert fewer.verdict == WRONG and "other shares" in fewer.reason
    assert (
        "gave its key as holder 3"
        in judge(_answer(holder, product, partials, sites, context), 3).reason
    )
    assert "not one of 1..5" in judge(_answer(holder, product, partials, sites, context, 9)).reason
    assert judge([]).verdict == WRONG


# ---------------------------------------------------------------------- rounds


def test_a_round_decrypts_with_two_of_five_holders_failing(dealt, shares) -> None:
    plaintexts, by_holder, timings = _round(dealt, shares, {2: "down", 4: "refuse"})
    assert plaintexts == SUMS
    assert by_holder["holders_valid"] == 3 and by_holder["holders_failed"] == 1
    assert by_holder["holder_1_partial_seconds"] > 0 and "holder_4_rejected" not in by_holder
    assert by_holder["partial_seconds"] > 0  # the slowest of the holders combined
    for name in ("holder_round_trip_seconds", "verify_proofs_seconds", "combine_seconds"):
        assert timings[name] >= 0


def test_a_wrong_holder_is_named_and_left_out(dealt, shares, caplog) -> None:
    caplog.set_level(logging.WARNING, "leteo.aggregator")
    # holder 1 would be combined first; holder 5 answers late, within the grace
    plaintexts, by_holder, _ = _round(dealt, shares, {1: "wrong", 5: "slow wrong"}, grace=5.0)
    assert plaintexts == SUMS
    assert by_holder["holder_1_rejected"] == 1.0 and by_holder["holder_5_rejected"] == 1.0
    assert by_holder["holders_wrong"] == 2 and by_holder["holders_valid"] == 3
    logged = caplog.text
    assert "key holder 1 at 127.0.0.1:" in logged and "proof does not verify" in logged
    assert "key holder 5 at" in logged


def test_reveal_removes_the_owners_masks_as_with_one_csp(dealt, tmp_path) -> None:
    """The whole reveal: masked, packed shares in, signed totals out, learned totals in the
    transcript (the part it shares with `SecureSum`)."""
    import json

    from leteo_fed.encoding.packing import make_layout, masks_from_seed, new_mask_seed, pack

    key, key_shares = dealt
    layout = make_layout(key.public.bits, per_owner_bound=1000, max_owners=4)
    values = {"site-1": [5, -7, 300], "site-2": [-1, 2, -999], "site-3": [0, 0, 1]}
    enc = Encryptor(key.public, randomizer="textbook")
    masked = []
    for site, row in values.items():
        seed = new_mask_seed()
        plain = [
            p + r for p, r in zip(pack(row, layout), masks_from_seed(seed, 1, layout), strict=True)
        ]
        statement = pb.Signed(body=pb.ShareStatement(site_id=site).SerializeToString())
        claims = pb.ShareStatement(site_id=site)
        masked.append(Share(site, statement, claims, seed, enc.encrypt_many(plain)))
    holders = start_standins(key_shares, {3: "wrong"})
    tls = TlsConfig.insecure_as("aggregator", "aggregator")
    channels = {a: tls.channel(a, peer="keyholder") for a in holders.addresses}
    agg = ThresholdSecureSum(channels, tmp_path / "transcript.jsonl", grace=1.0)
    try:
        agg.open("r1", agg.public_key().key_id, layout.n_ciphertexts(3), "blinded")
        timings: dict[str, float] = {}
        totals, by_holder = agg.reveal("r1", key.public, masked, 3, layout, timings, sorted(values))
    finally:
        agg.close()
        holders.stop()
    assert totals == [4, -5, -698]
    assert by_holder["holder_3_rejected"] == 1.0 and "unmask_seconds" in timings
    learned = json.loads((tmp_path / "transcript.jsonl").read_text())
    assert learned == {"round_id": "r1", "mode": "blinded", "aggregate_totals": ["4", "-5", "-698"]}


def test_holders_still_running_after_the_grace_are_cancelled_not_blamed(dealt, shares) -> None:
    key, key_shares = dealt
    holders = start_standins(key_shares, {5: "slow"})
    agg = _aggregator(holders.addresses, grace=0.1)
    try:
        agg.public_key()
        agg.open("r1", key.key_id, 3, "blinded")
        plaintexts, by_holder = agg.decrypt_sum("r1", key.key_id, shares, 3, {}, sorted(VALUES))
    finally:
        agg.close()
        holders.stop()
    assert plaintexts == SUMS
    assert by_holder["holders_wrong"] == 0 and by_holder["holders_failed"] == 0
    assert by_holder["holders_valid"] == 4 and by_holder["holders_cancelled"] == 1
    assert "holder_5_partial_seconds" not in by_holder  # the slow one: cancelled


def test_fewer_than_t_valid_answers_fail_the_round_naming_every_holder(dealt, shares) -> None:
    with pytest.raises(ProtocolError) as err:
        _round(dealt, shares, {1: "wrong", 2: "wrong", 3: "refuse"})
    text = str(err.value)
    assert "2 valid partial decryptions, the key needs 3" in text
    assert "valid: key holder 4 at" in text and "key holder 5 at" in text
    assert "wrong: key holder 1 at" in text and "key holder 2 at" in text
    assert "failed: key holder 3 at" in text and "decrypts nothing" in text


def _open(dealt, behaviours):
    key, key_shares = dealt
    holders = start_standins(key_shares, behaviours)
    agg = _aggregator(holders.addresses)
    try:
        agg.public_key()
        agg.open("r1", key.key_id, 3, "blinded")
    finally:
        agg.close()
        holders.stop()
    return holders


def test_a_round_needs_t_holders_to_open_it(dealt) -> None:
    with pytest.raises(ProtocolError) as err:  # refused: the round cannot run
        _open(dealt, {1: "closed", 2: "closed", 3: "closed"})
    text = str(err.value)
    assert "only 2 of the 5 key holders opened round r1, the key needs 3" in text
    assert text.count("opens no round") == 3
    with pytest.raises(PeerUnavailable) as err:  # two are down: it may run once they are back
        _open(dealt, {1: "closed", 2: "down", 3: "down"})
    assert "UNAVAILABLE" in str(err.value)
    opened = _open(dealt, {1: "closed", 2: "down"})  # three opened: enough
    assert sum(1 for h in opened.holders.values() if h.opened) == 3


def test_projection_rounds_are_refused_before_any_holder_is_asked(dealt) -> None:
    key, key_shares = dealt
    holders = start_standins(key_shares)
    agg = _aggregator(holders.addresses)
    try:
        with pytest.raises(ProtocolError, match="reveal=blinded"):
            agg.check_mode("projection")
        with pytest.raises(ProtocolError, match="projection-only rounds cannot run"):
            agg.open("r1", key.key_id, 3, "projection")
        assert all(not h.opened for h in holders.holders.values())
    finally:
        agg.close()
        holders.stop()


def test_the_key_is_the_one_most_holders_return(dealt, other) -> None:
    key, key_shares = dealt
    holders = start_standins(key_shares, {2: "other_key", 5: "down"}, other=other)
    agg = _aggregator(holders.addresses)
    try:
        assert agg.public_key() == key.public
        assert agg.threshold_key(key.key_id) == key  # kept by key id
    finally:
        agg.close()
        holders.stop()


# ---------------------------------------------------------------------- configuration


def test_the_aggregator_decrypts_with_a_csp_or_key_holders_not_both(capsys) -> None:
    from aggregator.service import key_service
    from leteo_fed.cli.main import main
    from leteo_fed.errors import ConfigError

    with pytest.raises(SystemExit) as stopped:
        main(["aggregator", "serve", "--csp", "c:1", "--keyholders", "h1:1,h2:1"])
    assert stopped.value.code == 2 and "not allowed with" in capsys.readouterr().err
    assert main(["aggregator", "serve", "--keyholders", "h1:1", "--insecure"]) == 2
    assert "--keyholders needs every holder, at least 2" in capsys.readouterr().err
    tls = TlsConfig.insecure_as("aggregator", "aggregator")
    with pytest.raises(ConfigError, match="not both"):
        key_service(tls, "c:1", ["h1:1", "h2:1"], None)
    with pytest.raises(ConfigError, match="twice"):
        key_service(tls, "", ["h1:1", "h1:1"], None)
    revealer = key_service(tls, "", ["h1:1", "h2:1"], None)
    assert isinstance(revealer, ThresholdSecureSum)
    revealer.close()
