"""The journey's stand-ins for the container images the rendered pods name: which programs each image has on its
PATH, and what its Python's site-packages holds. The local interpreter (the project's .venv) is every image's python3;
the programs are the small launchers this module writes into the world's folder (their code is image/standin_<program>.py).

| image (repository) | on PATH | site-packages beyond the local interpreter's |
| --- | --- | --- |
| pytorch-inference-vllm-neuronx, tag 0.9.1-... (legacy-v0) | python3, pip, vllm | the pod network (image/site), NxDI (image/nxdi) |
| pytorch-inference-vllm-neuronx, other tags (vllm-neuron) | python3, pip, vllm | the pod network |
| envoyproxy/envoy | envoy | - |
| the benchmark's Python image (config/versions.py BENCH) | python3, pip | the pod network |

An image the table does not know stops the pod with a sentence (CreateContainerError): a new image needs a stand-in.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from pathlib import Path

IMAGE_CODE = Path(__file__).resolve().parent / "image"
SITE = IMAGE_CODE / "site"
NXDI = IMAGE_CODE / "nxdi"
LEGACY_TAG = "0.9.1-"


@dataclass(frozen=True)
class Image:
    name: str
    programs: tuple[str, ...]
    site: tuple[Path, ...]
    vllm_stack: str = ""  # whose vLLM the image holds: the stand-in serves that stack's API and series


def image_for(reference: str) -> Image:
    """The stand-in for an image reference (repository:tag)."""
    from config.versions import BENCH, IMAGES

    repository, _, tag = reference.rpartition(":")
    if repository.endswith("/pytorch-inference-vllm-neuronx"):
        legacy = tag.startswith(LEGACY_TAG)
        return Image(
            "neuron-legacy" if legacy else "neuron-plugin",
            ("python3", "pip", "vllm"),
            (SITE, NXDI) if legacy else (SITE,),
            "legacy-v0" if legacy else "vllm-neuron",
        )
    if repository.endswith("envoyproxy/envoy"):
        return Image("envoy", ("envoy",), ())
    if reference == IMAGES[BENCH].version:
        return Image("python", ("python3", "pip"), (SITE,))
    raise LookupError(f"the journey has no stand-in for image {reference!r}; add one in tests/journey/images.py")


def visible() -> tuple[Path, ...]:
    """What the images hold under the deployer's folders: the interpreter's environment and the stand-ins' code and
    data (image/, the step-time table, the recorded NxDI keywords)."""
    tests = IMAGE_CODE.parents[1]
    prefixes = {Path(sys.prefix), Path(sys.prefix).resolve(), Path(sys.base_prefix)}
    return (
        *sorted(prefixes),
        IMAGE_CODE,
        tests / "bench" / "fixtures" / "step-times-h100-qwen3-32b.json",
        tests / "model_build" / "fixtures" / "nxdi_v0_6_10598.json",
    )


def _launcher(path: Path, body: str) -> None:
    path.write_text("#!/bin/sh\n" + body + "\n")
    path.chmod(0o755)


def install(root: Path, image: Image) -> Path:
    """Write the image's launchers under root/<image>/bin (once) and return that folder. Each Python program runs the
    local interpreter with the image's site-packages after the pod's own PYTHONPATH."""
    bin_dir = root / image.name / "bin"
    if bin_dir.is_dir():
        return bin_dir
    bin_dir.mkdir(parents=True)
    python = sys.executable
    site = os.pathsep.join(str(p) for p in image.site)
    with_site = f'PYTHONPATH="${{PYTHONPATH:+$PYTHONPATH{os.pathsep}}}{site}" ' if site else ""
    for program in image.programs:
        if program == "python3":
            _launcher(bin_dir / "python3", f'{with_site}exec "{python}" "$@"')
        else:
            stack = f"JOURNEY_VLLM_STACK={image.vllm_stack} " if program == "vllm" else ""
            _launcher(
                bin_dir / program, f'{with_site}{stack}exec "{python}" "{IMAGE_CODE / f"standin_{program}.py"}" "$@"'
            )
    return bin_dir
