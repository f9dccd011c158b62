"""The fuzz harness: a deployment of real processes, every party's identity, message strategies
and the verdict every call must meet.

The verdict (`refused_or_ok`): a call either succeeds or ends with a gRPC status a client can act
on (INVALID_ARGUMENT, FAILED_PRECONDITION, NOT_FOUND, PERMISSION_DENIED, ALREADY_EXISTS) and a
message that says what is wrong; never INTERNAL, never DEADLINE_EXCEEDED (every call has a
deadline), never UNAVAILABLE from a service that is up.

`messages(T)` draws any message of type T from its descriptor: every field set or not, strings
from arbitrary unicode and nasty names, bytes from garbage, integer fields at their boundaries
(0, 2^31, 2^32 - 1, 2^64 - 1), doubles NaN, +-inf, -0.0 and huge, oneofs with any member (or
several: the last one wins). The tests mix these with mutations of valid messages, which is what
gets past the first checks to the parsing code further in.

The number of examples per test is fixed for `make test` and taken from LETEO_FUZZ_EXAMPLES
when set (`make fuzz`); every run is derandomized (the same examples each time).
"""

from __future__ import annotations

import functools
import math
import os
import secrets
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

import grpc
from google.protobuf.descriptor import Descriptor, FieldDescriptor
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

from leteo_fed.crypto.paillier import Encryptor, PublicKey
from leteo_fed.demo.cluster import LocalCluster
from leteo_fed.proto import leteo_pb2 as pb
from leteo_fed.proto import leteo_pb2_grpc as pb_grpc
from leteo_fed.transport.grpc_io import make_server
from leteo_fed.transport.messages import public_key_from_proto
from leteo_fed.transport.signing import ROUND_REQUEST, Signer

EXAMPLES_ENV = "LETEO_FUZZ_EXAMPLES"
CALL_TIMEOUT = 10.0  # seconds; a call still running then is a hang
ALLOWED = frozenset(
    {
        grpc.StatusCode.INVALID_ARGUMENT,
        grpc.StatusCode.FAILED_PRECONDITION,
        grpc.StatusCode.NOT_FOUND,
        grpc.StatusCode.PERMISSION_DENIED,
        grpc.StatusCode.ALREADY_EXISTS,
    }
)
T = TypeVar("T")


def fuzz_settings(examples: int) -> settings:
    """`examples` per test in the bounded run; LETEO_FUZZ_EXAMPLES overrides it (make fuzz)."""
    return settings(
        max_examples=int(os.environ.get(EXAMPLES_ENV) or examples),
        derandomize=True,
        deadline=None,
        database=None,
        print_blob=False,
        suppress_health_check=[
            HealthCheck.function_scoped_fixture,  # the per-test health check runs once per test
            HealthCheck.too_slow,
            HealthCheck.data_too_large,
            HealthCheck.filter_too_much,
        ],
    )


# ------------------------------------------------------------------ the verdict


def check_refusal(exc: grpc.RpcError, what: str = "") -> grpc.RpcError:
    code, details = exc.code(), exc.details() or ""
    where = f"{what}: " if what else ""
    assert code != grpc.StatusCode.DEADLINE_EXCEEDED, f"{where}no answer within {CALL_TIMEOUT} s"
    assert code in ALLOWED, f"{where}{code.name}: {details}"
    assert "internal error" not in details, f"{where}{details}"
    assert len(details.strip()) >= 8, (
        f"{where}{code.name} with a message naming nothing: {details!r}"
    )
    return exc


def refused_or_ok(call: Callable[[], T], what: str = "") -> T | grpc.RpcError:
    """The call's reply, or its (checked) refusal."""
    try:
        return call()
    except grpc.RpcError as exc:
        return check_refusal(exc, what)


def refused(call: Callable[[], Any], code: grpc.StatusCode, *phrases: str) -> grpc.RpcError:
    """The call fails with `code`, its message naming every one of `phrases`."""
    outcome = refused_or_ok(call)
    assert isinstance(outcome, grpc.RpcError), f"accepted: {outcome}"
    assert outcome.code() == code, (outcome.code(), outcome.details())
    for phrase in phrases:
        assert phrase in (outcome.details() or ""), (phrase, outcome.details())
    return outcome


