"""Share benchmark: what one PCA or DCA share round costs each party, measured here.

For every key size and feature count d (synthetic Gaussian data, seeded; ``owners`` owners with
``rows`` rows each; one Paillier key per size from ``generate_keypair``):

owner share (``owner_share_s``)
    What an owner agent does for one round: validate the rows, local moments (R = sum x x^T and,
    per grouping, the per-class sums V_k and counts M_k; PCA is the one-class case), fixed-point
    encoding, slot packing and encryption. Every owner builds a fresh fixed-base ``Encryptor``
    including its ``prepare()`` table ("cold", what a one-shot owner process pays); the reported
    number is the mean over the owners (the published "owner avg"). ``owner_share_warm_s``: owner 0
    again with its table already built (an agent that keeps its encryptor across rounds), median
    of ``repeats`` runs; ``owner_share_textbook_s``: the textbook randomizer r^n.
    The owner also masks its packed plaintexts with its own one-time mask and signs its share
    statement (``sign_s``, inside the total).
aggregator per share (``aggregate_per_share_s``)
    Per received share, what the aggregator checks before keeping it: the owner's signature, the
    validity of every ciphertext and the signed digest; median over the shares.
CSP (``csp_total_s`` = ``csp_verify_s`` + ``csp_sum_s`` + ``csp_decrypt_s``)
    Verification of every owner's signed statement against the owners' CA, the round's quorum,
    every ciphertext's validity and digest; the CSP's own homomorphic sum of the shares; CRT
    decryption of every ciphertext of the masked sum on the CSP's decryption pool (one worker
    process per core from ``CSP_MIN_CIPHERTEXTS_PER_WORKER`` ciphertexts each, started before the
    timing as the CSP starts it when it loads its key; ``csp_decrypt_workers``). Medians of
    ``repeats`` runs.
eigendecomposition (``eig_s``)
    From the integer totals to the result: ``decode_totals``, the exact integer scatter
    matrices and ``pca_from_moments`` (eigh) or ``discriminant.from_aggregate(method="dca")``
    (generalized eigh). Expanding the owners' mask seeds, unmasking and unpacking is
    ``unmask_s``.
baseline (``baseline_*``)
    python-paillier (``phe``) encrypting, adding and decrypting the same encoded statistics one
    element at a time, under the same modulus. Only ``phe_sample`` operations of each kind are
    timed; the mean is multiplied by the number of statistics (``baseline.extrapolated``), and the
    owner's measured statistics + encoding time is added to the owner baseline.
correctness
    The decrypted totals must equal the sum of the owners' encoded values exactly
    (``aggregate_exact``); ``max_rel_eig_error`` compares the federated eigenvalues with NumPy on
    the pooled rows (PCA: all d eigenvalues of the covariance; DCA: the d generalized eigenvalues
    of ``discriminant.reference``).

Published reference figures (1024-bit Paillier, 10 owners, per-element encryption,
eigendecomposition in a garbled circuit) are attached as ``book`` where the feature count matches.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import gmpy2
import numpy as np
import phe
from phe import paillier as phe_paillier

from leteo_fed import bench, defaults
from leteo_fed.crypto.paillier import (
    DEFAULT_RANDOMIZER,
    DEFAULT_WINDOW_BITS,
    Encryptor,
    PrivateKey,
    add_ciphertexts,
    check_ciphertext,
    generate_keypair,
)
from leteo_fed.crypto.parallel import DecryptionPool
from leteo_fed.encoding.packing import (
    SlotLayout,
    masks_from_seed,
    new_mask_seed,
    pack,
    remove_masks,
    slot_totals,
    unpack,
)
from leteo_fed.encoding.share import ShareEncoding
from leteo_fed.errors import ConfigError
from leteo_fed.proto import leteo_pb2 as pb
from leteo_fed.protocols import discriminant, moments, pca
from leteo_fed.protocols.moments_round import encoding as moments_encoding
from leteo_fed.transport import membership
from leteo_fed.transport.certs import create_pki
from leteo_fed.transport.grpc_io import TlsConfig
from leteo_fed.transport.signing import Signer
from leteo_fed.transport.statements import (
    RoundShares,
    check_digest,
    ciphertext_digest,
    read_statement,
    sign_statement,
)

# ------------------------------------------------------------------ published reference figures

# Targets of the PCA share (stated for d = 50 and a 2048-bit key; recorded in every row)
TARGET_OWNER_S = 1.0  # cold
TARGET_SPEEDUP = 20.0  # cold owner share vs per-element phe
TARGET_CSP_S = 0.5
TARGET_SPEEDUP_FAST = 100.0  # the speed issue's targets, beyond the SPEC's
TARGET_CSP_FAST_S = 0.2
TARGET_EIG_S = 0.050
STARVED = 0.8  # cpu/wall below this: the row's wall-clock timings are inflated by other load
BOOK_KEY_BITS = 1024
BOOK_OWNERS = 10
_BOOK_COLUMNS = ("owner_share_s", "aggregate_per_share_s", "csp_decrypt_s", "eig_s")
_BOOK_ROWS = {
    "pca": {
        8: (0.63, 0.010, 0.67, 13.8),
        10: (0.93, 0.011, 1.0, 20.7),
        14: (1.7, 0.012, 1.8, 37.4),
        24: (5.0, 0.017, 5.0, 3.28 * 60),
        34: (9.8, 0.024, 9.9, 6.44 * 60),
        50: (22.5, 0.040, 22.7, 13.8 * 60),
    },
    "dca": {
        8: (0.7, 0.012, 0.8, 4.0),
        10: (1.2, 0.013, 1.3, 5.8),
        14: (2.1, 0.015, 2.2, 12.1),
        24: (5.6, 0.022, 5.8, 46.6),
        34: (11.2, 0.029, 11.6, 1.9 * 60),
        50: (26.2, 0.048, 26.9, 6.7 * 60),
    },
}
_BOOK_META = {
    "pca": {"table": "9.1", "eig_method": "EVD in a garbled circuit"},
    "dca": {"table": "9.2", "eig_method": "GEVD in a garbled circuit"},
}


def book_row(method: str, features: int) -> dict[str, Any] | None:
    """The published figures for this method and feature count, or None if none were published."""
    values = _BOOK_ROWS[method].get(features)
    if values is None:
        return None
    return {
        **_BOOK_META[method],
        "key_bits": BOOK_KEY_BITS,
        "owners": BOOK_OWNERS,
        **dict(zip(_BOOK_COLUMNS, values, strict=True)),
    }


# ------------------------------------------------------------------ configuration


@dataclass(frozen=True)
class BenchConfig:
    method: str = "pca"
    features: tuple[int, ...] = bench.DEFAULT_FEATURES
    key_bits: tuple[int, ...] = bench.DEFAULT_KEY_BITS
    owners: int = bench.DEFAULT_OWNERS
    classes: int = bench.DEFAULT_CLASSES
    rows: int = bench.DEFAULT_ROWS
    repeats: int = bench.DEFAULT_REPEATS
    phe_sample: int = bench.DEFAULT_PHE_SAMPLE
    seed: int = 0
    window_bits: int = DEFAULT_WINDOW_BITS
    randomizer: str = DEFAULT_RANDOMIZER
    quick: bool = False

    def __post_init__(self) -> None:
        if self.method not in bench.BENCH_METHODS:
            raise ConfigError(f"--method must be one of {bench.BENCH_METHODS}, got {self.method!r}")
        if not self.features or min(self.features) < 1:
            raise ConfigError("--features needs positive feature counts")
        if not self.key_bits or any(b < 512 or b % 2 for b in self.key_bits):
            raise ConfigError("--key-bits must be even sizes of at least 512 bits")
        if self.randomizer not in ("short-exponent", "fixed-base"):
            raise ConfigError("--randomizer must be short-exponent or fixed-base")
        if self.owners < 2:
            raise ConfigError("--owners must be at least 2 (the protocol's minimum quorum)")
        if self.method == "dca" and self.classes < 2:
            raise ConfigError("--classes must be at least 2 for DCA")
        if self.rows < 2 or self.repeats < 1 or self.phe_sample < 1:
            raise ConfigError("--rows must be >= 2, --repeats and --phe-sample >= 1")

    @property
    def n_classes(self) -> int:
        return self.classes if self.method == "dca" else 1

    def default_out(self) -> Path:
        return Path(f"out/bench_{self.method}_share{'_quick' if self.quick else ''}.json")


def config_from_args(args: argparse.Namespace) -> BenchConfig:
    quick = bool(args.quick)

    def pick(value: Any, normal: Any, fast: Any) -> Any:
        return value if value is not None else (fast if quick else normal)

    return BenchConfig(
        method=args.method,
        features=tuple(pick(args.features, bench.DEFAULT_FEATURES, bench.QUICK_FEATURES)),
        key_bits=tuple(pick(args.key_bits, bench.DEFAULT_KEY_BITS, bench.QUICK_KEY_BITS)),
        owners=args.owners,
        classes=args.classes,
        rows=pick(args.rows, bench.DEFAULT_ROWS, bench.QUICK_ROWS),
        repeats=pick(args.repeats, bench.DEFAULT_REPEATS, bench.QUICK_REPEATS),
        phe_sample=pick(args.phe_sample, bench.DEFAULT_PHE_SAMPLE, bench.QUICK_PHE_SAMPLE),
        seed=args.seed,
        randomizer=args.randomizer,
        quick=quick,
    )


# ------------------------------------------------------------------ helpers


def log(msg: str) -> None:
    print(f"[bench] {msg}", file=sys.stderr, flush=True)


def timed(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> tuple[Any, float]:
    t0 = time.perf_counter()
    out = fn(*args, **kwargs)
    return out, time.perf_counter() - t0


def median_time(fn: Callable[[], Any], runs: int) -> tuple[Any, float]:
    """Runs fn ``runs`` times; returns the last output and the median time."""
    times, out = [], None
    gc.collect()
    for _ in range(runs):
        out, t = timed(fn)
        times.append(t)
    return out, statistics.median(times)


# ------------------------------------------------------------------ data


@dataclass
class OwnerData:
    x: np.ndarray
    labels: np.ndarray | None  # class names (DCA), None for PCA
    y: np.ndarray | None  # class indices, for the pooled reference only


def class_names(k: int) -> tuple[str, ...]:
    return tuple(f"c{i}" for i in range(k))


def synthetic_owners(cfg: BenchConfig, d: int) -> list[OwnerData]:
    """Correlated Gaussian rows x = mu + z A with a spread of eigenvalues, one block per owner.

    DCA: a Gaussian mixture, class k shifted by its own mean; every owner draws its labels with
    its own class proportions (Dirichlet), so the sites are not identically distributed.
    """
    rng = np.random.default_rng([cfg.seed, d, cfg.n_classes])
    scales = np.geomspace(10.0, 0.1, d)
    mixing = rng.normal(size=(d, d)) / np.sqrt(d) * scales[:, None]
    mu = rng.normal(0.0, 5.0, size=d)
    if cfg.method == "pca":
        return [
            OwnerData(mu + rng.normal(size=(cfg.rows, d)) @ mixing, None, None)
            for _ in range(cfg.owners)
        ]
    names = np.array(class_names(cfg.classes))
    shifts = rng.normal(0.0, 2.0, size=(cfg.classes, d))
    owners = []
    for _ in range(cfg.owners):
        y = rng.choice(cfg.classes, size=cfg.rows, p=rng.dirichlet(np.full(cfg.classes, 5.0)))
        x = mu + shifts[y] + rng.normal(size=(cfg.rows, d)) @ mixing
        owners.append(OwnerData(x, names[y], y))
    return owners


# ------------------------------------------------------------------ one round, timed


@dataclass(frozen=True)
class ShareSetup:
    d: int
    features: list[str]
    groupings: list[moments.Grouping]
    declared: list[moments.Grouping]  # what the round spec carries ([] for PCA)
    enc: ShareEncoding
    layout: SlotLayout
    n_values: int


def setup_for(cfg: BenchConfig, d: int, key_bits: int) -> ShareSetup:
    declared = [moments.Grouping("label", class_names(cfg.classes))] if cfg.method == "dca" else []
    groupings = declared or [moments.ALL_ROWS]
    enc = moments_encoding(max_owners=cfg.owners)  # as a round inviting cfg.owners plans it
    return ShareSetup(
        d,
        [f"x{i}" for i in range(d)],
        groupings,
        declared,
        enc,
        enc.layout(key_bits),
        moments.n_values(d, groupings),
    )


def share_values(owner: OwnerData, s: ShareSetup) -> list[int]:
    """The owner agent's statistics and encoding: validate, moments, fixed point."""
    s.enc.check_rows(owner.x, s.features)
    index: list[np.ndarray | None] = []
    for g in s.declared:
        if owner.labels is None:
            raise ConfigError(f"grouping {g.label_column!r} needs labelled owner rows")
        # class_indices reads its labels with np.asarray: a NumPy array of names works as is
        index.append(moments.class_indices(cast("Sequence[str]", owner.labels), g))
    mom = moments.local_moments(owner.x, index or [None], s.groupings)
    return moments.encode_moments(mom, s.enc.scale_bits, s.enc.data_bound, s.enc.max_rows_per_owner)


