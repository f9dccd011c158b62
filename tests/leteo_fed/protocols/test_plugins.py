"""Plugin statistics: found by entry point, named and versioned on the wire, run by owners
only where installed at the same version and named by the site's policy ("*" does not cover
them). The example plugin (examples/plugin-skewness) is installed by `make test`."""

from __future__ import annotations

import dataclasses

import pytest

from leteo_fed.config import OwnerPolicy
from leteo_fed.errors import DataError
from leteo_fed.protocols import plugin_loader, registry
from leteo_fed.protocols.plugins import StatisticRequest, StatisticSpec
from leteo_fed.protocols.requests import Common
from leteo_fed.transport import membership
from leteo_fed.transport.rounds import (
    invitation_from_proto,
    request_from_proto,
    spec_to_proto,
)
from owner_agent.policy import refusal


def _skewness():
    from leteo_skewness import SkewnessRequest

    return SkewnessRequest(features=("a", "b"))


def test_the_installed_plugin_is_found_with_its_command_and_request():
    assert "skewness" in plugin_loader.installed()
    assert [p.name for p in registry.statistics()][-1] == "skewness"
    dispatch = registry.for_request(_skewness())
    assert dispatch is registry.get("statistic")
    wire = dispatch.wire_request(_skewness())
    assert wire == StatisticRequest("skewness", "1.0.0", '{"features":["a","b"]}')


def test_the_request_travels_as_its_name_version_and_canonical_json():
    from leteo_fed.client import RoundOptions, round_request

    msg = round_request(_skewness(), RoundOptions())
    assert msg.WhichOneof("payload") == "statistic"
    protocol, request = request_from_proto(msg)
    assert protocol.name == "statistic" and request.name == "skewness"
    plan = protocol.plan(request, Common(n_invited=3))
    assert plan.label == "skewness" and plan.spec.features == ("a", "b")


def test_another_version_or_a_missing_plugin_is_refused_by_name():
    dispatch = registry.get("statistic")
    # the refusal reaches the aggregator: it names the round's ask, not the site's plugins
    with pytest.raises(DataError, match="'skewness' version 2 is not installed here") as err:
        dispatch.columns(StatisticSpec("skewness", "2", '{"features":["a"]}'))
    assert "1.0.0" not in str(err.value)
    with pytest.raises(DataError, match="'gini' is not installed here") as err:
        dispatch.columns(StatisticSpec("gini", "1", "{}"))
    assert "skewness" not in str(err.value)
    with pytest.raises(DataError, match="unknown field"):
        dispatch.columns(StatisticSpec("skewness", "1.0.0", '{"features":["a"],"x":1}'))


def _invitation():
    protocol = registry.get("statistic")
    plan = protocol.plan(protocol.wire_request(_skewness()), Common(n_invited=3, min_owners=3))
    rnd = protocol.next_round(plan, None, 1)
    invited = ["a", "b", "c"]
    msg = spec_to_proto(
        "r1",
        protocol,
        rnd,
        "key",
        0.0,
        rnd.share_encoding.layout(2048),
        3,
        "",
        None,
        membership.root(invited),
        3,
    )
    return invitation_from_proto(msg, 2048)


def test_a_site_takes_part_only_if_its_policy_names_the_plugin():
    inv = _invitation()
    assert inv.label == "skewness" and isinstance(inv.spec, StatisticSpec)
    open_policy = OwnerPolicy(columns=("*",), min_other_owners=1, non_dp=("*",), data_refusals=0)
    said = refusal(open_policy, inv, list)
    assert said.startswith("policy.protocols: skewness is a plugin statistic")
    named = dataclasses.replace(open_policy, protocols=("*", "skewness"))
    assert refusal(named, inv, list) == ""
