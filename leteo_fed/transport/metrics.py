"""Prometheus metrics of the three services (docs/metrics.md lists every one).

Each service object holds its own metrics (`AggregatorMetrics`, `CspMetrics`, `OwnerMetrics`),
each with its own `CollectorRegistry`: several services in one process (the tests) never share
or clash. `serve` exposes a registry over HTTP on the `--metrics HOST:PORT` address (default
off). Labels take values from small fixed sets only (a protocol, a refusal reason, a decline
rule): never a round id, a site id, an analyst or free text, so no label can grow without bound
and no metric says anything about anyone's data. Instrumentation is one call per event (a round,
a share, a decryption), never per row or per ciphertext.
"""

from __future__ import annotations

import logging
import math
import re
from collections.abc import Callable
from typing import Any

import grpc
from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    PlatformCollector,
    ProcessCollector,
    start_http_server,
)

from leteo_fed.errors import (
    AccessDenied,
    ConfigError,
    DataError,
    DuplicateError,
    EncodingError,
    LeteoError,
    NotFoundError,
    ProtocolError,
)

log = logging.getLogger("leteo.metrics")

ENV = "LETEO_METRICS_LISTEN"
OTHER = "other"

# rounds last seconds to an hour (their deadline); the CSP's steps milliseconds to minutes
ROUND_BUCKETS = (0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0, 1800.0, 3600.0)
ANSWER_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)
CSP_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0)

# why the aggregator refused an upload (a share or LDP reports), or the CSP a decryption
REFUSAL_REASONS = (
    "denied",  # the caller may not send it: not invited, wrong identity or signature
    "unknown_round",  # no such round (any more)
    "duplicate",  # the owner's second upload to the round
    "closed",  # the round had closed (quorum in, or failed)
    "late",  # past the round's deadline
    "invalid",  # malformed: wrong key, dimension, encoding, count, ciphertext or statement
    "incomplete",  # the stream broke off before the upload was whole
    "protocol",  # any other protocol violation
    "aborted",  # the call itself failed (cancelled, connection lost)
    "internal",  # a bug
)

# the rule part of an owner's refusal (`<rule>: <sentence>`, owner_agent/refusals.py and
# owner_agent/policy.py) and of the aggregator's own declines (`unreachable: ...`)
DECLINE_RULES = frozenset(
    {
        # owner_agent/refusals.py: the site's data, its budget, a crash
        "bounds",
        "values",
        "rows",
        "classes",
        "columns",
        "data",
        "budget",
        "internal",
        # owner_agent/policy.py
        "policy.protocols",
        "policy.columns",
        "policy.min_other_owners",
        "policy.non_dp",
        "policy.analysts",
        "policy.min_rows",
        "policy.non_dp_repeats",
        "policy.data_refusals",
        # the signed request and the round's spec (owner_agent/authorization.py)
        "authorization",
        "spec",
        # the aggregator could not reach the owner, or the owner's upload failed
        "unreachable",
        "upload",
        "declined",  # a decline that gave no reason
    }
)
_ALIASES = {"upload refused": "upload", "replayed authorization": "authorization"}
_PROTOCOL = re.compile(r"[a-z][a-z0-9_]{0,31}")


def protocol_label(label: str) -> str:
    """A round's protocol as a label value ("pca", "kmeans", "ldp"...): the plan's label, a
    name from a fixed set; anything else (never expected) is 'other'."""
    return label if _PROTOCOL.fullmatch(label or "") else OTHER


def decline_rule(reason: str) -> str:
    """The rule of a decline, from its text ('policy.columns: ...' -> 'policy.columns'); a
    text naming no known rule is 'other' (owners write the reason: the label set stays fixed)."""
    head = reason.split(":", 1)[0].strip().lower() if reason else "declined"
    head = _ALIASES.get(head, head)
    return head if head in DECLINE_RULES else OTHER


def refusal_reason(exc: BaseException) -> str:
    """One of REFUSAL_REASONS for the error an upload or a decryption was refused with."""
    if isinstance(exc, NotFoundError):
        return "unknown_round"
    if isinstance(exc, DuplicateError):
        return "duplicate"
    if isinstance(exc, AccessDenied):
        return "denied"
    if isinstance(exc, DataError | EncodingError):
        return "invalid"
    if isinstance(exc, ProtocolError):
        text = str(exc)
        if "deadline" in text:
            return "late"
        if "closed" in text or "declined" in text:
            return "closed"
        if "incomplete" in text:
            return "incomplete"
        if "statement" in text or "signed" in text or "key" in text:
            return "invalid"
        return "protocol"
    if isinstance(exc, LeteoError):
        return "protocol"
    if isinstance(exc, grpc.RpcError | GeneratorExit | ConnectionError):
        return "aborted"
    return "internal"