ROUND_ID = "bench-round"
SPEC_DIGEST = bytes(32)  # every share of the benchmark round was sent one spec


def owner_share(
    owner: OwnerData, s: ShareSetup, encryptor: Encryptor, signer: Signer, invited: list[str]
) -> tuple[list[int], ShareMessage, dict[str, float]]:
    """statistics + encode -> pack -> mask -> encrypt -> sign, as the owner agent does."""
    t0 = time.perf_counter()
    values = share_values(owner, s)
    t1 = time.perf_counter()
    packed = pack(values, s.layout)
    seed = new_mask_seed()
    masks = masks_from_seed(seed, len(packed), s.layout)
    packed = [p + r for p, r in zip(packed, masks, strict=True)]
    t2 = time.perf_counter()
    cts = encryptor.encrypt_many(packed)
    t3 = time.perf_counter()
    public = encryptor.public
    statement = pb.ShareStatement(
        round_id=ROUND_ID,
        site_id=signer.identity.name,
        key_id=public.key_id,
        protocol="pca",
        invited_root=membership.root(invited),
        n_invited=len(invited),
        quorum=len(invited),
        n_ciphertexts=len(cts),
        ciphertext_digest=ciphertext_digest(cts, public.ciphertext_bytes),
        masked=True,
        reveal="blinded",
        spec_digest=SPEC_DIGEST,
    )
    signed = sign_statement(statement, signer)
    t4 = time.perf_counter()
    stages = {"statistics_encode_s": t1 - t0, "pack_s": t2 - t1, "encrypt_s": t3 - t2}
    stages["sign_s"] = t4 - t3
    return values, ShareMessage(signed, seed, cts), stages


