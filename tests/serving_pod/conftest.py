"""serving_pod fixtures: the profiles' build plans, as model_build's tests make them (the init check is given
what `model_build plan` renders for the pod)."""

from __future__ import annotations

from tests.model_build.conftest import plans

__all__ = ["plans"]
