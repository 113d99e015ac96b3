"""Snapshots of every stack's template (asset hashes normalised). Update with `pytest --snapshot-update`."""

from __future__ import annotations

import pytest

from tests.conftest import normalise_template


@pytest.mark.parametrize("stack", ["Models", "Cluster"])
def test_template_matches_snapshot(synth, stack, snapshot):
    assert normalise_template(synth.template(stack)) == snapshot
