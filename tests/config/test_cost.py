"""Cost arithmetic shared by bench and the dashboard, and the price's place in the config."""

from __future__ import annotations

import pytest

from config import ConfigError, parse_config
from config.cost import hourly_cost_usd, per_million_tokens_factor, usd_per_million_tokens, usd_per_request
from tests.conftest import default_config_dict


def test_a_service_pays_for_its_share_of_the_nodes_devices() -> None:
    assert hourly_cost_usd(40.0, 8, 16) == 20.0
    assert hourly_cost_usd(40.0, 16, 16) == 40.0  # two replicas of 8 devices
    # 20 USD/h at 1000 output tokens/s: 3.6M tokens an hour, 5.56 USD per million
    assert usd_per_million_tokens(20.0, 1000.0) == pytest.approx(20.0 / 3.6)
    assert per_million_tokens_factor(20.0) / 1000.0 == usd_per_million_tokens(20.0, 1000.0)
    assert usd_per_million_tokens(20.0, 0.0) is None
    assert usd_per_request(36.0, 100.0, 10) == pytest.approx(0.1)  # 1 USD over 100 s, 10 requests
    assert usd_per_request(36.0, 100.0, 0) is None


def test_the_price_is_unset_by_default_and_a_bad_one_is_a_sentence(default_config) -> None:
    assert default_config.trn2_nodes.hourly_price_usd is None
    assert [default_config.profile_devices(p) for p in default_config.profiles] == [8, 8]
    data = default_config_dict()
    data["trn2_nodes"]["max_size"] = 2
    data["profiles"][1]["replicas"] = 2  # the service claims both replicas' devices
    two_replicas = parse_config(data)
    assert [two_replicas.profile_devices(p) for p in two_replicas.profiles] == [8, 16]
    data["trn2_nodes"]["hourly_price_usd"] = -3
    with pytest.raises(ConfigError) as err:
        parse_config(data)
    assert any("trn2_nodes.hourly_price_usd" in p and "-3" in p for p in err.value.problems), err.value.problems
