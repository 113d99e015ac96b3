"""Snapshot of the rendered serving objects (shipped code reduced to its file list so code edits do not churn it,
hash-pinned requirements to their pins)."""

from __future__ import annotations

import copy


def test_serving_objects_match_snapshot(serving_objects, snapshot):
    objects = copy.deepcopy(serving_objects)
    for obj in objects:
        if obj["kind"] == "ConfigMap" and obj["metadata"]["name"].endswith("-code"):
            if "data" in obj:
                obj["data"] = sorted(obj["data"])
            else:
                obj["binaryData"] = {k: "<tar.gz of the shipped files>" for k in obj["binaryData"]}
        if obj["kind"] == "ConfigMap" and obj["metadata"]["name"].endswith("-requirements"):
            obj["data"] = {k: [line for line in v.splitlines() if "==" in line] for k, v in obj["data"].items()}
    assert objects == snapshot
