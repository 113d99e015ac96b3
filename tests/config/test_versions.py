"""The version map is the one source of every add-on, chart and image version: read from the synthesized templates
and the rendered manifests (not from the constants the constructs import), so a construct that pins its own version,
or floats one, fails here."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

import pytest

from charts.jobs.bench import render_bench_job
from charts.jobs.model_build import render_build_job
from charts.jobs.stage import render_stage_job
from config import DeploymentConfig, parse_config
from config.catalogue import PLACEHOLDER_ACCOUNT
from config.kubernetes import SUPPORTED_KUBERNETES_VERSIONS
from config.versions import (
    ADDONS,
    CHARTS,
    CLUSTER_AUTOSCALER_IMAGES,
    CLUSTER_AUTOSCALER_REPOSITORY,
    IMAGES,
    PLUGINS,
    for_kubernetes,
)
from serving_stacks import stack_serving
from tests.conftest import NEWEST_KUBERNETES_SYNTH, THREE_PROFILE_CONFIGS

# What EKS add-on versions look like (Renovate's aws-eks-addon versioning: ^v?\d+\.\d+\.\d+-eksbuild\.\d+$).
ADDON_VERSION = re.compile(r"^v\d+\.\d+\.\d+-eksbuild\.\d+$")
# An image that cannot move: a digest, or a tag naming a whole release (major.minor.patch, optionally a suffix such as
# -slim-bookworm). `python:3.11-slim-bookworm` or `envoy:v1.40-latest` follow new releases, so they do not match.
EXACT_IMAGE = re.compile(r"(@sha256:[0-9a-f]{64}|:v?\d+\.\d+\.\d+(\.\d+)*(-[\w.-]+)?)$")
FLOATING_WORDS = ("latest", "stable", "current")
# The synthesized configs and their Kubernetes versions: every supported version has one (see the test below).
VERSION_SYNTHS = ["synth", "variant_synth", "newest_kubernetes_synth"]


def exact_image(image: str) -> bool:
    return bool(EXACT_IMAGE.search(image)) and not any(word in image.rsplit(":", 1)[-1] for word in FLOATING_WORDS)


def test_the_map_pins_every_supported_kubernetes_version():
    assert set(ADDONS) == set(SUPPORTED_KUBERNETES_VERSIONS)


def test_the_synthesized_configs_cover_every_supported_kubernetes_version(default_config, variant_config):
    """The version-map tests below run on these three synths: a supported version none of them is on goes untested."""
    newest = parse_config(THREE_PROFILE_CONFIGS[NEWEST_KUBERNETES_SYNTH]())
    synthesized = [c.kubernetes_version for c in (default_config, variant_config, newest)]
    assert sorted(synthesized) == sorted(SUPPORTED_KUBERNETES_VERSIONS)


def test_every_pin_is_an_exact_version_with_a_source():
    for version, addons in ADDONS.items():
        assert set(addons) == set(ADDONS[SUPPORTED_KUBERNETES_VERSIONS[0]]), version
        for name, pin in addons.items():
            assert ADDON_VERSION.match(pin.version), (version, name, pin.version)
            assert pin.source.strip(), (version, name)
    for chart in CHARTS.values():
        assert re.fullmatch(r"\d+\.\d+\.\d+", chart.version) and chart.source.strip()
    for name, image in IMAGES.items():
        assert exact_image(image.version) and image.source.strip(), (name, image.version)
    assert set(CLUSTER_AUTOSCALER_IMAGES) == set(SUPPORTED_KUBERNETES_VERSIONS)
    for version, image in CLUSTER_AUTOSCALER_IMAGES.items():
        assert re.fullmatch(rf"v{re.escape(version)}\.\d+", image.version) and image.source.strip(), version
    for name, plugin in PLUGINS.items():
        assert re.fullmatch(r"\d+\.\d+\.\d+", plugin.version) and plugin.source.strip(), name


@pytest.mark.parametrize(
    "image",
    [
        "public.ecr.aws/docker/library/python:3.11-slim-bookworm",
        "public.ecr.aws/docker/library/python:3-slim",
        "docker.io/envoyproxy/envoy:latest",
        "docker.io/envoyproxy/envoy:v1.40-latest",
        "docker.io/envoyproxy/envoy",
        "registry.k8s.io/autoscaling/cluster-autoscaler:v1.36",
    ],
)
def test_a_floating_image_is_not_an_exact_pin(image):
    assert not exact_image(image)


@pytest.mark.parametrize(
    "image",
    [
        "public.ecr.aws/docker/library/python:3.11.15-slim-bookworm",
        "docker.io/envoyproxy/envoy:v1.40.0",
        f"public.ecr.aws/docker/library/python@sha256:{'0' * 64}",
        "public.ecr.aws/neuron/pytorch-inference-vllm-neuronx:0.29.0.1.2.0-neuronx-py314-sdk2.33.0-ubuntu26.04",
    ],
)
def test_an_exact_image_is_a_pin(image):
    assert exact_image(image)


def _addons(synth) -> dict[str, dict[str, Any]]:
    return {
        r["Properties"]["AddonName"]: r["Properties"] for r in synth.resources("Cluster", "AWS::EKS::Addon").values()
    }


@pytest.mark.parametrize("which", VERSION_SYNTHS)
def test_every_addon_in_the_template_is_pinned_from_the_map(which, request):
    """The default config (Kubernetes 1.35), the variant (1.34) and the newest (1.36): every add-on, each at the map's
    version for the config's Kubernetes version."""
    synth = request.getfixturevalue(which)
    pins = for_kubernetes(synth.config.kubernetes_version).addons
    found = {name: props.get("AddonVersion") for name, props in _addons(synth).items()}
    assert found == {name: pin.version for name, pin in pins.items()}


