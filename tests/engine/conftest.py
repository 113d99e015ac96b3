from __future__ import annotations

from pathlib import Path

import pytest

from tests.engine.command_lines import EngineRuns

HERE = Path(__file__).parent
_RUNS = pytest.StashKey[EngineRuns]()


def pytest_collection_modifyitems(session: pytest.Session, config: pytest.Config, items: list[pytest.Item]) -> None:
    """Start the engine check as soon as its tests are collected, so it overlaps the rest of the suite."""
    if any(HERE in item.path.parents for item in items):
        tmp = config._tmp_path_factory.mktemp("engine")  # type: ignore[attr-defined]
        config.stash[_RUNS] = EngineRuns(tmp)


@pytest.fixture(scope="session")
def engine_results(pytestconfig: pytest.Config, tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    runs = pytestconfig.stash.get(_RUNS, None) or EngineRuns(tmp_path_factory.mktemp("engine"))
    return runs.results()
