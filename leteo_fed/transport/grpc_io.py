"""gRPC plumbing shared by the three services: mTLS credentials, peer identity, error mapping.

With TLS (the default) the peer's identity is read from its verified client certificate, and
`require_role` accepts it only if the authority of the role it claims issued it: the TLS bundle
holds several authorities, and any of them could sign a certificate that claims any role. In the
other direction a channel names the role of the server it dials (`TlsConfig.channel(target,
peer=...)`) and trusts that role's authority alone, so no other custodian (the aggregator's
operator in particular) can stand in for the CSP or any other peer. With
``--insecure`` (local experiments only) there is no authentication at all: the caller's claimed
identity travels in a metadata header and every service logs a loud warning at start-up.
"""

from __future__ import annotations

import asyncio
import errno
import functools
import inspect
import logging
import socket
import threading
from collections.abc import Callable, Iterator
from concurrent import futures
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import grpc
from cryptography import x509
from google.protobuf.message import DecodeError

from leteo_fed.errors import (
    AccessDenied,
    ConfigError,
    DataError,
    DuplicateError,
    LeteoError,
    NotFoundError,
    Overloaded,
    PeerUnavailable,
    ProtocolError,
)
from leteo_fed.transport.certs import Authorities, Party, read_identity
from leteo_fed.transport.roles import ROLES, authority_of, ca_file
from leteo_fed.transport.signing import Signer

log = logging.getLogger(__name__)

