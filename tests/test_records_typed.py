"""Stored records are read through their classes, never by string key (issue 27; shared/STYLE.md).

A case record's comparisons are harness.core.compare.Comparison objects and its shadow a
harness.store.records.Shadow; a bench or compile record's shape is read through shape_name and
shape_case. The scan reads harness/ with `ast` and imports nothing: it flags `x.get("key")` and
`x["key"]` where `x` is a record's nested-document attribute (`rec.shadow`, `rec.case or {}`),
an element of one (`for c in rec.comparisons`), or a name assigned from either. Reads inside a
`from_json` (parsing a document is its class's job) are left out.

The round trip: records written by earlier releases (tests/fixtures) load and write back the
same JSON, comparisons and shadow included.
"""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest

from harness.core.compare import Comparison
from harness.store.records import CaseRecord, Shadow, from_json
from harness.store.schema import RecordError
from tests import record_builders as rb

ROOT = Path(__file__).resolve().parent.parent
FIXTURE_STORE = ROOT / "tests" / "fixtures" / "store_2e1da82"

# Record attributes that hold a document of another class (a list of them, for comparisons and
# growth). Figures keyed by name (memory, cost, stats, samples, versions, machine) are mappings by
# design and not listed.
NESTED_FIELDS = frozenset(
    {
        "comparisons",
        "shadow",
        "case",
        "located",
        "shape",
        "kernels",
        "interpret",
        "conventions",
        "more",
        "growth",
        "results",
    }
)
# String-keyed reads in files other helpers own this session, each naming its owner; the lead
# empties this at merge. A listed read that is gone fails the test (the list cannot go stale).
OWNED_ELSEWHERE: dict[tuple[str, str, str], str] = {
    # run.json's recorded conventions (harness.core.contract.Conventions.to_json): the class in
    # contract.py has no from_json to read them back with; s27kernels owns contract.py.
    **{("harness/report/conventions.py", "conventions", k): "s27kernels" for k in ("bias", "causal", "gqa")},
    **{("harness/report/conventions.py", "conventions", k): "s27kernels" for k in ("empty_rows", "notes")},
}


def _source(expr: ast.expr, bound: dict[str, str]) -> str | None:
    """The nested field `expr` reads from, if any: `rec.shadow`, `(rec.case or {})`, `rec.comparisons[0]`,
    or a name bound to one of those."""
    while isinstance(expr, ast.BoolOp) and isinstance(expr.op, ast.Or):
        expr = expr.values[0]
    if isinstance(expr, ast.Subscript):
        return _source(expr.value, bound)
    if isinstance(expr, ast.Attribute) and expr.attr in NESTED_FIELDS:
        owner = expr.value
        # A class reading its own fields (self.shape) is the class itself.
        return None if isinstance(owner, ast.Name) and owner.id in ("self", "cls") else expr.attr
    if isinstance(expr, ast.Name):
        return bound.get(expr.id)
    return None


def _key_read(node: ast.AST) -> tuple[ast.expr, str] | None:
    if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant) and isinstance(node.slice.value, str):
        return node.value, node.slice.value
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "get"
        and node.args
        and isinstance(node.args[0], ast.Constant)
        and isinstance(node.args[0].value, str)
    ):
        return node.func.value, node.args[0].value
    return None


def _bindings(fn: ast.AST) -> dict[str, str]:
    """Names in `fn` bound to a nested field or an element of one (assignments, for loops, comprehensions)."""
    bound: dict[str, str] = {}
    for node in ast.walk(fn):
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            if (field := _source(node.value, bound)) is not None:
                bound[node.targets[0].id] = field
        elif isinstance(node, ast.For | ast.comprehension):
            target, it = node.target, node.iter
            # `for k, v in doc.items()` and `for v in doc.values()` bind the values of a mapping field.
            if isinstance(it, ast.Call) and isinstance(it.func, ast.Attribute) and it.func.attr in ("items", "values"):
                if isinstance(target, ast.Tuple) and len(target.elts) == 2 and it.func.attr == "items":
                    target = target.elts[1]
                it = it.func.value
            if isinstance(target, ast.Name) and (field := _source(it, bound)) is not None:
                bound[target.id] = field
    return bound


