"""SHOAL_CLUSTER_CIDRS: the networks model downloads never reach."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from shoal.render.tenancy import DEFAULT_CLUSTER_CIDRS
from shoal.settings import Settings


def test_unset_means_the_private_ranges() -> None:
    assert Settings.from_env({}).cluster_cidrs == DEFAULT_CLUSTER_CIDRS


def test_a_list_is_read_and_each_network_checked() -> None:
    given = Settings.from_env({"SHOAL_CLUSTER_CIDRS": "10.96.0.0/12, fd00:10::/64,"})
    assert given.cluster_cidrs == ("10.96.0.0/12", "fd00:10::/64")
    with pytest.raises(ValidationError, match=r"10\.96\.0\.1/12"):
        Settings.from_env({"SHOAL_CLUSTER_CIDRS": "10.96.0.1/12"})  # host bits set
