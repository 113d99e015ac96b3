"""Replicas and nodes together over a load step, with the default config's rendered ScaledObjects and CA settings:
a step is seen at the first scrape after it and adds one node and one replica per profile, the trough removes them
only after the window, never below the floor; a replica counts as Ready only on a Ready node and once loaded."""

from __future__ import annotations

import itertools

from charts.autoscaling import render_autoscaling
from config import node_scaling
from tests.charts.capacity_replay import CapacityReplay
from tests.charts.conftest import of_kind
from tests.charts.hpa_replay import scrape_interval
from tests.charts.test_autoscaling import QUERY_URL

UP, DOWN, END = 600, 600 + 3 * 3600, 600 + 6 * 3600


def _replay(config) -> CapacityReplay:
    specs = {n: o["spec"] for n, o in of_kind(render_autoscaling(config, QUERY_URL), "ScaledObject").items()}
    replay = CapacityReplay.from_config(config, specs)
    replay.run(lambda now: 8 if UP <= now < DOWN else 2, seconds=END, tokens_per_second=20, request_seconds=30)
    return replay


def test_a_load_step_adds_one_node_and_one_replica_per_profile_then_the_trough_removes_them(default_config):
    replay = _replay(default_config)
    history = replay.history
    nodes = [s.nodes for s in history]
    assert min(nodes) == default_config.trn2_nodes.min_size == 1 and max(nodes) == default_config.trn2_nodes.max_size
    assert all(max(s.replicas.values()) <= 2 for s in history)
    # The node is asked for once a scrape has seen the step (the worst phase: interval - 1 into each interval, so
    # the first scrape after a step on an interval boundary is interval - 1 later), within one HPA sync and one CA
    # scan of that scrape.
    interval = scrape_interval(default_config)
    assert UP % interval == 0
    (asked,) = [s.time for prev, s in itertools.pairwise(history) if s.nodes > prev.nodes]
    assert UP + interval - 1 <= asked <= UP + interval - 1 + 15 + node_scaling.SCAN_INTERVAL_SECONDS
    # Both new replicas are Ready one node boot plus one time-to-Ready later, not before.
    ready_both = min(s.time for s in history if all(r == 2 for r in s.ready.values()))
    back = default_config.trn2_nodes.node_ready_seconds + default_config.scaling.time_to_ready_seconds
    assert asked + back <= ready_both <= asked + back + 2 * 15
    # The trough: replicas go after KEDA's stabilization window, the node only after CA's unneeded time.
    (removed,) = [s.time for prev, s in itertools.pairwise(history) if s.nodes < prev.nodes]
    replicas_gone = min(s.time for s in history if s.time > DOWN and all(r == 1 for r in s.replicas.values()))
    # (the window counts from the last high recommendation, one 15 s sync before the drop)
    assert replicas_gone >= DOWN - 15 + default_config.scaling.scale_down_stabilization_seconds
    assert removed >= replicas_gone + node_scaling.scale_down_unneeded_seconds(default_config)
    assert history[-1].nodes == 1


def test_a_trough_shorter_than_the_unneeded_time_keeps_the_node(default_config):
    specs = {n: o["spec"] for n, o in of_kind(render_autoscaling(default_config, QUERY_URL), "ScaledObject").items()}
    replay = CapacityReplay.from_config(default_config, specs)
    gap = default_config.scaling.scale_down_stabilization_seconds + 600  # replicas go, then load returns
    replay.run(
        lambda now: 8 if UP <= now < DOWN or now >= DOWN + gap else 2,
        seconds=DOWN + gap + 3600,
        tokens_per_second=20,
        request_seconds=30,
    )
    after_up = [s.nodes for s in replay.history if s.time > UP + 60]
    assert min(after_up) == 2  # the node waited out the short trough and served the second peak at once


def test_a_replica_is_ready_only_on_a_ready_node_and_once_loaded(default_config):
    """A floor of two replicas per profile on a floor of one node: the node holds two 8-device replicas, the other
    two wait Pending for the node CA adds, and serve only a node Ready plus a time-to-Ready later."""
    specs = {n: o["spec"] for n, o in of_kind(render_autoscaling(default_config, QUERY_URL), "ScaledObject").items()}
    for spec in specs.values():
        spec["minReplicaCount"] = 2
    replay = CapacityReplay.from_config(default_config, specs)
    assert replay.min_nodes == 1 and replay.devices_per_node == 2 * max(replay.devices.values())
    back = default_config.trn2_nodes.node_ready_seconds + default_config.scaling.time_to_ready_seconds
    history = replay.run(lambda now: 2, seconds=back + 300, tokens_per_second=20, request_seconds=30)
    assert sum(history[0].ready.values()) == 2 and sum(history[0].replicas.values()) == 4
    all_ready = min(s.time for s in history if sum(s.ready.values()) == 4)
    assert back <= all_ready <= back + 2 * node_scaling.SCAN_INTERVAL_SECONDS
