"""House rules that a scan of the source can check (shared/STYLE.md, docs/layout.md).

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
