"""House rules that a scan of the source can check (shared/STYLE.md, docs/layout.md).

A dataclass with more than three fields is `kw_only=True`: a wide positional constructor lets a
reordered or inserted field shift every value after it silently (tokamax's backend configs are
keyword-only for that reason). The scan reads the source with `ast` and imports nothing.
"""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
# Shipped code; tests build throwaway dataclasses of their own and are left out.
PACKAGES = ("harness", "kernels", "oracles", "benchmarks", "tools")
MAX_POSITIONAL_FIELDS = 3


def _is_dataclass(decorator: ast.expr) -> bool:
    node = decorator.func if isinstance(decorator, ast.Call) else decorator
    return (isinstance(node, ast.Attribute) and node.attr == "dataclass") or (
        isinstance(node, ast.Name) and node.id == "dataclass"
    )


def _kw_only(decorator: ast.expr) -> bool:
    return isinstance(decorator, ast.Call) and any(
        k.arg == "kw_only" and isinstance(k.value, ast.Constant) and k.value.value is True for k in decorator.keywords
    )


def _own_fields(cls: ast.ClassDef) -> list[str]:
    """Annotated class-level names, as dataclasses sees them; a ClassVar is no field."""
    return [
        stmt.target.id
        for stmt in cls.body
        if isinstance(stmt, ast.AnnAssign)
        and isinstance(stmt.target, ast.Name)
        and "ClassVar" not in ast.unparse(stmt.annotation)
    ]


def wide_positional(source: str, filename: str = "<source>") -> list[tuple[str, int, int]]:
    """(class name, line, field count) of each dataclass in `source` with more than three fields,
    inherited ones from a dataclass of the same module included, that is not kw_only=True."""
    tree = ast.parse(source, filename)
    fields: dict[str, int] = {}
    out = []
    # ast.walk is breadth-first, so a module-level base is counted before a subclass that follows it.
    for node in ast.walk(tree):
        if not isinstance(node, ast.ClassDef):
            continue
        decorators = [d for d in node.decorator_list if _is_dataclass(d)]
        if not decorators:
            continue
        inherited = sum(fields.get(b.id, 0) for b in node.bases if isinstance(b, ast.Name))
        fields[node.name] = count = inherited + len(_own_fields(node))
        if count > MAX_POSITIONAL_FIELDS and not _kw_only(decorators[0]):
            out.append((node.name, node.lineno, count))
    return out


def source_files() -> list[Path]:
    return sorted(p for package in PACKAGES for p in (ROOT / package).rglob("*.py"))


@pytest.mark.parametrize(
    ("source", "flagged"),
    [
        pytest.param(
            "@dataclasses.dataclass(frozen=True)\nclass A:\n a: int\n b: int\n c: int\n d: int", ["A"], id="4"
        ),
        pytest.param("@dataclass\nclass A:\n a: int\n b: int\n c: int\n d: int = 0", ["A"], id="bare-decorator"),
        pytest.param("@dataclass(kw_only=False)\nclass A:\n a: int\n b: int\n c: int\n d: int", ["A"], id="False"),
        pytest.param(
            "@dataclass(frozen=True, kw_only=True)\nclass A:\n a: int\n b: int\n c: int\n d: int", [], id="kw"
        ),
        pytest.param("@dataclasses.dataclass\nclass A:\n a: int\n b: int\n c: int", [], id="3"),
        pytest.param("@dataclass\nclass A:\n K: ClassVar[int] = 1\n a: int\n b: int\n c: int", [], id="ClassVar"),
        pytest.param("class A:\n a: int\n b: int\n c: int\n d: int", [], id="not-a-dataclass"),
        pytest.param(
            "@dataclass\nclass B:\n a: int\n b: int\n@dataclass\nclass A(B):\n c: int\n d: int", ["A"], id="inherited"
        ),
        pytest.param("def f():\n @dataclass\n class A:\n  a: int\n  b: int\n  c: int\n  d: int", ["A"], id="nested"),
    ],
)
def test_the_scan_flags_wide_positional_dataclasses(source: str, flagged: list[str]) -> None:
    assert [name for name, _, _ in wide_positional(source)] == flagged


