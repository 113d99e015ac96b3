from __future__ import annotations

from pathlib import Path

import pytest

from tests.engine.command_lines import EngineRuns

HERE = Path(__file__).parent
_RUNS = pytest.StashKey[EngineRuns]()


def pytest_collection_finish(session: pytest.Session) -> None:
    """Start the engine check as soon as its tests are selected, so it overlaps the rest of the suite.

    After collection_modifyitems, not in it: a conftest's modifyitems runs before `-m`/`-k` deselect
    (pytest 9.2.0 _pytest/main.py:875-882, _pytest/mark/__init__.py:327), so `pytest tests -m timing` started
    both vLLMs (about a minute of CPU) for no test, beside the timing tests that need a quiet machine."""
    if any(HERE in item.path.parents for item in session.items):
        tmp = session.config._tmp_path_factory.mktemp("engine")  # type: ignore[attr-defined]
        session.config.stash[_RUNS] = EngineRuns(tmp)


@pytest.fixture(scope="session")
def engine_results(pytestconfig: pytest.Config, tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    runs = pytestconfig.stash.get(_RUNS, None) or EngineRuns(tmp_path_factory.mktemp("engine"))
    return runs.results()


def pytest_sessionfinish(session: pytest.Session) -> None:
    """A run that ended before engine_results waited (-x, a failure, ^C) leaves no vLLM running on the machine."""
    runs = session.config.stash.get(_RUNS, None)
    for proc in runs.procs.values() if runs else ():
        if proc.poll() is None:
            proc.kill()
            proc.wait()
