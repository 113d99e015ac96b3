"""`make synth` reports the templates of the cloud assembly it just wrote, and clears what another config left."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tools.synth_report import main


def _assembly(out: Path, stacks: list[str]) -> None:
    """A cloud assembly as the CDK writes it: manifest.json plus three files per stack."""
    out.mkdir(exist_ok=True)
    artifacts: dict[str, dict] = {"Tree": {"type": "cdk:tree", "properties": {"file": "tree.json"}}}
    for name in stacks:
        artifacts[f"{name}.assets"] = {"type": "cdk:asset-manifest", "properties": {"file": f"{name}.assets.json"}}
        artifacts[name] = {"type": "aws:cloudformation:stack", "properties": {"templateFile": f"{name}.template.json"}}
        for kind in ("template", "assets", "metadata"):
            (out / f"{name}.{kind}.json").write_text("{}")
    (out / "manifest.json").write_text(json.dumps({"version": "48.0.0", "artifacts": artifacts}))


def test_a_synth_after_another_configs_lists_only_its_own_templates_and_removes_the_others(tmp_path, capsys):
    out = tmp_path / "cdk.out"
    _assembly(out, ["TrnSpecdecPlugin-Models", "TrnSpecdecPlugin-Cluster"])  # CONFIG=config/vllm-neuron.yaml
    _assembly(out, ["TrnSpecdec-Models", "TrnSpecdec-Cluster"])  # then the default config, into the same cdk.out

    assert main(["--out", str(out)]) == 0

    printed = capsys.readouterr().out
    assert f"templates: {out}/TrnSpecdec-Cluster.template.json {out}/TrnSpecdec-Models.template.json\n" in printed
    assert "removed from" in printed and "TrnSpecdecPlugin-Cluster.template.json" in printed
    assert sorted(p.name for p in out.glob("TrnSpecdecPlugin-*")) == []
    assert len(list(out.glob("TrnSpecdec-*.json"))) == 6  # this synth's files stay


def test_a_synth_with_nothing_stale_removes_nothing_and_says_nothing_about_it(tmp_path, capsys):
    out = tmp_path / "cdk.out"
    _assembly(out, ["TrnSpecdec-Models"])
    dist = tmp_path / "dist"
    dist.mkdir()
    (dist / "serving.yaml").write_text("")

    main(["--out", str(out), "--dist", str(dist)])

    assert capsys.readouterr().out.splitlines() == [
        f"templates: {out}/TrnSpecdec-Models.template.json",
        f"kubernetes: {dist}/serving.yaml",
    ]


def test_a_missing_manifest_is_a_sentence_asking_for_a_synth(tmp_path):
    with pytest.raises(SystemExit, match=r"is not a cloud assembly manifest .*run the synth again"):
        main(["--out", str(tmp_path)])
