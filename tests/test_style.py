"""House rules that a scan of the source can check (shared/STYLE.md, README "Layout").

A dataclass with more than three fields is `kw_only=True`: a wide positional constructor lets a
reordered or inserted field shift every value after it silently (tokamax's backend configs are
keyword-only for that reason). The scan reads the source with `ast` and imports nothing.
"""

from __future__ import annotations

import ast
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
LONG_FUNCTIONS_OWNED_ELSEWHERE: dict[str, str] = {
    "harness/running/search.py:search": "s27run",
    "harness/cli/commands/run.py:main": "s27run",
    "harness/cli/commands/run.py:_run_kernels": "s27run",
    "harness/cli/commands/run.py:add_arguments": "s27run",
}


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