@dataclass
class ShareMessage:
    """What one owner sends: its signed statement, its mask seed, its ciphertexts."""

    signed: pb.Signed
    seed: bytes
    ciphertexts: list[int]


def cold_share(
    owner: OwnerData,
    s: ShareSetup,
    key: PrivateKey,
    window_bits: int,
    signer: Signer,
    invited: list[str],
    randomizer: str = DEFAULT_RANDOMIZER,
) -> tuple[list[int], ShareMessage, Encryptor, dict[str, float]]:
    """A fresh encryptor, its fixed-base table built inside the timing."""
    t0 = time.perf_counter()
    encryptor = Encryptor(key.public, randomizer, window_bits)
    encryptor.prepare()
    prepare_s = time.perf_counter() - t0
    values, share, stages = owner_share(owner, s, encryptor, signer, invited)
    stages["prepare_s"] = prepare_s
    stages["total_s"] = prepare_s + sum(
        stages[k] for k in ("statistics_encode_s", "pack_s", "encrypt_s", "sign_s")
    )
    return values, share, encryptor, stages


def verify_shares(
    shares: list[ShareMessage], owners_ca: bytes, public: Any, n_cts: int, invited: list[str]
) -> list[float]:
    """What the CSP (and, on arrival, the aggregator) checks of each share; seconds per share."""
    check = RoundShares(ROUND_ID, public.key_id, n_cts, invited=invited)
    seconds = []
    for share in shares:
        t0 = time.perf_counter()
        claims = read_statement(share.signed, owners_ca)
        check.admit(claims)
        for c in share.ciphertexts:
            check_ciphertext(public, c)
        check_digest(claims, share.ciphertexts, public.ciphertext_bytes)
        seconds.append(time.perf_counter() - t0)
    check.require_quorum()
    return seconds


