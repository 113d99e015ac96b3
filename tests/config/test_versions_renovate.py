"""Every pin of the version map and every serving stack's image tag arrives by itself: some regex manager of
renovate.json captures it as a currentValue, with the datasource and package of its kind (EKS add-ons aws-eks-addon
per Kubernetes version, HTTPS charts helm, OCI charts and images docker, the Grafana plugin grafana.com's repository),
and no manager captures a string of config/versions.py that is not a pin. The managers' own regexes are applied
(tests/renovate_managers.py); Renovate's validator checks the file itself (tests/tools/test_renovate_tool.py)."""

from __future__ import annotations

import inspect
import json
import sys
import types
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from config import versions
from config.profiles import Image
from serving_stacks import STACKS
from tests.conftest import ROOT
from tests.renovate_managers import Dependency, extract_all, python_regex, repository_files

RENOVATE = json.loads((ROOT / "renovate.json").read_text())
MAP = "config/versions.py"
SERVING_REPOSITORY = Image.model_fields["repository"].default


@dataclass(frozen=True)
class Expected:
    """A pin and what a manager must extract for it."""

    what: str
    file: str
    datasource: str
    package: str
    value: str
    digest: str | None = None
    registry: str | None = None
    groups: dict[str, str] = field(default_factory=dict)

    def managed_by(self, dep: Dependency) -> bool:
        return (
            dep.file == self.file
            and dep.datasource == self.datasource
            and _package(dep) == self.package
            and _value_of_tag(dep, self.value) == dep.value
            and dep.fields.get("currentDigest") == self.digest
            and (self.registry is None or dep.fields.get("registryUrl") == self.registry)
            and all(dep.groups.get(k) == v for k, v in self.groups.items())
        )


def _package(dep: Dependency) -> str:
    """An EKS add-on's package is a JSON filter (Renovate's aws-eks-addon datasource): compared as data."""
    if dep.datasource == "aws-eks-addon":
        return json.dumps(json.loads(dep.package), sort_keys=True)
    return dep.package


def _value_of_tag(dep: Dependency, tag: str) -> str:
    """What Renovate compares for a tag: the extractVersion group `version` where the manager has one (v1.40.0 ->
    1.40.0), else the tag."""
    pattern = dep.fields.get("extractVersion")
    if not pattern:
        return tag
    match = python_regex(pattern).search(tag)
    return match["version"] if match else tag


def _image(reference: str) -> tuple[str, str, str | None]:
    """repository, tag and digest of `repository:tag[@sha256:...]`."""
    name, _, digest = reference.partition("@")
    repository, _, tag = name.rpartition(":")
    return repository, tag, digest or None


def expected_pins(pins: types.ModuleType) -> list[Expected]:
    """Every version the map (`pins`, config/versions.py or a planted copy) and the serving stacks pin."""
    found = []
    for k8s, addons in pins.ADDONS.items():
        for name, pin in addons.items():
            package = json.dumps({"addonName": name, "kubernetesVersion": k8s}, sort_keys=True)
            found.append(Expected(f"ADDONS[{k8s!r}][{name!r}]", MAP, "aws-eks-addon", package, pin.version))
    for name, chart in pins.CHARTS.items():
        what = f"CHARTS[{name!r}]"
        if chart.repository.startswith("oci://"):
            found.append(Expected(what, MAP, "docker", chart.repository.removeprefix("oci://"), chart.version))
        else:
            found.append(Expected(what, MAP, "helm", chart.chart, chart.version, registry=chart.repository))
    for k8s, pin in pins.CLUSTER_AUTOSCALER_IMAGES.items():
        what, repository = f"CLUSTER_AUTOSCALER_IMAGES[{k8s!r}]", pins.CLUSTER_AUTOSCALER_REPOSITORY
        found.append(Expected(what, MAP, "docker", repository, pin.version, groups={"kubernetesVersion": k8s}))
    for name, pin in pins.IMAGES.items():
        repository, tag, digest = _image(pin.version)
        found.append(Expected(f"IMAGES[{name!r}]", MAP, "docker", repository, tag, digest))
    for name, pin in pins.PLUGINS.items():
        found.append(Expected(f"PLUGINS[{name!r}]", MAP, "custom.grafana-plugin", name, pin.version))
    for stack in STACKS:
        module = Path(inspect.getfile(stack)).relative_to(ROOT).as_posix()
        found.append(Expected(f"{module} IMAGE_TAG", module, "docker", SERVING_REPOSITORY, stack.IMAGE_TAG))
    return found