MAX_MESSAGE_BYTES = 64 * 1024 * 1024
IDENTITY_HEADER = "x-leteo-insecure-identity"
CHANNEL_OPTIONS = [
    ("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
    ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
    ("grpc.keepalive_time_ms", 20_000),
    ("grpc.keepalive_timeout_ms", 10_000),
    ("grpc.keepalive_permit_without_calls", 1),
    ("grpc.http2.max_pings_without_data", 0),
    # A peer that starts after us must be found within ~2 s, not after minutes of backoff.
    ("grpc.initial_reconnect_backoff_ms", 200),
    ("grpc.min_reconnect_backoff_ms", 200),
    ("grpc.max_reconnect_backoff_ms", 2000),
    # A peer restarted under a new address (a container's new IP) must be looked up again
    # within seconds: gRPC re-resolves a name at most this often (default 30 s).
    ("grpc.dns_min_time_between_resolutions_ms", 1000),
]
SERVER_OPTIONS = [
    ("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
    ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
    ("grpc.keepalive_permit_without_calls", 1),
    ("grpc.http2.min_ping_interval_without_data_ms", 10_000),
    # a second server on a port in use fails to bind instead of silently sharing its calls
    ("grpc.so_reuseport", 0),
]
INSECURE_WARNING = (
    "INSECURE MODE: no TLS, no authentication. Any process that can reach this port can "
    "impersonate any party. Use only for local experiments."
)


@dataclass(frozen=True)
class TlsConfig:
    """Where this party's certificate material is, or that it runs without TLS."""

    identity: Party
    ca: Path | None = None
    cert: Path | None = None
    key: Path | None = None
    insecure: bool = False

    @classmethod
    def from_dir(cls, tls_dir: str | Path, name: str, role: str) -> TlsConfig:
        d = Path(tls_dir)
        return cls(Party(name, role), d / "ca.crt", d / f"{name}.crt", d / f"{name}.key")

    @classmethod
    def insecure_as(cls, name: str, role: str) -> TlsConfig:
        return cls(Party(name, role), insecure=True)

    def _read(self) -> tuple[bytes, bytes, bytes]:
        out = []
        for label, path in (("ca", self.ca), ("certificate", self.cert), ("key", self.key)):
            if path is None or not Path(path).is_file():
                raise ConfigError(
                    f"TLS {label} file not found: {path} (make certificates with `leteo-fed "
                    "certs`, docs/certificates.md, or point --tls-dir / [tls] at them)",
                    field=f"tls.{label}",
                )
            out.append(Path(path).read_bytes())
        ca, cert, key = out
        identity = read_identity(cert)
        if identity != self.identity:
            raise ConfigError(
                f"certificate {self.cert} is for {identity.role} '{identity.name}', "
                f"not {self.identity.role} '{self.identity.name}'",
                field="tls.cert",
            )
        return ca, cert, key

    def signer(self) -> Signer | None:
        """This party's signing key (its certificate's), or None in insecure mode."""
        if self.insecure:
            return None
        _, cert, key = self._read()
        return Signer.from_pem(cert, key)

    def role_ca(self, role: str) -> bytes | None:
        """The authority that certifies `role`: `owners-ca.crt`, `analysts-ca.crt`,
        `aggregators-ca.crt` or `csps-ca.crt` beside `ca.crt`. A legacy folder with one CA in
        `ca.crt` falls back to it; a bundle of several never does, since it would let every
        authority in it certify the role. None in insecure mode."""
        if self.insecure or self.ca is None:
            return None
        bundle = Path(self.ca)
        authority = authority_of(role)
        own = bundle.parent / ca_file(authority)
        if own.is_file():
            return own.read_bytes()
        if not bundle.is_file():
            raise ConfigError(f"TLS {authority}' CA file not found: {own}", field="tls.ca")
        pem = bundle.read_bytes()
        try:
            single = len(x509.load_pem_x509_certificates(pem)) == 1
        except ValueError as exc:
            raise ConfigError(f"unreadable CA bundle {bundle}: {exc}", field="tls.ca") from exc
        if not single:
            raise ConfigError(
                f"{own} not found: {bundle} holds several authorities, so the {authority}' "
                "CA must be in its own file (see docs/certificates.md)",
                field="tls.ca",
            )
        return pem

    def authorities(self) -> Authorities | None:
        """Each role's authority, for `require_role`; None in insecure mode."""
        if self.insecure or self.ca is None:
            return None
        by_role = {}
        for role in ROLES:
            try:
                by_role[role] = x509.load_pem_x509_certificates(self.role_ca(role) or b"")
            except ValueError as exc:
                raise ConfigError(f"unreadable CA for role {role}: {exc}", field="tls.ca") from exc
        return Authorities(by_role)

    def server_credentials(self) -> grpc.ServerCredentials:
        ca, cert, key = self._read()
        return grpc.ssl_server_credentials(
            [(key, cert)], root_certificates=ca, require_client_auth=True
        )

    def channel(self, target: str, *, peer: str) -> grpc.Channel:
        """A channel to the `peer` role's service at `target` (`peer="csp"`, `"aggregator"`,
        `"owner"`). With TLS it trusts only the authority of `peer` (`role_ca(peer)`), not the
        whole bundle: a server whose certificate another authority issued, say a "CSP" the
        aggregators' CA minted, fails the handshake (UNAVAILABLE) before any call is made."""
        authority_of(peer)  # an unknown role is a bug at the call site, even without TLS
        if self.insecure:
            channel = grpc.insecure_channel(target, options=CHANNEL_OPTIONS)
            header = (IDENTITY_HEADER, f"{self.identity.role}:{self.identity.name}")
            return grpc.intercept_channel(channel, _MetadataInterceptor(header))
        return grpc.secure_channel(target, self.channel_credentials(peer), options=CHANNEL_OPTIONS)

    def channel_credentials(self, peer: str) -> grpc.ChannelCredentials:
        """This party's certificate and key, trusting only the `peer` role's authority: what
        `channel` dials with (also for a grpc.aio channel, `aio.secure_channel`)."""
        _, cert, key = self._read()
        return grpc.ssl_channel_credentials(
            root_certificates=self.role_ca(peer), private_key=key, certificate_chain=cert
        )


class _MetadataInterceptor(
    grpc.UnaryUnaryClientInterceptor,
    grpc.UnaryStreamClientInterceptor,
    grpc.StreamUnaryClientInterceptor,
    grpc.StreamStreamClientInterceptor,
):
    def __init__(self, header: tuple[str, str]) -> None:
        self._header = header

    def _details(self, details: grpc.ClientCallDetails) -> grpc.ClientCallDetails:
        metadata = list(details.metadata or []) + [self._header]
        return _CallDetails(
            details.method,
            details.timeout,
            metadata,
            details.credentials,
            details.wait_for_ready,
            details.compression,
        )

    def intercept_unary_unary(self, continuation, details, request):
        return continuation(self._details(details), request)

    def intercept_unary_stream(self, continuation, details, request):
        return continuation(self._details(details), request)

    def intercept_stream_unary(self, continuation, details, request_iterator):
        return continuation(self._details(details), request_iterator)

    def intercept_stream_stream(self, continuation, details, request_iterator):
        return continuation(self._details(details), request_iterator)


@dataclass(frozen=True)
class _CallDetails(grpc.ClientCallDetails):
    method: str
    timeout: float | None
    metadata: Any
    credentials: Any
    wait_for_ready: Any
    compression: Any


def _peer_certificate(context: grpc.ServicerContext) -> bytes | None:
    pems = context.auth_context().get("x509_pem_cert")
    return pems[0] if pems else None


def peer_identity(context: grpc.ServicerContext) -> Party:
    pem = _peer_certificate(context)
    if pem is not None:
        return read_identity(pem)
    for key, value in context.invocation_metadata():
        if key == IDENTITY_HEADER and ":" in value:
            role, name = value.split(":", 1)
            return Party(name, role)
    raise AccessDenied("caller presented no certificate and no identity")


# The authorities of the server whose worker thread runs the current call: `make_server`
# binds them to every thread of the server's own pool, where gRPC runs all its handlers.
_SERVER = threading.local()


def _bind_authorities(authorities: Authorities | None) -> None:
    _SERVER.authorities = authorities


def require_role(context: grpc.ServicerContext, *roles: str) -> Party:
    """The caller, if its role is one of `roles` and (with TLS) its certificate was issued by
    that role's authority; AccessDenied otherwise."""
    party = peer_identity(context)
    if party.role not in roles:
        raise AccessDenied(
            f"{party.role} '{party.name}' may not call this method (allowed: {', '.join(roles)})"
        )
    pem = _peer_certificate(context)
    if pem is not None:
        authorities = getattr(_SERVER, "authorities", None)
        if authorities is None:  # a TLS server not made by make_server: refuse, do not guess
            raise AccessDenied("this server has no certificate authorities to check callers by")
        authorities.check(pem, party)
    return party


_CODES: list[tuple[type[Exception], grpc.StatusCode]] = [
    (AccessDenied, grpc.StatusCode.PERMISSION_DENIED),
    (NotFoundError, grpc.StatusCode.NOT_FOUND),
    (DuplicateError, grpc.StatusCode.ALREADY_EXISTS),
    (ProtocolError, grpc.StatusCode.FAILED_PRECONDITION),
    (PeerUnavailable, grpc.StatusCode.UNAVAILABLE),
    (Overloaded, grpc.StatusCode.RESOURCE_EXHAUSTED),
    (LeteoError, grpc.StatusCode.INVALID_ARGUMENT),
]


def status_code_for(exc: Exception) -> grpc.StatusCode:
    for kind, code in _CODES:
        if isinstance(exc, kind):
            return code
    return grpc.StatusCode.INTERNAL


# A status message travels in a header (percent-encoded, at most 16 KiB): one that echoes a
# huge field would be replaced by RESOURCE_EXHAUSTED "Stream removed" on the way.
MAX_STATUS_MESSAGE_CHARS = 1000


def _shorten(message: str) -> str:
    if len(message) <= MAX_STATUS_MESSAGE_CHARS:
        return message
    return message[: MAX_STATUS_MESSAGE_CHARS - 16] + " ... (truncated)"


def _failure(name: str, exc: Exception) -> tuple[grpc.StatusCode, str]:
    """The status a handler's exception ends its call with, logged: a LeteoError's own
    message, anything else an internal error (its traceback in the server log only)."""
    if isinstance(exc, LeteoError):
        message = _shorten(str(exc))
        log.warning("%s refused: %s", name, message)
        return status_code_for(exc), message
    log.error("%s failed", name, exc_info=exc)
    return grpc.StatusCode.INTERNAL, f"{name}: internal error, see server log"


def _abort(context: grpc.ServicerContext, name: str, exc: Exception) -> None:
    context.abort(*_failure(name, exc))


def rpc_method(func: Callable) -> Callable:
    """Map LeteoError to a gRPC status with a readable message; never leak a traceback."""

    @functools.wraps(func)
    def wrapper(self, request, context):
        try:
            return func(self, request, context)
        except Exception as exc:
            _abort(context, func.__name__, exc)

    return wrapper


def rpc_stream_method(func: Callable) -> Callable:
    """rpc_method for server-streaming handlers (generators)."""

    @functools.wraps(func)
    def wrapper(self, request, context):
        try:
            yield from func(self, request, context)
        except Exception as exc:
            _abort(context, func.__name__, exc)

    return wrapper


def rpc_async_stream_method(func: Callable) -> Callable:
    """rpc_stream_method for server-streaming coroutines (an event-loop server's)."""

    @functools.wraps(func)
    async def wrapper(self, request, context):
        try:
            async for reply in func(self, request, context):
                yield reply
        except asyncio.CancelledError:  # the caller went away: nothing to answer
            raise
        except Exception as exc:
            await context.abort(*_failure(func.__name__, exc))

    return wrapper


def rpc_error_message(exc: grpc.RpcError) -> str:
    """One line for a failed call, e.g. for the CLI."""
    code = exc.code() if hasattr(exc, "code") else None
    details = exc.details() if hasattr(exc, "details") else str(exc)
    name = code.name if code is not None else "ERROR"
    if code == grpc.StatusCode.UNAVAILABLE:
        details = (
            f"{details} (peer unreachable, it rejected our certificate, or its certificate was "
            "not issued by the authority of its role)"
        )
    return f"{name}: {details}"


@dataclass(frozen=True)
class _Undecodable:
    """What a request message's bytes became when they are no message of its type."""

    reason: str

    def error(self) -> DataError:
        return DataError(f"undecodable request: {self.reason}", field="request")


def _undecodable_iterator(requests: Iterator[Any]) -> Iterator[Any]:
    for request in requests:
        if isinstance(request, _Undecodable):
            raise request.error()  # where the handler reads it: its rpc_method maps it
        yield request


def _lenient(handler: grpc.RpcMethodHandler, method: str) -> grpc.RpcMethodHandler:
    """`handler` with a request deserializer that never raises: a request whose bytes do not
    parse reaches the handler as `_Undecodable` and is refused as INVALID_ARGUMENT naming the
    parse error. Left to gRPC it would be INTERNAL "Exception deserializing request!" with a
    traceback in the server log. Coroutine handlers (an event-loop server's) stay coroutines."""
    parse = handler.request_deserializer

    def lenient(raw: bytes) -> Any:
        try:
            return parse(raw)
        except DecodeError as exc:
            return _Undecodable(str(exc))

    def refusal(request: Any) -> DataError | None:
        if isinstance(request, _Undecodable):
            error = request.error()
            log.warning("%s refused: %s", method, error)
            return error
        return None

    behavior: Callable[..., Any]
    if handler.request_streaming:
        inner = handler.stream_stream or handler.stream_unary

        def behavior(requests, context):
            return inner(_undecodable_iterator(requests), context)

    else:
        inner = handler.unary_stream or handler.unary_unary
        if inspect.isasyncgenfunction(inner):

            async def behavior(request, context):
                error = refusal(request)
                if error is not None:
                    await context.abort(grpc.StatusCode.INVALID_ARGUMENT, _shorten(str(error)))
                async for reply in inner(request, context):
                    yield reply

        else:

            def behavior(request, context):
                error = refusal(request)
                if error is not None:
                    context.abort(grpc.StatusCode.INVALID_ARGUMENT, _shorten(str(error)))
                return inner(request, context)

    make = {
        (False, False): grpc.unary_unary_rpc_method_handler,
        (False, True): grpc.unary_stream_rpc_method_handler,
        (True, False): grpc.stream_unary_rpc_method_handler,
        (True, True): grpc.stream_stream_rpc_method_handler,
    }[(handler.request_streaming, handler.response_streaming)]
    return make(
        behavior,
        request_deserializer=lenient,
        response_serializer=handler.response_serializer,
    )


class _RefuseUndecodable(grpc.ServerInterceptor):
    """Undecodable requests refused by name (`_lenient`), on a thread-pool server."""

    def intercept_service(self, continuation, handler_call_details):
        handler = continuation(handler_call_details)
        if handler is None or handler.request_deserializer is None:
            return handler
        return _lenient(handler, handler_call_details.method)


class _AioRefuseUndecodable(grpc.aio.ServerInterceptor):
    """Undecodable requests refused by name (`_lenient`), on an event-loop server."""

    async def intercept_service(self, continuation, handler_call_details):
        handler = await continuation(handler_call_details)
        if handler is None or handler.request_deserializer is None:
            return handler
        return _lenient(handler, handler_call_details.method)


def make_server(tls: TlsConfig, listen: str, workers: int = 16) -> tuple[grpc.Server, int]:
    """A gRPC server for `tls`; its worker threads carry the party's role authorities (read
    once, here) for `require_role`. Requests that do not parse are refused as INVALID_ARGUMENT."""
    pool = futures.ThreadPoolExecutor(
        max_workers=workers, initializer=_bind_authorities, initargs=(tls.authorities(),)
    )
    server = grpc.server(pool, options=SERVER_OPTIONS, interceptors=[_RefuseUndecodable()])
    if tls.insecure:
        log.warning(INSECURE_WARNING)
    credentials = None if tls.insecure else tls.server_credentials()
    return server, bind(server, listen, credentials, "listen")


class LoopServer:
    """A grpc.aio server on an event loop of its own thread, driven like a `grpc.Server`.

    Why: a thread-pool server gives every open server-streaming call a thread for its whole
    life, so ten thousand owners' open streams would need ten thousand threads. Here handlers
    written as coroutines (an owner's stream) run on the loop, as many as there are sockets,
    and every plain handler runs on the worker pool as before (`migration_thread_pool`)."""

    def __init__(self, pool: futures.ThreadPoolExecutor, authorities: Authorities | None) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._run, name="grpc-loop", daemon=True)
        self._thread.start()
        # `require_role` reads the authorities of the thread a handler runs on: the loop's too
        self.loop.call_soon_threadsafe(_bind_authorities, authorities)
        self._server: grpc.aio.Server = self._call(self._create(pool))

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.loop.run_forever()

    async def _create(self, pool: futures.ThreadPoolExecutor) -> grpc.aio.Server:
        return grpc.aio.server(
            migration_thread_pool=pool,
            options=SERVER_OPTIONS,
            interceptors=[_AioRefuseUndecodable()],
        )

    def _call(self, coroutine: Any, timeout: float | None = 30.0) -> Any:
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop).result(timeout)

    def __getattr__(self, name: str) -> Any:  # add_*_port, add_generic_rpc_handlers, ...
        return getattr(self._server, name)

    def start(self) -> None:
        self._call(self._server.start())

    def stop(self, grace: float | None) -> threading.Event:
        """Stop accepting calls, give in-flight ones `grace` seconds, then stop the loop; the
        returned event is set once it has (a `grpc.Server.stop` future stands in the same way)."""
        done = threading.Event()

        async def stopping() -> None:
            try:
                await self._server.stop(grace)
            finally:
                done.set()
                self.loop.call_soon(self.loop.stop)

        asyncio.run_coroutine_threadsafe(stopping(), self.loop)
        return done


