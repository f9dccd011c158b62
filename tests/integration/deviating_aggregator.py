"""An aggregator the test drives by hand, to deviate from the protocol on purpose.

It serves the Aggregator service on the real aggregator's address with the real aggregator's
certificate, so the owner agents and the CSP (real processes) cannot tell it from the real one.
It records what owners send (registrations, shares with their headers and ciphertexts,
declines) and gives the test the moves a malicious aggregator has: plan rounds with the real
planning code and change the spec before inviting, invite any subset of owners, open rounds at
the CSP and ask it to decrypt or project any combination of signed statements and ciphertexts.

In a threshold deployment (`LocalCluster(keyholders=...)`) the same moves go to every key
holder (`HolderQuorum`): a refusal all of them make is the refusal the test sees, and t valid
partial decryptions are combined as the real aggregator combines them.
"""

from __future__ import annotations

import json
import secrets
import threading
import time
import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import grpc
from gmpy2 import mpz

from csp.decrypt_log import FILE_NAME as DECRYPT_LOG
from leteo_fed.crypto import threshold
from leteo_fed.crypto.paillier import Encryptor, PublicKey, bytes_to_int, int_to_bytes
from leteo_fed.demo.cluster import LocalCluster
from leteo_fed.encoding.packing import (
    SlotLayout,
    masks_from_seed,
    remove_masks,
    slot_totals,
    unpack,
)
from leteo_fed.errors import ProtocolError
from leteo_fed.proto import leteo_pb2 as pb
from leteo_fed.proto import leteo_pb2_grpc as pb_grpc
from leteo_fed.protocols.interface import FederatedProtocol
from leteo_fed.protocols.round_types import RoundPlan
from leteo_fed.transport import membership
from leteo_fed.transport.grpc_io import make_server, require_role, rpc_method
from leteo_fed.transport.messages import (
    batches,
    proof_from_proto,
    public_key_from_proto,
    threshold_key_from_proto,
)
from leteo_fed.transport.rounds import (
    common_from_proto,
    member_copy,
    request_from_proto,
    spec_to_proto,
)
from leteo_fed.transport.signing import ROUND_REQUEST, SHARE_STATEMENT, Signer
from leteo_fed.transport.statements import ciphertext_digest

TIMEOUT = 30.0


@dataclass
class Upload:
    """One owner's share as it reached the aggregator."""

    header: pb.ShareHeader
    ciphertexts: list[int]

    @property
    def statement(self) -> pb.Signed:
        return self.header.statement

    @property
    def claims(self) -> pb.ShareStatement:
        return pb.ShareStatement.FromString(self.header.statement.body)


@dataclass
class PlannedRound:
    """A round planned with the real planning code; `spec` is what owners would receive from
    an honest aggregator (the test may change it before inviting)."""

    round_id: str
    protocol: FederatedProtocol
    plan: RoundPlan
    layout: SlotLayout | None
    spec: pb.RoundSpec  # the spec every owner shares (no membership proof)
    signed: pb.Signed | None  # the analyst's signed request the spec relays
    invited: list[str] = field(default_factory=list)  # sorted: the set the spec's root names

    def spec_for(self, site: str) -> pb.RoundSpec:
        """`site`'s copy of the spec: the shared spec with its membership proof."""
        return member_copy(self.spec, self.invited, site)

    @property
    def n_ciphertexts(self) -> int:
        return self.spec.n_ciphertexts

    @property
    def features(self) -> list[str]:
        return list(self.spec.moments.features)


@dataclass
class Decrypted:
    """What came back from the CSP for one decryption request."""

    plaintexts: list[int] = field(default_factory=list)
    contributors: list[str] = field(default_factory=list)