# ------------------------------------------------------------------ strategies

NASTY_TEXT = [
    "",
    " ",
    "\x00",
    "\n\r\t",
    "../../leteo-fuzz-escape",  # from an owner's results folder: the deployment's folder
    "/tmp/leteo-fuzz-absolute",
    "a" * 300,
    "x" * 20_000,
    "é✓𝄞\u202e\ufeff",
    "%s%n{0}",
    "NaN",
    "-1",
    "site-1",
    "fuzz-a",
    "csp",
    "aggregator",
]
texts = st.one_of(st.sampled_from(NASTY_TEXT), st.text(max_size=16))
names = st.one_of(st.sampled_from(NASTY_TEXT), st.text(min_size=1, max_size=8))

U32 = [0, 1, 2, 3, 7, 255, 2**16, 2**31 - 1, 2**31, 2**32 - 1]
U64 = [*U32, 2**32, 2**53 + 1, 2**63 - 1, 2**63, 2**64 - 1]
u32 = st.one_of(st.sampled_from(U32), st.integers(0, 2**32 - 1))
u64 = st.one_of(st.sampled_from(U64), st.integers(0, 2**64 - 1))
small = st.one_of(st.sampled_from(U32), st.integers(0, 9))

DOUBLES = [math.nan, math.inf, -math.inf, 0.0, -0.0, -1.0, 1.0, 0.5, 1e-12, 5e-324, 1e308, -1e308]
doubles = st.one_of(st.sampled_from(DOUBLES), st.floats())

blobs = st.one_of(
    st.sampled_from([b"", b"\x00", b"\xff" * 300, bytes(4096)]), st.binary(max_size=48)
)


def _scalar(f: FieldDescriptor) -> st.SearchStrategy:
    kind = f.type
    if kind == FieldDescriptor.TYPE_STRING:
        return texts
    if kind == FieldDescriptor.TYPE_BYTES:
        return blobs
    if kind == FieldDescriptor.TYPE_UINT32:
        return u32
    if kind == FieldDescriptor.TYPE_UINT64:
        return u64
    if kind == FieldDescriptor.TYPE_DOUBLE:
        return doubles
    if kind == FieldDescriptor.TYPE_BOOL:
        return st.booleans()
    raise TypeError(f"no strategy for {f.full_name} (type {kind})")


def _is_map(f: FieldDescriptor) -> bool:
    return f.message_type is not None and f.message_type.GetOptions().map_entry


def _value(f: FieldDescriptor, depth: int) -> st.SearchStrategy | None:
    if f.message_type is None:
        return _scalar(f)
    return _message(f.message_type.name, depth - 1) if depth > 0 else None


def _field(f: FieldDescriptor, depth: int) -> st.SearchStrategy | None:
    if _is_map(f):
        entry = f.message_type
        value = _value(entry.fields_by_name["value"], depth)
        if value is None:
            return None
        return st.dictionaries(_scalar(entry.fields_by_name["key"]), value, max_size=3)
    one = _value(f, depth)
    if one is None:
        return None
    return st.lists(one, max_size=4) if f.is_repeated else one


def _build(desc: Descriptor, values: dict[str, Any]) -> Any:
    msg = getattr(pb, desc.name)()
    for name, value in values.items():
        f = desc.fields_by_name[name]
        if _is_map(f):
            target = getattr(msg, name)
            for k, v in value.items():
                if f.message_type.fields_by_name["value"].message_type is None:
                    target[k] = v
                else:
                    target[k].CopyFrom(v)
        elif f.is_repeated and f.message_type is not None:
            for v in value:
                getattr(msg, name).add().CopyFrom(v)
        elif f.is_repeated:
            getattr(msg, name).extend(value)
        elif f.message_type is not None:
            getattr(msg, name).CopyFrom(value)
        else:
            setattr(msg, name, value)
    return msg


@functools.cache
def _message(name: str, depth: int) -> st.SearchStrategy:
    desc = pb.DESCRIPTOR.message_types_by_name[name]
    parts = {}
    for f in desc.fields:
        s = _field(f, depth)
        if s is not None:
            parts[f.name] = s
    return st.fixed_dictionaries({}, optional=parts).map(functools.partial(_build, desc))


