"""The scaling section: bad values fail before synth with a sentence naming the field, the value and the fix."""

from __future__ import annotations

import pytest

from config import ConfigError, parse_config
from config.scaling import max_replicas, waiting_threshold
from tests.config.test_schema import problems_for
from tests.conftest import default_config_dict


def test_defaults_scale_to_the_ceiling_and_wait_a_time_to_ready_between_replicas(default_config):
    s = default_config.scaling
    assert (s.time_to_ready_seconds, s.scale_up_period_seconds, s.scale_down_stabilization_seconds) == (900, 900, 600)
    for p in default_config.profiles:  # two 8-device profiles share the ceiling's two 16-device nodes
        assert (waiting_threshold(s, p), max_replicas(default_config, p)) == (2, 2)


def test_a_threshold_above_the_compiled_batch_is_refused():
    (problem,) = problems_for(lambda d: d.update(scaling={"waiting_per_replica": 1.5}))
    assert "scaling.waiting_per_replica=1.5" in problem and "max_num_seqs" in problem and "at most 1" in problem


def test_a_max_above_the_node_groups_devices_is_refused():
    (problem,) = problems_for(lambda d: d.update(scaling={"max_replicas": {"baseline": 3}}))
    assert "scaling.max_replicas.baseline=3" in problem and "32 devices" in problem and "use at most 2" in problem


def test_a_max_for_an_unknown_profile_is_refused():
    (problem,) = problems_for(lambda d: d.update(scaling={"max_replicas": {"basline": 1}}))
    assert "'basline'" in problem and "not a profile" in problem


def test_a_scale_up_period_shorter_than_time_to_ready_is_refused():
    (problem,) = problems_for(lambda d: d.update(scaling={"scale_up_period_seconds": 300}))
    assert "scaling.scale_up_period_seconds=300" in problem and "time_to_ready_seconds=900" in problem
    assert "set scale_up_period_seconds: 900" in problem


def test_a_scale_down_window_below_ten_minutes_is_refused():
    (problem,) = problems_for(lambda d: d.update(scaling={"scale_down_stabilization_seconds": 60}))
    assert "scaling.scale_down_stabilization_seconds" in problem and "600" in problem


def test_a_lower_cap_than_the_fair_share_is_kept():
    data = default_config_dict()
    data["trn2_nodes"].update(min_size=2, desired_size=2, max_size=2)
    data["scaling"] = {"max_replicas": {"speculative": 1}}
    config = parse_config(data)
    assert [max_replicas(config, p) for p in config.profiles] == [2, 1]


def test_fixed_replicas_above_a_profiles_fair_share_are_refused_while_scaling():
    """Five 4-device replicas plus one fit the ceiling's 32 devices, but not two equal shares of 16."""
    import yaml

    from tests.conftest import ROOT

    data = yaml.safe_load((ROOT / "config" / "vllm-neuron.yaml").read_text())
    data["profiles"][0]["replicas"] = 5
    with pytest.raises(ConfigError) as err:
        parse_config(data)
    (problem,) = err.value.problems
    assert "profiles (baseline): 5 replica(s) x 4 devices" in problem and "scaling.enabled: false" in problem
    data["scaling"] = {"enabled": False}
    assert parse_config(data).profiles[0].replicas == 5


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("enabled", 0),
        ("enabled", "true"),
        ("waiting_per_replica", "0.5"),
        ("waiting_per_replica", True),
        ("polling_interval_seconds", "15"),
        ("time_to_ready_seconds", True),
        ("max_replicas", {"baseline": True}),
    ],
)
def test_scaling_values_are_not_coerced_from_other_types(field, value):
    """Strict like every other section: YAML `0`, `true` and quoted numbers are refused, not converted."""
    (problem,) = problems_for(lambda d: d.update(scaling={field: value}))
    assert problem.startswith(f"scaling.{field}") and repr(value if not isinstance(value, dict) else True) in problem


def _with_switched_off_third_profile(data: dict) -> None:
    data["profiles"].append(
        {
            "name": "spare",
            "replicas": 0,
            "decoding": {
                "method": "fused-draft",
                "draft": "qwen3-1-7b",
                "num_speculative_tokens": 5,
                "draft_max_model_len": 1024,
            },
        }
    )


