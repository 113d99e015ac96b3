"""Where code outside serving_stacks/ uses a serving stack other than by asking it for a ServingStack member, read
from each module's syntax tree (tests/serving_stacks/test_contract.py runs it on every Python file of the repository).

Inverted, not a list of forbidden spellings: the check follows what holds a stack through each module (what
stack_named() returns, an element of STACKS, a name, parameter or attribute annotated ServingStack, and any name
bound to one of those, so an alias is followed too) and allows it only to be asked for a contract member, passed
on (an argument, a return value, an element or key of a collection) or tested for None. It follows a stack's name
(`.NAME`, a profile image's `.stack`, a module's `.__name__`) and the image versions that tell the stacks apart
(`.plugin_version`, `.vllm_version`) the same way, and allows them only to be passed on, shown in a sentence or (the
name) tested for None. Anything else is a finding: another attribute of a stack, getattr() or any reflection on one,
a comparison with a stack, its name or its version, a lookup, key, method, match or test on them. A stack name or
module written out, an import of a concrete stack module and a stack picked by its position in STACKS are findings
wherever they are.
"""

from __future__ import annotations

import ast
import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from serving_stacks import STACKS
from serving_stacks.contract import ServingStack

MEMBERS = frozenset(name for name in vars(ServingStack) if not name.startswith("_"))
STACK_NAMES = frozenset(s.NAME for s in STACKS)
STACK_MODULES = frozenset(s.__name__.rsplit(".", 1)[1] for s in STACKS)  # vllm_neuron
STACK_MODULE_PATHS = frozenset(s.__name__ for s in STACKS)  # serving_stacks.vllm_neuron
NAME_ATTRIBUTES = frozenset({"NAME", "stack", "__name__"})  # a stack's NAME, a profile image's stack, a module's name
# The parts of an image tag that tell the stacks apart (the legacy stack's images have no plugin version and an older
# vLLM): deciding by them is deciding by the stack. The SDK version is not one (both stacks span SDKs).
VERSION_ATTRIBUTES = frozenset({"plugin_version", "vllm_version"})
REFLECTION = frozenset({"getattr", "hasattr", "setattr", "delattr", "vars", "dir", "type", "id", "isinstance"})
# Methods that look a value up or compare with it, when a stack's name or version is their argument.
LOOKUPS = frozenset({"get", "setdefault", "pop", "index", "count", "find", "startswith", "endswith", "removeprefix"})
SKIPPED_FOLDERS = frozenset({"node_modules", "__pycache__", "cdk.out", "dist"})

# What an expression holds, as far as this check follows it.
STACK = "a stack"
STACKS_OF = "stacks"  # a collection of stacks
KEYED = "a dict keyed by stacks"
ITEMS = "(stack, value) pairs"
ENUMERATED = "(index, stack) pairs"
NAME = "a stack's name"
NAMES = "stack names"
VERSION = "an image version that tells the stacks apart"
ELEMENT = {STACKS_OF: STACK, KEYED: STACK, NAMES: NAME, ITEMS: (STACK, None), ENUMERATED: (None, STACK)}
SCOPES = (
    ast.Module,
    ast.FunctionDef,
    ast.AsyncFunctionDef,
    ast.Lambda,
    ast.ClassDef,
    ast.ListComp,
    ast.SetComp,
    ast.DictComp,
    ast.GeneratorExp,
)
Kind = str | tuple | None
BINDERS = (
    ast.Assign,
    ast.AnnAssign,
    ast.AugAssign,
    ast.NamedExpr,
    ast.For,
    ast.AsyncFor,
    ast.comprehension,
    ast.FunctionDef,
    ast.AsyncFunctionDef,
    ast.Lambda,
    ast.ClassDef,
    ast.Import,
    ast.ImportFrom,
)


