"""A malicious aggregator against real owner agents and a real CSP (issue 11, item 5).

The owners and the CSP are the processes `LocalCluster` starts; the aggregator is the test's
own (`deviating_aggregator.DeviatingAggregator`): same address, same certificate, so the others
cannot tell it from the real one. It plans rounds with the real planning code and then deviates:
it asks the CSP to decrypt fewer shares than the owners signed for, replays shares and rounds,
forges owners, repeats a non-DP query on a subset, weakens DP, reaches for columns, protocols and
analysts the owners' policies exclude, and relays requests no analyst signed.

Every attack must be refused by an owner (a decline naming the rule) or by the CSP (an RPC
error naming the check), with nothing decrypted reaching the aggregator and no privacy ledger
charged. One positive control runs the honest path through the same harness and recovers the
exact totals of the data, so the refusals are not an artefact of a broken harness.

Every test runs twice: against one CSP, and against a 3-of-5 threshold key whose five key
holders (real processes) each check the round as the CSP does (docs/threshold-keys.md); the
test's aggregator then asks every holder (`deviating_aggregator.HolderQuorum`), and each attack
must be refused by every one of them, with no holder opening the round.
"""

from __future__ import annotations

import itertools
import json
import subprocess
import sys
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import grpc
import numpy as np
import pytest
from deviating_aggregator import Decrypted, DeviatingAggregator, PlannedRound, Upload
from integration_helpers import write_parts
from sklearn.datasets import load_breast_cancer

from leteo_fed.data.sources import read_matrix
from leteo_fed.demo.cluster import LocalCluster, OwnerSpec
from leteo_fed.encoding.packing import masks_from_seed
from leteo_fed.proto import leteo_pb2 as pb
from leteo_fed.protocols import moments, pca
from leteo_fed.protocols.kmeans_round import KmeansRequest
from leteo_fed.protocols.moments_round import MomentsRequest
from leteo_fed.protocols.weighted_stats import WeightedStatsRequest
from leteo_fed.transport import membership
from leteo_fed.transport.certs import Party, create_pki, issue_from
from leteo_fed.transport.grpc_io import TlsConfig
from leteo_fed.transport.messages import encoding_to_proto
from leteo_fed.transport.rounds import request_to_proto
from leteo_fed.transport.signing import Signer

pytestmark = pytest.mark.slow

SITES = ("site-1", "site-2", "site-3")
D = 4  # features per round: small shares, every round a query of its own
EPSILON = 1.0
ROW_NORM = 10.0  # DP rounds clip rows to this L2 norm


def _policy(allowed: list[str]) -> str:
    """Every owner's [policy]: PCA only, every column but one, one analyst, at least one other
    site in the quorum, non-DP PCA allowed but each query answered once."""
    return "\n".join(
        [
            'protocols = ["pca", "kmeans"]',
            f"columns = {json.dumps(allowed)}",
            'analysts = ["analyst"]',
            "min_other_owners = 1",
            'non_dp = ["pca", "kmeans"]',
            "non_dp_repeats = 1",
            "non_dp_window_days = 30",
        ]
    )


@dataclass
class Env:
    cluster: LocalCluster
    agg: DeviatingAggregator
    names: list[str]
    forbidden: str
    data: dict[str, np.ndarray]  # site -> its rows (all columns)
    rogue: Path  # a certificate folder of another PKI (same names, other CAs)
    second_analyst: Signer  # a valid analyst certificate the owners' policy does not list
    queries: Iterator[tuple[str, ...]]
    # differencing is counted by column: rounds over {site-1, site-2}, or over an unknown set
    # of owners, use columns no round of all three sites touches
    pair_columns: list[str] = field(default_factory=list)
    apart_columns: list[str] = field(default_factory=list)
    declined: dict[str, tuple[str, ...]] = field(default_factory=dict)  # round -> sites

    @property
    def holders(self) -> bool:
        """A threshold deployment: key holders instead of the CSP."""
        return bool(self.cluster.keyholders)

    @property
    def party(self) -> str:
        """How the decrypting party names itself in its refusals."""
        return "key holder" if self.holders else "CSP"

    @property
    def decryptors(self) -> list[str]:
        return self.cluster.keyholder_names if self.holders else ["csp"]

    def fresh(self) -> list[str]:
        """Columns for a round of all three sites with a quorum of 3: they release nothing
        another such round could be subtracted from, so the owners' non_dp_repeats rule
        refuses only what a test means it to."""
        return list(next(self.queries))

    def columns(self, features: Iterable[str]) -> list[int]:
        return [self.names.index(f) for f in features]


