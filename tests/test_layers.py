"""The import graph: no cycle, and no import from a lower layer into a higher one (README "Layout").

Layers, lowest first; a module may import its own group and any lower layer, never a higher
layer or a sibling group of its own layer. Kernels and oracles (the plug-ins) use the core
only, and nothing imports them: the registry finds them by name (harness.core.contract). Imports
inside functions count (they are dependencies all the same), and so do imports under
`if TYPE_CHECKING:`: they never run, but a type named from a higher layer is a record that lives
above the code that reads it (issue 27: the records a layer writes live in that layer or below).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("harness", "kernels", "oracles")

# (layer, {group: module prefixes}). A prefix names a module and everything under it.
LAYERS: list[tuple[str, dict[str, tuple[str, ...]]]] = [
    # Devices, interpreters, library versions and shims, caches, thread races, the ISA: no case, no kernel.
    ("runtime", {"runtime": ("harness.runtime",)}),
    (
        "core",
        {
            "core": (
                "harness",  # the package itself: its __init__ re-exports the core
                "harness.core.errors",
                "harness.core.exit_codes",
                "harness.core.case",
                "harness.core.masks",
                "harness.core.paging",
                "harness.core.inputs",
                "harness.core.compare",
                "harness.core.magnitudes",
                "harness.core.locate",
                "harness.core.strips",
                "harness.core.contract",
                "harness.core.exactness",
                "harness.core.probes",
                "harness.core.jaxvjp",
                "harness.core.torchvjp",
                "harness.core.reference",
                "harness.core.extended",
                "harness.core.coverage",
                "harness.core.shapes",
                "harness.core.strategies",
                "harness.core.profiles",
                "harness.gate.stats",
                "harness.gate.thresholds",
            )
        },
    ),
    # Implementations plug into the core's contract; the store records results. Neither knows the other.
    ("plug-ins and store", {"plug-ins": ("kernels", "oracles"), "store": ("harness.store",)}),
    (
        "tooling",
        {
            "tooling": (
                "harness.tpu.native",
                "harness.tpu.bench",
                "harness.tpu.compile",
                "harness.tpu.crosscheck",
                "harness.tpu.mosaic",
                "harness.tpu.outline",
                "harness.tpu.profile",
            )
        },
    ),
    (
        "running",
        {
            "running": (
                "harness.running.execute",
                "harness.running.runner",
                "harness.running.worker",
                "harness.running.search",
                "harness.running.signatures",
                "harness.running.trigger",
                "harness.running.failures",
                "harness.running.leak",
                "harness.running.session",
                "harness.running.sink",
                "harness.running.plan",
                "harness.running.jobs",
                "harness.running.summaries",
                "harness.running.distinct",
                "harness.running.determinism",
                "harness.running.batch",
                "harness.running.exactness",
                "harness.running.probes",
                "harness.running.known",
                "harness.running.settle",
            ),
            "environments": (
                "harness.environments.envs",
                "harness.environments.matrix",
                "harness.environments.upgrade",
                "harness.environments.bisect",
                "harness.environments.pythons",
                "harness.environments.watch",
            ),
        },
    ),
    # A fork's lineage (harness.upstream: its base release, upstream's hunks since, the fixes replayed on it) pairs a
    # drop-in with the built-in it replaces, as the gate does (harness.gate.forks).
    ("gate", {"gate": ("harness.gate", "harness.gate.drift", "harness.upstream")}),
    ("report", {"report": ("harness.report",)}),
    (
        "cli",
        {
            "cli": (
                "harness.cli",
                "harness.__main__",
                "harness.cli.commands",
                "harness.cli.console",
                "harness.cli.results",
                "harness.cli.progress",
            )
        },
    ),
    # The library a team's own tests import, and the pytest plugin built on it (docs/pytest.md).
    ("api", {"api": ("harness.api", "harness.pytest_plugin")}),
]


PLUG_INS = "plug-ins"


def modules() -> dict[str, Path]:
    out = {}
    for package in PACKAGES:
        for path in (ROOT / package).rglob("*.py"):
            parts = path.relative_to(ROOT).with_suffix("").parts
            out[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return out


def _type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def imports(path: Path, known: set[str], *, type_only: bool = True) -> set[str]:
    """The known modules `path` imports. `from pkg import name` imports pkg.name when that is a
    module, else pkg itself (a parent package is initialised first anyway: not a dependency).
    type_only=False leaves out the imports under `if TYPE_CHECKING:` (those that never run)."""
    out: set[str] = set()

    def visit(node: ast.AST) -> None:
        if not type_only and isinstance(node, ast.If) and _type_checking(node):
            for child in node.orelse:
                visit(child)
            return
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names if a.name in known)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for a in node.names:
                sub = f"{node.module}.{a.name}"
                if sub in known:
                    out.add(sub)
                elif node.module in known:
                    out.add(node.module)
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(ast.parse(path.read_text(), str(path)))
    return out


def graph(*, type_only: bool = True) -> dict[str, set[str]]:
    mods = modules()
    return {name: imports(path, set(mods), type_only=type_only) - {name} for name, path in mods.items()}


def place(module: str) -> tuple[int, str]:
    """(layer index, group) of `module`: its longest matching prefix."""
    best = None
    for index, (_, groups) in enumerate(LAYERS):
        for group, prefixes in groups.items():
            for prefix in prefixes:
                if module == prefix or module.startswith(prefix + "."):
                    if best is None or len(prefix) > best[0]:
                        best = (len(prefix), index, group)
    if best is None:
        raise AssertionError(f"{module} is in no layer: add it to tests/test_layers.py LAYERS and the README")
    return best[1], best[2]


def violations(edges: dict[str, set[str]]) -> list[str]:
    out = []
    for src, dsts in sorted(edges.items()):
        s_layer, s_group = place(src)
        for dst in sorted(dsts):
            d_layer, d_group = place(dst)
            if d_group == PLUG_INS and s_group != PLUG_INS:
                out.append(f"{src} imports {dst}: plug-ins are found through the registry, never imported")
            elif d_layer > s_layer:
                out.append(f"{src} ({LAYERS[s_layer][0]}) imports {dst} ({LAYERS[d_layer][0]}): upward")
            elif d_layer == s_layer and d_group != s_group:
                out.append(f"{src} ({s_group}) imports {dst} ({d_group}): sibling groups must not")
    return out


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Every strongly connected component of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []

    def connect(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(edges.get(v, ())):
            if w not in index:
                connect(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                out.append(sorted(component))

    for v in sorted(edges):
        if v not in index:
            connect(v)
    return out


def test_every_module_is_in_a_layer() -> None:
    for module in modules():
        place(module)


# Upward imports another helper removes this session, each with its owner; the lead empties this at merge.
KNOWN_UPWARD: dict[tuple[str, str], str] = {}


def test_no_module_imports_upward_or_across() -> None:
    edges = graph()
    known = {edge for edge in KNOWN_UPWARD if edge[1] in edges.get(edge[0], set())}
    assert sorted(set(KNOWN_UPWARD) - known) == [], "gone: remove them from KNOWN_UPWARD"
    assert violations({src: dsts - {d for s, d in known if s == src} for src, dsts in edges.items()}) == []


def test_the_import_graph_has_no_cycle() -> None:
    """No cycle of any kind: type-only imports (under `if TYPE_CHECKING:`) count as imports, since a module
    that names another's type depends on it as surely as one that calls it."""
    assert cycles(graph(type_only=True)) == []