def python_files(root: Path, *, skip: tuple[str, ...] = ()) -> list[Path]:
    """Every Python file of the repository (no hidden folder: .venv*, .cache, .git; no node_modules or build output),
    without the top-level folders in `skip`."""
    found: list[Path] = []
    for folder, dirs, files in os.walk(root):
        here = Path(folder)
        dirs[:] = sorted(
            d for d in dirs if not d.startswith(".") and d not in SKIPPED_FOLDERS and not (here == root and d in skip)
        )
        found += [here / f for f in sorted(files) if f.endswith(".py")]
    return found


def annotation_kind(annotation: ast.expr | None) -> Kind:
    """What a type annotation says a value holds: ServingStack (or None), a collection of them, a dict keyed by them."""
    match annotation:
        case ast.Name(id="ServingStack") | ast.Attribute(attr="ServingStack"):
            return STACK
        case ast.BinOp(op=ast.BitOr(), left=left, right=right):
            return annotation_kind(left) or annotation_kind(right)
        case ast.Subscript(value=ast.Name(id=base) | ast.Attribute(attr=base), slice=inner):
            first = inner.elts[0] if isinstance(inner, ast.Tuple) else inner
            if annotation_kind(first) != STACK:
                return None
            if base == "Optional":
                return STACK
            return KEYED if base in ("dict", "Mapping", "MutableMapping") else STACKS_OF
    return None


@dataclass
class Declarations:
    """What the repository's annotations say holds a stack: functions that return one (stack_named), class
    attributes (a plan's serving_stack) and module-level names (STACKS), by name."""

    functions: dict[str, Kind] = field(default_factory=dict)
    attributes: dict[str, Kind] = field(default_factory=dict)
    names: dict[str, Kind] = field(default_factory=dict)

    def read(self, tree: ast.Module) -> None:
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and (kind := annotation_kind(node.returns)):
                self.functions[node.name] = kind
            elif isinstance(node, ast.ClassDef):
                self.attributes |= _annotated(node.body)
        self.names |= _annotated(tree.body)


def _annotated(body: list[ast.stmt]) -> dict[str, Kind]:
    """The names a class or module body annotates as holding a stack."""
    return {
        item.target.id: kind
        for item in body
        if isinstance(item, ast.AnnAssign)
        and isinstance(item.target, ast.Name)
        and (kind := annotation_kind(item.annotation))
    }


def declarations(paths: list[Path]) -> Declarations:
    found = Declarations()
    for path in paths:
        found.read(ast.parse(path.read_text(), str(path)))
    return found


def _against_none(compare: ast.Compare, operand: ast.expr) -> bool:
    """`x is None` / `x is not None`: whether there is a stack (or a name), not which one."""
    others = [o for o in (compare.left, *compare.comparators) if o is not operand]
    return all(isinstance(o, ast.Constant) and o.value is None for o in others) and all(
        isinstance(op, ast.Is | ast.IsNot) for op in compare.ops
    )


def _passes_through(parent: ast.AST, child: ast.AST) -> bool:
    """Whether `parent` hands `child`'s value on as part of its own (a tuple, `a or b`, a concatenation, ...)."""
    match parent:
        case ast.Tuple() | ast.List() | ast.Set() | ast.Starred() | ast.BinOp() | ast.BoolOp():
            return True
        case ast.IfExp():
            return child is not parent.test
        case ast.ListComp() | ast.SetComp() | ast.GeneratorExp():
            return child is parent.elt
        case ast.DictComp():
            return child is parent.value
    return False


def _is_test(parent: ast.AST, child: ast.AST) -> bool:
    match parent:
        case ast.If() | ast.While() | ast.IfExp() | ast.Assert():
            return child is parent.test
        case ast.comprehension():
            return child in parent.ifs
        case ast.UnaryOp(op=ast.Not()):
            return True
    return False


def _is_lookup(func: ast.expr) -> bool:
    return (isinstance(func, ast.Attribute) and func.attr in LOOKUPS) or (
        isinstance(func, ast.Name) and func.id in ("getattr", "hasattr")
    )