def messages(cls: type, depth: int = 3) -> st.SearchStrategy:
    """Any message of type `cls`, nested messages down to `depth` levels."""
    return _message(cls.DESCRIPTOR.name, depth)


def mutated(base: Any, overrides: st.SearchStrategy[dict[str, Any]]) -> st.SearchStrategy:
    """`base` (a message) with some of its fields replaced (None: cleared)."""

    def apply(changes: dict[str, Any]) -> Any:
        msg = type(base)()
        msg.CopyFrom(base)
        for name, value in changes.items():
            msg.ClearField(name)
            if value is not None:
                msg.MergeFrom(_build(msg.DESCRIPTOR, {name: value}))
        return msg

    return overrides.map(apply)


def some_of(parts: dict[str, st.SearchStrategy], most: int = 2) -> st.SearchStrategy:
    """The mutations of one example: new values for one field of `parts`, sometimes `most`
    (one wrong field at a time gets past the checks of the others)."""
    keys = sorted(parts)
    chosen = st.lists(st.sampled_from(keys), min_size=1, max_size=most, unique=True)
    return chosen.flatmap(lambda ks: st.fixed_dictionaries({k: parts[k] for k in ks}))


def pick(choices: list[T]) -> st.SearchStrategy[T]:
    """One of `choices`, a list that grows during the run (the rounds opened so far): drawn as
    an index, so every run draws the same way whatever the list holds."""
    return st.integers(0, 15).map(lambda i: choices[i % len(choices)])


def const(value: Any) -> st.SearchStrategy:
    """st.just(value) without its repr (large messages make Hypothesis warn)."""
    return st.just(None).map(lambda _: value)


def fields_of(cls: type, depth: int = 2) -> dict[str, st.SearchStrategy]:
    """Per field of `cls`, the strategy `messages` would use (for `some_of`)."""
    out = {}
    for f in cls.DESCRIPTOR.fields:
        s = _field(f, depth)
        if s is not None:
            out[f.name] = s
    return out


