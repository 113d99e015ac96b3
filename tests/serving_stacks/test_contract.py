"""The serving-stack contract: every stack module has every member, and no code outside serving_stacks/ decides
by a stack's name (read from the source's syntax tree, so a comparison is found however it is spelt)."""

from __future__ import annotations

import ast
import types
from collections.abc import Callable
from pathlib import Path

import pytest

from serving_stacks import STACKS, legacy_v0
from serving_stacks.contract import ArtifactKind, ServingStack
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


@pytest.mark.parametrize("stack", STACKS, ids=lambda s: s.NAME)
def test_a_stack_whose_artifact_is_a_compile_cache_says_where_it_is_and_where_serving_copies_it(stack):
    """model_build.compile_cache reads both from the contract: a compile-cache stack without them could not build."""
    is_cache = stack.ARTIFACT is ArtifactKind.COMPILE_CACHE
    assert (stack.COMPILE_CACHE_SUBDIR is not None) == is_cache
    assert (stack.LOCAL_CACHE is not None) == is_cache


def test_a_module_without_a_member_is_not_a_serving_stack():
    partial = types.ModuleType("partial")
    partial.__dict__.update({k: v for k, v in vars(legacy_v0).items() if k != "compile_args"})
    assert not isinstance(partial, ServingStack)


@pytest.mark.parametrize("stack", STACKS, ids=lambda s: s.NAME)
def test_each_stack_serves_plain_decoding_first_and_names_its_driver(stack):
    assert stack.METHODS[0] == "none"
    assert len(stack.MIN_DRIVER) == 4


# The concrete stack modules: their short and dotted names (serving_stacks.vllm_neuron).
STACK_MODULES = {s.__name__.rsplit(".", 1)[1] for s in STACKS}
STACK_MODULE_PATHS = {s.__name__ for s in STACKS}
STACK_MODULE_NAMES = STACK_MODULES | STACK_MODULE_PATHS
# What a stack's name or module is read from: NAME_ATTRIBUTES and the module's own __name__.
IDENTITY_ATTRIBUTES = NAME_ATTRIBUTES | {"__name__"}


def _is_name(node: ast.AST) -> bool:
    """A stack's name or module name: `.NAME`, `.stack` or `.__name__`."""
    return isinstance(node, ast.Attribute) and node.attr in IDENTITY_ATTRIBUTES


def _is_stack_module(node: ast.AST) -> bool:
    """A concrete stack module by its own name: `vllm_neuron`, `serving_stacks.legacy_v0`."""
    return (isinstance(node, ast.Name) and node.id in STACK_MODULES) or (
        isinstance(node, ast.Attribute) and node.attr in STACK_MODULES
    )


def _imports_a_stack_module(node: ast.AST) -> bool:
    if isinstance(node, ast.Import):
        return any(alias.name in STACK_MODULE_PATHS for alias in node.names)
    if isinstance(node, ast.ImportFrom) and node.module:
        if node.module in STACK_MODULE_PATHS:
            return True
        return node.module == "serving_stacks" and any(alias.name in STACK_MODULES for alias in node.names)
    return False


def _compares_a_name(node: ast.AST) -> bool:
    if not isinstance(node, ast.Compare):
        return False
    operands = [node.left, *node.comparators]
    operands += [e for o in operands if isinstance(o, ast.Tuple | ast.List | ast.Set) for e in o.elts]
    return any(_is_name(o) for o in operands)


def _keys_by_name(node: ast.AST) -> bool:
    if isinstance(node, ast.Dict):
        return any(k is not None and _is_name(k) for k in node.keys)
    return isinstance(node, ast.DictComp) and _is_name(node.key)


def _looks_up_by_name(node: ast.AST) -> bool:
    if isinstance(node, ast.Subscript):
        return _is_name(node.slice)
    return (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr in ("get", "setdefault", "pop")
        and bool(node.args)
        and _is_name(node.args[0])
    )


def _picks_by_position(node: ast.AST) -> bool:
    def is_stacks(n: ast.AST) -> bool:
        return isinstance(n, ast.Name) and n.id == "STACKS"

    if isinstance(node, ast.Subscript):
        return is_stacks(node.value)
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and is_stacks(node.func.value)


def _probes_a_member(node: ast.AST) -> bool:
    return (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id == "hasattr"
        and len(node.args) == 2
        and isinstance(node.args[1], ast.Constant)
        and node.args[1].value in MEMBERS
    )