@pytest.fixture(scope="module", params=["csp", "keyholders"])
def env(tmp_path_factory, request) -> Iterator[Env]:
    bunch = load_breast_cancer()
    names = [str(n).replace(" ", "_") for n in bunch.feature_names]
    forbidden, allowed = names[-1], names[:-1]
    work = tmp_path_factory.mktemp("malicious-aggregator")
    parts = write_parts(bunch.data, names, 3, work / "data")
    owners = [
        OwnerSpec(site, part, policy=_policy(allowed))
        for site, part in zip(SITES, parts, strict=True)
    ]
    cluster = LocalCluster(
        work / "run",
        owners,
        csp_transcript=True,
        privacy_budget=(5.0, 1e-4),
        external_aggregator=True,
        keyholders=(5, 3) if request.param == "keyholders" else None,
    )
    agg = None
    try:
        cluster.prepare()
        agg = DeviatingAggregator(cluster)  # up before the owners, who register with it
        cluster.start_services()
        cluster.wait_healthy()
        for owner in owners:
            cluster.start_owner(owner)
        cluster.wait_healthy()
        agg.wait_for_owners(SITES)

        rogue = work / "rogue"
        create_pki(rogue, ["site-2"])  # other CAs issuing the same names
        issue_from(cluster.certs, work / "analyst-2", Party("analyst-2", "analyst"), [])
        second = Signer.from_pem(
            (work / "analyst-2" / "analyst-2.crt").read_bytes(),
            (work / "analyst-2" / "analyst-2.key").read_bytes(),
        )
        data = {
            site: read_matrix(str(part), names) for site, part in zip(SITES, parts, strict=True)
        }
        yield Env(
            cluster,
            agg,
            names,
            forbidden,
            data,
            rogue,
            second,
            itertools.combinations(allowed[:-8], D),
            allowed[-8:-4],
            allowed[-4:],
        )
    finally:
        if agg is not None:
            agg.close()
        cluster.stop()


# ------------------------------------------------------------------ helpers


def moments_request(
    features: Iterable[str],
    *,
    owners: Iterable[str] = (),
    min_owners: int = 0,
    dp_epsilon: float | None = None,
    projection_only: bool = False,
) -> pb.RoundRequest:
    return request_to_proto(
        "moments",
        MomentsRequest(method="pca", features=tuple(features), projection_only=projection_only),
        owners=tuple(owners),
        min_owners=min_owners,
        dp_epsilon=dp_epsilon,
        row_norm_bound=None if dp_epsilon is None else ROW_NORM,
    )


def honest_round(env: Env, features: list[str], invited=SITES, **kw) -> PlannedRound:
    """A round planned exactly as the real engine would, from a freshly signed request."""
    signed = env.agg.sign(moments_request(features, **kw))
    return env.agg.plan(signed, invited)


def collect(
    env: Env, rnd: PlannedRound, sites=SITES, spec: pb.RoundSpec | None = None
) -> dict[str, Upload]:
    """Invite `sites` (with `spec`, default the planned one) and wait for their shares."""
    replies = env.agg.invite(spec or rnd.spec, sites)
    assert all(r.accepted for r in replies.values()), replies
    return env.agg.wait_uploads(rnd.round_id, sites)


def pairs(*uploads: Upload) -> list[tuple[pb.Signed, list[int]]]:
    return [(u.statement, u.ciphertexts) for u in uploads]


def config_dir(env: Env) -> Path:
    return env.cluster.workdir / "config"


def ledgers(env: Env) -> dict[str, bytes | None]:
    """Every owner's ledger file as it is on disk (None: nothing was ever charged)."""
    out = {}
    for site in SITES:
        path = config_dir(env) / "ledgers" / f"{site}.json"
        out[site] = path.read_bytes() if path.exists() else None
    return out


def audit(env: Env, site: str) -> list[dict]:
    path = config_dir(env) / f"audit-{site}.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def wait_sent(env: Env, round_id: str, sites: Iterable[str], timeout: float = 15.0) -> None:
    """The owners record `sent` right after the upload returns: wait for the record."""
    end = time.monotonic() + timeout
    for site in sites:
        while not any(e["event"] == "sent" and e["round_id"] == round_id for e in audit(env, site)):
            assert time.monotonic() < end, f"{site} recorded no upload for {round_id}"
            time.sleep(0.05)


def csp_decrypted(env: Env, round_id: str) -> bool:
    """Whether the CSP (or any key holder) decrypted the round."""
    return env.agg.decrypted(round_id)


def assert_declined(
    env: Env, round_id: str, replies: dict[str, pb.InviteReply], prefix: str, phrase: str
) -> None:
    """Every invited owner declined with `prefix` and `phrase`, recorded it, and sent nothing."""
    assert replies
    for site, reply in replies.items():
        assert not reply.accepted, f"{site} accepted round {round_id}"
        assert reply.reason.startswith(prefix), (site, reply.reason)
        assert phrase in reply.reason, (site, reply.reason)
        events = [e for e in audit(env, site) if e["round_id"] == round_id]
        decisions = [e for e in events if e["event"] == "decision"]
        assert [(d["accepted"], d["reason"]) for d in decisions] == [(False, reply.reason)]
        assert not [e for e in events if e["event"] in ("sent", "failed")]
    assert env.agg.received(round_id) == set(), f"shares arrived for refused round {round_id}"
    env.declined[round_id] = tuple(replies)  # checked again at the end of the module


def assert_csp_refuses(
    env: Env, call, code: grpc.StatusCode, phrase: str, round_id: str
) -> grpc.RpcError:
    """The CSP call fails with `code` naming `phrase`, having returned nothing at all."""
    received = Decrypted()
    with pytest.raises(grpc.RpcError) as err:
        call(received)
    assert err.value.code() == code, (err.value.code(), err.value.details())
    assert phrase in (err.value.details() or ""), err.value.details()
    assert received.plaintexts == [] and received.contributors == []
    assert not csp_decrypted(env, round_id)
    return err.value


def relay(rnd: PlannedRound, agg: DeviatingAggregator | None = None, **changes) -> pb.RoundSpec:
    """A copy of the planned spec with fields changed by the aggregator. `invited` names
    another invited set: the spec gets its root and size, and `agg` (if given) valid
    membership proofs in it for the owners it invites."""
    spec = pb.RoundSpec()
    spec.CopyFrom(rnd.spec)
    for name, value in changes.items():
        if name == "invited":
            members = sorted(value)
            spec.invited_root = membership.root(members)
            spec.n_invited = len(members)
            if agg is not None:
                agg.sets[spec.invited_root] = members
        else:
            setattr(spec, name, value)
    return spec


