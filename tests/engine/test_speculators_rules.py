"""serving_stacks/vllm_neuron.py's speculators rules agree with the pinned vLLM's own loader (vLLM 0.29.0, in its
environment): the registered algorithms, the EAGLE3 layer types, and the verdict on the RedHatAI head as staged and
as one public copy spells it (speculators_model_type "qwen3")."""

from __future__ import annotations

import json
import subprocess

from serving_stacks import vllm_neuron
from tests.engine.command_lines import CHECKPOINT_FIXTURES, ENGINES, VLLM_ENV

REDHAT = (
    CHECKPOINT_FIXTURES / "checkpoints/RedHatAI/Qwen3-32B-speculator.eagle3/dc84fe7ff1db31efa824776f49c141fc8195eb47"
)

# Runs in vLLM 0.29.0's environment: its registry, and what its loader does with each config (ok or its error).
PROBE = """
import json, sys
from vllm.transformers_utils.configs.speculators.algos import SUPPORTED_SPECULATORS_TYPES, update_eagle3
from vllm.transformers_utils.configs.speculators.base import SpeculatorsConfig
layer_types = []
for model_type in ("llama", "qwen3", "mistral", "gemma3"):
    try:
        update_eagle3({}, {"model_type": model_type})
        layer_types.append(model_type)
    except ValueError:
        pass
verdicts = {}
for name, config in json.loads(sys.argv[1]).items():
    try:
        SpeculatorsConfig.extract_transformers_pre_trained_config(config)
        SpeculatorsConfig.validate_speculators_config(config)
        verdicts[name] = "ok"
    except (ValueError, TypeError) as err:
        verdicts[name] = str(err)
print(json.dumps({"types": sorted(SUPPORTED_SPECULATORS_TYPES), "layer_types": layer_types, "verdicts": verdicts}))
"""


def test_the_stacks_speculators_rules_are_vllm_0_29s():
    staged = json.loads((REDHAT / "config.json").read_text())
    configs = {
        "as staged": staged,
        "the qwen3 copy": {**staged, "speculators_model_type": "qwen3"},
        "no verifier": {**staged, "speculators_config": {**staged["speculators_config"], "verifier": {}}},
    }
    engine = ENGINES[vllm_neuron.VLLM_VERSION]
    result = subprocess.run(
        [engine.python, "-c", PROBE, json.dumps(configs)], capture_output=True, text=True, env=VLLM_ENV, timeout=300
    )
    assert result.returncode == 0, result.stderr[-3000:]
    found = json.loads(result.stdout.strip().splitlines()[-1])
    assert found["types"] == sorted(vllm_neuron.SPECULATORS_TYPES)
    assert found["layer_types"] == sorted(vllm_neuron.EAGLE3_LAYER_TYPES)
    for name, config in configs.items():
        ours = vllm_neuron.speculators_problems(config, "eagle3")
        assert (found["verdicts"][name] == "ok") == (ours == []), (name, found["verdicts"][name], ours)
    assert "Expected one of" in found["verdicts"]["the qwen3 copy"]