class ServiceMetrics:
    """One service's registry; `serve` publishes it."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry if registry is not None else CollectorRegistry()

    def _counter(self, name: str, doc: str, labels: tuple[str, ...] = ()) -> Counter:
        return Counter(name, doc, labels, registry=self.registry)

    def _gauge(self, name: str, doc: str) -> Gauge:
        return Gauge(name, doc, registry=self.registry)

    def _histogram(
        self, name: str, doc: str, labels: tuple[str, ...], buckets: tuple[float, ...]
    ) -> Histogram:
        return Histogram(name, doc, labels, buckets=buckets, registry=self.registry)

    def serve(self, listen: str | None) -> Any:
        """With `listen` (`--metrics HOST:PORT`): the metrics over HTTP at /metrics, plus this
        process's CPU, memory and Python version; the HTTP server (None: off)."""
        if not listen:
            return None
        self.with_process_metrics()
        return serve(listen, self.registry)

    def with_process_metrics(self) -> None:
        """process_* (CPU, memory, open files) and python_info of this process."""
        if not getattr(self, "_process", False):
            ProcessCollector(registry=self.registry)
            PlatformCollector(registry=self.registry)
            self._process = True


class AggregatorMetrics(ServiceMetrics):
    """Rounds, uploads and declines as the aggregator sees them."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        super().__init__(registry)
        p = ("protocol",)
        self.rounds_started = self._counter(
            "leteo_rounds_started", "Rounds whose invitations went out", p
        )
        self.rounds_completed = self._counter(
            "leteo_rounds_completed", "Rounds that completed (quorum in, revealed)", p
        )
        self.rounds_failed = self._counter(
            "leteo_rounds_failed", "Rounds that failed (no quorum, CSP refusal or outage...)", p
        )
        self.round_duration = self._histogram(
            "leteo_round_duration_seconds",
            "Seconds from a round's invitations to its end (completed or failed)",
            p,
            ROUND_BUCKETS,
        )
        self.answer_latency = self._histogram(
            "leteo_invitation_answer_seconds",
            "Seconds from a round's invitations to an owner's answer (accepted or declined)",
            (),
            ANSWER_BUCKETS,
        )
        self.shares_received = self._counter(
            "leteo_shares_received",
            "Uploads accepted into a round: encrypted shares, or one owner's LDP reports",
            p,
        )
        self.reports_received = self._counter(
            "leteo_reports_received", "LDP reports accepted (summed over the uploads)", p
        )
        self.shares_refused = self._counter(
            "leteo_shares_refused", "Uploads refused, by reason", ("reason",)
        )
        self.declines = self._counter(
            "leteo_declines", "Owners' declines of a round, by rule", ("rule",)
        )
        self.connected_owners = self._gauge(
            "leteo_connected_owners",
            "Owners the aggregator can reach now: outbound ones with an open stream, and "
            "registered inbound ones",
        )
        for reason in REFUSAL_REASONS:  # every reason shows, at 0, from the first scrape
            self.shares_refused.labels(reason)

    def round_started(self, protocol: str) -> None:
        self.rounds_started.labels(protocol_label(protocol)).inc()

    def round_ended(self, protocol: str, completed: bool, seconds: float) -> None:
        label = protocol_label(protocol)
        (self.rounds_completed if completed else self.rounds_failed).labels(label).inc()
        if math.isfinite(seconds) and seconds >= 0:
            self.round_duration.labels(label).observe(seconds)

    def share_received(self, protocol: str, reports: int = 0) -> None:
        label = protocol_label(protocol)
        self.shares_received.labels(label).inc()
        if reports:
            self.reports_received.labels(label).inc(reports)

    def share_refused(self, exc: BaseException) -> None:
        self.shares_refused.labels(refusal_reason(exc)).inc()

    def declined(self, reason: str) -> None:
        self.declines.labels(decline_rule(reason)).inc()

    def answered(self, seconds: float) -> None:
        if math.isfinite(seconds) and seconds >= 0:
            self.answer_latency.observe(seconds)

    def watch_owners(self, count: Callable[[], int]) -> None:
        """`leteo_connected_owners` is `count()` at each scrape."""
        self.connected_owners.set_function(lambda: float(count()))


class CspMetrics(ServiceMetrics):
    """The CSP's rounds and decryptions."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        super().__init__(registry)
        m = ("mode",)
        self.rounds_opened = self._counter(
            "leteo_csp_rounds_opened", "Rounds the aggregator opened at the CSP", m
        )
        self.decryptions = self._counter(
            "leteo_csp_decryptions", "Rounds decrypted (a blinded sum or a rotated aggregate)", m
        )
        self.refusals = self._counter(
            "leteo_csp_refusals", "Decryptions refused after the round was claimed", ("reason",)
        )
        self.verification = self._histogram(
            "leteo_csp_verification_seconds",
            "Seconds verifying one round's shares (signatures, digests, ciphertexts)",
            m,
            CSP_BUCKETS,
        )
        self.decryption = self._histogram(
            "leteo_csp_decryption_seconds",
            "Seconds decrypting one round's summed ciphertexts",
            m,
            CSP_BUCKETS,
        )

    def opened(self, mode: str) -> None:
        self.rounds_opened.labels(_mode(mode)).inc()

    def decrypted(self, mode: str, verify_seconds: float, decrypt_seconds: float) -> None:
        label = _mode(mode)
        self.decryptions.labels(label).inc()
        self.verification.labels(label).observe(max(verify_seconds, 0.0))
        self.decryption.labels(label).observe(max(decrypt_seconds, 0.0))

    def refused(self, exc: BaseException) -> None:
        self.refusals.labels(refusal_reason(exc)).inc()