def owner_signers(folder: Path, owners: int) -> tuple[list[Signer], bytes]:
    """Real owner certificates from a throw-away owners' CA, and that CA."""
    sites = [f"site-{i}" for i in range(owners)]
    create_pki(folder, sites)
    signers = [
        Signer.from_pem((folder / f"{s}.crt").read_bytes(), (folder / f"{s}.key").read_bytes())
        for s in sites
    ]
    return signers, TlsConfig.from_dir(folder, sites[0], "owner").role_ca("owner") or b""


def phe_baseline(values: Sequence[int], key: PrivateKey, sample: int) -> dict[str, Any]:
    """Per-element phe on a sample of the same encoded statistics: encrypt, add, decrypt."""
    public = phe_paillier.PaillierPublicKey(key.public.n)
    private = phe_paillier.PaillierPrivateKey(public, key.p, key.q)
    count = len(values)
    idx = sorted({int(i) for i in np.linspace(0, count - 1, min(sample, count)).round()})
    enc_t, add_t, dec_t, ok = [], [], [], True
    gc.collect()
    for i in idx:
        c, t = timed(public.encrypt, values[i])
        enc_t.append(t)
        c2, t = timed(c.__add__, c)
        add_t.append(t)
        m, t = timed(private.decrypt, c2)
        dec_t.append(t)
        ok = ok and m == 2 * values[i]
    return {
        "library": f"phe {phe.__version__}",
        "sample": len(idx),
        "n_values": count,
        "extrapolated": len(idx) < count,
        "encrypt_each_s": statistics.fmean(enc_t),
        "add_each_s": statistics.fmean(add_t),
        "decrypt_each_s": statistics.fmean(dec_t),
        "roundtrip_ok": ok,
    }


def rel_error(fed: np.ndarray, ref: np.ndarray) -> float:
    return float(np.max(np.abs(fed - ref) / np.maximum(np.abs(ref), np.finfo(float).tiny)))


def eigen_result(agg: moments.IntegerMoments, cfg: BenchConfig, s: ShareSetup, components: int):
    if cfg.method == "pca":
        return pca.pca_from_moments(agg, s.features, components)
    return discriminant.from_aggregate(agg, "dca", s.groupings, s.features, components)


