"""The owner agent: sits next to a site's data, answers invitations with encrypted shares.

Raw rows never leave this process. Per round it sends one share: the encoded statistics,
packed and Paillier-encrypted under the CSP's public key. Problems with the data (missing
column, NaN, out-of-bound value) are reported to the aggregator as a decline naming the problem.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import grpc
import numpy as np

from leteo_fed import __version__
from leteo_fed.config import SPARK_AUTO_BYTES, OwnerConfig
from leteo_fed.crypto.paillier import Encryptor, PublicKey
from leteo_fed.crypto.parallel import EncryptionPool
from leteo_fed.data import sources
from leteo_fed.encoding.packing import SlotLayout, check_finite_and_bounded, pack
from leteo_fed.errors import DataError, LeteoError, ProtocolError
from leteo_fed.fileio import atomic_write_json
from leteo_fed.privacy import dp_release
from leteo_fed.privacy.ledger import PrivacyLedger
from leteo_fed.proto import leteo_pb2 as pb
from leteo_fed.proto import leteo_pb2_grpc as pb_grpc
from leteo_fed.protocols import METHODS, kmeans, ldp_collection, moments, pca, rotation
from leteo_fed.transport.grpc_io import require_role, rpc_error_message, rpc_method
from leteo_fed.transport.messages import (
    batches,
    encoding_from_proto,
    encoding_to_proto,
    fetch_public_key,
    grouping_from_proto,
)

log = logging.getLogger("leteo.owner")

REGISTER_INTERVAL_SECONDS = 30.0
LARGE_SHARE_CIPHERTEXTS = 512  # from here on a share is encrypted on all cores (d >~ 100)
SUPPORTED_PROTOCOLS = (*METHODS, kmeans.PROTOCOL)


class OwnerAgentService(pb_grpc.OwnerAgentServicer):
    def __init__(self, config: OwnerConfig) -> None:
        self.config = config
        self._aggregator_channel = config.tls.channel(config.aggregator)
        self._aggregator = pb_grpc.AggregatorStub(self._aggregator_channel)
        self._csp_channel = config.tls.channel(config.csp)
        self._csp = pb_grpc.CryptoServiceProviderStub(self._csp_channel)
        self._encryptor: Encryptor | None = None
        self._pool: EncryptionPool | None = None  # started only for large shares
        self._key_lock = threading.Lock()
        self._stop = threading.Event()
        self._jobs: dict[str, threading.Thread] = {}
        privacy = config.privacy
        self._ledger = (
            PrivacyLedger(privacy.ledger, privacy.epsilon_total, privacy.delta_total)
            if privacy
            else None
        )
        self.results: dict[str, dict] = {}

    # ------------------------------------------------------------------ lifecycle

    def start_background(self) -> None:
        """Register with the aggregator (and keep registering) and warm up the encryptor."""
        threading.Thread(target=self._register_loop, name="register", daemon=True).start()
        threading.Thread(target=self._warm_up, name="warm-up", daemon=True).start()

    def stop(self) -> None:
        self._stop.set()
        if self._pool is not None:
            self._pool.close()
        self._aggregator_channel.close()
        self._csp_channel.close()

    def _register_loop(self) -> None:
        delay = 0.2
        while not self._stop.is_set():
            try:
                self._aggregator.RegisterOwner(
                    pb.OwnerRegistration(
                        site_id=self.config.site_id, address=self.config.advertise
                    ),
                    timeout=5,
                )
                delay = REGISTER_INTERVAL_SECONDS
            except grpc.RpcError as exc:
                log.info("aggregator not reachable yet (%s); retrying", rpc_error_message(exc))
                delay = min(delay * 2, 5.0)
            self._stop.wait(delay)

    def _warm_up(self) -> None:
        delay = 0.2
        while not self._stop.is_set():
            try:
                self.encryptor()
                return
            except LeteoError as exc:
                log.info("CSP not reachable yet (%s); retrying", exc)
                self._stop.wait(delay)
                delay = min(delay * 2, 5.0)

    def encryptor(self) -> Encryptor:
        """The CSP's public key with a prepared fixed-base table, fetched once."""
        with self._key_lock:
            if self._encryptor is None:
                public = fetch_public_key(self._csp, self.config.csp)
                start = time.perf_counter()
                enc = Encryptor(public)
                enc.prepare()
                log.info(
                    "CSP key %s (%d bits); randomizer table built in %.2f s",
                    public.key_id,
                    public.bits,
                    time.perf_counter() - start,
                )
                self._encryptor = enc
            return self._encryptor

    # ------------------------------------------------------------------ RPCs

    @rpc_method
    def Health(self, request, context):
        return pb.HealthReply(
            party=self.config.site_id, role="owner", version=__version__, status="SERVING"
        )

    @rpc_method
    def Invite(self, request, context):
        require_role(context, "aggregator")
        ldp = request.protocol == "ldp"
        reason = self._precheck_ldp(request) if ldp else self._precheck(request)
        if reason:
            log.warning("round %s declined: %s", request.round_id, reason)
            return pb.InviteReply(accepted=False, reason=reason)
        job = threading.Thread(
            target=self._run_ldp if ldp else self._run_share,
            args=(request,),
            name=f"share-{request.round_id}",
            daemon=True,
        )
        self._jobs[request.round_id] = job
        job.start()
        return pb.InviteReply(accepted=True)

    @rpc_method
    def PublishResult(self, request, context):
        require_role(context, "aggregator")
        doc = {
            "round_id": request.round_id,
            "state": request.state,
            "message": request.message,
            "result": json.loads(request.result_json) if request.result_json else None,
        }
        self.results[request.round_id] = doc
        if self.config.results_dir is not None:
            atomic_write_json(Path(self.config.results_dir) / f"{request.round_id}.json", doc)
        log.info("round %s result received: %s", request.round_id, request.state)
        return pb.Ack(ok=True)

    # ------------------------------------------------------------------ share computation

    def _precheck(self, spec: pb.RoundSpec) -> str:
        """Cheap checks answered synchronously; the heavy work runs after the reply."""
        if spec.protocol not in SUPPORTED_PROTOCOLS:
            return f"protocol {spec.protocol!r} is not supported by this agent"
        if spec.round_id in self._jobs:
            return f"round {spec.round_id} was already accepted"
        if spec.protocol == kmeans.PROTOCOL:
            return self._precheck_kmeans(spec)
        try:
            public = self.encryptor().public
            if spec.key_id != public.key_id:
                return f"round key {spec.key_id} is not the CSP key {public.key_id}"
            enc, _ = encoding_from_proto(spec.encoding, public.bits)
            if spec.HasField("dp"):
                reason = self._dp_precheck(spec, enc)
                if reason:
                    return reason
            if sources.is_local(self.config.data.path):
                available = sources.column_names(self.config.data.path, self.config.data.format)
                wanted = [*spec.features, *(g.label_column for g in spec.groupings)]
                missing = [f for f in wanted if f not in available]
                if missing:
                    return (
                        f"column '{missing[0]}' is not in {Path(self.config.data.path).name} "
                        f"(site {self.config.site_id})"
                    )
        except LeteoError as exc:
            return str(exc)
        return ""

    def _precheck_ldp(self, spec: pb.RoundSpec) -> str:
        if spec.round_id in self._jobs:
            return f"round {spec.round_id} was already accepted"
        if self._ledger is None:
            return f"site {self.config.site_id} has no privacy budget configured ([privacy] in its config)"
        ldp = spec.ldp
        try:
            ldp_collection.mechanism_for(ldp)  # refuses unknown mechanisms and bad epsilon
            if sources.is_local(self.config.data.path):
                available = sources.column_names(self.config.data.path, self.config.data.format)
                for column in list(ldp.columns) or [ldp.column]:
                    if column not in available:
                        return f"column '{column}' is not in {Path(self.config.data.path).name}"
        except LeteoError as exc:
            return str(exc)
        if not self._ledger.can_afford(ldp.epsilon, 0.0):
            eps, _ = self._ledger.remaining()
            return (
                f"privacy budget of site {self.config.site_id} exhausted: the round asks epsilon "
                f"{ldp.epsilon:g}, remaining {eps:g}"
            )
        return ""

    def _precheck_kmeans(self, spec: pb.RoundSpec) -> str:
        """One k-means iteration: the centers, the encoding, the engine, the budget, the columns."""
        try:
            if not spec.HasField("kmeans"):
                return "a k-means round without its centers (kmeans) was refused"
            public = self.encryptor().public
            if spec.key_id != public.key_id:
                return f"round key {spec.key_id} is not the CSP key {public.key_id}"
            enc, _ = kmeans.encoding_from_proto(spec.encoding, public.bits)
            km, d = spec.kmeans, len(spec.features)
            kmeans.validate_centers(km.centers, km.k, d, enc.value_bound, field="centers")
            if spec.n_values != kmeans.n_values(km.k, d):
                return f"round declares {spec.n_values} values, k x (d + 1) = {kmeans.n_values(km.k, d)}"
            data = self.config.data
            if not sources.is_local(data.path) or data.engine == "spark":
                return "k-means rounds are computed with the numpy engine on a local file only"
            if spec.HasField("dp"):
                if self._ledger is None:
                    return f"site {self.config.site_id} has no privacy budget configured ([privacy] in its config)"
                kmeans.verify_dp(spec.dp, enc, d, km.k)
                # take part only if the budget covers this and every later iteration of the job
                left = max(1, km.iterations - km.iteration + 1)
                eps, delta = spec.dp.epsilon * left, spec.dp.delta * left
                if not self._ledger.can_afford(eps, delta):
                    have_eps, have_delta = self._ledger.remaining()
                    return (
                        f"privacy budget of site {self.config.site_id} exhausted: the job's "
                        f"{left} remaining iteration(s) ask epsilon {eps:g}, delta {delta:g}; "
                        f"remaining {have_eps:g}, {have_delta:g}"
                    )
            available = sources.column_names(data.path, data.format)
            missing = [f for f in spec.features if f not in available]
            if missing:
                return (
                    f"column '{missing[0]}' is not in {Path(data.path).name} "
                    f"(site {self.config.site_id})"
                )
        except LeteoError as exc:
            return str(exc)
        return ""

    def _run_ldp(self, spec: pb.RoundSpec) -> None:
        """Reserve epsilon, perturb every record, stream the reports; commit once sent."""
        ldp = spec.ldp
        try:
            self._ledger.reserve(
                spec.round_id,
                f"ldp-{ldp.mechanism}",
                ldp.epsilon,
                0.0,
                note=f"column {ldp.column}, one report per record",
            )
            try:
                start = time.perf_counter()
                data = self.config.data
                columns = list(ldp.columns) or [ldp.column]
                table = sources.read_table(data.path, data.format, columns)
                if ldp_collection.is_frequency(ldp.mechanism):
                    values = sources.label_strings(table, ldp.column)
                elif ldp.mechanism == ldp_collection.GEO or ldp_collection.is_multi(ldp):
                    values = sources.to_matrix(table, columns)
                else:
                    values = sources.to_matrix(table, [ldp.column])[:, 0]
                encoded = ldp_collection.encode_column(values, ldp)
                chunks = list(ldp_collection.perturb_chunks(encoded, ldp, np.random.default_rng()))
                seconds = time.perf_counter() - start
            except BaseException:
                self._ledger.release(spec.round_id, share_left_owner=False)  # nothing was sent
                raise
            header = pb.ReportHeader(
                round_id=spec.round_id,
                site_id=self.config.site_id,
                n_reports=len(encoded),
                timings={"perturb_seconds": seconds, "rows": float(len(encoded))},
            )

            def stream():
                yield pb.ReportChunk(header=header)
                for chunk in chunks:
                    yield pb.ReportChunk(batch=ldp_collection.to_batch(chunk))

            self._ledger.commit(spec.round_id)  # committed as the reports start to leave the site
            self._aggregator.SubmitReports(stream(), timeout=300)
            log.info("round %s: %d LDP reports submitted", spec.round_id, len(encoded))
        except LeteoError as exc:
            self._decline(spec.round_id, str(exc))
        except grpc.RpcError as exc:
            log.error("round %s: reports refused: %s", spec.round_id, rpc_error_message(exc))
        except Exception as exc:
            log.exception("round %s: LDP perturbation crashed", spec.round_id)
            self._decline(spec.round_id, f"internal error at site: {type(exc).__name__}")

    def _dp_precheck(self, spec: pb.RoundSpec, enc: pca.PcaEncoding) -> str:
        if self._ledger is None:
            return f"site {self.config.site_id} has no privacy budget configured ([privacy] in its config)"
        if self._use_spark():
            return 'DP rounds are computed with the numpy engine only (engine = "spark" is set)'
        declared = [grouping_from_proto(g) for g in spec.groupings] or [moments.ALL_ROWS]
        dp_release.verify(spec.dp, enc, len(spec.features), declared, spec.n_values)
        if not self._ledger.can_afford(spec.dp.epsilon, spec.dp.delta):
            eps, delta = self._ledger.remaining()
            return (
                f"privacy budget of site {self.config.site_id} exhausted: the round asks "
                f"epsilon {spec.dp.epsilon:g}, delta {spec.dp.delta:g}; remaining {eps:g}, {delta:g}"
            )
        return ""

    def _run_share(self, spec: pb.RoundSpec) -> None:
        dp = spec.dp if spec.HasField("dp") else None
        try:
            if dp is not None:  # reserved before the data is touched; refused = nothing spent
                what = (
                    f"kmeans job {spec.kmeans.job_id} iteration {spec.kmeans.iteration}"
                    f"/{spec.kmeans.iterations}"
                    if spec.protocol == kmeans.PROTOCOL
                    else spec.protocol
                )
                self._ledger.reserve(
                    spec.round_id,
                    dp_release.MECHANISM,
                    dp.epsilon,
                    dp.delta,
                    note=f"{what} on {len(spec.features)} features, rows clipped to {dp.row_norm_bound:g}",
                )
            try:
                if spec.protocol == kmeans.PROTOCOL:
                    header, ciphertexts = self.build_kmeans_share(spec)
                else:
                    header, ciphertexts = self.build_share(spec)
            except BaseException:
                if dp is not None:  # the noisy share never left this site
                    self._ledger.release(spec.round_id, share_left_owner=False)
                raise
            if dp is not None:  # committed as the noisy share starts to leave the site
                self._ledger.commit(spec.round_id)
            self._aggregator.SubmitShare(self._chunks(header, ciphertexts), timeout=120)
            log.info("round %s: share submitted (%d ciphertexts)", spec.round_id, len(ciphertexts))
        except LeteoError as exc:
            self._decline(spec.round_id, str(exc))
        except grpc.RpcError as exc:
            log.error("round %s: share refused: %s", spec.round_id, rpc_error_message(exc))
        except Exception as exc:
            log.exception("round %s: share computation crashed", spec.round_id)
            self._decline(spec.round_id, f"internal error at site: {type(exc).__name__}")

    def _decline(self, round_id: str, reason: str) -> None:
        log.warning("round %s: declining: %s", round_id, reason)
        try:
            self._aggregator.Decline(
                pb.DeclineNotice(round_id=round_id, site_id=self.config.site_id, reason=reason),
                timeout=10,
            )
        except grpc.RpcError as exc:
            log.error("could not tell the aggregator: %s", rpc_error_message(exc))

    def build_share(self, spec: pb.RoundSpec) -> tuple[pb.ShareHeader, list[int]]:
        timings: dict[str, float] = {}
        encryptor = self.encryptor()
        public: PublicKey = encryptor.public
        enc, layout = encoding_from_proto(spec.encoding, public.bits)
        features = list(spec.features)

        declared = [grouping_from_proto(g) for g in spec.groupings]
        dp = spec.dp if spec.HasField("dp") else None
        start = time.perf_counter()
        mom = self.local_moments(features, declared, enc, dp.row_norm_bound if dp else None)
        if spec.rotation:  # projection-only mode: send the moments of rotated rows
            if enc.rotation_dimension != len(features):
                raise ProtocolError(
                    "a rotated round needs a rotated encoding of the same dimension"
                )
            mom = rotation.rotate_moments(
                mom, rotation.rotation_from_wire(spec.rotation, len(features))
            )
        timings["statistics_seconds"] = time.perf_counter() - start

        start = time.perf_counter()
        values = moments.encode_moments(
            mom, enc.scale_bits, enc.per_owner_bound(), enc.max_rows_per_owner, enc.count_scale_bits
        )
        timings["rows"] = float(mom.m[0].sum())
        return self._sealed_share(
            spec, values, dp, layout, start, timings, len(features), encoding_to_proto(enc, layout)
        )

    def _sealed_share(
        self,
        spec: pb.RoundSpec,
        values: list[int],
        dp: pb.DpSpec | None,
        layout: SlotLayout,
        encode_start: float,
        timings: dict[str, float],
        dimension: int,
        encoding: pb.Encoding,
    ) -> tuple[pb.ShareHeader, list[int]]:
        """Encoded values -> (noised,) packed, encrypted share with its header."""
        if len(values) != spec.n_values:
            raise ProtocolError(f"share has {len(values)} values, round expects {spec.n_values}")
        if dp is not None:
            values = dp_release.add_noise(values, dp)
        packed = pack(values, layout)
        timings["encode_seconds"] = time.perf_counter() - encode_start

        start = time.perf_counter()
        ciphertexts = self._encrypt(packed)
        timings["encrypt_seconds"] = time.perf_counter() - start
        header = pb.ShareHeader(
            round_id=spec.round_id,
            site_id=self.config.site_id,
            key_id=self.encryptor().public.key_id,
            dimension=dimension,
            encoding=encoding,
            n_ciphertexts=len(ciphertexts),
            timings=timings,
        )
        return header, ciphertexts

    def _encrypt(self, packed: list[int]) -> list[int]:
        encryptor = self.encryptor()
        if len(packed) >= LARGE_SHARE_CIPHERTEXTS:
            if self._pool is None:
                self._pool = EncryptionPool(
                    encryptor.public, min_per_worker=LARGE_SHARE_CIPHERTEXTS // 2
                )
            log.info(
                "encrypting %d ciphertexts on %d worker processes", len(packed), self._pool.workers
            )
            return self._pool.encrypt_many(packed)
        return encryptor.encrypt_many(packed)

    def build_kmeans_share(self, spec: pb.RoundSpec) -> tuple[pb.ShareHeader, list[int]]:
        """One k-means iteration: assign every row to the nearest center, encode the per-cluster
        sums and counts of ALL k clusters, add this owner's noise (DP), encrypt. The header
        carries timings only: not even this site's row count leaves in the clear."""
        timings: dict[str, float] = {}
        public: PublicKey = self.encryptor().public
        enc, layout = kmeans.encoding_from_proto(spec.encoding, public.bits)
        features, km = list(spec.features), spec.kmeans
        centers = kmeans.validate_centers(
            km.centers, km.k, len(features), enc.value_bound, field="centers"
        )
        dp = spec.dp if spec.HasField("dp") else None

        start = time.perf_counter()
        data = self.config.data
        x = sources.read_matrix(data.path, features, data.format)
        if dp is not None:  # any finite value is accepted; every row is clipped to norm C
            check_finite_and_bounded(x, features, np.inf)
            if x.shape[0] == 0:
                raise DataError("the data source has no rows")
            x = dp_release.clip(x, dp.row_norm_bound)
        pca.validate_rows(x, features, enc)
        timings["read_seconds"] = time.perf_counter() - start

        start = time.perf_counter()
        sums, counts = kmeans.cluster_stats(x, kmeans.assign(x, centers), km.k)
        timings["assign_seconds"] = time.perf_counter() - start

        start = time.perf_counter()
        values = kmeans.encode_cluster_stats(sums, counts, enc)
        return self._sealed_share(
            spec,
            values,
            dp,
            layout,
            start,
            timings,
            len(features),
            kmeans.encoding_to_proto(enc, layout),
        )

    def local_moments(
        self,
        features: list[str],
        declared: list[moments.Grouping],
        enc: pca.PcaEncoding,
        clip_to: float | None = None,
    ) -> moments.LocalMoments:
        """R and per-class sums/counts of this site's rows; PCA uses the single class ALL_ROWS.

        DP rounds (`clip_to`): any finite value is accepted and each row is clipped to that L2 norm.
        """
        data = self.config.data
        groupings = declared or [moments.ALL_ROWS]
        if self._use_spark():
            from leteo_fed.data import spark_stats

            log.info("computing statistics with Spark over %s", data.path)
            if declared:
                return spark_stats.spark_local_moments(
                    data.path, features, declared, data.format, enc.value_bound
                )
            stats = spark_stats.spark_local_statistics(
                data.path, features, data.format, enc.value_bound
            )
            return pca.as_moments(stats)
        labels = [g.label_column for g in declared]
        table = sources.read_table(data.path, data.format, [*features, *labels])
        x = sources.to_matrix(table, features)
        if clip_to is not None:
            check_finite_and_bounded(x, features, np.inf)
            if x.shape[0] == 0:
                raise DataError("the data source has no rows")
            x = dp_release.clip(x, clip_to)
        pca.validate_rows(x, features, enc)
        index = [
            moments.class_indices(sources.label_strings(table, g.label_column), g) for g in declared
        ]
        return moments.local_moments(x, index or [None], groupings)

    def _use_spark(self) -> bool:
        data = self.config.data
        if data.engine != "auto":
            return data.engine == "spark"
        if not sources.is_local(data.path):
            return True
        return Path(data.path.removeprefix("file://")).stat().st_size > SPARK_AUTO_BYTES

    def _chunks(self, header: pb.ShareHeader, ciphertexts: list[int]) -> Iterator[pb.ShareChunk]:
        yield pb.ShareChunk(header=header)
        width = self.encryptor().public.ciphertext_bytes
        for chunk in batches(ciphertexts, width):
            yield pb.ShareChunk(batch=pb.CiphertextBatch(ciphertexts=chunk))


def add_to_server(server: grpc.Server, service: OwnerAgentService) -> None:
    pb_grpc.add_OwnerAgentServicer_to_server(service, server)
