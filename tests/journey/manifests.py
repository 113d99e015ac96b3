"""What a synth rendered for the cluster, read from its output the way `cdk deploy` would apply it.

`dist/serving.yaml` is the cdk8s part only (README); the Workloads stack's `Custom::AWSCDK-EKS-KubernetesResource`
resources carry every manifest `cdk deploy` applies through the kubectl handler (their `Manifest` property: a JSON
list, sometimes inside an `Fn::Join` with tokens), among them the KEDA ScaledObjects that dist/ leaves out. The
tokens are resolved the way CloudFormation would in the journey's account: `AWS::AccountId` is moto's account,
`AWS::Region` the config's, and an `Fn::ImportValue` or `Fn::GetAtt` of a resource the journey does not create (the
managed Prometheus workspace id) becomes a placeholder naming it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

KUBERNETES_RESOURCE = "Custom::AWSCDK-EKS-KubernetesResource"
# The label the kubectl handler prunes by; not part of what a person reads back.
PRUNE_LABEL_PREFIX = "aws.cdk.eks/prune-"


class SynthError(Exception):
    """The synth output lacks something the journey needs: the sentence names the file."""


@dataclass(frozen=True)
class Rendered:
    """One synth's output: its stacks' templates by name and every Kubernetes object `cdk deploy` applies."""

    cdk_out: Path
    dist: Path
    templates: dict[str, dict[str, Any]]
    objects: list[dict[str, Any]]

    def template(self, suffix: str) -> dict[str, Any]:
        found = [t for name, t in self.templates.items() if name.endswith(suffix)]
        if len(found) != 1:
            raise SynthError(f"{self.cdk_out} has {len(found)} templates ending in {suffix!r}, expected 1")
        return found[0]

    def find(self, kind: str, name: str | None = None) -> list[dict[str, Any]]:
        return [o for o in self.objects if o["kind"] == kind and (name is None or o["metadata"]["name"] == name)]

    def one(self, kind: str, name: str) -> dict[str, Any]:
        found = self.find(kind, name)
        if len(found) != 1:
            raise SynthError(f"the synth rendered {len(found)} {kind} objects named {name!r}, expected 1")
        return found[0]


def resolve(value: Any, account: str, region: str) -> Any:
    """CloudFormation intrinsics of a manifest, resolved as the journey's account would see them."""
    if isinstance(value, list):
        return [resolve(v, account, region) for v in value]
    if not isinstance(value, dict):
        return value
    if "Ref" in value and len(value) == 1:
        ref = value["Ref"]
        pseudo = {"AWS::AccountId": account, "AWS::Region": region, "AWS::URLSuffix": "amazonaws.com"}
        return pseudo.get(ref, f"journey-unresolved-{ref}")
    if "Fn::Join" in value:
        sep, parts = value["Fn::Join"]
        return sep.join(str(resolve(p, account, region)) for p in parts)
    if "Fn::ImportValue" in value or "Fn::GetAtt" in value:
        what = value.get("Fn::ImportValue") or ".".join(value["Fn::GetAtt"])
        return "journey-" + "".join(c if c.isalnum() else "-" for c in str(what))[-40:].lower()
    return {k: resolve(v, account, region) for k, v in value.items()}


def _clean(obj: dict[str, Any]) -> dict[str, Any]:
    labels = obj.get("metadata", {}).get("labels") or {}
    for key in [k for k in labels if k.startswith(PRUNE_LABEL_PREFIX)]:
        del labels[key]
    return obj


def read_synth(cdk_out: Path, dist: Path, *, account: str, region: str) -> Rendered:
    """The templates the cloud assembly's manifest names, and the cluster's objects: every KubernetesResource
    manifest of the templates (what `cdk deploy` applies). dist/serving.yaml must hold the same cdk8s objects."""
    manifest = cdk_out / "manifest.json"
    if not manifest.is_file():
        raise SynthError(f"{manifest} is missing: the synth did not finish")
    artifacts = json.loads(manifest.read_text()).get("artifacts", {})
    templates: dict[str, dict[str, Any]] = {}
    for name, artifact in artifacts.items():
        if artifact.get("type") == "aws:cloudformation:stack":
            path = cdk_out / artifact["properties"]["templateFile"]
            templates[name] = json.loads(path.read_text())
    objects: list[dict[str, Any]] = []
    for template in templates.values():
        for resource in template.get("Resources", {}).values():
            if resource["Type"] == KUBERNETES_RESOURCE:
                text = resolve(resource["Properties"]["Manifest"], account, region)
                objects.extend(_clean(o) for o in json.loads(text))
    serving = dist / "serving.yaml"
    if not serving.is_file():
        raise SynthError(f"{serving} is missing: synth with -c dist=<dir> writes it")
    dist_objects = [o for o in yaml.safe_load_all(serving.read_text()) if o]
    applied = {(o["kind"], o["metadata"]["name"]) for o in objects}
    missing = [
        f"{o['kind']}/{o['metadata']['name']}"
        for o in dist_objects
        if (o["kind"], o["metadata"]["name"]) not in applied
    ]
    if missing:
        raise SynthError(f"dist/serving.yaml holds objects no template applies: {', '.join(missing[:5])}")
    return Rendered(cdk_out, dist, templates, objects)
