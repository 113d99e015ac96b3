"""The serving-stack contract: every stack module has every member, and code outside serving_stacks/ uses a stack only
through those members (tests/serving_stacks/stack_use.py follows what holds a stack, its name or its version through
each module's syntax tree, so an alias or a getattr is found however it is spelt)."""

from __future__ import annotations

import types
from pathlib import Path

import pytest

from serving_stacks import STACKS, legacy_v0
from serving_stacks.contract import ArtifactKind, ServingStack
from tests.conftest import ROOT
from tests.serving_stacks.stack_use import SKIPPED_FOLDERS, declarations, python_files, stack_decisions

MEMBERS = sorted(name for name in vars(ServingStack) if not name.startswith("_"))
METHODS = {name for name in MEMBERS if callable(vars(ServingStack)[name])}
# Not scanned: the stacks themselves, and the tests, which name a stack on purpose to state what it does (its
# route, its metric names, the stack the default config picks).
UNSCANNED = ("serving_stacks", "tests")
# What the repository's annotations say holds a stack (stack_named, STACKS, a plan's serving_stack).
DECLARED = declarations(python_files(ROOT, skip=("tests",)))


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


def scanned(root: Path) -> list[Path]:
    return python_files(root, skip=UNSCANNED)


def decisions(source: str) -> list[str]:
    return stack_decisions(source, DECLARED)


@pytest.mark.parametrize("path", scanned(ROOT), ids=lambda p: str(p.relative_to(ROOT)))
def test_no_code_outside_serving_stacks_uses_a_stack_but_through_the_contract(path):
    found = decisions(path.read_text())
    assert not found, (
        f"{path.relative_to(ROOT)} uses a serving stack other than through the ServingStack contract "
        f"({'; '.join(found)}); ask the profile's stack (serving_stacks.stack_named(profile.image.stack)) for a "
        "member of ServingStack instead, adding one to serving_stacks/contract.py if none fits"
    )


def test_every_python_folder_but_the_stacks_and_the_tests_is_scanned():
    """cloud/, serving_pod/ and perf/ were once left out of a hand-written list: now nothing is listed."""
    folders = {p.relative_to(ROOT).parts[0] for p in scanned(ROOT)}
    ours = [p for p in ROOT.iterdir() if p.is_dir() and not p.name.startswith(".") and p.name not in SKIPPED_FOLDERS]
    on_disk = {p.name for p in ours if any(p.rglob("*.py"))}
    assert folders == (on_disk - set(UNSCANNED)) | {"app.py"}


@pytest.mark.parametrize("folder", ["cloud", "serving_pod", "perf", "a_new_folder"])
def test_a_concrete_stack_module_imported_in_any_folder_is_found(tmp_path, folder):
    """A planted import in a folder the old list missed, scanned from a repository of its own."""
    (tmp_path / folder / "sub").mkdir(parents=True)
    (tmp_path / folder / "sub" / "planted.py").write_text("from serving_stacks import vllm_neuron\n")
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_x.py").write_text("from serving_stacks import vllm_neuron\n")
    found = {p.relative_to(tmp_path).as_posix(): decisions(p.read_text()) for p in scanned(tmp_path)}
    planted = "line 1: an import of a concrete stack module: from serving_stacks import vllm_neuron"
    assert found == {f"{folder}/sub/planted.py": [planted]}


# Each way of using a stack other than through the contract, as a small program the check must refuse.
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
    "a probe for a contract member": [
        "if hasattr(stack, 'graph_args'):\n    pass\n",
        "args = getattr(stack, 'graph_args', None)\n",
    ],
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
    assert decisions(source), source