def keyed_reads(source: str, filename: str = "<source>") -> list[tuple[int, str, str]]:
    """(line, field, key) of each string-keyed read of a record's nested document in `source`."""
    out = []
    functions = [n for n in ast.walk(ast.parse(source, filename)) if isinstance(n, ast.FunctionDef | ast.Lambda)]
    for fn in functions:
        if isinstance(fn, ast.FunctionDef) and fn.name == "from_json":
            continue
        bound = _bindings(fn)
        nested = {id(n) for f in ast.walk(fn) if f is not fn and isinstance(f, ast.FunctionDef) for n in ast.walk(f)}
        for node in ast.walk(fn):
            if id(node) in nested:  # an inner function is scanned on its own
                continue
            read = _key_read(node)
            if read is not None and (field := _source(read[0], bound)) is not None:
                out.append((node.lineno, field, read[1]))
    return sorted(set(out))


def _harness_reads() -> dict[tuple[str, str, str], list[int]]:
    out: dict[tuple[str, str, str], list[int]] = {}
    for path in sorted((ROOT / "harness").rglob("*.py")):
        rel = path.relative_to(ROOT).as_posix()
        for line, field, key in keyed_reads(path.read_text(), rel):
            out.setdefault((rel, field, key), []).append(line)
    return out


def test_no_record_is_read_by_string_key_outside_its_class() -> None:
    reads = _harness_reads()
    unexpected = {f"{k[0]}:{k[1]}[{k[2]!r}]": lines for k, lines in reads.items() if k not in OWNED_ELSEWHERE}
    assert unexpected == {}, "read these through the record's class (its attributes or a property beside it)"
    assert sorted(set(OWNED_ELSEWHERE) - set(reads)) == [], "gone: remove them from OWNED_ELSEWHERE"


@pytest.mark.parametrize(
    ("source", "found"),
    [
        pytest.param("def f(rec):\n    return rec.shadow.get('passed')", [(2, "shadow", "passed")], id="attribute"),
        pytest.param("def f(rec):\n    return (rec.case or {})['dtype']", [(2, "case", "dtype")], id="or-default"),
        pytest.param(
            "def f(rec):\n    return [c.get('quantity') for c in rec.comparisons or []]",
            [(2, "comparisons", "quantity")],
            id="comprehension",
        ),
        pytest.param(
            "def f(rec):\n    for c in rec.comparisons:\n        print(c['bound'])",
            [(3, "comparisons", "bound")],
            id="for-loop",
        ),
        pytest.param(
            "def f(rec):\n    s = rec.shadow or {}\n    return s.get('error')", [(3, "shadow", "error")], id="assigned"
        ),
        pytest.param(
            "def f(rec):\n    return rec.comparisons[0]['max_abs']", [(2, "comparisons", "max_abs")], id="index"
        ),
        pytest.param(
            "def f(ff):\n    return [r['passed'] for _, r in (ff.results or {}).items()]",
            [(2, "results", "passed")],
            id="items",
        ),
        pytest.param("def f(rec):\n    return [c.quantity for c in rec.comparisons]", [], id="typed-read"),
        pytest.param("def f(rec):\n    return rec.memory.get('temp')", [], id="a-mapping-by-design"),
        pytest.param("def f(d):\n    return d.get('quantity')", [], id="a-plain-dict"),
        pytest.param("class A:\n    def f(self):\n        return self.shape.get('name')", [], id="its-own-class"),
        pytest.param(
            "class A:\n    @classmethod\n    def from_json(cls, d):\n        return d['shadow'].get('passed')",
            [],
            id="parsing",
        ),
    ],
)
def test_the_scan_flags_keyed_reads_of_records(source: str, found: list[tuple[int, str, str]]) -> None:
    assert keyed_reads(source) == found


