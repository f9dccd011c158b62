"""The services' Prometheus metrics (leteo_fed/transport/metrics.py), in one process.

Checked: every metric docs/metrics.md lists exists (and the other way round); each service's
metrics live in a registry of its own; label values come from fixed sets (protocols, refusal
reasons, decline rules: every rule an owner can send is known, free text is 'other'); the owner's
budget gauges follow its ledger file; the HTTP endpoint serves them, and an address in use or a
malformed one is a one-line ConfigError naming --metrics.
"""

from __future__ import annotations

import re
import socket
import urllib.request
from pathlib import Path

import grpc
import pytest
from prometheus_client.parser import text_string_to_metric_families

from leteo_fed.demo.ports import free_port
from leteo_fed.errors import (
    AccessDenied,
    ConfigError,
    DataError,
    DuplicateError,
    LeteoError,
    NotFoundError,
    ProtocolError,
)
from leteo_fed.privacy.accounting import GaussianEvent
from leteo_fed.privacy.budget import Budget
from leteo_fed.privacy.ledger import PrivacyLedger
from leteo_fed.transport import metrics
from leteo_fed.transport.metrics import (
    DECLINE_RULES,
    REFUSAL_REASONS,
    AggregatorMetrics,
    CspMetrics,
    OwnerMetrics,
    decline_rule,
    protocol_label,
    refusal_reason,
)

ROOT = Path(__file__).resolve().parents[3]


def _samples(m: metrics.ServiceMetrics) -> dict[tuple[str, tuple], float]:
    """Every sample of a registry: (name, sorted labels) -> value."""
    out = {}
    for family in m.registry.collect():
        for s in family.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def _value(m: metrics.ServiceMetrics, name: str, **labels: str) -> float:
    return _samples(m).get((name, tuple(sorted(labels.items()))), 0.0)


def _families(m: metrics.ServiceMetrics) -> set[str]:
    """Metric names as exposed (counters with their _total)."""
    names = set()
    for family in m.registry.collect():
        names.add(family.name + ("_total" if family.type == "counter" else ""))
    return names


def _all_metrics(tmp_path: Path) -> set[str]:
    owner = OwnerMetrics()
    owner.watch_ledger(PrivacyLedger(tmp_path / "ledger.json", 1.0, 1e-5))
    return _families(AggregatorMetrics()) | _families(CspMetrics()) | _families(owner)


def test_docs_list_every_metric_and_only_those(tmp_path):
    exposed = _all_metrics(tmp_path)
    assert {"leteo_rounds_started_total", "leteo_csp_decryptions_total"} <= exposed
    documented = set(re.findall(r"`(leteo_[a-z_]+)`", (ROOT / "docs/metrics.md").read_text()))
    assert exposed == documented, (exposed - documented, documented - exposed)


def test_each_service_has_a_registry_of_its_own():
    a, b = AggregatorMetrics(), AggregatorMetrics()
    a.round_started("pca")
    assert _value(a, "leteo_rounds_started_total", protocol="pca") == 1
    assert _value(b, "leteo_rounds_started_total", protocol="pca") == 0


def test_rounds_shares_and_owners_at_the_aggregator():
    m = AggregatorMetrics()
    connected = [3]
    m.watch_owners(lambda: connected[0])
    m.round_started("pca")
    m.share_received("pca")
    m.share_received("ldp", reports=250)
    m.round_ended("pca", True, 2.0)
    m.round_ended("kmeans", False, 0.2)
    assert _value(m, "leteo_rounds_completed_total", protocol="pca") == 1
    assert _value(m, "leteo_rounds_failed_total", protocol="kmeans") == 1
    assert _value(m, "leteo_round_duration_seconds_count", protocol="pca") == 1
    assert _value(m, "leteo_round_duration_seconds_sum", protocol="pca") == 2.0
    assert _value(m, "leteo_shares_received_total", protocol="ldp") == 1
    assert _value(m, "leteo_reports_received_total", protocol="ldp") == 250
    assert _value(m, "leteo_connected_owners") == 3
    connected[0] = 2  # read at each scrape
    assert _value(m, "leteo_connected_owners") == 2
    # every refusal reason is there from the start, at 0
    for reason in REFUSAL_REASONS:
        assert ("leteo_shares_refused_total", (("reason", reason),)) in _samples(m)