# One rule per spelling: (what it is, whether a syntax node is it).
RULES: list[tuple[str, Callable[[ast.AST], bool]]] = [
    ("a stack name written out", lambda n: isinstance(n, ast.Constant) and n.value in STACK_NAMES),
    ("a stack module's import path", lambda n: isinstance(n, ast.Constant) and n.value in STACK_MODULE_NAMES),
    ("an import of a concrete stack module", _imports_a_stack_module),
    ("a concrete stack module", _is_stack_module),
    ("a comparison with a stack's name", _compares_a_name),
    ("a dict keyed by a stack's name", _keys_by_name),
    ("a lookup by a stack's name", _looks_up_by_name),
    ("a stack picked by its position", _picks_by_position),
    ("a match on a stack's name", lambda n: isinstance(n, ast.Match) and _is_name(n.subject)),
    (
        "a string method on a stack's name",
        lambda n: isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and _is_name(n.func.value),
    ),
    ("a probe for a contract member", _probes_a_member),
]


def name_decisions(source: str) -> list[str]:
    """Where the code decides by which stack a profile runs on instead of asking it for a contract member (RULES):
    a stack name written out, a comparison with a stack's name (`.NAME`, `.stack`, `.__name__`), a hasattr() probe
    for a contract member, and the nine spellings issue 27 listed: importing a concrete stack module, naming one
    (`stack_named(...) is vllm_neuron`), its import path as a string, a dict keyed by a stack's name, a lookup by it,
    a string method on it, `match` on it, a stack picked by its position in STACKS, a module's `__name__`. Passing
    the name to stack_named() and showing it in a sentence stay allowed."""
    found: list[str] = []
    for node in ast.walk(ast.parse(source)):
        why = next((why for why, rule in RULES if rule(node)), None)
        if why:
            found.append(f"line {getattr(node, 'lineno', '?')}: {why}: {ast.unparse(node).splitlines()[0]}")
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


# Each way of deciding by stack the check knows, as a small program it must refuse (one or more spellings each).
SPELLINGS = {
    "a stack name written out": [
        "if profile.image.stack == 'vllm-neuron':\n    pass\n",
        "COPY = {'legacy-v0': None}\n",
    ],
    "a comparison with a stack's name": [
        "x = legacy_NAME != profile.image.stack\n",
        "if name in (stack.NAME,):\n    pass\n",
        "ok = 'neuron' in profile.image.stack\n",
    ],
    "a probe for a contract member": ["if hasattr(stack, 'graph_args'):\n    pass\n"],
    # The nine the contract test used to miss (issue 27):
    "1 an import of a concrete stack module": [
        "from serving_stacks import vllm_neuron\n",
        "import serving_stacks.legacy_v0\n",
        "from serving_stacks.vllm_neuron import COMPILE_CACHE_SUBDIR\n",
        "from serving_stacks import legacy_v0 as old\n",
    ],
    "2 identity with a concrete stack module": [
        "if stack_named(profile.image.stack) is vllm_neuron:\n    pass\n",
        "subdir = serving_stacks.vllm_neuron.COMPILE_CACHE_SUBDIR\n",
    ],
    "3 a dict keyed by the stack's name": [
        "TABLE = {stack.NAME: 1}\n",
        "by_name = {p.image.stack: p for p in profiles}\n",
    ],
    "4 a lookup by the stack's name": [
        "env = ENV_BY_STACK[profile.image.stack]\n",
        "env = ENV_BY_STACK.get(profile.image.stack, {})\n",
        "groups.setdefault(profile.image.stack, []).append(profile)\n",
    ],
    "5 a string method on the name": [
        "if profile.image.stack.startswith('vllm'):\n    pass\n",
        "plugin = stack.NAME.endswith('neuron')\n",
    ],
    "6 a match on the name": ["match profile.image.stack:\n    case _:\n        pass\n"],
    "7 a stack picked by its position": [
        "if stack is STACKS[1]:\n    pass\n",
        "legacy = STACKS.index(stack) == 0\n",
    ],
    "8 a stack module's import path as a string": [
        "stack = importlib.import_module('serving_stacks.vllm_neuron')\n",
        "stack = sys.modules['serving_stacks.legacy_v0']\n",
    ],
    "9 the module's own name": [
        "if stack.__name__ == module_path:\n    pass\n",
        "plugin = stack.__name__.endswith('neuron')\n",
    ],
}


@pytest.mark.parametrize(
    "source",
    [source for sources in SPELLINGS.values() for source in sources],
    ids=[f"{kind} ({i})" for kind, sources in SPELLINGS.items() for i in range(len(sources))],
)
def test_the_check_finds_each_way_of_deciding_by_name(source):
    assert name_decisions(source), source


@pytest.mark.parametrize(
    "source",
    [
        "cache = stack_named(profile.image.stack).LOCAL_CACHE\n",
        "print(f'{stack.NAME} serves {stack.METHODS}')\n",
        "stacks = sorted({stack_named(p.image.stack) for p in profiles}, key=lambda s: s.NAME)\n",
        "from serving_stacks import STACKS, stack_named\n",
        "if __name__ == '__main__':\n    main()\n",
    ],
)
def test_the_check_lets_a_stack_be_asked_and_named(source):
    assert name_decisions(source) == []