def test_the_scan_reads_the_tree() -> None:
    """Planted in a real module it is found (a scan that read nothing would pass)."""
    path = ROOT / "harness" / "store" / "derive.py"
    planted = path.read_text() + "\n\ndef _planted(rec):\n    return rec.shadow.get('passed')\n"
    assert [(field, key) for _, field, key in keyed_reads(planted)] == [("shadow", "passed")]
    assert len(list((ROOT / "harness").rglob("*.py"))) > 50


def _fixture_records() -> list[Path]:
    return sorted(FIXTURE_STORE.glob("records/*/*.json"))


def test_records_written_by_earlier_releases_round_trip() -> None:
    """Each case, bench and compile record of the fixture store reads and writes back the same JSON."""
    paths = [p for p in _fixture_records() if p.name != "run.json"]
    cases = 0
    for path in paths:
        doc = json.loads(path.read_text())
        rec = from_json(doc, str(path))
        assert json.dumps(rec.to_json(), sort_keys=True) == json.dumps(doc, sort_keys=True), path
        if isinstance(rec, CaseRecord):
            cases += 1
            assert rec.comparisons and all(isinstance(c, Comparison) for c in rec.comparisons)
    assert cases >= 5


def test_a_shadow_round_trips_typed() -> None:
    fast = {
        "interpreter": "fast",
        "passed": False,
        "error": None,
        "comparisons": [rb.comparison("out", 5.0), rb.comparison("out[vs faithful]", 4.0)],
        "seconds": 0.5,
    }
    doc = rb.case_record("r", rb.case(), interpreter="faithful", shadow=fast)
    rec = CaseRecord.from_json(doc)
    assert isinstance(rec.shadow, Shadow) and rec.divergence
    assert [c.quantity for c in rec.shadow.comparisons if not c.passed] == ["out", "out[vs faithful]"]
    assert rec.to_json() == doc


def test_a_flaky_failure_round_trips_and_says_so() -> None:
    from harness.core.verdicts import Replay
    from harness.store.derive import failure_line

    replays = [Replay(interpreter="fast", passed=True, digest="d"), Replay(interpreter="faithful", passed=True)]
    doc = rb.case_record("r", rb.case(), error="WorkerDied: killed by SIGSEGV", interpreter="fast", replays=replays)
    rec = CaseRecord.from_json(doc)
    assert rec.replays == replays and rec.flaky and rec.to_json() == doc
    assert failure_line(rec).endswith(
        "(flaky failure: failed once, then passed 1 of 1 replay under the fast interpreter; "
        "passed under the faithful interpreter)"
    )
    # A failure that failed again on its replay under its own interpreter is no flaky failure.
    again = CaseRecord.from_json(rb.case_record("r", rb.case(), error="E: x", interpreter="fast", replays=replays[:0]))
    assert not again.flaky
    with pytest.raises(RecordError, match="replay"):
        CaseRecord.from_json({**doc, "replays": [{"interpreter": "fast"}]})


@pytest.mark.parametrize(
    ("comparisons", "message"),
    [
        pytest.param({}, "expected", id="not-a-list"),
        pytest.param(["out"], "comparison 0", id="not-an-object"),
        pytest.param([{"quantity": "out"}], "comparison 0", id="missing-fields"),
        pytest.param([{**rb.comparison("out", 0.5), "max_abs": "much"}], "comparison 0", id="not-a-number"),
    ],
)
def test_an_unreadable_comparison_is_a_record_error(comparisons: object, message: str) -> None:
    doc = {**rb.case_record("r", rb.case()), "comparisons": comparisons}
    with pytest.raises(RecordError, match=message):
        CaseRecord.from_json(doc, "c.json")


def test_a_newer_writers_extra_comparison_key_still_reads() -> None:
    doc = rb.case_record("r", rb.case())
    doc["comparisons"] = [{**c, "from_the_future": 1} for c in doc["comparisons"]]
    assert CaseRecord.from_json(doc).comparisons[0].quantity == "out"