# ------------------------------------------------------------------ the honest control


@dataclass
class Honest:
    rnd: PlannedRound
    uploads: dict[str, Upload]
    out: Decrypted


@pytest.fixture(scope="module")
def honest(env: Env) -> Honest:
    """One honest non-DP PCA round of all three owners, decrypted once."""
    rnd = honest_round(env, env.fresh(), min_owners=3)
    env.agg.open_at_csp(rnd.round_id, rnd.n_ciphertexts)
    uploads = collect(env, rnd)
    out = env.agg.decrypt(rnd.round_id, pairs(*uploads.values()))
    wait_sent(env, rnd.round_id, SITES)
    return Honest(rnd, uploads, out)


def test_honest_round_through_the_harness_gives_the_exact_totals(env: Env, honest: Honest):
    rnd, uploads, out = honest.rnd, honest.uploads, honest.out
    assert sorted(out.contributors) == list(SITES)
    assert len(out.plaintexts) == rnd.n_ciphertexts
    assert csp_decrypted(env, rnd.round_id)
    totals = env.agg.unmask(out.plaintexts, list(uploads.values()), rnd)

    cols = env.columns(rnd.features)
    enc = rnd.plan.share_encoding
    exact = [0] * rnd.plan.n_values
    for site in SITES:
        own = pca.share_values(pca.local_statistics(env.data[site][:, cols]), enc)
        exact = [a + b for a, b in zip(exact, own, strict=True)]
    assert totals == exact  # the integers every owner encoded, summed: nothing lost or added

    x = np.vstack([env.data[s] for s in SITES])[:, cols]
    agg = moments.decode_totals(totals, D, [moments.ALL_ROWS], enc.scale_bits)
    scale = 2.0**enc.scale_bits
    assert agg.n == len(x) == 569
    np.testing.assert_allclose(np.array(agg.v[0][0], dtype=float) / scale, x.sum(axis=0), rtol=1e-9)
    np.testing.assert_allclose(np.array(agg.r, dtype=float) / scale, x.T @ x, rtol=1e-9)
    # the CSP saw masked values only: each plaintext carries three masks of mask_bits bits
    assert rnd.layout is not None
    assert all(p.bit_length() > rnd.layout.mask_bits - 8 for p in out.plaintexts)


# ------------------------------------------------------------------ 1. one owner's share alone


def test_csp_refuses_to_decrypt_fewer_shares_than_the_owners_signed_for(env: Env):
    agg = env.agg
    before = ledgers(env)

    # all three shares arrive; the aggregator sends the CSP site-1's alone
    rnd = honest_round(env, env.fresh(), min_owners=3)
    agg.open_at_csp(rnd.round_id, rnd.n_ciphertexts)
    up = collect(env, rnd)
    assert_csp_refuses(
        env,
        lambda got: agg.decrypt(rnd.round_id, pairs(up["site-1"]), got),
        grpc.StatusCode.FAILED_PRECONDITION,
        "1 distinct owner share(s), the owners signed a quorum of 3: refused",
        rnd.round_id,
    )
    # ... and the round is spent: not even the honest request decrypts it now
    assert_csp_refuses(
        env,
        lambda got: agg.decrypt(rnd.round_id, pairs(*up.values()), got),
        grpc.StatusCode.ALREADY_EXISTS,
        f"was already decrypted; the {env.party} decrypts once",
        rnd.round_id,
    )

    # one share counted three times
    rnd = honest_round(env, env.fresh(), min_owners=3)
    agg.open_at_csp(rnd.round_id, rnd.n_ciphertexts)
    up = collect(env, rnd, ["site-1"])
    assert_csp_refuses(
        env,
        lambda got: agg.decrypt(rnd.round_id, pairs(*[up["site-1"]] * 3), got),
        grpc.StatusCode.FAILED_PRECONDITION,
        "share from 'site-1' in round " + rnd.round_id + ": this site's share was already counted",
        rnd.round_id,
    )

    # split views: site-1 is told the round has three owners, site-2 that it has two (each
    # spec planned as the request defines it for those owners); their statements disagree and
    # the CSP sums neither
    signed = agg.sign(moments_request(env.apart_columns))
    rnd = agg.plan(signed, SITES)
    pair = agg.plan(signed, ["site-1", "site-2"])
    agg.open_at_csp(rnd.round_id, rnd.n_ciphertexts)
    up1 = collect(env, rnd, ["site-1"])
    up2 = collect(env, rnd, ["site-2"], relay(pair, round_id=rnd.round_id, job_id=rnd.round_id))
    assert_csp_refuses(
        env,
        lambda got: agg.decrypt(rnd.round_id, pairs(up1["site-1"], up2["site-2"]), got),
        grpc.StatusCode.FAILED_PRECONDITION,
        "disagrees with the round's other shares on the protocol, the invited owners or the quorum",
        rnd.round_id,
    )
    assert ledgers(env) == before