class DeviatingAggregator(pb_grpc.AggregatorServicer):
    def __init__(self, cluster: LocalCluster) -> None:
        self.cluster = cluster
        self.tls = cluster.tls("aggregator", "aggregator")
        self.analyst: Signer = _signer(cluster.tls("analyst", "analyst").signer())
        self._cond = threading.Condition()
        self.owners: dict[str, str] = {}  # site -> address, as registered
        self.uploads: dict[str, dict[str, Upload]] = {}  # round -> site -> upload
        self.declines: dict[str, dict[str, str]] = {}  # round -> site -> reason (Decline RPC)
        self.refuse_uploads: set[str] = set()  # rounds whose uploads SubmitShare refuses
        self.reports: dict[str, set[str]] = {}  # round -> sites that sent LDP reports
        self._stubs: dict[str, pb_grpc.OwnerAgentStub] = {}
        self._channels: list[grpc.Channel] = []
        self.server, _ = make_server(self.tls, cluster.addresses["aggregator"], workers=16)
        pb_grpc.add_AggregatorServicer_to_server(self, self.server)
        self.server.start()
        self.csp: pb_grpc.CryptoServiceProviderStub | HolderQuorum
        if cluster.keyholders:
            stubs = {}
            for name in cluster.keyholder_names:
                channel = self.tls.channel(cluster.addresses[name], peer="keyholder")
                self._channels.append(channel)
                stubs[name] = pb_grpc.KeyHolderStub(channel)
            self.csp = HolderQuorum(stubs)
        else:
            csp_channel = self.tls.channel(cluster.addresses["csp"], peer="csp")
            self._channels.append(csp_channel)
            self.csp = pb_grpc.CryptoServiceProviderStub(csp_channel)
        self._public: PublicKey | None = None
        self.invited_of: dict[str, list[str]] = {}  # round -> the invited set it was planned for
        self.sets: dict[bytes, list[str]] = {}  # Merkle root -> the invited set it names

    def decrypted(self, round_id: str) -> bool:
        """Whether the round was decrypted: the CSP's transcript records it (the cluster keeps
        one), or, with key holders, any holder's decrypt-once log says it opened it."""
        cluster = self.cluster
        if cluster.keyholders:
            logs = [cluster.workdir / f"{n}-keys" / DECRYPT_LOG for n in cluster.keyholder_names]
            wanted = ("decrypted",)
        else:
            logs, wanted = [cluster.workdir / "csp-transcript.jsonl"], ()
        for path in logs:
            lines = path.read_text().splitlines() if path.exists() else []
            for record in (json.loads(line) for line in lines if line.strip()):
                if record["round_id"] == round_id and (not wanted or record["state"] in wanted):
                    return True
        return False

    def close(self) -> None:
        self.server.stop(0)
        for channel in self._channels:
            channel.close()

    # ------------------------------------------------------------------ the Aggregator service

    @rpc_method
    def Health(self, request, context):
        return pb.HealthReply(party="aggregator", role="aggregator", status="SERVING")

    @rpc_method
    def RegisterOwner(self, request, context):
        caller = require_role(context, "owner")
        with self._cond:
            self.owners[caller.name] = request.address
            self._cond.notify_all()
        return pb.Ack(ok=True)

    @rpc_method
    def SubmitShare(self, request_iterator, context):
        caller = require_role(context, "owner")
        first = next(request_iterator)
        header = first.header
        if header.round_id in self.refuse_uploads:
            raise ProtocolError(f"upload to round {header.round_id} refused by the test")
        ciphertexts = [bytes_to_int(c) for msg in request_iterator for c in msg.batch.ciphertexts]
        with self._cond:
            self.uploads.setdefault(header.round_id, {})[caller.name] = Upload(header, ciphertexts)
            self._cond.notify_all()
        return pb.Ack(ok=True)

    @rpc_method
    def SubmitReports(self, request_iterator, context):
        caller = require_role(context, "owner")
        first = next(request_iterator)
        for _ in request_iterator:
            pass
        with self._cond:
            self.reports.setdefault(first.header.round_id, set()).add(caller.name)
            self._cond.notify_all()
        return pb.Ack(ok=True)

    @rpc_method
    def Decline(self, request, context):
        caller = require_role(context, "owner")
        with self._cond:
            self.declines.setdefault(request.round_id, {})[caller.name] = request.reason
            self._cond.notify_all()
        return pb.Ack(ok=True)

    # ------------------------------------------------------------------ what it received

    def wait_for_owners(self, sites: Iterable[str], timeout: float = 60.0) -> None:
        wanted = set(sites)
        with self._cond:
            if not self._cond.wait_for(lambda: wanted <= set(self.owners), timeout):
                raise TimeoutError(f"owners registered: {sorted(self.owners)}, wanted {wanted}")

    def wait_uploads(
        self, round_id: str, sites: Iterable[str], timeout: float = TIMEOUT
    ) -> dict[str, Upload]:
        wanted = set(sites)

        def arrived() -> bool:
            failed = set(self.declines.get(round_id, {})) & wanted
            if failed:
                raise AssertionError(f"round {round_id}: declined {self.declines[round_id]}")
            return wanted <= set(self.uploads.get(round_id, {}))

        with self._cond:
            if not self._cond.wait_for(arrived, timeout):
                got = sorted(self.uploads.get(round_id, {}))
                raise TimeoutError(f"round {round_id}: shares from {got}, wanted {sorted(wanted)}")
            return dict(self.uploads[round_id])

    def received(self, round_id: str) -> set[str]:
        """Every site that sent anything (a share or reports) for this round."""
        with self._cond:
            return set(self.uploads.get(round_id, {})) | self.reports.get(round_id, set())

    # ------------------------------------------------------------------ planning and inviting

    def public_key(self) -> PublicKey:
        if self._public is None:
            msg = self.csp.GetPublicKey(pb.PublicKeyRequest(), timeout=TIMEOUT, wait_for_ready=True)
            self._public = public_key_from_proto(msg)
        return self._public

    def sign(self, request: pb.RoundRequest, signer: Signer | None = None) -> pb.Signed:
        """The analyst's signed request, as `AnalystClient._start` makes it (fresh nonce and
        time of signing)."""
        request.nonce = secrets.token_hex(16)
        request.issued_unix = time.time()
        body = request.SerializeToString(deterministic=True)
        return (signer or self.analyst).sign(body, ROUND_REQUEST)

    def plan(
        self,
        signed: pb.Signed | None,
        invited: Sequence[str],
        request: pb.RoundRequest | None = None,
    ) -> PlannedRound:
        """Plan a round the way the real engine does (`JobLoop.start`, `RoundLifecycle.open`
        and `invite_all`): from `request` (default: the signed one), relaying `signed` (None:
        no authorization at all)."""
        if request is None:
            assert signed is not None, "plan from a request or a signed request"
            request = pb.RoundRequest.FromString(signed.body)
        protocol, payload = request_from_proto(request)
        job_plan: Any = protocol.plan(payload, common_from_proto(request, len(invited)))
        job_id = f"{job_plan.label}-{uuid.uuid4().hex[:12]}"
        members = sorted(set(invited))
        state = protocol.start(job_plan, job_id, list(invited))
        plan = protocol.next_round(job_plan, state, 1)
        round_id = f"{job_id}-it1" if protocol.multi_round else job_id
        layout = None
        key_id = ""
        if plan.encoding is not None:
            layout = plan.encoding.layout(self.public_key().bits)
            key_id = self.public_key().key_id
        spec = spec_to_proto(
            round_id,
            protocol,
            plan,
            key_id,
            time.time() + job_plan.deadline_seconds,
            layout,
            job_plan.min_owners,
            job_id,
            signed,
            membership.root(members),
            len(members),
        )
        self.invited_of.setdefault(round_id, members)
        self.sets[spec.invited_root] = members
        return PlannedRound(round_id, protocol, plan, layout, spec, signed, members)

    def _owner(self, site: str) -> pb_grpc.OwnerAgentStub:
        if site not in self._stubs:
            channel = self.tls.channel(self.owners[site], peer="owner")
            self._channels.append(channel)
            self._stubs[site] = pb_grpc.OwnerAgentStub(channel)
        return self._stubs[site]

    def invite(self, spec: pb.RoundSpec, sites: Iterable[str]) -> dict[str, pb.InviteReply]:
        """Send `spec` to each of `sites` (whoever the spec says is invited). A spec without a
        membership proof gets each site's proof in the set its root names (as an honest
        aggregator adds it); a site outside that set, or a root of no planned set, gets none."""
        return {
            site: self._owner(site).Invite(self._proved(spec, site), timeout=TIMEOUT)
            for site in sites
        }

    def _proved(self, spec: pb.RoundSpec, site: str) -> pb.RoundSpec:
        members = self.sets.get(spec.invited_root, [])
        if spec.HasField("membership") or site not in members:
            return spec
        return member_copy(spec, members, site)

    def publish(self, round_id: str, sites: Iterable[str], state: str, message: str = "") -> None:
        """Tell the owners how a round ended (true or not)."""
        status = pb.RoundStatus(round_id=round_id, state=state, message=message)
        for site in sites:
            self._owner(site).PublishResult(status, timeout=TIMEOUT)

    # ------------------------------------------------------------------ talking to the CSP

    def open_at_csp(self, round_id: str, n_ciphertexts: int, mode: str = "blinded") -> None:
        self.csp.OpenRound(
            pb.CspRoundRequest(
                round_id=round_id,
                key_id=self.public_key().key_id,
                n_ciphertexts=n_ciphertexts,
                mode=mode,
            ),
            timeout=TIMEOUT,
            wait_for_ready=True,
        )

    def _shares(self, parts: Sequence[tuple[pb.Signed, Sequence[int]]], chunk_type):
        width = self.public_key().ciphertext_bytes
        for statement, ciphertexts in parts:
            yield chunk_type(share=statement)
            for chunk in batches(list(ciphertexts), width):
                yield chunk_type(batch=pb.CiphertextBatch(ciphertexts=chunk))

    def decrypt(
        self,
        round_id: str,
        parts: Sequence[tuple[pb.Signed, Sequence[int]]],
        received: Decrypted | None = None,
        invited: Sequence[str] | None = None,
    ) -> Decrypted:
        """DecryptBlinded with these (statement, ciphertexts) pairs and the invited list
        `invited` (default: the set the round was planned for). Whatever the CSP streams
        back is collected into `received` before an error surfaces, so a test can show that
        nothing came back."""
        out = received if received is not None else Decrypted()
        listed = self.invited_of.get(round_id, []) if invited is None else invited
        header = pb.CspRoundRequest(
            round_id=round_id, key_id=self.public_key().key_id, invited=list(listed)
        )

        def requests():
            yield pb.DecryptChunk(header=header)
            yield from self._shares(parts, pb.DecryptChunk)

        for batch in self.csp.DecryptBlinded(requests(), timeout=TIMEOUT, wait_for_ready=True):
            out.plaintexts.extend(bytes_to_int(p) for p in batch.plaintexts)
            out.contributors = list(batch.contributors)
        return out

    def project(
        self, head: pb.ProjectionRequest, parts: Sequence[tuple[pb.Signed, Sequence[int]]]
    ) -> pb.ProjectionResult:
        header = head
        if not header.invited:  # the set the round was planned for, as an honest aggregator
            header = pb.ProjectionRequest()
            header.CopyFrom(head)
            header.invited.extend(self.invited_of.get(head.round_id, []))

        def requests():
            yield pb.ProjectionChunk(header=header)
            yield from self._shares(parts, pb.ProjectionChunk)

        return self.csp.ComputeProjection(requests(), timeout=TIMEOUT, wait_for_ready=True)

    def unmask(
        self, plaintexts: Sequence[int], uploads: Sequence[Upload], rnd: PlannedRound
    ) -> list[int]:
        """The aggregator's honest last step: remove the owners' masks, unpack the slots."""
        assert rnd.layout is not None
        mask_sums = [0] * len(plaintexts)
        for upload in uploads:
            own = masks_from_seed(upload.header.mask_seed, len(plaintexts), rnd.layout)
            mask_sums = [a + b for a, b in zip(mask_sums, own, strict=True)]
        packed = remove_masks(plaintexts, mask_sums, rnd.layout)
        return slot_totals(unpack(packed, rnd.plan.n_values, rnd.layout), len(uploads), rnd.layout)

    # ------------------------------------------------------------------ forgeries

    def forged_share(
        self, like: pb.ShareStatement, site_id: str, signer: Signer | None
    ) -> tuple[pb.Signed, list[int]]:
        """A share the aggregator makes itself (encryptions of zero) for `site_id`, with a
        statement copying `like` (same round, invited set, quorum), signed by `signer` (None:
        unsigned)."""
        public = self.public_key()
        ciphertexts = Encryptor(public).encrypt_many([0] * like.n_ciphertexts)
        statement = pb.ShareStatement()
        statement.CopyFrom(like)
        statement.site_id = site_id
        statement.ciphertext_digest = ciphertext_digest(ciphertexts, public.ciphertext_bytes)
        body = statement.SerializeToString(deterministic=True)
        if signer is None:
            return pb.Signed(body=body), ciphertexts
        return signer.sign(body, SHARE_STATEMENT), ciphertexts