def _imports_a_stack_module(node: ast.AST) -> bool:
    if isinstance(node, ast.Import):
        return any(alias.name in STACK_MODULE_PATHS for alias in node.names)
    if isinstance(node, ast.ImportFrom) and node.module:
        if node.module in STACK_MODULE_PATHS:
            return True
        return node.module == "serving_stacks" and any(alias.name in STACK_MODULES for alias in node.names)
    return False


def _picks_by_position(node: ast.AST) -> bool:
    def is_stacks(n: ast.AST) -> bool:
        return isinstance(n, ast.Name) and n.id == "STACKS"

    if isinstance(node, ast.Subscript):
        return is_stacks(node.value)
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and is_stacks(node.func.value)


def _probes_a_member(node: ast.AST) -> bool:
    """hasattr(x, "graph_args"), getattr(x, "graph_args", None): asking whether something is a stack of a kind."""
    return (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id in ("hasattr", "getattr")
        and len(node.args) >= 2
        and isinstance(node.args[1], ast.Constant)
        and node.args[1].value in MEMBERS
    )


# Findings wherever they are, whatever holds them: (what it is, whether a syntax node is it).
SPELLINGS = [
    ("a stack name written out", lambda n: isinstance(n, ast.Constant) and n.value in STACK_NAMES),
    ("a stack module's import path", lambda n: isinstance(n, ast.Constant) and n.value in STACK_MODULE_PATHS),
    ("an import of a concrete stack module", _imports_a_stack_module),
    (
        "a concrete stack module",
        lambda n: (
            (isinstance(n, ast.Name) and n.id in STACK_MODULES)
            or (isinstance(n, ast.Attribute) and n.attr in STACK_MODULES)
        ),
    ),
    ("a stack picked by its position", _picks_by_position),
    ("a probe for a contract member", _probes_a_member),
]


