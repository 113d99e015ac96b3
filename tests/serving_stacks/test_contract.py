"""The serving-stack contract: every stack module has every member, and no code outside serving_stacks/ decides
by a stack's name (read from the source's syntax tree, so a comparison is found however it is spelt)."""

from __future__ import annotations

import ast
import types
from pathlib import Path

import pytest

from serving_stacks import STACKS, legacy_v0
from serving_stacks.contract import ServingStack
from tests.conftest import ROOT

MEMBERS = sorted(name for name in vars(ServingStack) if not name.startswith("_"))
METHODS = {name for name in MEMBERS if callable(vars(ServingStack)[name])}
STACK_NAMES = {s.NAME for s in STACKS}
# Attributes that hold a stack's name: a stack's NAME and a profile image's `stack`.
NAME_ATTRIBUTES = {"NAME", "stack"}
OUTSIDE = ("app.py", "bench", "charts", "config", "model_build", "ops", "stacks", "tools")


@pytest.mark.parametrize("stack", STACKS, ids=lambda s: s.NAME)
def test_every_stack_module_has_every_member_of_the_contract(stack):
    missing = [name for name in MEMBERS if not hasattr(stack, name)]
    assert not missing, f"serving stack {stack.NAME} lacks {missing}; every stack implements ServingStack"
    assert isinstance(stack, ServingStack)
    not_callable = [name for name in METHODS if not callable(getattr(stack, name))]
    assert not not_callable, f"serving stack {stack.NAME}: {not_callable} must be functions"


def test_a_module_without_a_member_is_not_a_serving_stack():
    partial = types.ModuleType("partial")
    partial.__dict__.update({k: v for k, v in vars(legacy_v0).items() if k != "compile_args"})
    assert not isinstance(partial, ServingStack)


@pytest.mark.parametrize("stack", STACKS, ids=lambda s: s.NAME)
def test_each_stack_serves_plain_decoding_first_and_names_its_driver(stack):
    assert stack.METHODS[0] == "none"
    assert len(stack.MIN_DRIVER) == 4


def name_decisions(source: str) -> list[str]:
    """Where the code decides by a stack's name: a stack name written out, a comparison with a `.NAME` or
    `.stack` attribute, or a hasattr() probe for a contract member."""
    found: list[str] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Constant) and node.value in STACK_NAMES:
            found.append(f"line {node.lineno}: the stack name {node.value!r}")
        elif isinstance(node, ast.Compare):
            operands = [node.left, *node.comparators]
            operands += [e for o in operands if isinstance(o, ast.Tuple | ast.List | ast.Set) for e in o.elts]
            if any(isinstance(o, ast.Attribute) and o.attr in NAME_ATTRIBUTES for o in operands):
                found.append(f"line {node.lineno}: {ast.unparse(node)}")
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id == "hasattr"
            and len(node.args) == 2
            and isinstance(node.args[1], ast.Constant)
            and node.args[1].value in MEMBERS
        ):
            found.append(f"line {node.lineno}: {ast.unparse(node)}")
    return found


def _modules() -> list[Path]:
    return sorted(
        p for entry in OUTSIDE for p in ([ROOT / entry] if entry.endswith(".py") else (ROOT / entry).rglob("*.py"))
    )


@pytest.mark.parametrize("path", _modules(), ids=lambda p: str(p.relative_to(ROOT)))
def test_no_code_outside_serving_stacks_decides_by_a_stacks_name(path):
    found = name_decisions(path.read_text())
    assert not found, (
        f"{path.relative_to(ROOT)} decides by a serving stack's name ({'; '.join(found)}); ask the profile's stack "
        "(serving_stacks.stack_named(profile.image.stack)) for a member of ServingStack instead, adding one to "
        "serving_stacks/contract.py if none fits"
    )


@pytest.mark.parametrize(
    "source",
    [
        "if profile.image.stack == 'vllm-neuron':\n    pass\n",
        "x = legacy_v0.NAME != profile.image.stack\n",
        "if name in (vllm_neuron.NAME,):\n    pass\n",
        "if hasattr(stack, 'graph_args'):\n    pass\n",
        "COPY = {'legacy-v0': None}\n",
    ],
)
def test_the_check_finds_each_way_of_deciding_by_name(source):
    assert name_decisions(source)


def test_the_check_lets_a_stack_member_be_read():
    assert name_decisions("cache = stack_named(profile.image.stack).LOCAL_CACHE\n") == []