def _mode(mode: str) -> str:
    return mode if mode in ("blinded", "projection", "partial") else OTHER


class OwnerMetrics(ServiceMetrics):
    """One site's invitations, uploads and privacy budget."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        super().__init__(registry)
        self.rounds = self._counter(
            "leteo_owner_rounds",
            "Invitations this site answered, by decision (accepted, declined)",
            ("decision",),
        )
        self.uploads = self._counter(
            "leteo_owner_uploads",
            "Uploads this site sent: an encrypted share or its LDP reports",
            ("kind",),
        )
        self.declines = self._counter(
            "leteo_owner_declines",
            "Refusals this site sent (at the invitation or after accepting), by rule",
            ("rule",),
        )
        for decision in ("accepted", "declined"):
            self.rounds.labels(decision)

    def decided(self, accepted: bool, reason: str = "") -> None:
        self.rounds.labels("accepted" if accepted else "declined").inc()
        if not accepted:
            self.refused(reason)

    def refused(self, reason: str) -> None:
        self.declines.labels(decline_rule(reason)).inc()

    def uploaded(self, reports: bool) -> None:
        self.uploads.labels("reports" if reports else "share").inc()

    def watch_ledger(self, ledger: Any) -> None:
        """The privacy budget (epsilon) read from the site's ledger file at each scrape: total,
        spent (committed), reserved (rounds in flight) and left, each under the ledger's
        accountant (the same figures as `leteo-fed owner budget`), and which accountant that is.
        None: no [privacy], no gauge."""
        if ledger is None:
            return
        gauges = {
            "total": ("Epsilon this site's ledger allows in all", lambda: ledger.epsilon_total),
            "spent": ("Epsilon committed", lambda: ledger.spent().epsilon),
            "reserved": ("Epsilon reserved by rounds in flight", lambda: ledger.reserved().epsilon),
            "left": ("Epsilon still available", lambda: ledger.remaining().epsilon),
        }
        for name, (doc, read) in gauges.items():
            gauge = self._gauge(f"leteo_owner_budget_epsilon_{name}", doc)
            gauge.set_function(_safe(read))
        # spent and left are composed under the current period's accountant: say which
        self._gauge(
            "leteo_owner_budget_accountant_rdp",
            "1: the ledger composes releases by Renyi DP (rdp accountant); 0: basic composition",
        ).set_function(_safe(lambda: 1.0 if ledger.accountant == "rdp" else 0.0))


def _safe(read: Callable[[], float]) -> Callable[[], float]:
    """A ledger that cannot be read is NaN for that scrape, not a failed scrape."""

    def value() -> float:
        try:
            return float(read())
        except Exception:
            log.warning("metrics: could not read the privacy ledger", exc_info=True)
            return math.nan

    return value


def parse_listen(listen: str, flag: str = "--metrics") -> tuple[str, int]:
    """'HOST:PORT' (an IPv6 host in brackets) -> (host, port); ConfigError naming the flag."""
    host, sep, port = listen.rpartition(":")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ConfigError(
            f"{flag} must be HOST:PORT (e.g. 127.0.0.1:9464), got {listen!r}", field="metrics"
        )
    return host, int(port)


def serve(listen: str, registry: CollectorRegistry) -> Any:
    """Serve `registry` at http://listen/metrics in a daemon thread; an address in use or
    invalid is a one-line ConfigError naming --metrics, never a traceback."""
    host, port = parse_listen(listen)
    try:
        server, _thread = start_http_server(port, host, registry=registry)
    except OSError as exc:
        raise ConfigError(
            f"cannot listen on {listen} (--metrics): the address is in use by another process "
            f"or is not a valid host:port ({exc.strerror or exc})",
            field="metrics",
        ) from None
    log.info("Prometheus metrics on http://%s/metrics", listen)
    return server
