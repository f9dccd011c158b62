"""The one secure-sum path every Paillier protocol uses.

open at the CSP -> collect the owners' signed, owner-masked shares -> the CSP verifies and sums
them and decrypts the sum -> remove the owners' masks (from their seeds) -> totals.

The aggregator sees ciphertexts, the owners' mask seeds and the totals; the CSP sees each share
only masked and decrypts only masked sums (in projection-only mode it is given the total of the
masks and sees the rotated aggregate, never the rotation). The aggregator cannot have the CSP
decrypt anything but the sum of a quorum of signed shares.

With a threshold key, t of m key holders take the CSP's place (`threshold_sum`); the intake
(`SignedShares`) is the same, it reveals through whichever `reveal.Revealer` it was given.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path

import grpc

from aggregator.rounds.reveal import (
    REFUSALS,
    Revealer,
    Share,
    mask_sums,
    rpc_failure,
    same_contributors,
    share_stream,
)
from leteo_fed import defaults
from leteo_fed.crypto.paillier import PublicKey, bytes_to_int, check_ciphertexts, int_to_bytes
from leteo_fed.encoding.packing import SlotLayout, masks_from_seed
from leteo_fed.encoding.share import ShareEncoding
from leteo_fed.errors import DataError, PeerUnavailable, ProtocolError
from leteo_fed.proto import leteo_pb2 as pb
from leteo_fed.protocols.dp_facts import encoding_facts
from leteo_fed.protocols.round_types import Outcome, ProjectionQuery, ProjectionReply
from leteo_fed.transport.grpc_io import rpc_error_message
from leteo_fed.transport.messages import encoding_to_proto, fetch_public_key
from leteo_fed.transport.statements import RoundShares, check_digest, read_statement


class SignedShares:
    """A round's intake of encrypted shares: checked on arrival, relayed to the CSP at reveal
    (a `RoundIntake`, `aggregator.rounds.intake`)."""

    def __init__(
        self,
        public: PublicKey,
        layout: SlotLayout,
        n_values: int,
        round_id: str,
        reveal: str,
        owners_ca: bytes | None,
        invited: list[str],
        csp: Revealer,
        projection_query: Callable[[int], ProjectionQuery],
    ) -> None:
        """`csp`: where the shares are revealed (a CSP or key holders); `projection_query`: what a projection round
        asks the CSP for, given the number of shares."""
        self.public = public
        self.layout = layout
        self.n_ciphertexts = layout.n_ciphertexts(n_values)
        self._owners_ca = owners_ca
        self._csp = csp
        self._projection_query = projection_query
        self._check = RoundShares(
            round_id, public.key_id, self.n_ciphertexts, reveal, sorted(invited)
        )
        self._shares: dict[str, Share] = {}
        self._lock = threading.Lock()
        self.intake_seconds = 0.0  # summed over the received shares: wall clock, this thread's CPU
        self.intake_cpu_seconds = 0.0

    def receive(
        self, site: str, header: pb.ShareHeader, request_iterator, rnd_view: tuple
    ) -> Share:
        """A complete upload, refused early unless the CSP would accept it: signed by `site`,
        for this round as the aggregator announced it (invited, quorum, protocol), with the
        ciphertexts its owner signed and a mask seed."""
        start, cpu = time.perf_counter(), time.thread_time()
        invited, quorum, label = rnd_view
        claims = read_statement(header.statement, self._owners_ca)
        if claims.site_id != site:
            raise ProtocolError(f"owner '{site}' sent a statement for '{claims.site_id}'")
        announced = (self._check.invited_root, len(invited), quorum, label)
        signed = (claims.invited_root, claims.n_invited, claims.quorum, claims.protocol)
        if signed != announced:
            raise ProtocolError(
                f"the share statement of '{site}' does not describe this round (invited owners, "
                "quorum or protocol differ)"
            )
        with self._lock:
            self._check.check(claims)
        ciphertexts = self.read(request_iterator)
        check_digest(claims, ciphertexts, self.public.ciphertext_bytes)
        masks_from_seed(header.mask_seed, 0, self.layout)  # refuses a too-short seed
        with self._lock:
            self.intake_seconds += time.perf_counter() - start
            self.intake_cpu_seconds += time.thread_time() - cpu
        return Share(site, header.statement, claims, header.mask_seed, ciphertexts)

    def read(self, request_iterator) -> list[int]:
        """The rest of an upload stream: exactly `n_ciphertexts` valid ciphertexts."""
        expected = self.n_ciphertexts
        ciphertexts: list[int] = []
        for msg in request_iterator:
            if msg.WhichOneof("part") != "batch":
                raise ProtocolError("only ciphertext batches may follow the share header")
            batch = [bytes_to_int(raw) for raw in msg.batch.ciphertexts]
            check_ciphertexts(self.public.n, batch)
            ciphertexts.extend(batch)
            if len(ciphertexts) > expected:
                raise DataError(f"share has more than the {expected} ciphertexts it declared")
        if len(ciphertexts) != expected:
            raise ProtocolError(
                f"incomplete share: {len(ciphertexts)} of {expected} ciphertexts arrived"
            )
        return ciphertexts

    def fold(self, share: Share) -> None:
        """Keep a received share until the reveal (the CSP, not we, sums them)."""
        with self._lock:
            self._check.admit(share.claims)
            self._shares[share.site] = share

    def take(self) -> list[Share]:
        """The shares, once: nothing of them outlives the round."""
        with self._lock:
            shares, self._shares = list(self._shares.values()), {}
        if not shares:
            raise ProtocolError("no share was received")
        return shares

    @property
    def key_id(self) -> str:
        return self.public.key_id

    def reveal(self, outcome: Outcome) -> None:
        """The CSP verifies and sums the shares: the round's totals, or in projection mode the
        directions of the rotated aggregate."""
        plan = outcome.plan
        shares = self.take()
        n = len(shares)
        outcome.timings["intake_seconds_per_share"] = self.intake_seconds / n
        outcome.timings["intake_cpu_seconds_per_share"] = self.intake_cpu_seconds / n
        enc = plan.share_encoding
        outcome.encoding = encoding_facts(enc, self.layout, plan.n_values, self.public.bits)
        if plan.reveal == "projection":
            outcome.projection = self._csp.project(
                outcome.round_id,
                self.public,
                shares,
                self._projection_query(n),
                enc,
                self.layout,
                outcome.timings,
                outcome.invited,
            )
            outcome.csp = {"compute_seconds": outcome.projection.compute_seconds}
        else:
            outcome.totals, outcome.csp = self._csp.reveal(
                outcome.round_id,
                self.public,
                shares,
                plan.n_values,
                self.layout,
                outcome.timings,
                outcome.invited,
            )

    def cleanup(self) -> None:
        """Nothing to delete: a revealed round's shares were taken (`take`), a failed round's
        are never relayed."""


class SecureSum(Revealer):
    """The aggregator's side of the CSP: key, round announcements, decryption of blinded sums."""

    def __init__(self, channel: grpc.Channel, address: str, transcript: Path | None) -> None:
        from leteo_fed.proto import leteo_pb2_grpc as pb_grpc

        super().__init__(transcript)
        self._channel = channel
        self._csp = pb_grpc.CryptoServiceProviderStub(channel)
        self._address = address
        self._keys: dict[str, PublicKey] = {}  # the CSP's keys seen so far, by key id

    def close(self) -> None:
        self._channel.close()

    def _ready(self, what: str) -> None:
        """Wait (briefly) for the channel to the CSP: a CSP that just restarted is found, one that
        is down fails the round now rather than after the whole decryption timeout."""
        try:
            grpc.channel_ready_future(self._channel).result(
                timeout=defaults.CSP_OPEN_TIMEOUT_SECONDS
            )
        except grpc.FutureTimeoutError as exc:
            raise PeerUnavailable(
                f"{what} failed: the CSP at {self._address} is unreachable"
            ) from exc

    def public_key(self, key_id: str = "") -> PublicKey:
        """The CSP's current key, asked for at every round opening (one small RPC) so a key
        rotation at the CSP takes effect with the next round; with `key_id`, that key. A round
        keeps the key it was opened with (`SignedShares.public`) to the end."""
        if key_id:
            with self._lock:
                known = self._keys.get(key_id)
            if known is not None:
                return known
        public = fetch_public_key(self._csp, self._address, key_id)
        with self._lock:
            return self._keys.setdefault(public.key_id, public)

    def open(self, round_id: str, key_id: str, n_ciphertexts: int, mode: str) -> None:
        """Announce a round, the key its shares are encrypted under and its ciphertext count
        to the CSP."""
        self.check_mode(mode)
        try:
            self._csp.OpenRound(
                pb.CspRoundRequest(
                    round_id=round_id,
                    key_id=key_id,
                    n_ciphertexts=n_ciphertexts,
                    mode=mode,
                ),
                timeout=defaults.CSP_OPEN_TIMEOUT_SECONDS,
                wait_for_ready=True,  # ride over a reconnect (e.g. a CSP that just restarted)
            )
        except grpc.RpcError as exc:
            if exc.code() in REFUSALS:  # the CSP is up and said no: not an outage
                raise ProtocolError(
                    f"the CSP refused to open the round: {rpc_error_message(exc)}"
                ) from exc
            raise PeerUnavailable(
                f"the CSP refused to open the round: {rpc_error_message(exc)}"
            ) from exc

    def reveal(
        self,
        round_id: str,
        public: PublicKey,
        shares: list[Share],
        n_values: int,
        layout: SlotLayout,
        timings: dict[str, float],
        invited: list[str],
    ) -> tuple[list[int], dict[str, float]]:
        """The CSP verifies, sums and decrypts; we remove the owners' masks: (signed integer
        totals, the CSP's timings)."""
        start = time.perf_counter()
        replies = self._stream(
            self._csp.DecryptBlinded,
            pb.DecryptChunk,
            pb.CspRoundRequest(
                round_id=round_id,
                key_id=public.key_id,
                n_ciphertexts=layout.n_ciphertexts(n_values),
                invited=sorted(invited),  # the CSP checks it against every signed root
            ),
            shares,
            public.ciphertext_bytes,
            "CSP decryption",
        )
        plaintexts: list[int] = []
        last = pb.PlaintextBatch()
        for reply in replies:
            plaintexts.extend(bytes_to_int(p) for p in reply.plaintexts)
            last = reply
        timings["csp_round_trip_seconds"] = time.perf_counter() - start
        if len(plaintexts) != layout.n_ciphertexts(n_values):
            raise ProtocolError(f"the CSP returned {len(plaintexts)} plaintexts")
        _check_contributors(last.contributors, shares)
        totals = self.unmask(round_id, plaintexts, shares, n_values, layout, timings)
        csp = {
            "decrypt_seconds": last.decrypt_seconds,
            "verify_seconds": last.verify_seconds,
            "sum_seconds": last.sum_seconds,
        }
        return totals, csp

    def _stream(self, rpc, chunk_type, header, shares: list[Share], width: int, what: str):
        """Header, then every share's signed statement and ciphertexts, as the CSP reads them."""
        try:
            self._ready(what)
            reply = rpc(
                share_stream(chunk_type, header, shares, width),
                timeout=defaults.CSP_TIMEOUT_SECONDS,
            )
            return list(reply) if chunk_type is pb.DecryptChunk else reply
        except grpc.RpcError as exc:
            raise rpc_failure(exc, what, "the CSP") from exc

    def project(
        self,
        round_id: str,
        public: PublicKey,
        shares: list[Share],
        query: ProjectionQuery,
        encoding: ShareEncoding,
        layout: SlotLayout,
        timings: dict[str, float],
        invited: list[str],
    ) -> ProjectionReply:
        """Projection-only rounds: the CSP eigendecomposes the rotated aggregate."""
        head = pb.ProjectionRequest(
            round_id=round_id,
            key_id=public.key_id,
            method=query.method,
            dimension=query.dimension,
            classes_per_grouping=list(query.classes_per_grouping),
            encoding=encoding_to_proto(encoding, layout),
            n_owners=len(shares),
            invited=sorted(invited),
            components=query.components,
            ridge_noise_floor=query.ridge_noise_floor,
        )
        if query.rho is not None:
            head.rho = query.rho
        if query.rho_prime is not None:
            head.rho_prime = query.rho_prime
        start = time.perf_counter()
        # the CSP removes the owners' masks in total; it never learns one owner's mask
        sums = mask_sums(shares, len(shares[0].ciphertexts), layout)
        head.mask_sums.extend(int_to_bytes(m) for m in sums)
        reply = self._stream(
            self._csp.ComputeProjection,
            pb.ProjectionChunk,
            head,
            shares,
            public.ciphertext_bytes,
            "CSP projection",
        )
        timings["csp_round_trip_seconds"] = time.perf_counter() - start
        _check_contributors(reply.contributors, shares)
        k, d = query.components, query.dimension
        if len(reply.components) != k * d or len(reply.eigenvalues) != k:
            raise ProtocolError("the CSP's projection has the wrong shape")
        result = ProjectionReply(
            eigenvalues=tuple(reply.eigenvalues),
            components=tuple(reply.components),
            explained_variance_ratio=tuple(reply.explained_variance_ratio),
            ridge=dict(reply.ridge),
            compute_seconds=reply.compute_seconds,
        )
        rotated = [list(result.components[i * d : (i + 1) * d]) for i in range(k)]
        self.record(
            round_id,
            {
                "mode": "projection",
                "eigenvalues": list(result.eigenvalues),
                "rotated_components": rotated,
            },
        )
        return result


def _check_contributors(contributors, shares: list[Share]) -> None:
    if not same_contributors(contributors, shares):
        raise ProtocolError("the CSP summed other shares than the ones sent")