def correctness(
    cfg: BenchConfig, s: ShareSetup, data: list[OwnerData], agg: moments.IntegerMoments
) -> dict[str, Any]:
    """Federated eigenvalues (all d of them) and top directions vs NumPy on the pooled rows."""
    pooled = np.vstack([o.x for o in data])
    d = s.d
    res: pca.PcaResult | discriminant.DiscriminantResult
    if cfg.method == "pca":
        ref_vals, ref_vecs, _ = pca.reference_pca(pooled, d)
        res = pca.pca_from_moments(agg, s.features, d)
        fed_vals = np.array(res.all_eigenvalues)
    else:
        labels = np.concatenate([o.y for o in data])
        ref_vals, ref_vecs = discriminant.reference(pooled, [labels], "dca", d)
        res = discriminant.from_aggregate(agg, "dca", s.groupings, s.features, d)
        fed_vals = np.array(res.eigenvalues)
    top = min(max(1, cfg.n_classes - 1) if cfg.method == "dca" else 2, d)
    comps = np.array(res.components[:top]).T
    cos = np.abs(np.sum(comps * ref_vecs[:, :top], axis=0))
    return {
        "max_rel_eig_error": rel_error(fed_vals, np.asarray(ref_vals)),
        "eig_compared": int(len(fed_vals)),
        "top_components_max_1_minus_cos": float(np.max(np.abs(1.0 - cos))),
        "mean_max_abs_error": float(np.max(np.abs(np.array(res.mean) - pooled.mean(axis=0)))),
        "pooled_rows": int(pooled.shape[0]),
    }