def test_a_kmeans_iteration_is_protected_like_any_round(env: Env):
    """The CSP checks k-means iterations as it checks every secure sum: one site's cluster sums
    are refused, an iteration's full quorum decrypts to the plain per-cluster counts."""
    agg = env.agg

    def kmeans_round() -> tuple[PlannedRound, np.ndarray, np.ndarray]:
        features = env.fresh()  # a query of its own (non-DP k-means answers each query once)
        x = np.vstack([env.data[s] for s in SITES])[:, env.columns(features)]
        centers = x[[0, len(x) // 2]]
        request = request_to_proto(
            "kmeans",
            KmeansRequest(
                k=2, centers=tuple(centers.ravel()), iterations=2, features=tuple(features)
            ),
            min_owners=3,
        )
        rnd = agg.plan(agg.sign(request), SITES)
        assert rnd.round_id.endswith("-it1") and rnd.spec.WhichOneof("payload") == "kmeans"
        agg.open_at_csp(rnd.round_id, rnd.n_ciphertexts)
        return rnd, x, centers

    rnd, _, _ = kmeans_round()
    up = collect(env, rnd)
    assert_csp_refuses(
        env,
        lambda got: agg.decrypt(rnd.round_id, pairs(up["site-2"]), got),
        grpc.StatusCode.FAILED_PRECONDITION,
        "1 distinct owner share(s), the owners signed a quorum of 3: refused",
        rnd.round_id,
    )
    # control: an honest iteration decrypts to the exact per-cluster counts
    rnd, x, centers = kmeans_round()
    up = collect(env, rnd)
    got = agg.decrypt(rnd.round_id, pairs(*up.values()))
    totals = agg.unmask(got.plaintexts, list(up.values()), rnd)
    nearest = np.argmin(((x[:, None, :] - centers[None, :, :]) ** 2).sum(axis=2), axis=1)
    d = x.shape[1]
    scale = 2**rnd.plan.share_encoding.count_scale_bits
    counts = [totals[j * (d + 1) + d] for j in range(2)]
    assert counts == [int(np.sum(nearest == j)) * scale for j in range(2)]


def test_an_owner_whose_upload_is_refused_says_so_at_once(env: Env):
    """Not an attack on privacy but on liveness: an upload the aggregator refuses is reported
    back as a decline naming the refusal, so an honest round does not wait for its deadline."""
    agg = env.agg
    rnd = honest_round(env, env.fresh(), min_owners=3)
    agg.refuse_uploads.add(rnd.round_id)
    replies = agg.invite(rnd.spec, SITES)
    assert all(r.accepted for r in replies.values())
    end = time.monotonic() + 20
    while set(agg.declines.get(rnd.round_id, {})) != set(SITES):
        assert time.monotonic() < end, agg.declines.get(rnd.round_id)
        time.sleep(0.05)
    for reason in agg.declines[rnd.round_id].values():
        assert reason.startswith("upload refused: FAILED_PRECONDITION: upload to round")


def test_owners_decline_a_round_whose_quorum_is_themselves_alone(env: Env):
    agg = env.agg
    before = ledgers(env)
    for site in SITES:
        # the analyst (the data user, here in league with the aggregator) asks for this owner
        # alone: no request plans a quorum below 2, so the round invites fewer than its quorum
        rnd = honest_round(env, env.fresh(), invited=[site], owners=[site])
        assert_declined(
            env,
            rnd.round_id,
            agg.invite(rnd.spec, [site]),
            "spec:",
            "field 'n_invited' names 1 owner(s), fewer than the quorum of 2",
        )
    # an honest analyst asked for three: the aggregator's quorum of 1 is not what it signed
    rnd = honest_round(env, env.fresh(), min_owners=3)
    spec = relay(rnd, agg, min_owners=1, invited=["site-1"])
    assert_declined(
        env,
        rnd.round_id,
        agg.invite(spec, ["site-1"]),
        "spec:",
        "fewer than the quorum of 3",
    )
    rnd = honest_round(env, env.fresh(), min_owners=3)
    spec = relay(rnd, min_owners=1)
    assert_declined(env, rnd.round_id, agg.invite(spec, ["site-1"]), "spec:", "'min_owners'")
    assert ledgers(env) == before


def test_a_forged_invited_set_or_membership_proof_is_declined(env: Env):
    """The invited set travels as a Merkle root and size with a proof per owner: a proof that
    does not verify, a size the root was not built for, or a root of another set than the
    owners the analyst named is declined before anything is read."""
    agg = env.agg
    before = ledgers(env)
    # a forged sibling in one owner's proof
    rnd = honest_round(env, env.fresh(), min_owners=3)
    spec = rnd.spec_for("site-1")
    spec.membership.siblings[0] = bytes(32)
    assert_declined(env, rnd.round_id, agg.invite(spec, ["site-1"]), "spec:", "does not include")
    # another owner's (valid) proof, and an inflated size with this owner's valid proof
    rnd = honest_round(env, env.fresh(), min_owners=3)
    spec = rnd.spec_for("site-2")
    assert_declined(env, rnd.round_id, agg.invite(spec, ["site-1"]), "spec:", "does not include")
    rnd = honest_round(env, env.fresh(), min_owners=3)
    spec = rnd.spec_for("site-1")
    spec.n_invited += 1  # refused as it is decoded (slots sized for 3); the root binds n too
    reply = agg.invite(spec, ["site-1"])
    assert_declined(env, rnd.round_id, reply, "the encoding's slots", "4 owners are invited")
    # the analyst named site-1..3; the aggregator plans the round for a site of its own added
    # (valid proofs in the larger set, slots sized for it), or for one dropped
    for invited in ([*SITES, "site-x"], ["site-1", "site-2"]):
        rnd = honest_round(env, env.fresh(), invited=invited, owners=SITES, min_owners=2)
        assert_declined(
            env,
            rnd.round_id,
            agg.invite(rnd.spec, ["site-1", "site-2"]),
            "spec:",
            "field 'invited_root' is not the set of owners the analyst's request names",
        )
    assert ledgers(env) == before


def test_csp_refuses_an_invited_list_that_is_not_the_signed_root(env: Env):
    """Every owner signed the root of the invited set; the aggregator hands the CSP the list.
    A list with a site added (one the aggregator could forge a share for) is not that set."""
    agg = env.agg
    rnd = honest_round(env, env.fresh(), min_owners=3)
    agg.open_at_csp(rnd.round_id, rnd.n_ciphertexts)
    up = collect(env, rnd)
    assert_csp_refuses(
        env,
        lambda got: agg.decrypt(rnd.round_id, pairs(*up.values()), got, invited=[*SITES, "site-x"]),
        grpc.StatusCode.FAILED_PRECONDITION,
        "the invited set it signed is not the round's invited set",
        rnd.round_id,
    )


# ------------------------------------------------------------------ 2. replays
# ------------------------------------------------------------------ 2. replays


def test_a_share_signed_for_one_round_is_refused_in_another(env: Env, honest: Honest):
    agg = env.agg
    before = ledgers(env)
    rnd = honest_round(env, env.fresh(), min_owners=3)
    assert rnd.n_ciphertexts == honest.rnd.n_ciphertexts
    agg.open_at_csp(rnd.round_id, rnd.n_ciphertexts)
    up = collect(env, rnd, ["site-1", "site-2"])  # site-3 is never asked
    stale = honest.uploads["site-3"]  # its share of the honest round
    assert_csp_refuses(
        env,
        lambda got: agg.decrypt(rnd.round_id, pairs(up["site-1"], up["site-2"], stale), got),
        grpc.StatusCode.FAILED_PRECONDITION,
        f"share from 'site-3' in round {rnd.round_id} was signed for round "
        f"'{honest.rnd.round_id}': refused (replay)",
        rnd.round_id,
    )
    assert ledgers(env) == before


def test_a_round_is_decrypted_once_even_across_a_csp_restart(env: Env, honest: Honest):
    agg, cluster = env.agg, env.cluster
    round_id = honest.rnd.round_id
    shares = pairs(*honest.uploads.values())

    def again(got: Decrypted) -> None:
        agg.decrypt(round_id, shares, got)

    got = Decrypted()
    with pytest.raises(grpc.RpcError) as err:
        again(got)
    assert err.value.code() == grpc.StatusCode.ALREADY_EXISTS
    assert f"round {round_id} was already decrypted; the {env.party} decrypts once" in (
        err.value.details()
    )
    assert got.plaintexts == []

    for name in env.decryptors:  # same key dir: same key, same record of decrypted rounds
        cluster.kill(name)
        if env.holders:
            cluster.start_keyholder(name)
        else:
            cluster.start_csp()
    cluster.wait_healthy(names=env.decryptors)
    for name in env.decryptors:
        folder = "csp-keys" if name == "csp" else f"{name}-keys"
        log = cluster.workdir / folder / "decrypted-rounds.jsonl"
        assert round_id in {json.loads(line)["round_id"] for line in log.read_text().splitlines()}

    with pytest.raises(grpc.RpcError) as err:
        agg.open_at_csp(round_id, honest.rnd.n_ciphertexts)
    assert err.value.code() == grpc.StatusCode.ALREADY_EXISTS
    assert f"round {round_id} was already used here (decrypted)" in err.value.details()
    got = Decrypted()
    with pytest.raises(grpc.RpcError) as err:
        again(got)
    assert err.value.code() == grpc.StatusCode.NOT_FOUND
    assert f"round {round_id} was never opened at this {env.party}" in err.value.details()
    assert got.plaintexts == []


# ------------------------------------------------------------------ 3. forged owners


def _forger(env: Env, kind: str) -> Signer | None:
    if kind == "aggregator-cert":
        return env.agg.tls.signer()
    if kind == "rogue-ca":  # a certificate for site-2 from another PKI's owners' CA
        return TlsConfig.from_dir(env.rogue, "site-2", "owner").signer()
    return None  # unsigned


@pytest.mark.parametrize("kind", ["aggregator-cert", "rogue-ca", "unsigned"])
def test_csp_refuses_a_share_not_signed_by_an_owner(env: Env, kind: str):
    """One real owner (site-1) and a forged site-2: the aggregator makes site-2's share itself
    (encryptions of zero) so that the sum the CSP decrypts is site-1's share alone."""
    agg = env.agg
    signer = _forger(env, kind)
    before = ledgers(env)
    rnd = honest_round(env, env.pair_columns, invited=["site-1", "site-2"], min_owners=2)
    agg.open_at_csp(rnd.round_id, rnd.n_ciphertexts)
    real = collect(env, rnd, ["site-1"])["site-1"]
    forged = agg.forged_share(real.claims, "site-2", signer)
    phrase = (
        "a share statement is not signed"
        if signer is None
        else "a share statement: the signer's certificate was not issued by the owners' "
        "certificate authority this party trusts"
    )
    assert_csp_refuses(
        env,
        lambda got: agg.decrypt(rnd.round_id, [*pairs(real), forged], got),
        grpc.StatusCode.PERMISSION_DENIED,
        phrase,
        rnd.round_id,
    )
    assert ledgers(env) == before


def test_csp_refuses_ciphertexts_other_than_the_ones_the_owner_signed(env: Env):
    """site-2's real signed statement, with the aggregator's own ciphertexts behind it."""
    agg = env.agg
    before = ledgers(env)
    rnd = honest_round(env, env.pair_columns, invited=["site-1", "site-2"], min_owners=2)
    agg.open_at_csp(rnd.round_id, rnd.n_ciphertexts)
    up = collect(env, rnd, ["site-1", "site-2"])
    _, zeros = agg.forged_share(up["site-2"].claims, "site-2", None)
    assert_csp_refuses(
        env,
        lambda got: agg.decrypt(
            rnd.round_id, [pairs(up["site-1"])[0], (up["site-2"].statement, zeros)], got
        ),
        grpc.StatusCode.FAILED_PRECONDITION,
        "the ciphertexts of the share from 'site-2' do not match the digest its owner signed",
        rnd.round_id,
    )
    assert ledgers(env) == before


def test_csp_refuses_a_projection_of_one_share(env: Env):
    agg = env.agg
    before = ledgers(env)
    rnd = honest_round(env, env.fresh(), min_owners=3, projection_only=True)
    if env.holders:  # no holder takes a projection round at all
        with pytest.raises(grpc.RpcError) as err:
            agg.open_at_csp(rnd.round_id, rnd.n_ciphertexts, mode="projection")
        assert err.value.code() == grpc.StatusCode.FAILED_PRECONDITION
        assert "projection-only rounds need a single CSP" in (err.value.details() or "")
        return
    agg.open_at_csp(rnd.round_id, rnd.n_ciphertexts, mode="projection")
    up = collect(env, rnd, ["site-1"])
    assert rnd.layout is not None
    header = pb.ProjectionRequest(
        round_id=rnd.round_id,
        key_id=agg.public_key().key_id,
        method="pca",
        dimension=D,
        encoding=encoding_to_proto(rnd.plan.share_encoding, rnd.layout),
        n_owners=1,
        components=2,
        mask_sums=[
            m.to_bytes(rnd.layout.mask_bits // 8 + 1, "big")
            for m in masks_from_seed(up["site-1"].header.mask_seed, rnd.n_ciphertexts, rnd.layout)
        ],
    )
    with pytest.raises(grpc.RpcError) as err:
        agg.project(header, pairs(up["site-1"]))
    assert err.value.code() == grpc.StatusCode.FAILED_PRECONDITION
    assert "1 distinct owner share(s), the owners signed a quorum of 3: refused" in (
        err.value.details() or ""
    )
    assert not csp_decrypted(env, rnd.round_id)
    assert ledgers(env) == before


def test_projection_only_round_is_not_decrypted_as_a_blinded_round(env: Env):
    """Owners agreed to a projection-only round: the aggregator should learn directions and
    eigenvalues only. It opens the round at the CSP as a blinded one instead and asks for the
    masked sum, which the mask seeds and its own rotation would turn into the whole aggregate."""
    agg = env.agg
    rnd = honest_round(env, env.fresh(), min_owners=3, projection_only=True)
    assert rnd.plan.reveal == "projection" and rnd.spec.moments.rotation
    agg.open_at_csp(rnd.round_id, rnd.n_ciphertexts, mode="blinded")  # not "projection"
    up = collect(env, rnd)
    got = Decrypted()
    try:
        agg.decrypt(rnd.round_id, pairs(*up.values()), got)
    except grpc.RpcError as exc:
        assert not got.plaintexts and not csp_decrypted(env, rnd.round_id)
        assert exc.code() == grpc.StatusCode.FAILED_PRECONDITION, exc.details()
        assert "was signed for a projection reveal, not blinded: refused" in (exc.details() or "")
        return
    # not refused: show what the aggregator now holds
    enc = rnd.plan.share_encoding
    rotated = moments.decode_totals(
        agg.unmask(got.plaintexts, list(up.values()), rnd), D, [moments.ALL_ROWS], 0
    )
    x = np.vstack([env.data[s] for s in SITES])[:, env.columns(rnd.features)]
    trace = sum(rotated.r[i][i] for i in range(D)) / 2.0**enc.scale_bits
    pytest.fail(
        f"the CSP decrypted projection-only round {rnd.round_id} as a blinded round; unmasked "
        f"with the owners' seeds it gives the row count {rotated.n} (withheld in projection-only "
        f"mode; the data has {len(x)}) and the rotated moments (trace of R {trace:.6g}, the "
        f"data's {float((x**2).sum()):.6g}), which the aggregator's own rotation turns back"
    )


# ------------------------------------------------------------------ 4. subset differencing


def test_the_same_non_dp_query_on_a_subset_is_declined(env: Env, honest: Honest):
    """{site-1, site-2, site-3} answered the honest round; the same query on {site-1, site-2}
    would let the aggregator subtract site-3's statistics."""
    agg = env.agg
    before = ledgers(env)
    features = honest.rnd.features
    subset = ["site-1", "site-2"]
    rnd = honest_round(env, features, invited=subset, owners=subset, min_owners=2)
    assert_declined(
        env,
        rnd.round_id,
        agg.invite(rnd.spec, subset),
        "policy.non_dp_repeats:",
        "another non-DP release of these columns over a different set of owners would exceed "
        "this site's limit of 1 in 30 days",
    )
    # nor can it reuse the analyst's first request for the second job
    again = agg.plan(honest.rnd.signed, SITES)
    assert again.round_id != honest.rnd.round_id
    assert_declined(
        env,
        again.round_id,
        agg.invite(again.spec, subset),
        "authorization:",
        f"replayed authorization: the analyst's request already served job "
        f"{honest.rnd.spec.job_id}",
    )
    assert ledgers(env) == before


# ------------------------------------------------------------------ 5. weaker DP than announced


def test_weaker_dp_is_declined_before_any_budget_is_spent(env: Env):
    agg = env.agg
    before = ledgers(env)

    def dp_round(epsilon: float = EPSILON) -> PlannedRound:
        return honest_round(env, env.fresh(), min_owners=3, dp_epsilon=epsilon)

    # half the noise, the same claimed epsilon
    rnd = dp_round()
    spec = relay(rnd)
    spec.dp.mu = rnd.spec.dp.mu / 2
    assert_declined(
        env,
        rnd.round_id,
        agg.invite(spec, SITES),
        "spec:",
        "field 'dp.mu' differs from the round the analyst's signed request defines",
    )
    # the noise calibrated for 3 shares, the quorum the CSP enforces lowered to 2
    rnd = dp_round()
    assert_declined(
        env,
        rnd.round_id,
        agg.invite(relay(rnd, min_owners=2), SITES),
        "the DP noise is calibrated",
        "for 3 shares but the round's quorum is 2",
    )
    # consistent accounting for a larger epsilon than the analyst signed for
    signed = agg.sign(moments_request(env.fresh(), min_owners=3, dp_epsilon=EPSILON))
    request = pb.RoundRequest.FromString(signed.body)
    request.dp_epsilon = 2 * EPSILON
    rnd = agg.plan(signed, SITES, request=request)
    assert rnd.spec.dp.mu < agg.plan(signed, SITES).spec.dp.mu  # less noise, same accounting
    assert_declined(
        env,
        rnd.round_id,
        agg.invite(rnd.spec, SITES),
        "spec:",
        "'dp.epsilon'",
    )
    # no noise at all for a DP request
    request.ClearField("dp_epsilon")
    request.ClearField("row_norm_bound")
    rnd = agg.plan(signed, SITES, request=request)
    assert not rnd.spec.HasField("dp")
    assert_declined(
        env,
        rnd.round_id,
        agg.invite(rnd.spec, SITES),
        "spec:",
        "'dp' differ",
    )
    assert ledgers(env) == before

    # control: the honest DP round is accepted and charged, so the ledgers above were real
    rnd = dp_round()
    collect(env, rnd)
    for site in SITES:
        doc = json.loads((config_dir(env) / "ledgers" / f"{site}.json").read_text())
        mine = [s for s in doc["spends"] if s["round_id"] == rnd.round_id]
        assert len(mine) == 1 and mine[0]["epsilon"] == EPSILON, doc
        assert {s["round_id"] for s in doc["spends"]} & set(env.declined) == set()


def spend_states(env: Env, round_id: str) -> dict[str, list[str]]:
    """Each owner's ledger entries for this round, by state."""
    out = {}
    for site in SITES:
        path = config_dir(env) / "ledgers" / f"{site}.json"
        spends = json.loads(path.read_text())["spends"] if path.exists() else []
        out[site] = [s["state"] for s in spends if s["round_id"] == round_id]
    return out


def test_a_dp_charge_comes_back_only_if_the_csp_never_decrypted(env: Env):
    """A DP round the CSP refuses (one share sent where the owners signed a quorum of 3): the
    aggregator publishes the failure, every owner asks the CSP to close the round, the CSP
    attests it never decrypted it, and the charge is withdrawn. An aggregator that publishes a
    failure for a round it did decrypt gets no budget back for the owners."""
    agg = env.agg
    rnd = honest_round(env, env.fresh(), min_owners=3, dp_epsilon=EPSILON)
    agg.open_at_csp(rnd.round_id, rnd.n_ciphertexts)
    up = collect(env, rnd)
    wait_sent(env, rnd.round_id, SITES)
    assert spend_states(env, rnd.round_id) == {s: ["committed"] for s in SITES}
    assert_csp_refuses(
        env,
        lambda got: agg.decrypt(rnd.round_id, pairs(up["site-1"]), got),
        grpc.StatusCode.FAILED_PRECONDITION,
        "the owners signed a quorum of 3: refused",
        rnd.round_id,
    )
    agg.publish(rnd.round_id, SITES, "FAILED", "the CSP refused the decryption")
    end = time.monotonic() + 15
    while spend_states(env, rnd.round_id) != {s: ["withdrawn"] for s in SITES}:
        assert time.monotonic() < end, spend_states(env, rnd.round_id)
        time.sleep(0.1)
    for site in SITES:
        events = [e for e in audit(env, site) if e["round_id"] == rnd.round_id]
        withdrawn = [e for e in events if e["event"] == "withdrawn"]
        assert len(withdrawn) == 1 and withdrawn[0]["epsilon"] == EPSILON
        attests = "the key holders attest" if env.holders else "the CSP attests it never decrypted"
        assert attests in withdrawn[0]["reason"], withdrawn[0]["reason"]
    # and the round is closed for good: the aggregator cannot decrypt it with all shares now
    assert_csp_refuses(
        env,
        lambda got: agg.decrypt(rnd.round_id, pairs(*up.values()), got),
        grpc.StatusCode.ALREADY_EXISTS,
        "already decrypted",
        rnd.round_id,
    )

    # a decrypted round reported as failed: the CSP says "decrypted", the charge stays
    rnd = honest_round(env, env.fresh(), min_owners=3, dp_epsilon=EPSILON)
    agg.open_at_csp(rnd.round_id, rnd.n_ciphertexts)
    up = collect(env, rnd)
    wait_sent(env, rnd.round_id, SITES)
    assert len(agg.decrypt(rnd.round_id, pairs(*up.values())).plaintexts) == rnd.n_ciphertexts
    agg.publish(rnd.round_id, SITES, "FAILED", "a lie")
    end = time.monotonic() + 15
    for site in SITES:  # every owner has processed the published failure
        while not any(
            e["event"] == "result" and e["round_id"] == rnd.round_id for e in audit(env, site)
        ):
            assert time.monotonic() < end
            time.sleep(0.05)
    time.sleep(1.0)  # the withdrawal runs in the background: give it time to (wrongly) act
    assert spend_states(env, rnd.round_id) == {s: ["committed"] for s in SITES}


# ------------------------------------------------------------------ 6. columns and protocols


def test_columns_protocols_and_unsigned_columns_are_declined(env: Env):
    agg = env.agg
    before = ledgers(env)
    features = [*env.fresh()[:-1], env.forbidden]
    rnd = honest_round(env, features, min_owners=3)
    assert_declined(
        env,
        rnd.round_id,
        agg.invite(rnd.spec, SITES),
        "policy.columns:",
        f"column '{env.forbidden}' may not be used",
    )

    signed = agg.sign(
        request_to_proto(
            "weighted_stats", WeightedStatsRequest(features=tuple(env.fresh())), min_owners=3
        )
    )
    rnd = agg.plan(signed, SITES)
    assert_declined(
        env,
        rnd.round_id,
        agg.invite(rnd.spec, SITES),
        "policy.protocols:",
        "this site does not take part in weighted_stats rounds",
    )

    # the analyst signed for one set of columns; the aggregator plans (and asks for) another
    asked = env.fresh()
    taken = next(c for c in env.fresh() if c not in asked)
    signed = agg.sign(moments_request(asked, min_owners=3))
    rnd = agg.plan(signed, SITES, request=moments_request([*asked[:-1], taken], min_owners=3))
    assert_declined(
        env,
        rnd.round_id,
        agg.invite(rnd.spec, SITES),
        "spec:",
        "field 'moments.features' differs",
    )
    assert ledgers(env) == before


# ------------------------------------------------------------------ 7. who may ask


def test_only_a_listed_analyst_with_a_valid_signature_may_ask(env: Env):
    agg = env.agg
    before = ledgers(env)
    features = env.fresh()
    not_ours = (
        "the round request: the signer's certificate was not issued by the analysts' "
        "certificate authority this party trusts"
    )
    unsigned = moments_request(features)
    unsigned.nonce, unsigned.issued_unix = "0" * 32, time.time()
    tampered = agg.sign(moments_request(features, min_owners=3))
    changed = pb.RoundRequest.FromString(tampered.body)
    changed.min_owners = 2  # what the aggregator would like the analyst to have asked
    tampered.body = changed.SerializeToString(deterministic=True)
    rogue = TlsConfig.from_dir(env.rogue, "analyst", "analyst").signer()
    cases: list[tuple[pb.Signed | None, str, str]] = [
        # a valid analyst certificate, but not an analyst these owners answer
        (
            agg.sign(moments_request(features), env.second_analyst),
            "policy.analysts:",
            "analyst 'analyst-2' may not start rounds that include this site",
        ),
        (
            pb.Signed(body=unsigned.SerializeToString(deterministic=True)),
            "authorization:",
            "the round request is not signed",
        ),
        (agg.sign(moments_request(features), agg.tls.signer()), "authorization:", not_ours),
        (agg.sign(moments_request(features), rogue), "authorization:", not_ours),
        (None, "authorization:", "the round carries no round request from an analyst"),
        (
            tampered,
            "authorization:",
            "the round request: the signature does not match its content",
        ),
    ]
    for signed, prefix, phrase in cases:
        rnd = agg.plan(signed, SITES, request=moments_request(features))
        assert rnd.spec.HasField("authorization") == (signed is not None)
        assert_declined(env, rnd.round_id, agg.invite(rnd.spec, SITES), prefix, phrase)
    assert ledgers(env) == before


# ------------------------------------------------------------------ what the owners' logs say


def test_owner_audit_command_lists_every_refusal_and_no_upload(env: Env):
    """The site's own record (`leteo-fed owner audit --json`) of every round it declined in
    this module: declined, nothing sent, nothing charged; and still nothing at the aggregator."""
    if not env.declined:
        pytest.skip("no declined round in this run")
    for site in SITES:
        proc = subprocess.run(
            [
                sys.executable,
                "-m",
                "leteo_fed",
                "owner",
                "audit",
                "--config",
                str(config_dir(env) / f"{site}.toml"),
                "--json",
            ],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert proc.returncode == 0, proc.stderr
        events = [json.loads(line) for line in proc.stdout.splitlines() if line.strip()]
        for round_id, asked in env.declined.items():
            assert env.agg.received(round_id) == set()
            if site not in asked:
                continue
            mine = [e for e in events if e["round_id"] == round_id]
            assert [e["accepted"] for e in mine if e["event"] == "decision"] == [False]
            assert not [e for e in mine if e["event"] in ("sent", "failed")]
        ledger = config_dir(env) / "ledgers" / f"{site}.json"
        if ledger.exists():
            spent = {s["round_id"] for s in json.loads(ledger.read_text())["spends"]}
            assert not spent & set(env.declined)
