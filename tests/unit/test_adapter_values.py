"""The documented prometheus-adapter install (the community chart with Shoal's values)
gives the adapter exactly the rules Shoal's HPAs read, and the rig's adapter runs that
config."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from e2e.monitoring import ADAPTER_VALUES, adapter_config_from_chart_values

from shoal.metrics.pipeline import adapter_rules
from shoal.render.autoscaler import (
    GATEWAY_QUEUE_METRIC,
    P95_METRIC,
    QUEUE_METRIC,
    REQUIRED_REPLICAS_METRIC,
)

CONFIG = (
    Path(__file__).resolve().parents[2]
    / "manifests"
    / "monitoring"
    / ("prometheus-adapter-config.yaml")
)


def test_the_chart_values_give_the_adapter_the_shipped_config() -> None:
    values = yaml.safe_load(ADAPTER_VALUES.read_text())
    from_values = adapter_config_from_chart_values(values)
    assert from_values == yaml.safe_load(CONFIG.read_text()) == adapter_rules()
    served = {rule["name"]["as"] for rule in from_values["rules"]}
    assert served == {QUEUE_METRIC, P95_METRIC, GATEWAY_QUEUE_METRIC, REQUIRED_REPLICAS_METRIC}
    # The chart's own default rules stay off: they would expose every series again.
    assert values["rules"]["default"] is False


def test_the_mirrored_template_refuses_what_it_does_not_mirror() -> None:
    with pytest.raises(ValueError, match="default rules"):
        adapter_config_from_chart_values({"rules": {"default": True, "custom": []}})
    external = {"rules": {"custom": [{"seriesQuery": "x"}], "external": [{"seriesQuery": "y"}]}}
    assert adapter_config_from_chart_values(external) == {
        "rules": [{"seriesQuery": "x"}],
        "externalRules": [{"seriesQuery": "y"}],
    }