def unmanaged(expected: list[Expected], deps: list[Dependency]) -> list[str]:
    return [f"{e.what} = {e.value}" for e in expected if not any(e.managed_by(d) for d in deps)]


def extracted(map_text: str | None = None) -> list[Dependency]:
    """What the managers extract from the repository, with config/versions.py's text replaced when given."""

    def read(path: str) -> str:
        return map_text if path == MAP and map_text is not None else (ROOT / path).read_text()

    return extract_all(RENOVATE, repository_files(ROOT), read)


def test_every_pin_is_captured_by_a_renovate_manager():
    missing = unmanaged(expected_pins(versions), extracted())
    assert not missing, (
        f"pinned but matched by no manager of renovate.json: {missing}; add or widen a customManagers entry (the "
        "datasource of its kind: docs/decisions.md, Versions), or keep the pin's line in the shape a manager reads"
    )


def test_no_manager_captures_a_string_of_the_map_that_is_not_a_pin():
    expected = expected_pins(versions)
    stray = [
        f"{d.manager}: {d.value}" for d in extracted() if d.file == MAP and not any(e.managed_by(d) for e in expected)
    ]
    assert not stray, f"renovate.json would update strings of {MAP} that pin nothing: {stray}"


def test_every_serving_config_names_its_image_as_the_stacks_manager_does():
    """A serving image moves in one pull request: the shipped configs' tags are the same dependency."""
    configs = [d for d in extracted() if d.file.startswith("config/") and d.file.endswith(".yaml")]
    assert {d.file for d in configs} == {p.relative_to(ROOT).as_posix() for p in (ROOT / "config").glob("*.yaml")}
    assert {(d.datasource, d.package) for d in configs} == {("docker", SERVING_REPOSITORY)}
    assert {d.value for d in configs} <= {s.IMAGE_TAG for s in STACKS}


PLANTS = {
    "an add-on no manager names": (
        '"1.35": {\n',
        '"1.35": {\n        "aws-efs-csi-driver": Pin("v2.1.0-eksbuild.1", "planted"),\n',
        "ADDONS['1.35']['aws-efs-csi-driver'] = v2.1.0-eksbuild.1",
    ),
    "a chart whose arguments come in another order": (
        'repository="https://kedacore.github.io/charts",\n        chart="keda",',
        'chart="keda",\n        repository="https://kedacore.github.io/charts",',
        f"CHARTS['keda'] = {versions.CHARTS['keda'].version}",
    ),
    "an image written as an f-string": (
        '"public.ecr.aws/docker/library/python:',
        'f"public.ecr.aws/docker/library/python:',
        f"IMAGES['bench'] = {_image(versions.IMAGES['bench'].version)[1]}",
    ),
}


@pytest.mark.parametrize("plant", PLANTS, ids=list(PLANTS))
def test_a_pin_planted_outside_every_manager_is_named(plant):
    old, new, named = PLANTS[plant]
    source = (ROOT / MAP).read_text()
    assert source.count(old) == 1, f"the plant for {plant!r} no longer fits {MAP}; update PLANTS"
    planted_text = source.replace(old, new)
    planted = types.ModuleType("planted_versions")
    sys.modules[planted.__name__] = planted  # dataclasses look their module up
    try:
        exec(compile(planted_text, MAP, "exec"), planted.__dict__)
    finally:
        del sys.modules[planted.__name__]
    assert unmanaged(expected_pins(planted), extracted(planted_text)) == [named]
