"""The DRA rule over its whole grid: TP = devices x 8 physical cores / LNC, for LNC 1 and 2 and every connected
device group size, read back from what the serving chart renders (the claim, vLLM's args, the runtime env)."""

from __future__ import annotations

from typing import Any

import pytest

from charts import render_serving
from config import parse_config
from tests.charts.conftest import TEST_BUCKET, of_kind, vllm_of_kind
from tests.conftest import default_config_dict

PHYSICAL_CORES_PER_TRN2_DEVICE = 8  # a Trainium2 device has 8 physical NeuronCores (trn2.48xlarge: 16 x 8 = 128)
GRID = [(devices, lnc) for lnc in (1, 2) for devices in (1, 4, 8, 16)]


def _render(devices: int, lnc: int) -> list[dict[str, Any]]:
    data = default_config_dict()
    data["trn2_nodes"].update(min_size=2, desired_size=2, max_size=2)  # two 16-device services need two nodes
    tp = devices * PHYSICAL_CORES_PER_TRN2_DEVICE // lnc
    data["serving"]["placement"] = {"devices": devices, "logical_neuron_cores": lnc, "tensor_parallel_size": tp}
    return render_serving(parse_config(data), TEST_BUCKET)


@pytest.mark.parametrize(("devices", "lnc"), GRID, ids=[f"{d}dev-lnc{n}" for d, n in GRID])
def test_the_rendered_claim_holds_the_devices_and_logical_core_size_that_give_the_tp(devices, lnc):
    objects = _render(devices, lnc)
    claims = of_kind(objects, "ResourceClaimTemplate")
    deployments = vllm_of_kind(objects, "Deployment")
    assert set(deployments) == {"baseline", "speculative"}
    for name, deployment in deployments.items():
        pod = deployment["spec"]["template"]["spec"]
        (ref,) = pod["resourceClaims"]
        claim = claims[ref["resourceClaimTemplateName"]]["spec"]["spec"]["devices"]
        (request,) = claim["requests"]
        (config,) = claim["config"]
        assert request["exactly"]["count"] == devices, name
        assert request["exactly"]["allocationMode"] == "ExactCount", name
        assert config["requests"] == [request["name"]], name
        assert config["opaque"]["driver"] == "neuron.aws.com", name
        assert config["opaque"]["parameters"]["logicalNeuronCore"] == lnc, name

        (vllm,) = [c for c in pod["containers"] if c["name"] == "vllm"]
        args = vllm["args"]
        assert int(args[args.index("--tensor-parallel-size") + 1]) == devices * PHYSICAL_CORES_PER_TRN2_DEVICE // lnc
        env = {e["name"]: e["value"] for e in vllm["env"]}
        assert env["NEURON_RT_VIRTUAL_CORE_SIZE"] == str(lnc), name  # the runtime must use the claimed LNC

        # more than one device must be connected: all from one published device group
        expected = (
            None
            if devices == 1
            else [{"requests": [request["name"]], "matchAttribute": f"resource.aws.com/devicegroup{devices}_id"}]
        )
        assert claim.get("constraints") == expected, name


@pytest.mark.parametrize("instance_type", ["trn2u.48xlarge", "trn2.48xlarge"])
def test_every_claim_selects_the_configured_instance_type(instance_type):
    """A claim hard-coding trn2.48xlarge would leave a trn2u deployment's pods Pending forever."""
    data = default_config_dict()
    data["trn2_nodes"]["instance_type"] = instance_type
    claims = of_kind(render_serving(parse_config(data), TEST_BUCKET), "ResourceClaimTemplate")
    assert {"baseline-neuron", "speculative-neuron"} <= set(claims)
    for claim in claims.values():
        (request,) = claim["spec"]["spec"]["devices"]["requests"]
        expressions = [s["cel"]["expression"] for s in request["exactly"]["selectors"]]
        named = [e for e in expressions if ".instanceType" in e]
        assert named and all(e.endswith(f".instanceType == '{instance_type}'") for e in named), named