def bench_row(cfg: BenchConfig, d: int, key: PrivateKey, keygen_s: float) -> dict[str, Any]:
    started, cpu_started = time.perf_counter(), time.process_time()
    bits = key.public.bits
    s = setup_for(cfg, d, bits)
    n_cts = s.layout.n_ciphertexts(s.n_values)
    tag = f"{cfg.method} d={d} {bits}-bit"
    log(f"{tag}: {s.n_values} statistics -> {n_cts} ciphertexts; {cfg.owners} owners")
    data = synthetic_owners(cfg, d)

    # owner shares, cold: every owner builds its own encryptor (its own random base)
    tmp = tempfile.TemporaryDirectory(prefix="leteo-bench-")
    signers, owners_ca = owner_signers(Path(tmp.name), cfg.owners)
    invited = sorted(sg.identity.name for sg in signers)
    values, shares, cold = [], [], []
    gc.collect()
    enc0 = None
    for owner, signer in zip(data, signers, strict=True):
        v, share, encryptor, stages = cold_share(
            owner, s, key, cfg.window_bits, signer, invited, cfg.randomizer
        )
        values.append(v)
        shares.append(share)
        cold.append(stages)
        if enc0 is None:
            enc0 = encryptor
    if enc0 is None:  # BenchConfig refuses fewer than 2 owners
        raise ConfigError("the benchmark needs at least one owner")
    owner_s = statistics.fmean(c["total_s"] for c in cold)

    # owner 0 again, warm (table built) and textbook randomizer
    _, warm_s = median_time(lambda: owner_share(data[0], s, enc0, signers[0], invited), cfg.repeats)
    textbook = Encryptor(key.public, "textbook")
    _, textbook_s = median_time(
        lambda: owner_share(data[0], s, textbook, signers[0], invited), cfg.repeats
    )

    # aggregator, per share on arrival: signature, ciphertext validity, digest
    pk = key.public
    gc.collect()
    per_share = verify_shares(shares, owners_ca, pk, n_cts, invited)

    # CSP: verify every share and the quorum, sum the shares itself, decrypt the masked sum on
    # its decryption pool, started beforehand as the CSP starts it when it loads its key
    decryptor, decryptor_init_s = timed(
        DecryptionPool, key, min_per_worker=defaults.CSP_MIN_CIPHERTEXTS_PER_WORKER
    )
    decryptor.start()
    _, csp_verify_s = median_time(
        lambda: verify_shares(shares, owners_ca, pk, n_cts, invited), cfg.repeats
    )

    def csp_sum() -> list[int]:
        total = shares[0].ciphertexts
        for share in shares[1:]:
            total = add_ciphertexts(pk, total, share.ciphertexts)
        return total

    summed, csp_sum_s = median_time(csp_sum, cfg.repeats)
    plain, csp_s = median_time(lambda: decryptor.decrypt_many(summed), cfg.repeats)
    csp_workers = decryptor.parts_for(len(summed))  # 1: in-process
    decryptor.close()
    csp_total_s = csp_verify_s + csp_sum_s + csp_s
    tmp.cleanup()

    # aggregator after decryption: remove the owners' masks, then decode + scatter + eigensolver
    runs = max(5, cfg.repeats)

    def unmask() -> list[int]:
        mask_sums = [0] * len(plain)
        for share in shares:
            own = masks_from_seed(share.seed, len(plain), s.layout)
            mask_sums = [a + b for a, b in zip(mask_sums, own, strict=True)]
        packed = remove_masks(plain, mask_sums, s.layout)
        return slot_totals(unpack(packed, s.n_values, s.layout), cfg.owners, s.layout)

    totals, unmask_s = median_time(unmask, runs)
    components = min(2, d) if cfg.method == "pca" else min(d, cfg.classes - 1)

    def eig() -> Any:
        agg = moments.decode_totals(totals, d, s.groupings, s.enc.scale_bits)
        return agg, eigen_result(agg, cfg, s, components)

    (agg, _), eig_s = median_time(eig, runs)
    exact = list(totals) == [sum(col) for col in zip(*values, strict=True)]

    log(f"{tag}: phe baseline ({min(cfg.phe_sample, s.n_values)} sampled operations)")
    base = phe_baseline(values[0], key, cfg.phe_sample)
    stats_encode_s = statistics.median(c["statistics_encode_s"] for c in cold)
    baseline_owner_s = stats_encode_s + base["encrypt_each_s"] * s.n_values
    baseline_csp_s = base["decrypt_each_s"] * s.n_values
    baseline_agg_s = base["add_each_s"] * s.n_values

    check = correctness(cfg, s, data, agg)
    book = book_row(cfg.method, d)
    load = os.getloadavg()[0]
    row = {
        "method": cfg.method,
        "features": d,
        "key_bits": bits,
        "owners": cfg.owners,
        "classes": cfg.n_classes,
        "rows_per_owner": cfg.rows,
        "n_values": s.n_values,
        "n_ciphertexts": n_cts,
        "slots_per_ciphertext": s.layout.slots_per_ciphertext,
        "slot_bits": s.layout.slot_bits,
        "owner_share_s": owner_s,
        "owner_share_warm_s": warm_s,
        "owner_share_textbook_s": textbook_s,
        "owner_share_cold_runs_s": [c["total_s"] for c in cold],
        "owner_stages_s": {
            k: statistics.median(c[k] for c in cold)
            for k in ("prepare_s", "statistics_encode_s", "pack_s", "encrypt_s", "sign_s")
        },
        "aggregate_per_share_s": statistics.median(per_share),
        "csp_verify_s": csp_verify_s,
        "csp_sum_s": csp_sum_s,
        "csp_decrypt_s": csp_s,
        "csp_total_s": csp_total_s,
        "csp_decrypt_each_s": csp_s / n_cts,
        "csp_decryptor_init_s": decryptor_init_s,
        "csp_decrypt_workers": csp_workers,
        "unmask_s": unmask_s,
        "eig_s": eig_s,
        "eig_solver": "numpy.linalg.eigh" if cfg.method == "pca" else "scipy.linalg.eigh(A, B)",
        "baseline_owner_share_s": baseline_owner_s,
        "baseline_aggregate_per_share_s": baseline_agg_s,
        "baseline_csp_decrypt_s": baseline_csp_s,
        "baseline": base,
        "speedup_owner_vs_baseline": baseline_owner_s / owner_s,
        "speedup_csp_vs_baseline": baseline_csp_s / csp_s,
        "aggregate_exact": exact,
        **check,
        "book": book,
        "keygen_s": keygen_s,
        "repeats": cfg.repeats,
        "seed": cfg.seed,
        "window_bits": cfg.window_bits,
        "randomizer": cfg.randomizer,
        "loadavg_1min": load,
        "row_runtime_s": time.perf_counter() - started,
    }
    row["targets"] = {
        "owner_share_lt_1s": owner_s < TARGET_OWNER_S,
        "speedup_ge_20x": row["speedup_owner_vs_baseline"] >= TARGET_SPEEDUP,
        "csp_total_lt_0_5s": csp_total_s < TARGET_CSP_S,
        "csp_total_lt_0_2s": csp_total_s < TARGET_CSP_FAST_S,
        "speedup_ge_100x": row["speedup_owner_vs_baseline"] >= TARGET_SPEEDUP_FAST,
        "eig_lt_50ms": eig_s < TARGET_EIG_S,
    }
    # CPU time this process got per second of wall time: well below 1 means it was starved by
    # other load and the wall-clock timings of the row are inflated.
    row["cpu_per_wall"] = (time.process_time() - cpu_started) / row["row_runtime_s"]
    log(
        f"{tag}: owner {owner_s:.3g} s (warm {warm_s:.3g} s), CSP {csp_s:.3g} s, "
        f"eig {eig_s * 1e3:.3g} ms, max rel eig error {check['max_rel_eig_error']:.1e}"
    )
    return row


def machine_info() -> dict[str, Any]:
    return {
        "cpus": os.cpu_count(),
        "platform": platform.platform(),
        "python": platform.python_version(),
        "phe": phe.__version__,
        "gmpy2": gmpy2.version(),
        "numpy": np.__version__,
        "blas_threads": 1,
    }


def single_threaded_blas():
    """One BLAS thread: a multi-threaded OpenBLAS spins under other load and turns a 1 ms
    x^T x into hundreds of ms at some shapes, which would measure the machine, not the share."""
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:  # pragma: no cover - scikit-learn brings threadpoolctl
        return contextlib.nullcontext()
    return threadpool_limits(limits=1, user_api="blas")