def make_loop_server(tls: TlsConfig, listen: str, workers: int = 32) -> tuple[LoopServer, int]:
    """`make_server`'s event-loop twin (`LoopServer`): for a service whose clients hold calls
    open for hours, the aggregator's outbound owners."""
    authorities = tls.authorities()
    pool = futures.ThreadPoolExecutor(
        max_workers=workers, initializer=_bind_authorities, initargs=(authorities,)
    )
    server = LoopServer(pool, authorities)
    if tls.insecure:
        log.warning(INSECURE_WARNING)
    credentials = None if tls.insecure else tls.server_credentials()
    return server, bind(server, listen, credentials, "listen")


def bind(
    server: grpc.Server, listen: str, credentials: grpc.ServerCredentials | None, field: str
) -> int:
    """Add a port to `server`; an address in use or invalid is a ConfigError naming the flag
    (gRPC raises or returns 0, depending on the version), never a traceback. A port in use is
    found before gRPC tries it, which would log its own error line first."""
    if _in_use(listen):
        raise ConfigError(
            f"cannot listen on {listen} (--{field.replace('_', '-')}): the address is in use by "
            "another process",
            field=field,
        )
    try:
        if credentials is None:
            port = server.add_insecure_port(listen)
        else:
            port = server.add_secure_port(listen, credentials)
    except RuntimeError:
        port = 0
    if port == 0:
        flag = "--" + field.replace("_", "-")
        raise ConfigError(
            f"cannot listen on {listen} ({flag}): the address is in use by another process or "
            "is not a valid host:port",
            field=field,
        )
    return port