def test_the_scan_reads_the_tree() -> None:
    """It sees the packages it checks: Case has 17 fields (a scan that read nothing would pass)."""
    case = (ROOT / "harness" / "core" / "case.py").read_text()
    assert [(name, count) for name, _, count in wide_positional(case.replace("kw_only=True", "kw_only=False"))] == [
        ("Case", 17)
    ]
    assert len(source_files()) > 100


def test_dataclasses_with_more_than_three_fields_are_keyword_only() -> None:
    found = [
        f"{path.relative_to(ROOT)}:{line} {name} ({count} fields)"
        for path in source_files()
        for name, line, count in wide_positional(path.read_text(), str(path))
    ]
    assert not found, (
        f"{len(found)} dataclasses with more than {MAX_POSITIONAL_FIELDS} fields lack kw_only=True "
        "(add it and pass every field by name):\n" + "\n".join(found)
    )


# --- No function in harness/ over 80 lines (shared/STYLE.md; issue 27) ---

MAX_FUNCTION_LINES = 80
# Functions over the limit in files other helpers own this session; each names its owner, who
# shortens it. The lead empties this at merge: a name left here that is no longer long fails below.
LONG_FUNCTIONS_OWNED_ELSEWHERE: dict[str, str] = {}


def long_functions(source: str, filename: str = "<source>") -> list[tuple[str, int]]:
    """(qualified name, lines) of each function in `source` longer than MAX_FUNCTION_LINES, from its
    `def` line to its last line (decorators left out), nested functions counted on their own too."""
    out = []

    def visit(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
                name = f"{prefix}{child.name}"
                lines = child.end_lineno - child.lineno + 1  # type: ignore[operator]
                if lines > MAX_FUNCTION_LINES:
                    out.append((name, lines))
                visit(child, f"{name}.")
            elif isinstance(child, ast.ClassDef):
                visit(child, f"{prefix}{child.name}.")
            else:
                visit(child, prefix)

    visit(ast.parse(source, filename), "")
    return out


def _harness_long_functions() -> dict[str, int]:
    out = {}
    for path in sorted((ROOT / "harness").rglob("*.py")):
        rel = path.relative_to(ROOT).as_posix()
        for name, lines in long_functions(path.read_text(), rel):
            out[f"{rel}:{name}"] = lines
    return out


def test_no_function_in_harness_is_over_80_lines() -> None:
    long = _harness_long_functions()
    unexpected = {k: v for k, v in long.items() if k not in LONG_FUNCTIONS_OWNED_ELSEWHERE}
    assert unexpected == {}, f"split these (lines > {MAX_FUNCTION_LINES}): {unexpected}"
    stale = sorted(set(LONG_FUNCTIONS_OWNED_ELSEWHERE) - set(long))
    assert stale == [], f"no longer long: remove from LONG_FUNCTIONS_OWNED_ELSEWHERE: {stale}"


def _body(n: int) -> str:
    return "".join(f"    x{i} = {i}\n" for i in range(n))


@pytest.mark.parametrize(
    ("source", "flagged"),
    [
        pytest.param("def f():\n" + _body(79), [], id="80-lines"),
        pytest.param("def f():\n" + _body(80), [("f", 81)], id="81-lines"),
        pytest.param("@deco\ndef f():\n" + _body(79), [], id="decorator-not-counted"),
        pytest.param("class A:\n    def m(self):\n" + _body(80).replace("    ", "  " * 4), [("A.m", 81)], id="method"),
        pytest.param(
            "def f():\n    def g():\n" + _body(80).replace("    ", "        "),
            [("f", 82), ("f.g", 81)],
            id="nested",
        ),
        pytest.param("async def f():\n" + _body(80), [("f", 81)], id="async"),
    ],
)
def test_the_scan_flags_long_functions(source: str, flagged: list[tuple[str, int]]) -> None:
    assert long_functions(source) == flagged


def test_the_long_function_scan_reads_the_tree() -> None:
    """It reads real source: compare.py with a function stretched past the limit is flagged."""
    source = (ROOT / "harness" / "core" / "compare.py").read_text()
    assert long_functions(source.replace("def check_empty_rows(", "def check_empty_rows(\n" + "\n" * 80)) != []


# --- No module-level mutable state outside caches (issue 27) ---

_MUTATING_METHODS = frozenset(
    {"append", "add", "update", "setdefault", "clear", "pop", "popitem", "extend", "insert", "remove", "discard"}
)
_MUTABLE_DISPLAYS = (ast.List, ast.Dict, ast.Set, ast.ListComp, ast.DictComp, ast.SetComp)
_MUTABLE_CALLS = frozenset({"list", "dict", "set", "collections.OrderedDict", "collections.defaultdict", "OrderedDict"})
# Module-level state that stays, each with why: caches (lost, they are computed again) and registries.
ALLOWED_STATE: dict[str, str] = {
    "harness/core/jaxvjp.py:_COMPILED": "a cache: compiled reference programs, LRU-bounded (COMPILED_KEEP)",
    "harness/core/reference.py:_TRUTH_SEEN": "a cache: which truth programs are worth compiling (both paths agree)",
    "harness/runtime/caches.py:_REFUSED": "a cache: the compilation cache directories this process found untrustworthy",
    "harness/running/exactness.py:_MEASURED": "a cache: the exactness probe's answers in this process",
    "harness/running/worker.py:_session": "a context variable: the worker of the session open in this context",
    "harness/runtime/interpret.py:_interpret": "a context variable: the interpreter options of the block open here",
    "harness/runtime/interpret.py:_force_interpret": "a context variable: whether the block open here forces interpret",
    # The registry, nox's pattern (STYLE.md): filled once by register() as the kernel modules import,
    # read through copies; a kernel is one file because nothing else lists it.
    "harness/core/contract.py:_REGISTRY": "the registry: what registered here",
    "harness/core/contract.py:_DEFINED": "the registry: every implementation the code defines, hardware or not",
    "harness/core/contract.py:_DISCOVERED": "the registry: the kernel packages already imported",
    "harness/core/contract.py:_UNAVAILABLE": "the registry: the import errors of optional frameworks",
    "harness/core/locate.py:_TILE_NAMES": "the registry: tile names, a kernel's own added as it registers",
}
# State other helpers remove this session, each naming its owner; the lead empties this at merge.
STATE_OWNED_ELSEWHERE: dict[str, str] = {}


def _mutated_names(tree: ast.AST) -> set[str]:
    """Names (or attributes) mutated in place anywhere in `tree`: X.append(...), X[k] = ..., del X[k],
    X[k] += ..., and names rebound through `global`."""
    out: set[str] = set()

    def name(e: ast.expr) -> str | None:
        return e.id if isinstance(e, ast.Name) else e.attr if isinstance(e, ast.Attribute) else None

    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in _MUTATING_METHODS:
            out.add(name(node.func.value) or "")
        elif isinstance(node, ast.Assign | ast.AugAssign | ast.Delete):
            targets = node.targets if isinstance(node, ast.Assign | ast.Delete) else [node.target]
            out.update(name(t.value) or "" for t in targets if isinstance(t, ast.Subscript))
        elif isinstance(node, ast.Global):
            out.update(node.names)
    return out - {""}


def _module_bindings(tree: ast.Module) -> list[tuple[str, ast.expr]]:
    out = []
    for node in tree.body:
        if isinstance(node, ast.Assign):
            out += [(t.id, node.value) for t in node.targets if isinstance(t, ast.Name)]
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.value is not None:
            out.append((node.target.id, node.value))
    return out


def module_state(sources: dict[str, str]) -> list[str]:
    """ "file:NAME" of each module-level binding that is state: a mutable container (a list, dict or
    set display or comprehension, or list()/dict()/set()/OrderedDict()/defaultdict()) that is mutated
    somewhere in `sources`, or lower-case (not a constant) and mutable or an instance of a class
    (a call); `__all__` and UPPER_CASE constants that nothing mutates are not state."""
    trees = {f: ast.parse(s, f) for f, s in sources.items()}
    mutated = set().union(*(_mutated_names(t) for t in trees.values()))
    out = []
    for f, tree in trees.items():
        for name, value in _module_bindings(tree):
            container = isinstance(value, _MUTABLE_DISPLAYS) or (
                isinstance(value, ast.Call) and ast.unparse(value.func) in _MUTABLE_CALLS
            )
            constant = name.isupper() or name.lstrip("_").isupper() or name == "__all__"
            instance = isinstance(value, ast.Call) and not constant
            if (container and name in mutated) or (not constant and (container or instance)):
                out.append(f"{f}:{name}")
    return sorted(out)


def _harness_sources() -> dict[str, str]:
    return {p.relative_to(ROOT).as_posix(): p.read_text() for p in sorted((ROOT / "harness").rglob("*.py"))}


def test_no_module_level_mutable_state_outside_caches() -> None:
    found = module_state(_harness_sources())
    unexpected = [s for s in found if s not in ALLOWED_STATE and s not in STATE_OWNED_ELSEWHERE]
    assert unexpected == [], "pass it explicitly, or own it in the session (or, for a cache, list it in ALLOWED_STATE)"
    stale = sorted(set(STATE_OWNED_ELSEWHERE) - set(found))
    assert stale == [], f"gone: remove from STATE_OWNED_ELSEWHERE: {stale}"


@pytest.mark.parametrize(
    ("source", "flagged"),
    [
        pytest.param("_worker = Worker()", ["m.py:_worker"], id="an-instance"),
        pytest.param("seen = []", ["m.py:seen"], id="a-lower-case-list"),
        pytest.param("SEEN = []\ndef f(x):\n    SEEN.append(x)", ["m.py:SEEN"], id="a-mutated-constant"),
        pytest.param("SEEN = {}\ndef f(x):\n    SEEN[x] = 1", ["m.py:SEEN"], id="a-mutated-dict"),
        pytest.param("CACHE = collections.OrderedDict()\ndef f():\n    CACHE.clear()", ["m.py:CACHE"], id="ordered"),
        pytest.param("TABLE = {'a': 1}\nNAMES = ['a']\nPATH = Path('x')", [], id="constants"),
        pytest.param("__all__ = ['f']", [], id="dunder-all"),
        pytest.param("KINDS = frozenset({'a'})\nT = tuple(range(3))", [], id="immutable"),
        pytest.param("def f():\n    seen = []\n    seen.append(1)", [], id="a-local"),
    ],
)
def test_the_scan_flags_module_level_state(source: str, flagged: list[str]) -> None:
    assert module_state({"m.py": source}) == flagged


def test_the_state_scan_reads_the_tree() -> None:
    """It sees harness/ and follows a mutation in another module (SIGNALLED is appended to elsewhere
    while it exists; a planted singleton is found either way)."""
    sources = _harness_sources()
    sources["harness/running/worker.py"] += "\n_worker = Worker()\n"
    assert "harness/running/worker.py:_worker" in module_state(sources)


def test_importing_harness_leaves_the_process_alone() -> None:
    """JAX_PLATFORMS is set where a process starts (the CLI), not on `import harness`; set before jax
    loads, it keeps JAX off a TPU plugin that has no TPU (a host with libtpu and no TPU)."""
    probe = (
        "import os, sys; os.environ.pop('JAX_PLATFORMS', None)\n"
        "import harness, harness.cli; print(os.environ.get('JAX_PLATFORMS'), 'jax' in sys.modules)\n"
        "from harness.cli import main\n"
        "try:\n    main(['--help'])\nexcept SystemExit:\n    pass\n"
        "import jax; print(os.environ.get('JAX_PLATFORMS'), jax.config.jax_platforms)\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "JAX_PLATFORMS"}
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, env=env, cwd=ROOT, check=True)
    lines = out.stdout.strip().splitlines()
    assert lines[0] == "None False"
    if _tpu_device_files():  # a TPU host: the platforms are left to JAX
        assert lines[-1].split()[0] == "None", out.stdout
    else:
        assert lines[-1] == "cpu cpu", out.stdout


def _tpu_device_files() -> bool:
    return any(p.startswith("accel") for p in os.listdir("/dev")) or os.path.isdir("/dev/vfio")