# What passed the list of spellings (issue 38), by the finding each must get: reflection, an attribute the contract
# does not declare, an alias, a comparison with a stack, a version proxy.
BEYOND_SPELLINGS = {
    "() on a stack": [
        "stack = stack_named(profile.image.stack)\nflags = getattr(stack, flag_name, None)\n",
        "path = getattr(plan.serving_stack, '__file__')\n",
        "for s in STACKS:\n    print(vars(s))\n",
        "def f(stack: ServingStack) -> bool:\n    return hasattr(stack, 'COMPILE_ROUTE')\n",
    ],
    "which the ServingStack contract does not declare": [
        "route = stack_named(profile.image.stack).ROUTE\n",
        "def f(stack: ServingStack) -> str:\n    return stack.__file__\n",
        "roles = plan.serving_stack.SPECULATORS_TYPES\n",
        "stacks = sorted({stack_named(p.image.stack) for p in profiles}, key=lambda s: s.NAME)\nx = stacks[0].ENV_READERS\n",
    ],
    # aliases: the finding is on the alias
    "line 2: a comparison with a stack's name: s": ["s = profile.image.stack\nlegacy = s == OLD\n"],
    "line 3: a comparison with a stack's name: t": [
        "s = profile.image.stack\nt = s\nif t in PLUGIN_STACKS:\n    pass\n"
    ],
    "line 2: a method or attribute of a stack's name: name": [
        "name = stack_named(p.image.stack).NAME\nif name.endswith(SUFFIX):\n    pass\n"
    ],
    "line 2: a comparison with a stack: s": [
        "s = stack_named(profile.image.stack)\nif s is chosen:\n    pass\n",
        "(s := stack_named(profile.image.stack)).NAME\nold = s == first\n",
    ],
    "a comparison with a stack": [
        "if stack_named(a.image.stack) is not stack_named(b.image.stack):\n    pass\n",
        "others = [s for s in STACKS if s != default]\n",
        "by_stack: dict[ServingStack, list[str]] = {}\nfor stack, names in by_stack.items():\n    if stack == first:\n        pass\n",
        "if stack_named(profile.image.stack) in (OLD, NEW):\n    pass\n",
    ],
    "an image version that tells the stacks apart": [
        "if profile.image.plugin_version is None:\n    pass\n",
        "legacy = not profile.image.plugin_version\n",
        "v = profile.image.vllm_version\nif v.startswith('0.9'):\n    pass\n",
        "flags = FLAGS[profile.image.vllm_version]\n",
        "plugin = 'yes' if image.plugin_version else 'no'\n",
        "m = stack_named(name).LIVE_METRICS\nold = m.vllm_version < NEW\n",
    ],
}


@pytest.mark.parametrize(
    ("finding", "source"),
    [(finding, source) for finding, sources in BEYOND_SPELLINGS.items() for source in sources],
    ids=[f"{finding} ({i})" for finding, sources in BEYOND_SPELLINGS.items() for i in range(len(sources))],
)
def test_the_check_follows_a_stack_its_name_and_its_version_through_the_module(finding, source):
    found = decisions(source)
    assert any(finding in f for f in found), f"{source!r}: {found}"


@pytest.mark.parametrize(
    "source",
    [
        "cache = stack_named(profile.image.stack).LOCAL_CACHE\n",
        "print(f'{stack.NAME} serves {stack.METHODS}')\n",
        "stacks = sorted({stack_named(p.image.stack) for p in profiles}, key=lambda s: s.NAME)\n",
        "from serving_stacks import STACKS, stack_named\n",
        "if __name__ == '__main__':\n    main()\n",
        # a stack tested for None, asked for members, passed on, grouped by; its name passed on or tested for None
        "if stack_serving(vllm, plugin, sdk) is None:\n    raise ValueError(tag)\n",
        "stack = stack_named(p.image.stack)\nif stack.ARTIFACT is ArtifactKind.NXDI_COMPILE and m not in stack.METHODS:\n    pass\n",
        "needed = max(s.MIN_DRIVER for s in stacks)\nif driver < needed:\n    pass\n",
        "serving = [s for s in STACKS if method in s.METHODS]\n",
        "plan = Plan(serving_stack=stack_named(p.image.stack))\nroles = plan.serving_stack.draft_config_roles(m)\n",
        "by_stack: dict[ServingStack, list[str]] = {}\nfor p in profiles:\n    by_stack.setdefault(stack_named(p.image.stack), []).append(p.name)\n"
        "for stack, names in sorted(by_stack.items(), key=lambda item: item[0].NAME):\n    jobs.append((stack.NAME, stack.METRICS_PATH, names))\n",
        "inputs = {'stack': profile.image.stack, 'plugin_version': profile.image.plugin_version}\n",
        "def stack(self) -> str:\n    return stack_serving(self.vllm_version, self.plugin_version, self.sdk_version).NAME\n",
        "if script.stack:\n    args += ['--stack', script.stack]\n",
        "sdk = profile.image.sdk_version\nrelease = NXDI_RELEASE_BY_SDK.get('.'.join(sdk.split('.')[:2]))\n",
        # a name bound to a stack in one function is its own in another (scopes are followed)
        "def a(p):\n    s = stack_named(p.image.stack)\n    return s.METHODS\ndef b(s):\n    return s == other\n",
    ],
)
def test_the_check_lets_a_stack_be_asked_passed_on_and_named(source):
    assert decisions(source) == []