def run(cfg: BenchConfig) -> list[dict[str, Any]]:
    """All rows: for each key size (one key each), every feature count."""
    rows = []
    machine = machine_info()
    with single_threaded_blas():
        for bits in cfg.key_bits:
            log(f"generating a {bits}-bit Paillier key")
            key, keygen_s = timed(generate_keypair, bits)
            for d in cfg.features:
                row = bench_row(cfg, d, key, keygen_s)
                row["machine"] = machine
                rows.append(row)
    return rows


# ------------------------------------------------------------------ output


def table(headers: Sequence[str], rows: Sequence[Sequence[str]], indent: str = "  ") -> str:
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(headers)]

    def line(cells: Sequence[str]) -> str:
        return indent + "  ".join(c.rjust(w) for c, w in zip(cells, widths, strict=True))

    rule = indent + "  ".join("-" * w for w in widths)
    return "\n".join([line(headers), rule, *(line(r) for r in rows)])


def fmt_s(v: float | None) -> str:
    """Seconds with a readable unit: ms below 1 s, min above 10 min."""
    if v is None:
        return "-"
    if v < 1.0:
        return f"{v * 1e3:.3g} ms"
    if v < 600:
        return f"{v:.3g} s"
    return f"{v / 60:.3g} min"


def fmt_x(v: float) -> str:
    return f"{v:.0f}x" if v >= 10 else f"{v:.1f}x"


def book_cell(row: dict[str, Any], name: str) -> str:
    return fmt_s(row["book"][name]) if row["book"] else "-"