@pytest.mark.parametrize("which", VERSION_SYNTHS)
def test_every_helm_chart_in_the_template_comes_from_the_map(which, request):
    synth = request.getfixturevalue(which)
    charts = [r["Properties"] for r in synth.resources("Cluster", "Custom::AWSCDK-EKS-HelmChart").values()]
    found = sorted((c["Repository"], c["Chart"], c["Version"]) for c in charts)
    assert found == sorted((c.repository, c.chart, c.version) for c in CHARTS.values())


@pytest.mark.parametrize("which", VERSION_SYNTHS)
def test_the_cluster_autoscaler_image_is_the_maps_for_the_clusters_kubernetes_minor(which, request):
    """One CA minor per Kubernetes minor (CA's README): the Helm values carry the map's image for the config's version."""
    synth = request.getfixturevalue(which)
    values = json.loads(synth.helm_chart("cluster-autoscaler")["Values"])
    image = for_kubernetes(synth.config.kubernetes_version).cluster_autoscaler_image
    assert values["image"] == {"repository": CLUSTER_AUTOSCALER_REPOSITORY, "tag": image.version}


def test_every_grafana_plugin_in_the_template_comes_from_the_map(synth):
    values = synth.helm_chart("grafana")["Values"]
    # The values carry tokens (the workspace URL), so CloudFormation joins them: read the literal parts.
    text = (
        values if isinstance(values, str) else "".join(p if isinstance(p, str) else "0" for p in values["Fn::Join"][1])
    )
    (plugins,) = re.findall(r'"plugins":(\[[^\]]*\])', text)
    assert json.loads(plugins) == [f"{name}@{pin.version}" for name, pin in PLUGINS.items()]


def _images(node: Any) -> Iterator[str]:
    """Every container's image in rendered Kubernetes objects (containers and init containers, any depth)."""
    if isinstance(node, dict):
        for key, value in node.items():
            if key in ("containers", "initContainers"):
                yield from (c["image"] for c in value)
            else:
                yield from _images(value)
    elif isinstance(node, list):
        for item in node:
            yield from _images(item)


def _manifest_objects(template: dict[str, Any]) -> list[Any]:
    """The objects of every kubectl-applied manifest. A manifest with CloudFormation tokens is an Fn::Join whose
    literal parts hold the images; joining the literals with a placeholder for each token gives parseable JSON."""
    objects: list[Any] = []
    for resource in template["Resources"].values():
        if resource["Type"] != "Custom::AWSCDK-EKS-KubernetesResource":
            continue
        manifest = resource["Properties"]["Manifest"]
        if isinstance(manifest, dict):
            _, parts = manifest["Fn::Join"]
            manifest = "".join(p if isinstance(p, str) else "TOKEN" for p in parts)
        objects.extend(json.loads(manifest))
    return objects


def _rendered_images(synth, config: DeploymentConfig) -> set[str]:
    images = set()
    for template in synth.templates.values():
        images |= set(_images(_manifest_objects(template)))
    # What ops/ renders at run time: the staging, build and benchmark Jobs.
    images |= set(_images(render_stage_job(config, config.models_in_use(), PLACEHOLDER_ACCOUNT)))
    for profile in config.profiles:
        images |= set(_images(render_build_job(config, profile.name, PLACEHOLDER_ACCOUNT)))
    images |= set(_images(render_bench_job(config, PLACEHOLDER_ACCOUNT, "run", [])))
    return images


def _served_by_a_stack(image: str, config: DeploymentConfig) -> bool:
    """A serving image: one the profiles name, whose tag a serving stack's catalogue serves (the stacks own those)."""
    for profile in config.profiles:
        if image == profile.image.uri:
            i = profile.image
            return stack_serving(i.vllm_version, i.plugin_version, i.sdk_version) is not None
    return False


@pytest.mark.parametrize("which", ["synth", "plugin_synth"])
def test_every_container_image_comes_from_the_map_or_a_serving_stack(which, request):
    synth = request.getfixturevalue(which)
    images = _rendered_images(synth, synth.config)
    pinned = {pin.version for pin in IMAGES.values()}
    stray = {i for i in images if i not in pinned and not _served_by_a_stack(i, synth.config)}
    assert not stray, f"images not in config/versions.py IMAGES nor a serving stack's catalogue: {sorted(stray)}"
    assert pinned <= images, f"pinned but never rendered: {sorted(pinned - images)}"
    floating = sorted(i for i in images if not exact_image(i))
    assert not floating, f"images whose tag follows new releases (pin a whole version or a digest): {floating}"