def test_a_switched_off_profile_takes_no_share_of_the_devices():
    data = default_config_dict()
    _with_switched_off_third_profile(data)
    config = parse_config(data)
    assert [max_replicas(config, p) for p in config.profiles[:2]] == [2, 2]  # the ceiling's 2 nodes, halved


def test_the_fair_share_sentence_names_only_profiles_that_run():
    """Over the share, the sentence names the running profiles and never asks to lower replicas that are 0."""
    data = default_config_dict()
    _with_switched_off_third_profile(data)
    data["profiles"][0]["replicas"] = 3
    with pytest.raises(ConfigError) as err:
        parse_config(data)
    assert "profiles (baseline): 3 replica(s)" in str(err.value)
    assert "spare" not in str(err.value)


WARM = {"timezone": "Europe/Berlin", "start": "30 7 * * 1-5", "end": "0 19 * * 1-5", "replicas": 2}


def test_a_warm_window_within_the_ceiling_is_kept():
    data = default_config_dict()
    data["scaling"]["warm_schedule"] = [WARM]
    (window,) = parse_config(data).scaling.warm_schedule
    assert (window.timezone, window.replicas) == ("Europe/Berlin", 2)


@pytest.mark.parametrize(
    ("change", "fragment"),
    [
        ({"timezone": "Mars/Olympus"}, "scaling.warm_schedule[0].timezone='Mars/Olympus' is not an IANA time zone"),
        ({"start": "0 30 7 * * 1-5"}, "start='0 30 7 * * 1-5' is refused by KEDA's cron parser (expected exactly 5"),
        ({"end": "at 19:00"}, "end='at 19:00' is refused by KEDA's cron parser (expected exactly 5 fields, found 2"),
        ({"start": "99 99 * * *"}, "(end of range (99) above maximum (59): 99)"),
        ({"start": "a b c d e"}, "(failed to parse int from a: "),
        ({"start": "*/0 * * * *"}, "(step of range should be a positive number: */0)"),
        ({"start": "0 8 * * 7"}, "(end of range (7) above maximum (6): 7)"),
        ({"start": "0 8 0 * *"}, "(beginning of range (0) below minimum (1): 0)"),
        ({"start": "0 18-8 * * *"}, "(beginning of range (18) beyond end of range (8): 18-8)"),
        ({"start": "0 1-2-3 * * *"}, "(too many hyphens: 1-2-3)"),
        ({"start": "0 */2/3 * * *"}, "(too many slashes: */2/3)"),
        ({"start": "@daily"}, "(parser does not accept descriptors: @daily)"),
        ({"start": "CRON_TZ=UTC 0 8 * * *"}, "(a TZ= prefix is not used here"),
        ({"start": "0 , * * *"}, "(the hour field ',' names no value)"),
        ({"end": "30 7 * * MON-FRI"}, "warm_schedule[0] opens and closes at the same times"),
        ({"end": "30 7 * * 1-5"}, "warm_schedule[0] opens and closes at the same times"),
        ({"replicas": 3}, "scaling.warm_schedule[0].replicas=3 is above the 2 replica(s) profile baseline"),
    ],
)
def test_a_bad_warm_window_is_refused_before_synth(change, fragment):
    text = "\n".join(problems_for(lambda d: d["scaling"].update(warm_schedule=[{**WARM, **change}])))
    assert fragment in text, text


@pytest.mark.parametrize("spec", ["0 8 * * 1-5", "*/15 8-18 1,15 jan-MAR sun", "5/10 * * * ?", "+5 8 * * *"])
def test_cron_expressions_keda_accepts_pass(spec):
    """robfig/cron v3.0.1 accepts these (names in any case, `?` as `*`, `N/step`, Go's Atoi sign)."""
    data = default_config_dict()
    data["scaling"]["warm_schedule"] = [{**WARM, "start": spec, "end": "59 23 31 12 6"}]
    assert parse_config(data).scaling.warm_schedule[0].start == spec


def test_a_warm_window_with_scaling_off_is_refused():
    text = "\n".join(problems_for(lambda d: d["scaling"].update(enabled=False, warm_schedule=[WARM])))
    assert "scaling.warm_schedule[0] is set but scaling.enabled=false renders no ScaledObject" in text, text


def test_a_warm_window_replica_count_of_true_is_refused():
    text = "\n".join(problems_for(lambda d: d["scaling"].update(warm_schedule=[{**WARM, "replicas": True}])))
    assert "replicas" in text and "valid integer" in text, text