class ModuleUse:
    """One module's syntax tree with what each name holds, per scope (a function's names are its own)."""

    def __init__(self, tree: ast.Module, declared: Declarations) -> None:
        self.tree = tree
        self.declared = declared
        self.nodes = list(ast.walk(tree))
        self.parent = {child: node for node in self.nodes for child in ast.iter_child_nodes(node)}
        self.bound: dict[ast.AST, dict[str, Kind]] = {}
        self.known: dict[ast.AST, Kind] = {}  # kind() of each node, for the bindings of this round
        binders = [node for node in self.nodes if isinstance(node, BINDERS)]
        for _ in range(5):  # an alias of an alias: bind until nothing changes
            before = {scope: dict(names) for scope, names in self.bound.items()}
            self.known.clear()
            for node in binders:
                self._bind_at(node)
            if before == self.bound:
                break

    # --- what names hold ---------------------------------------------------------------------------------------------

    def scope(self, node: ast.AST) -> ast.AST:
        up = self.parent.get(node)
        while up is not None and not isinstance(up, SCOPES):
            up = self.parent.get(up)
        return up if up is not None else self.tree

    def _bind(self, target: ast.AST, kind: Kind, scope: ast.AST | None = None) -> None:
        if isinstance(target, ast.Name):
            names = self.bound.setdefault(scope or self.scope(target), {})
            if names.get(target.id) is None:
                names[target.id] = kind
        elif isinstance(target, ast.Tuple | ast.List):
            parts = kind if isinstance(kind, tuple) and len(kind) == len(target.elts) else (None,) * len(target.elts)
            for elt, part in zip(target.elts, parts, strict=True):
                self._bind(elt, part, scope)
        elif isinstance(target, ast.Starred):
            self._bind(target.value, None, scope)

    def _bind_at(self, node: ast.AST) -> None:
        match node:
            case ast.Assign(targets=targets, value=value):
                for target in targets:
                    self._bind(target, self.kind(value))
            case ast.AnnAssign(target=target, annotation=annotation, value=value):
                self._bind(target, annotation_kind(annotation) or (self.kind(value) if value else None))
            case ast.AugAssign(target=target) | ast.NamedExpr(target=target):
                self._bind(target, self.kind(node.value))
            case ast.For(target=target, iter=iterable) | ast.AsyncFor(target=target, iter=iterable):
                self._bind(target, ELEMENT.get(self.kind(iterable)))  # type: ignore[arg-type]
            case ast.comprehension(target=target, iter=iterable):
                self._bind(target, ELEMENT.get(self.kind(iterable)))  # type: ignore[arg-type]
            case ast.FunctionDef() | ast.AsyncFunctionDef() | ast.Lambda():
                self._bind_arguments(node)
            case ast.ClassDef(name=name):
                self.bound.setdefault(self.scope(node), {}).setdefault(name, None)
            case ast.Import(names=aliases) | ast.ImportFrom(names=aliases):
                for alias in aliases:
                    bound = alias.asname or alias.name.split(".")[0]
                    kind = self.declared.names.get(alias.name) if isinstance(node, ast.ImportFrom) else None
                    self.bound.setdefault(self.scope(node), {}).setdefault(bound, kind)

    def _bind_arguments(self, node: ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda) -> None:
        """A function's parameters in its own scope (a stack where annotated ServingStack), its name in the outer."""
        a = node.args
        for arg in [*a.posonlyargs, *a.args, *a.kwonlyargs, *filter(None, [a.vararg, a.kwarg])]:
            self.bound.setdefault(node, {}).setdefault(arg.arg, annotation_kind(arg.annotation))
        if not isinstance(node, ast.Lambda):
            self.bound.setdefault(self.scope(node), {}).setdefault(node.name, None)

    def lookup(self, name: ast.Name) -> Kind:
        """What the name holds in the innermost scope that binds it (a class body's names are not its methods')."""
        scope: ast.AST | None = self.scope(name)
        first = True
        while scope is not None:
            names = self.bound.get(scope, {})
            if name.id in names and (first or not isinstance(scope, ast.ClassDef)):
                return names[name.id]
            first = False
            scope = None if scope is self.tree else self.scope(scope)
        return self.declared.names.get(name.id)  # not bound here: a module-level name read without an import

    def kind(self, node: ast.AST) -> Kind:
        """What `node` holds (STACK, NAME, ...), or None when it holds nothing this check follows."""
        if node not in self.known:
            self.known[node] = self._kind(node)
        return self.known[node]

    def _kind(self, node: ast.AST) -> Kind:
        match node:
            case ast.Name():
                return self.lookup(node)
            case ast.Attribute(attr=attr):
                if attr in NAME_ATTRIBUTES:
                    return NAME
                if attr in VERSION_ATTRIBUTES:
                    return VERSION
                return self.declared.attributes.get(attr) or self.declared.names.get(attr)  # serving_stacks.STACKS
            case ast.Call():
                return self._returns(node)
            case ast.Subscript(value=value, slice=index):
                held = self.kind(value)
                if held == STACKS_OF:
                    return STACKS_OF if isinstance(index, ast.Slice) else STACK
                return NAME if held == NAMES else None
            case ast.IfExp(body=body, orelse=orelse):
                return self.kind(body) or self.kind(orelse)
            case ast.BoolOp(values=values):
                return next((k for v in values if (k := self.kind(v))), None)
            case ast.NamedExpr(value=value):
                return self.kind(value)
        return self._displayed(node)

    def _displayed(self, node: ast.AST) -> Kind:
        """A collection written out or built by a comprehension: of stacks, of names, or a dict keyed by stacks."""
        match node:
            case ast.Tuple(elts=elts) | ast.List(elts=elts) | ast.Set(elts=elts):
                return self._collection([self.kind(e) for e in elts])
            case ast.ListComp(elt=elt) | ast.SetComp(elt=elt) | ast.GeneratorExp(elt=elt):
                return self._collection([self.kind(elt)])
            case ast.DictComp(key=key):
                return KEYED if self.kind(key) == STACK else None
            case ast.Dict(keys=keys):
                return KEYED if any(k is not None and self.kind(k) == STACK for k in keys) else None
        return None

    @staticmethod
    def _collection(kinds: list[Kind]) -> Kind:
        return STACKS_OF if STACK in kinds else NAMES if NAME in kinds else None

    def _returns(self, call: ast.Call) -> Kind:
        func = call.func
        name = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""
        if name in self.declared.functions:
            return self.declared.functions[name]
        first = self.kind(call.args[0]) if call.args else None
        if name in ("sorted", "list", "tuple", "set", "frozenset", "reversed", "iter"):
            return STACKS_OF if first == KEYED else first if first in (STACKS_OF, NAMES, ITEMS, ENUMERATED) else None
        if name in ("next", "max", "min"):
            element = ELEMENT.get(first)  # type: ignore[arg-type]
            return element if isinstance(element, str) else None
        if name == "enumerate":
            return ENUMERATED if first in (STACKS_OF, KEYED) else None
        if isinstance(func, ast.Attribute) and self.kind(func.value) == KEYED:
            return {"items": ITEMS, "keys": STACKS_OF, "copy": KEYED}.get(name)
        return None

    # --- what is done with them ---------------------------------------------------------------------------------------

    def findings(self) -> Iterator[str]:
        for node in self.nodes:
            if not isinstance(node, ast.expr | ast.Import | ast.ImportFrom):
                continue
            why = next((why for why, rule in SPELLINGS if rule(node)), None) or self._misuse(node)
            if why:
                yield f"line {getattr(node, 'lineno', '?')}: {why}: {ast.unparse(node).splitlines()[0]}"

    def _context(self, node: ast.AST) -> tuple[ast.AST, ast.AST | None]:
        """The node that receives `node`'s value (past tuples, `a or b`, ...), and the child it receives it as."""
        child, parent = node, self.parent.get(node)
        while parent is not None and _passes_through(parent, child):
            child, parent = parent, self.parent.get(parent)
        return child, parent

    def _misuse(self, node: ast.AST) -> str | None:
        if not isinstance(node, ast.expr) or isinstance(getattr(node, "ctx", None), ast.Store | ast.Del):
            return None
        kind = self.kind(node)
        if kind == STACK:
            return self._stack_misuse(*self._context(node))
        if kind in (NAME, VERSION):
            return self._name_misuse(*self._context(node), kind)  # type: ignore[arg-type]
        return None

    @staticmethod
    def _stack_misuse(child: ast.AST, parent: ast.AST | None) -> str | None:
        match parent:
            case ast.Attribute(attr=attr) if attr not in MEMBERS:
                return f"a stack's {attr}, which the ServingStack contract does not declare"
            case ast.Call(func=func) if func is child:
                return "a stack called"
            case ast.Call(func=ast.Name(id=reflect)) if reflect in REFLECTION:
                return f"{reflect}() on a stack"
            case ast.Compare() if not _against_none(parent, child):  # type: ignore[arg-type]
                return "a comparison with a stack"
            case ast.Match():
                return "a match on a stack"
        return None

    @staticmethod
    def _name_misuse(child: ast.AST, parent: ast.AST | None, kind: str) -> str | None:
        match parent:
            case ast.Compare():
                return None if kind == NAME and _against_none(parent, child) else f"a comparison with {kind}"  # type: ignore[arg-type]
            case ast.Attribute():
                return f"a method or attribute of {kind}"
            case ast.Subscript():
                return f"indexing {kind}" if child is parent.value else f"a lookup by {kind}"
            case ast.Dict() if child in parent.keys:
                return f"a dict keyed by {kind}"
            case ast.DictComp() if child is parent.key:
                return f"a dict keyed by {kind}"
            case ast.Call(func=func) if child is not func and _is_lookup(func):
                return f"a lookup or comparison by {kind}"
            case ast.Match():
                return f"a match on {kind}"
        if kind == VERSION and parent is not None and _is_test(parent, child):
            return f"a test of {kind}"
        return None


def stack_decisions(source: str, declared: Declarations) -> list[str]:
    """Each use of a stack in `source` other than through the contract (the module docstring says which)."""
    return list(ModuleUse(ast.parse(source), declared).findings())