def test_protocol_labels_are_bounded():
    assert protocol_label("pca") == "pca"
    assert protocol_label("weighted_stats") == "weighted_stats"
    assert protocol_label("site-7 round 12") == "other"
    assert protocol_label("") == "other"


def _policy_rules() -> set[str]:
    """Every `policy.<rule>:` an owner's policy can decline with (owner_agent/policy.py)."""
    text = (ROOT / "owner_agent/policy.py").read_text()
    return set(re.findall(r"\"(policy\.[a-z_]+): ", text))


def test_every_rule_an_owner_can_send_is_a_known_label():
    from owner_agent.refusals import SENTENCES, Refusal

    rules = set(SENTENCES) | _policy_rules()
    assert {"policy.columns", "policy.analysts", "policy.data_refusals"} <= rules
    assert rules <= DECLINE_RULES
    for name in SENTENCES:
        assert decline_rule(Refusal.rule(name).public) == name
    assert decline_rule("policy.columns: column 'x' may not be used") == "policy.columns"
    assert decline_rule("authorization: the request is too old") == "authorization"
    assert decline_rule("spec: quorum differs") == "spec"
    assert decline_rule("unreachable: no answer to the invitation within 30 s") == "unreachable"
    assert decline_rule("upload refused: UNAVAILABLE: gone") == "upload"
    assert decline_rule("") == "declined"
    # free text an owner (or an attacker holding an owner's certificate) writes stays 'other'
    assert decline_rule("site-3 has 17 rows, max value 4.2") == "other"
    assert decline_rule("policy.my_secret_rule: x") == "other"


def test_refusal_reasons_are_a_fixed_set():
    cases = {
        NotFoundError("unknown round 'x'"): "unknown_round",
        DuplicateError("owner 'a' already submitted a share to r"): "duplicate",
        AccessDenied("owner 'a' was not invited to round r"): "denied",
        DataError("share has dimension 3"): "invalid",
        ProtocolError("round r passed its deadline; share refused"): "late",
        ProtocolError("round r is closed; share from a refused"): "closed",
        ProtocolError("incomplete share: 3 of 9 ciphertexts arrived"): "incomplete",
        ProtocolError("share encrypted under key k1, round uses k2"): "invalid",
        ProtocolError("only ciphertext batches may follow the share header"): "protocol",
        LeteoError("something"): "protocol",
        grpc.RpcError(): "aborted",
        ValueError("bug"): "internal",
    }
    for exc, reason in cases.items():
        assert refusal_reason(exc) == reason, exc
        assert reason in REFUSAL_REASONS
    m = AggregatorMetrics()
    m.share_refused(DuplicateError("again"))
    assert _value(m, "leteo_shares_refused_total", reason="duplicate") == 1


def test_csp_decryptions_and_their_times():
    m = CspMetrics()
    m.opened("blinded")
    m.decrypted("blinded", 0.02, 0.5)
    m.decrypted("projection", 0.01, 0.1)
    m.refused(ProtocolError("quorum not met"))
    assert _value(m, "leteo_csp_rounds_opened_total", mode="blinded") == 1
    assert _value(m, "leteo_csp_decryptions_total", mode="blinded") == 1
    assert _value(m, "leteo_csp_decryptions_total", mode="projection") == 1
    assert _value(m, "leteo_csp_verification_seconds_sum", mode="blinded") == 0.02
    assert _value(m, "leteo_csp_decryption_seconds_count", mode="projection") == 1
    assert _value(m, "leteo_csp_refusals_total", reason="protocol") == 1
    m.opened("anything else")
    assert _value(m, "leteo_csp_rounds_opened_total", mode="other") == 1