def ciphertexts(public: PublicKey) -> st.SearchStrategy[bytes]:
    """Ciphertexts outside Z*_{n^2} and malformed framings, as bytes."""
    n, width = public.n, public.ciphertext_bytes
    bad = [0, 1, n, 2 * n, n * n, n * n + 1, n * n - n, 2 ** (8 * width) - 1]
    return st.one_of(
        st.sampled_from(bad).map(lambda c: c.to_bytes(width, "big")),
        st.sampled_from(bad).map(lambda c: c.to_bytes(max(1, (c.bit_length() + 7) // 8), "big")),
        st.integers(1, 2**64).map(lambda c: c.to_bytes(width, "big")),
        blobs,
        st.just(b"\x01" * (width + 1)),
    )


# ------------------------------------------------------------------ the deployment


class SinkOwner(pb_grpc.OwnerAgentServicer):
    """An owner (the test's process) that accepts every invitation and never sends anything,
    so the rounds it is invited to stay open for the fuzzed uploads."""

    def __init__(self, site: str, cluster: LocalCluster) -> None:
        self.site = site
        self.specs: dict[str, pb.RoundSpec] = {}
        self._cond = threading.Condition()
        self.server, port = make_server(cluster.tls(site, "owner"), "127.0.0.1:0", workers=4)
        pb_grpc.add_OwnerAgentServicer_to_server(self, self.server)
        self.server.start()
        self.address = f"127.0.0.1:{port}"

    def Health(self, request, context):
        return pb.HealthReply(party=self.site, role="owner", status="SERVING")

    def Invite(self, request, context):
        with self._cond:
            self.specs[request.round_id] = request
            self._cond.notify_all()
        return pb.InviteReply(accepted=True)

    def PublishResult(self, request, context):
        return pb.Ack(ok=True)

    def spec(self, round_id: str, timeout: float = 20.0) -> pb.RoundSpec:
        with self._cond:
            if not self._cond.wait_for(lambda: round_id in self.specs, timeout):
                raise AssertionError(f"{self.site} was never invited to {round_id}")
            return self.specs[round_id]


def _signer(cluster: LocalCluster, name: str, role: str) -> Signer:
    signer = cluster.tls(name, role).signer()
    assert signer is not None
    return signer


@dataclass(repr=False)
class Env:
    """One deployment and every identity the fuzzer calls it with."""

    cluster: LocalCluster
    sinks: dict[str, SinkOwner]
    public: PublicKey = field(init=False)
    encryptor: Encryptor = field(init=False)
    analyst: Signer = field(init=False)
    signers: dict[str, Signer] = field(default_factory=dict)
    _channels: dict[tuple[str, str, str], grpc.Channel] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.analyst = _signer(self.cluster, "analyst", "analyst")
        for site in self.sinks:
            self.signers[site] = _signer(self.cluster, site, "owner")
        key = self.csp("aggregator", "aggregator").GetPublicKey(
            pb.PublicKeyRequest(), timeout=CALL_TIMEOUT
        )
        self.public = public_key_from_proto(key)
        self.encryptor = Encryptor(self.public, randomizer="textbook")

    def __repr__(self) -> str:  # falsifying examples print their arguments: keep it short
        return f"Env({self.cluster.workdir})"

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:  # Hypothesis' printer
        printer.text(repr(self))

    def _channel(self, target: str, name: str, role: str, peer: str) -> grpc.Channel:
        key = (target, name, role)
        if key not in self._channels:
            tls = self.cluster.tls(name, role)
            self._channels[key] = tls.channel(self.cluster.addresses[target], peer=peer)
        return self._channels[key]

    def aggregator(self, name: str, role: str) -> pb_grpc.AggregatorStub:
        return pb_grpc.AggregatorStub(self._channel("aggregator", name, role, "aggregator"))

    def csp(self, name: str, role: str) -> pb_grpc.CryptoServiceProviderStub:
        return pb_grpc.CryptoServiceProviderStub(self._channel("csp", name, role, "csp"))

    def owner(self, name: str, role: str, site: str = "site-1") -> pb_grpc.OwnerAgentStub:
        return pb_grpc.OwnerAgentStub(self._channel(site, name, role, "owner"))

    def raw(self, target: str, name: str, role: str, peer: str) -> grpc.Channel:
        """A channel for hand-made bytes (no serializers)."""
        return self._channel(target, name, role, peer)

    def sign_request(self, request: pb.RoundRequest, signer: Signer | None = None) -> pb.Signed:
        """Signed as the analyst's client signs it: a fresh nonce, the time of signing."""
        request = pb.RoundRequest.FromString(request.SerializeToString())
        if not request.nonce:
            request.nonce = secrets.token_hex(16)
        if not request.issued_unix:
            request.issued_unix = time.time()
        body = request.SerializeToString(deterministic=True)
        return (signer or self.analyst).sign(body, ROUND_REQUEST)

    def start(self, request: pb.RoundRequest, owners: Sequence[str] = ()) -> pb.RoundStatus:
        """Start `request`; `owners`: the named owners sent beside it (default: the sinks,
        which the base requests name, when it names any)."""
        named = list(owners) or (sorted(self.sinks) if request.n_owners else [])
        start = pb.StartRoundRequest(request=self.sign_request(request), owners=named)
        return self.aggregator("analyst", "analyst").StartRound(start, timeout=CALL_TIMEOUT)

    def close(self) -> None:
        for channel in self._channels.values():
            channel.close()
        for sink in self.sinks.values():
            sink.server.stop(0)


def health(env: Env) -> None:
    """Every service of the deployment answers Health (as the analyst, like `wait_healthy`)."""
    for name in env.cluster.procs:
        assert env.cluster.procs[name].poll() is None, (
            f"{name} exited:\n{env.cluster.log_tail(name)}"
        )
    env.cluster.wait_healthy(timeout=15)


def log_problems(env: Env) -> dict[str, list[str]]:
    """Per service, the log lines that betray an unhandled exception."""
    out = {}
    for name in env.cluster.procs:
        path = env.cluster.logs / f"{name}.log"
        lines = path.read_text(errors="replace").splitlines() if path.exists() else []
        bad = [
            line
            for line in lines
            if "Traceback" in line or "internal error" in line or "Exception " in line
        ]
        if bad:
            out[name] = bad[:20]
    return out
