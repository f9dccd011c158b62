"""Statistics a data team writes itself, installed as Python packages (docs/plugins.md).

A plugin is a `SecureSumStatistic` its package registers under an entry point
(`plugin_loader`). Where the package is installed,
the aggregator plans its rounds, the analyst's CLI has its command and the Python API runs its
request; an owner computes it only where the package is installed too **and** the site's
`policy.protocols` names the statistic ("*" does not cover plugins: code a site did not choose
never runs on its rows).

On the wire a plugin's round is the `statistic` payload: its name, its version and its own
request or spec as canonical JSON, signed in the analyst's request and bound into the spec
digest like any payload. An owner with another version of the package, or without it, declines
the round and says why. Everything else is the built-in adapter's (`secure_sum`): a plugin
cannot weaken the encoding's bounds, the DP calibration, the owner's check of the noise or the
quorum.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from leteo_fed.errors import DataError, ProtocolError
from leteo_fed.protocols import registry
from leteo_fed.protocols.dp_plan import DpSpec
from leteo_fed.protocols.interface import SecureSumRounds
from leteo_fed.protocols.plugin_loader import (
    PluginProtocol,
    canonical_json,
    find,
    from_json,
    installed,
)
from leteo_fed.protocols.requests import Common
from leteo_fed.protocols.round_types import Outcome, RoundPlan, Step
from leteo_fed.protocols.secure_sum import StatisticPlan

PAYLOAD = "statistic"


@dataclass(frozen=True)
class StatisticRequest:
    name: str
    version: str
    params_json: str


@dataclass(frozen=True)
class StatisticSpec:
    name: str
    version: str
    params_json: str


class PluginDispatch(SecureSumRounds):
    """The `statistic` payload: finds the named plugin and lets its adapter do the work, with
    the plugin's own request and spec unwrapped from (and wrapped back into) their JSON."""

    name = PAYLOAD
    request_type = StatisticRequest
    spec_type = StatisticSpec
    plugin = True
    takes_bounds = True  # each plugin's adapter refuses bounds its statistic does not take

    # ---------------------------------------------------------------- the wire

    def wire_request(self, request: Any) -> StatisticRequest:
        if isinstance(request, StatisticRequest):
            return request
        plugin = self.for_request_type(type(request))
        return StatisticRequest(
            plugin.statistic.name, plugin.statistic.version, canonical_json(request)
        )

    @staticmethod
    def for_request_type(cls: type) -> PluginProtocol:
        for plugin in installed().values():
            if plugin.request_type is cls:
                return plugin
        raise DataError(f"{cls.__name__} is no installed statistic's request", field="payload")

    def _request(self, request: Any) -> tuple[PluginProtocol, Any]:
        request = self.wire_request(request)
        plugin = find(request.name, request.version)
        return plugin, from_json(plugin.request_type, request.params_json, "statistic's request")

    def _spec(self, spec: StatisticSpec) -> tuple[PluginProtocol, Any]:
        if not isinstance(spec, StatisticSpec):
            raise ProtocolError("a plugin round's spec must be a StatisticSpec")
        plugin = find(spec.name, spec.version)
        return plugin, from_json(plugin.spec_type, spec.params_json, "statistic's spec")

    @staticmethod
    def _plugin(plan: StatisticPlan) -> PluginProtocol:
        plugin = installed().get(plan.label)
        if plugin is None:
            raise ProtocolError(f"statistic {plan.label!r} is not installed")
        return plugin

    @staticmethod
    def _wrap(plugin: PluginProtocol, spec: Any) -> StatisticSpec:
        return StatisticSpec(plugin.statistic.name, plugin.statistic.version, canonical_json(spec))

    def result_file(self, label: str) -> str | None:
        plugin = installed().get(label)
        return plugin.result_file(label) if plugin is not None else None

    def output_file(self, request: Any) -> str:
        plugin, _ = self._request(request)
        return plugin.result_file(plugin.statistic.name) or f"{plugin.statistic.name}.json"

    # ---------------------------------------------------------------- aggregator side

    def plan(self, request: Any, common: Common) -> StatisticPlan:
        plugin, inner = self._request(request)
        return plugin.plan(inner, common)

    def next_round(self, plan: StatisticPlan, state: None, index: int) -> RoundPlan:
        plugin = self._plugin(plan)
        rnd = plugin.next_round(plan, state, index)
        return dataclasses.replace(rnd, spec=self._wrap(plugin, rnd.spec))

    def finish_round(self, plan: StatisticPlan, state: None, outcome: Outcome) -> Step:
        return self._plugin(plan).finish_round(plan, state, outcome)

    def release_figures(self, plan: StatisticPlan, totals: list[int], n_owners: int) -> dict:
        return self._plugin(plan).release_figures(plan, totals, n_owners)

    def preview_data(self, plan: StatisticPlan, columns: dict, rng: Any) -> tuple[dict, str]:
        return self._plugin(plan).preview_data(plan, columns, rng)

    def noise_preview(self, plan: StatisticPlan, rows: int | None = None) -> dict:
        return self._plugin(plan).noise_preview(plan, rows)

    # ---------------------------------------------------------------- owner side

    def columns(self, spec: StatisticSpec) -> list[str]:
        plugin, inner = self._spec(spec)
        return plugin.columns(inner)

    def request_columns(self, request: Any) -> list[str]:
        plugin, inner = self._request(request)
        return plugin.request_columns(inner)

    def dimension(self, spec: StatisticSpec) -> int:
        plugin, inner = self._spec(spec)
        return plugin.dimension(inner)

    def check(self, spec: StatisticSpec, enc: Any, dp: DpSpec | None, site: Any) -> None:
        plugin, inner = self._spec(spec)
        plugin.check(inner, enc, dp, site)

    def dp_sensitivity(self, spec: StatisticSpec, enc: Any, dp: DpSpec) -> Any:
        plugin, inner = self._spec(spec)
        return plugin.dp_sensitivity(inner, enc, dp)

    def describe(self, spec: StatisticSpec, dp: DpSpec | None) -> str:
        plugin, inner = self._spec(spec)
        return f"plugin {plugin.describe(inner, dp)}"

    def share_values(
        self, spec: StatisticSpec, enc: Any, dp: DpSpec | None, site: Any, timings: dict
    ) -> list[int]:
        plugin, inner = self._spec(spec)
        return plugin.share_values(inner, enc, dp, site, timings)


DISPATCH = registry.register(PluginDispatch())