def test_owner_decisions_and_budget_follow_the_ledger(tmp_path):
    ledger = PrivacyLedger(tmp_path / "ledger.json", 2.0, 1e-5)
    m = OwnerMetrics()
    m.watch_ledger(ledger)
    assert _value(m, "leteo_owner_budget_epsilon_total") == 2.0
    assert _value(m, "leteo_owner_budget_epsilon_spent") == 0.0
    assert _value(m, "leteo_owner_budget_epsilon_left") == 2.0
    ledger.reserve("r1", "skellam", Budget(0.5, 1e-6))
    assert _value(m, "leteo_owner_budget_epsilon_reserved") == 0.5
    assert _value(m, "leteo_owner_budget_epsilon_left") == 1.5
    ledger.commit("r1")
    assert _value(m, "leteo_owner_budget_epsilon_spent") == 0.5
    assert _value(m, "leteo_owner_budget_epsilon_reserved") == 0.0
    # another process (a second agent on the same ledger) charges: seen at the next scrape
    PrivacyLedger(tmp_path / "ledger.json", 2.0, 1e-5).charge("r2", "laplace", Budget(1.0, 0.0))
    assert _value(m, "leteo_owner_budget_epsilon_spent") == 1.5
    assert _value(m, "leteo_owner_budget_epsilon_left") == 0.5
    # the figures are the ledger's, under its accountant (RDP: a Gaussian's curve composed)
    assert _value(m, "leteo_owner_budget_accountant_rdp") == 1.0
    ledger.charge("r3", "gaussian", Budget(0.01, 1e-7), event=GaussianEvent(400.0))
    assert _value(m, "leteo_owner_budget_epsilon_spent") == ledger.spent().epsilon > 1.5
    # an unreadable ledger is NaN for that scrape, not a failed scrape
    (tmp_path / "ledger.json").write_text("{not json")
    left = _value(m, "leteo_owner_budget_epsilon_left")
    assert left != left  # NaN

    m.decided(True)
    m.decided(False, "budget: this site's privacy budget does not cover the round")
    m.refused("columns: a column the round reads is not in this site's data")
    m.uploaded(reports=False)
    assert _value(m, "leteo_owner_rounds_total", decision="accepted") == 1
    assert _value(m, "leteo_owner_rounds_total", decision="declined") == 1
    assert _value(m, "leteo_owner_declines_total", rule="budget") == 1
    assert _value(m, "leteo_owner_declines_total", rule="columns") == 1
    assert _value(m, "leteo_owner_uploads_total", kind="share") == 1


def test_an_owner_without_a_budget_has_no_budget_gauges():
    m = OwnerMetrics()
    m.watch_ledger(None)
    assert not {n for n in _families(m) if "budget" in n}


def test_the_endpoint_serves_the_registry_over_http():
    m = AggregatorMetrics()
    m.round_started("pca")
    listen = f"127.0.0.1:{free_port()}"
    server = m.serve(listen)
    try:
        with urllib.request.urlopen(f"http://{listen}/metrics", timeout=5) as reply:
            text = reply.read().decode()
    finally:
        server.shutdown()
        server.server_close()
    families = {f.name: f for f in text_string_to_metric_families(text)}
    started = families["leteo_rounds_started"]
    assert [(s.labels, s.value) for s in started.samples if s.name.endswith("_total")] == [
        ({"protocol": "pca"}, 1.0)
    ]
    assert "process_cpu_seconds" in families and "python_info" in families
    assert m.serve(None) is None  # off by default


def test_an_address_in_use_or_malformed_is_one_line_naming_the_flag():
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        busy = f"127.0.0.1:{held.getsockname()[1]}"
        with pytest.raises(ConfigError) as err:
            AggregatorMetrics().serve(busy)
    message = str(err.value)
    assert f"cannot listen on {busy} (--metrics)" in message and "\n" not in message
    for bad in ("9464", "127.0.0.1:", "127.0.0.1:99999", "host:port"):
        with pytest.raises(ConfigError, match="--metrics must be HOST:PORT"):
            CspMetrics().serve(bad)
    assert metrics.parse_listen("[::1]:9464") == ("::1", 9464)
