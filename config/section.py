"""What every section of the config is built from: a strict model and the two name shapes sections share.

A leaf below the section modules (config/network.py, nodes.py, profiles.py, observability.py, bench.py,
routing.py, scaling.py) and the root model that gathers them (config/schema.py).
"""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, ConfigDict, StringConstraints

Name = Annotated[str, StringConstraints(pattern=r"^[a-z]([a-z0-9-]{0,28}[a-z0-9])?$")]
ProfileName = Annotated[str, StringConstraints(pattern=r"^[a-z]([a-z0-9-]{0,22}[a-z0-9])?$")]


class Section(BaseModel):
    """Strict types: YAML's `true` is not the count 1, `"8"` is not 8, and a `!!binary` value is not a name."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)