# The checks themselves, on planted graphs: each must fail on the mistake it is for.
@pytest.mark.parametrize(
    ("edges", "found"),
    [
        pytest.param({"harness.core.case": {"harness.running.runner"}}, "upward", id="core-imports-running"),
        pytest.param({"harness.gate": {"harness.report.data"}}, "upward", id="gate-imports-report"),
        pytest.param({"harness.running.runner": {"oracles.jax_reference"}}, "registry", id="running-imports-a-plug-in"),
        pytest.param({"kernels.pallas_flash": {"harness.running.execute"}}, "upward", id="a-plug-in-imports-running"),
        pytest.param({"harness.store.read": {"kernels.pallas_flash"}}, "registry", id="store-imports-a-plug-in"),
        pytest.param(
            {"harness.environments.upgrade": {"harness.running.runner"}}, "sibling", id="environments-import-running"
        ),
    ],
)
def test_a_planted_upward_import_is_found(edges: dict[str, set[str]], found: str) -> None:
    (got,) = violations(edges)
    assert found in got


def test_a_planted_cycle_is_found() -> None:
    edges = {
        "harness.running.runner": {"harness.running.worker"},
        "harness.running.worker": {"harness.running.execute"},
        "harness.running.execute": set(),
    }
    assert cycles(edges) == []
    edges["harness.running.execute"] = {"harness.running.runner"}
    assert cycles(edges) == [["harness.running.execute", "harness.running.runner", "harness.running.worker"]]


def test_type_checking_imports_are_dependencies(tmp_path: Path) -> None:
    """A type-only import is counted like any other (issue 27: no upward import, type-only ones included)."""
    source = tmp_path / "m.py"
    guarded = ["from typing import TYPE_CHECKING", "if TYPE_CHECKING:", "    import harness.running.runner"]
    source.write_text("\n".join([*guarded, "import harness.core.case"]) + "\n")
    known = {"harness.running.runner", "harness.core.case"}
    assert imports(source, known) == {"harness.running.runner", "harness.core.case"}
    assert imports(source, known, type_only=False) == {"harness.core.case"}
    (found,) = violations({"harness.store.files": imports(source, known) - {"harness.core.case"}})
    assert "upward" in found


# The shape the next engineer reads quickly: short functions, modules of one subject.
MAX_FUNCTION_LINES = 60
MAX_MODULE_LINES = 600
# A module over MAX_MODULE_LINES says why near its top, on a line of its own: "# Long module: <why>".
LONG_MODULE = "# Long module:"


def test_no_function_over_60_lines_and_no_long_module_without_its_reason() -> None:
    long_functions, long_modules = [], []
    for name, path in modules().items():
        if not name.startswith("harness"):
            continue
        text = path.read_text()
        lines = text.splitlines()
        if len(lines) > MAX_MODULE_LINES and not any(ln.startswith(LONG_MODULE) for ln in lines[:40]):
            long_modules.append(f"{path}: {len(lines)} lines")
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                size = node.end_lineno - node.lineno + 1
                if size > MAX_FUNCTION_LINES:
                    long_functions.append(f"{path}:{node.lineno} {node.name}: {size} lines")
    assert long_functions == [], f"functions over {MAX_FUNCTION_LINES} lines: split them"
    assert long_modules == [], f"modules over {MAX_MODULE_LINES} lines with no '{LONG_MODULE} <why>' line"
