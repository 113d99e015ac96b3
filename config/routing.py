"""The `endpoint` section: one OpenAI endpoint in front of the profiles, how it splits sessions among them and when
it spills (docs/endpoint.md). Its fixed vocabulary (headers, metrics) is config/endpoint.py's, a leaf."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field, StringConstraints

from config.endpoint import ENVOY_THRESHOLD_MAX, STICKY_HEADER
from config.ports import DEFAULT_API_PORT
from config.section import ProfileName, Section


class EndpointConfig(Section):
    """One OpenAI endpoint in front of the profiles (docs/endpoint.md): an Envoy Deployment rendered from this."""

    enabled: bool = True
    weights: dict[ProfileName, Annotated[int, Field(ge=0, le=100)]] = Field(
        default_factory=dict,
        description="Percent of sessions per profile, summing to 100; a profile not named gets 0 and is reached only "
        "with the override header. Empty: everything to the baseline.",
    )
    sticky_header: Annotated[str, StringConstraints(pattern=r"^[a-z0-9][a-z0-9-]{0,62}$")] = Field(
        default=STICKY_HEADER,
        description="Requests with the same value of this header land on the same arm (unless spilled); without it "
        "each request draws an arm by the weights.",
    )
    spill: bool = Field(default=True, description="Send new requests of a busy speculative arm to the baseline.")
    # Up to Envoy's limit, not less: the loader folds crossover_file's thresholds in here, and the config.yaml the
    # Jobs load (charts/code_bundle.py) must validate with them.
    spill_threshold: dict[ProfileName, Annotated[int, Field(ge=1, le=ENVOY_THRESHOLD_MAX)]] = Field(
        default_factory=dict,
        description="In-flight requests per replica above which a speculative profile spills; wins over "
        "crossover_file. Unset: the crossover, else the profile's max_num_seqs.",
    )
    crossover_file: Annotated[str, StringConstraints(pattern=r"^[\w./-]+\.json$")] | None = Field(
        default=None,
        description="The load sweep's crossover.json (docs/sweep.md), relative to the config file's folder. The "
        "loader reads it once and turns it into spill_threshold entries, then clears it: the loaded config names no "
        "file.",
    )
    internal_load_balancer: bool = Field(
        default=False,
        description="Also expose the endpoint on an internal NLB (VPC only, tagged for the teardown sweep); default "
        "ClusterIP only (kubectl port-forward).",
    )
    port: int = Field(default=DEFAULT_API_PORT, ge=1024, le=65535)
    replicas: int = Field(default=1, ge=1, le=8, description="Router pods; each caps spill on its own count.")