class HolderQuorum:
    """Every key holder of a threshold deployment behind the CSP stub's calls, as this test's
    aggregator makes them. A call goes to every holder; a refusal every holder makes is raised
    as the first holder's RpcError (the holders run the CSP's checks, so they refuse alike);
    holders that disagree fail the test. DecryptBlinded checks each holder's proof against the
    product of the relayed shares and combines t valid partial decryptions."""

    def __init__(self, stubs: dict[str, pb_grpc.KeyHolderStub]) -> None:
        self.stubs = stubs

    def _each(self, call) -> list[tuple[str, Any]]:
        """(holder, its answer or its RpcError) for every holder."""
        out = []
        for name, stub in self.stubs.items():
            try:
                out.append((name, call(stub)))
            except grpc.RpcError as exc:
                out.append((name, exc))
        return out

    def _alike(self, answers: list[tuple[str, Any]]) -> list[tuple[str, Any]]:
        errors = [a for _, a in answers if isinstance(a, grpc.RpcError)]
        if errors and len(errors) == len(answers):
            raise errors[0]
        if errors:
            said = {n: (a.code(), a.details()) for n, a in answers if isinstance(a, grpc.RpcError)}
            raise AssertionError(f"the key holders disagree: some refused, some did not: {said}")
        return answers

    def GetPublicKey(self, request, **kw) -> pb.PublicKey:
        return self._alike(self._each(lambda stub: stub.GetPublicKey(request, **kw)))[0][1]

    def OpenRound(self, request, **kw) -> pb.Ack:
        self._alike(self._each(lambda stub: stub.OpenRound(request, **kw)))
        return pb.Ack(ok=True)

    def DecryptBlinded(self, request_iterator, **kw):
        requests = list(request_iterator)
        header = requests[0].header
        answers = self._alike(
            self._each(lambda stub: list(stub.PartialDecrypt(iter(requests), **kw)))
        )
        key, _ = threshold_key_from_proto(self.GetPublicKey(pb.PublicKeyRequest(), **kw))
        product = _product(key.public, requests[1:])
        context = threshold.proof_context(header.round_id, header.key_id)
        partials = {}
        for name, replies in answers:
            values = [bytes_to_int(p) for r in replies for p in r.partials]
            proof = proof_from_proto(replies[-1])
            index = replies[-1].index
            assert threshold.verify(key, index, product, values, proof, context), name
            partials[index] = values
        plaintexts = threshold.combine(key, partials)
        width = key.public.plaintext_bytes
        yield pb.PlaintextBatch(
            plaintexts=[int_to_bytes(p, width) for p in plaintexts],
            contributors=list(answers[0][1][-1].contributors),
        )

    def ComputeProjection(self, request_iterator, **kw):
        raise AssertionError("key holders project nothing: open such a round to see it refused")


def _product(public: PublicKey, chunks: Sequence[pb.DecryptChunk]) -> list[int]:
    """The coordinate-wise product of the relayed shares' ciphertexts (what a holder sums)."""
    n2 = mpz(public.n_square)
    product: list[mpz] = []
    position = 0
    for chunk in chunks:
        if chunk.WhichOneof("part") == "share":
            position = 0
            continue
        for raw in chunk.batch.ciphertexts:
            if position == len(product):
                product.append(mpz(1))
            product[position] = product[position] * bytes_to_int(raw) % n2
            position += 1
    return [int(x) for x in product]


def _signer(signer: Signer | None) -> Signer:
    if signer is None:
        raise AssertionError("the malicious-aggregator tests need TLS (signed messages)")
    return signer