def _in_use(listen: str) -> bool:
    """Whether another socket already listens on `listen` (host:port). The probe binds without
    SO_REUSEPORT, so a gRPC server there (which sets it) is found too; port 0 and addresses
    that do not resolve are left to gRPC."""
    host, _, port = listen.rpartition(":")
    host = host[1:-1] if host.startswith("[") and host.endswith("]") else host
    if not port.isdigit() or int(port) == 0:
        return False
    try:
        infos = socket.getaddrinfo(
            host or None, int(port), type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
        )
    except (OSError, UnicodeError):
        return False
    for family, kind, proto, _, address in infos:
        with socket.socket(family, kind, proto) as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as gRPC: not TIME_WAIT
            try:
                probe.bind(address)
            except OSError as exc:
                if exc.errno == errno.EADDRINUSE:
                    return True
    return False


class Drains(Protocol):
    """What a server's health (`transport.health.ServiceHealth`) does at shutdown."""

    def drain(self) -> None: ...

    def close(self) -> None: ...


def serve_until_signal(
    server: grpc.Server | None,
    name: str,
    on_stop: Callable[[], None] | None = None,
    health: Drains | None = None,
) -> None:
    """Block until SIGINT/SIGTERM, then stop gracefully (in-flight calls get 5 s): health
    probes hear NOT_SERVING first. Without a server (an outbound-only owner) only `on_stop`
    runs."""
    import signal

    stopped = threading.Event()

    def _stop(signum, _frame):
        log.info("%s: received signal %d, shutting down", name, signum)
        stopped.set()

    signal.signal(signal.SIGTERM, _stop)
    signal.signal(signal.SIGINT, _stop)
    if server is not None:
        server.start()
    # a timed wait: a signal the kernel hands to another thread only runs its Python handler
    # once the main thread wakes, and an untimed wait may never wake (a missed Ctrl-C)
    while not stopped.wait(0.5):
        pass
    if health is not None:
        health.drain()
    if on_stop:
        on_stop()
    if server is not None:
        server.stop(grace=5).wait()
    if health is not None:
        health.close()
    log.info("%s: stopped", name)
