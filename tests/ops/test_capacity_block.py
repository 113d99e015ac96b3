"""Nothing that needs the Trainium2 node starts in the last 45 minutes of its Capacity Block: EC2 drains and
terminates the node from 40 minutes before the end."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
import yaml

from config import parse_config
from ops.capacity_block import too_late
from ops.run_benchmark import main as bench_main
from tests.conftest import default_config_dict, variant_config_dict

END = datetime(2026, 12, 1, 11, 30, tzinfo=UTC)


def _config(end: datetime | None = END):
    data = variant_config_dict()
    data["trn2_nodes"]["capacity_block_end"] = end.isoformat() if end else None
    return parse_config(data)


@pytest.mark.parametrize(("minutes_left", "refused"), [(46, False), (45, True), (10, True), (-5, True)])
def test_work_is_refused_in_the_last_45_minutes_and_after_the_end(minutes_left, refused):
    said = too_late(_config(), END - timedelta(minutes=minutes_left), "the benchmark")
    assert (said is not None) == refused
    if refused:
        assert said.startswith("the benchmark does not start: Capacity Block cr-0123456789abcdef0 ")
        assert "set trn2_nodes.capacity_reservation_id and capacity_block_end" in said


def test_without_a_block_end_nothing_is_refused():
    assert too_late(parse_config(default_config_dict()), END, "the benchmark") is None
    assert too_late(_config(end=None), END, "the benchmark") is None


def test_make_bench_inside_the_last_minutes_stops_before_asking_aws_or_kubectl(tmp_path, monkeypatch, capsys):
    data = variant_config_dict()
    data["trn2_nodes"]["capacity_block_end"] = (datetime.now(UTC) + timedelta(minutes=20)).isoformat()
    path = tmp_path / "cb.yaml"
    path.write_text(yaml.safe_dump(data))
    monkeypatch.setenv("PATH", str(tmp_path / "nothing"))  # kubectl or aws would fail differently
    assert bench_main(["--apply", "--config", str(path)]) == 2
    err = capsys.readouterr().err
    assert "the benchmark does not start: Capacity Block cr-0123456789abcdef0 ends in 19 minutes" in err
    assert "Traceback" not in err


def test_a_block_end_needs_a_capacity_block():
    data = default_config_dict()
    data["trn2_nodes"]["capacity_block_end"] = END.isoformat()
    with pytest.raises(ValueError, match="capacity_block_end=2026-12-01T11:30:00\\+00:00 is set but capacity_type"):
        parse_config(data)