def report(cfg: BenchConfig, rows: Sequence[dict[str, Any]], runtime_s: float, out: Path) -> str:
    meta = _BOOK_META[cfg.method]
    eig_name = "EVD" if cfg.method == "pca" else "GEVD"
    what = (
        "R, V, Q"
        if cfg.method == "pca"
        else f"R and V_k, M_k for all {cfg.classes} classes (synthetic Gaussian mixture)"
    )
    samples = sorted({r["baseline"]["sample"] for r in rows})
    sample_text = "/".join(str(n) for n in samples)
    machine = rows[0]["machine"]
    first = rows[0]
    lines = [
        f"LETEO-Fed share benchmark, {cfg.method.upper()}: the columns of the book's table "
        f"{meta['table']}",
        f"  {cfg.owners} owners x {cfg.rows:,} rows, share = {what}; seed {cfg.seed}; median of "
        f"{cfg.repeats} run(s); {cfg.randomizer} randomizer, window {cfg.window_bits} bits",
        f"  {machine['cpus']} CPU(s), single process and BLAS thread, Python {machine['python']}, "
        f"gmpy2 {machine['gmpy2']}, phe {machine['phe']}; load average "
        f"{first['loadavg_1min']:.2f} .. {rows[-1]['loadavg_1min']:.2f} (other load skews timings)",
        "",
        f"Table {meta['table']} columns: ours vs the book (book: {BOOK_KEY_BITS}-bit Paillier, "
        f"{BOOK_OWNERS} owners, per-element encryption, {eig_name} in a garbled circuit)",
        table(
            [
                "key",
                "d",
                "cts",
                "owner (cold)",
                "book",
                "aggregator/share",
                "book",
                "CSP decrypt",
                "book",
                eig_name,
                f"book (GC {eig_name})",
                "max rel eig err",
                "cpu/wall",
            ],
            [
                [
                    str(r["key_bits"]),
                    str(r["features"]),
                    str(r["n_ciphertexts"]),
                    fmt_s(r["owner_share_s"]),
                    book_cell(r, "owner_share_s"),
                    fmt_s(r["aggregate_per_share_s"]),
                    book_cell(r, "aggregate_per_share_s"),
                    fmt_s(r["csp_decrypt_s"]),
                    book_cell(r, "csp_decrypt_s"),
                    fmt_s(r["eig_s"]),
                    book_cell(r, "eig_s"),
                    f"{r['max_rel_eig_error']:.1e}" + ("" if r["aggregate_exact"] else " INEXACT"),
                    f"{r['cpu_per_wall']:.2f}" + (" !" if r["cpu_per_wall"] < STARVED else ""),
                ]
                for r in rows
            ],
        ),
        "  owner (cold): mean over the owners of validate + moments + encode + pack + mask + encrypt + sign,",
        "  each owner with a fresh encryptor incl. its fixed-base table build (see warm below).",
        "  aggregator/share: signature, ciphertext validity and digest checks of one share (the CSP sums).",
        f"  {eig_name}: decode totals + exact scatter matrices + "
        + ("eigh" if cfg.method == "pca" else "generalized eigh (DCA pencil)")
        + ";",
        f"  max rel eig err: all d eigenvalues vs NumPy on the pooled {first['pooled_rows']:,} rows.",
        f"  cpu/wall: CPU time of this process per wall second in the row; '!' (< {STARVED}) means",
        "  other load on the machine took the CPU and inflated that row's timings.",
        "",
        f"Baseline: per-element phe, same encoded statistics, same modulus (EXTRAPOLATED from "
        f"{sample_text} timed operations of each kind per row; rows marked * timed every element)",
        table(
            [
                "key",
                "d",
                "statistics",
                "owner (cold)",
                "owner (warm)",
                "textbook r^n",
                "phe owner",
                "speed-up",
                "aggregator/share",
                "phe aggregator/share",
                "CSP decrypt",
                "phe CSP decrypt",
                "speed-up",
            ],
            [
                [
                    str(r["key_bits"]),
                    str(r["features"]),
                    str(r["n_values"]),
                    fmt_s(r["owner_share_s"]),
                    fmt_s(r["owner_share_warm_s"]),
                    fmt_s(r["owner_share_textbook_s"]),
                    fmt_s(r["baseline_owner_share_s"])
                    + ("" if r["baseline"]["extrapolated"] else " *"),
                    fmt_x(r["speedup_owner_vs_baseline"]),
                    fmt_s(r["aggregate_per_share_s"]),
                    fmt_s(r["baseline_aggregate_per_share_s"]),
                    fmt_s(r["csp_decrypt_s"]),
                    fmt_s(r["baseline_csp_decrypt_s"]),
                    fmt_x(r["speedup_csp_vs_baseline"]),
                ]
                for r in rows
            ],
        ),
        "  warm: owner 0 with its fixed-base table already built; textbook r^n: owner 0 with the",
        "  textbook randomizer. phe owner = our measured statistics + encoding time + mean phe",
        "  encryption x statistics; speed-ups are phe / ours (cold).",
        "",
    ]
    spec_rows = [r for r in rows if r["features"] == 50 and r["key_bits"] == 2048]
    if cfg.method == "pca" and spec_rows:
        r = spec_rows[0]
        t = r["targets"]

        def verdict(ok: bool, text: str) -> str:
            return f"{'PASS' if ok else 'FAIL'} ({text})"

        lines += [
            "SPEC targets (d = 50, 2048-bit key, owner share judged cold): "
            + "; ".join(
                [
                    "owner < 1 s " + verdict(t["owner_share_lt_1s"], fmt_s(r["owner_share_s"])),
                    ">= 20x vs phe "
                    + verdict(t["speedup_ge_20x"], fmt_x(r["speedup_owner_vs_baseline"])),
                    "CSP < 0.5 s "
                    + verdict(t["csp_total_lt_0_5s"], fmt_s(r["csp_total_s"]))
                    + f" (verify {fmt_s(r['csp_verify_s'])}, sum {fmt_s(r['csp_sum_s'])}, "
                    + f"decrypt {fmt_s(r['csp_decrypt_s'])})",
                    "EVD < 50 ms " + verdict(t["eig_lt_50ms"], fmt_s(r["eig_s"])),
                ]
            ),
            "Speed targets: owner >= 100x vs phe "
            + verdict(t["speedup_ge_100x"], fmt_x(r["speedup_owner_vs_baseline"]))
            + "; CSP < 0.2 s "
            + verdict(t["csp_total_lt_0_2s"], fmt_s(r["csp_total_s"]))
            + f" (decryption on {r['csp_decrypt_workers']} worker process(es))",
            "",
        ]
    lines.append(f"Total runtime {runtime_s:.1f} s; JSON ({len(rows)} rows): {out}")
    if any(r["key_bits"] < 2048 for r in rows):
        lines.insert(
            3,
            "  keys below 2048 bits are insecure: measured only to compare with the book",
        )
    return "\n".join(lines)


# ------------------------------------------------------------------ entry points


def execute(cfg: BenchConfig, out: Path | None) -> list[dict[str, Any]]:
    """Runs the benchmark, prints the report, writes the JSON list of rows."""
    start = time.perf_counter()
    path = Path(out) if out is not None else cfg.default_out()
    rows = run(cfg)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(rows, indent=2) + "\n")
    print(report(cfg, rows, time.perf_counter() - start, path), flush=True)
    return rows


def run_cli(args: argparse.Namespace) -> int:
    """``leteo-fed bench pca``: bad options raise ConfigError (exit 2 in the CLI)."""
    execute(config_from_args(args), args.out)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Standalone entry (``python -m leteo_fed.bench.share_bench``, ``make bench``)."""
    parser = argparse.ArgumentParser(
        prog="bench_pca_share",
        description=bench.DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    bench.add_pca_arguments(parser)
    args = parser.parse_args(argv)
    try:
        cfg = config_from_args(args)
    except ConfigError as exc:
        parser.error(str(exc))
    execute(cfg, args.out)
    return 0


__all__ = ["BenchConfig", "book_row", "config_from_args", "execute", "main", "run", "run_cli"]

if __name__ == "__main__":
    sys.exit(main())
