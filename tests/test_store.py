"""harness.store: typed records, their JSON round trip, the schema check, and what is derived from them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.core.masks import BlockSparse, Chunk, Lengths, Mask, Window
from harness.gate import thresholds
from harness.report import data
from harness.store import derive, read
from harness.store.records import CaseRecord, CompileRecord, RecordError, RunRecord, from_json
from tests import record_builders as rb

RUN = "20261129T100000Z-ci-aaaaaa"
# A store written by main at 2e1da82 (before harness.store): `run` of the fake kernels and a
# compile check (tests/fixtures/store_2e1da82/README). Old stores must keep loading.
OLD_STORE = Path(__file__).parent / "fixtures" / "store_2e1da82"


@pytest.fixture(scope="session")
def real_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return rb.real_store(tmp_path_factory)


def _docs(store: Path) -> list[tuple[str, dict]]:
    return [(str(p), json.loads(p.read_text())) for p in sorted((store / "records").glob("*/*.json"))]


@pytest.mark.parametrize("store", ["current", "2e1da82"])
def test_every_stored_record_round_trips_through_its_class(store: str, real_store: Path) -> None:
    docs = _docs(real_store if store == "current" else OLD_STORE)
    assert {d["kind"] for _, d in docs} >= {"run", "case", "compile", "bench"}
    for where, doc in docs:
        rec = from_json(doc, where)
        assert type(rec).KIND == doc["kind"]
        # run.json leaves out what a command does not record: a null there reads as absent.
        want = {k: v for k, v in doc.items() if v is not None} if doc["kind"] == "run" else doc
        assert rec.to_json() == want, where
        assert from_json(rec.to_json(), where) == rec


def test_a_run_records_the_apis_of_the_implementations_it_checks(real_store: Path) -> None:
    # Of their declaring built-ins (coverage.declaring_name: a MODULE:ATTR kernel stands in for pallas_flash),
    # what `harness coverage` looks up for their records. A compile run records the kernels it compiles (the
    # default, pallas_flash), never importing every adapter for run.json; a bench run every registered one.
    recs = read.load([real_store])
    runs = {tuple(r.field("kernels") or ()): r for r in recs.runs.values() if r.field("kernels")}
    (run,) = runs.values()
    assert set(run.api_parameters) == {"pallas_flash", "torch_sdpa"}
    others = {r.field("mode"): r for r in recs.runs.values() if not r.field("kernels")}
    assert set(others) == {"compile", "bench"}, others
    assert set(others["compile"].api_parameters) == {"pallas_flash"}
    assert {"pallas_flash", "jax_xla", "pallas_splash"} <= set(others["bench"].api_parameters)


def test_an_old_store_loads_with_nothing_unreadable() -> None:
    recs = read.load([OLD_STORE])
    assert recs.problems == [] and recs.cases and recs.compiles and recs.runs
    assert not any(c.passed for c in recs.cases if c.implementation == "tests._fakes:BROKEN" and c.shrunk)


@pytest.mark.parametrize(
    ("doc", "message"),
    [
        pytest.param({"schema": 2, "kind": "case"}, "record schema 2, this harness reads 1", id="newer-schema"),
        pytest.param({"kind": "case"}, "record schema None, this harness reads 1", id="no-schema"),
        pytest.param([1, 2], "not a JSON object", id="not-an-object"),
        pytest.param({"schema": 1, "kind": "timing", "run_id": "r"}, "unknown record kind 'timing'", id="unknown-kind"),
        pytest.param(
            {"schema": 1, "kind": "case", "run_id": "r", "case_id": 3, "implementation": "k"},
            "case record with case_id=3, passed=None, comparisons=None; expected",
            id="mistyped-case",
        ),
    ],
)
def test_a_record_that_cannot_be_read_says_why_in_one_line(doc: object, message: str) -> None:
    with pytest.raises(RecordError, match="x.json: ") as e:
        from_json(doc, "x.json")
    assert message in str(e.value) and "\n" not in str(e.value)


def test_an_unknown_schema_is_listed_as_a_problem_not_dropped(tmp_path: Path) -> None:
    store = rb.write_store(tmp_path / "s", [rb.run_record(RUN), rb.case_record(RUN, rb.case())])
    (path,) = (store / "records" / RUN).glob("*--pallas_flash.json")
    path.write_text(json.dumps({**json.loads(path.read_text()), "schema": 7}))  # as a newer harness would write it
    recs = read.load([store])
    (problem,) = recs.problems
    assert "record schema 7, this harness reads 1" in problem and recs.cases == []
    assert any("unreadable or invalid record" in why for why in recs.incomplete())


def test_run_json_keeps_each_commands_own_fields() -> None:
    doc = rb.run_record(RUN, cell="jax-0.10")
    rec = RunRecord.from_json(doc)
    assert rec.more["cell"] == "jax-0.10" and rec.field("cell") == "jax-0.10" and rec.finished
    assert rec.to_json() == doc


# --- derived: mask labels, one-line reasons, commands ---

MASKS = {
    "window": Mask(window=Window(left=32, right=16)),
    "causal_offset": Mask(window=Window(left=None, right=0, offset=8)),
    "chunk": Mask(chunk=Chunk(size=64)),
    "block_sparse": Mask(block_sparse=BlockSparse(block_q=64, block_kv=64, pattern=("10", "11"))),
    "causal_top_left+per_head+window": Mask(heads=(Mask(causal="top_left"), Mask(window=Window(left=16, right=16)))),
    "kv_lengths+q_lengths": Mask(lengths=Lengths(q=(100,), kv=(90,))),
}


def test_the_report_files_cases_under_their_real_mask_labels(tmp_path: Path) -> None:
    recs = [rb.run_record(RUN)]
    for i, mask in enumerate(MASKS.values()):
        c = rb.case(i, mask=mask)
        recs.append(rb.case_record(RUN, c, implementation="pallas_splash"))
        recs.append(rb.case_record(RUN, c, implementation="torch_sdpa", role="oracle", backend="cpu"))
    records = read.load([rb.write_store(tmp_path / "s", recs)])
    rows = data.matrix(records.cases).rows
    assert {r.mask for r in rows if r.subject == "pallas_splash"} == set(MASKS)
    assert {r.mask for r in rows if r.subject == "torch_sdpa"} == set(MASKS)
    report = data.build(records, thresholds=thresholds.load())
    assert "none" not in {r.mask for r in report.matrix.rows}


def test_a_label_is_the_cases_own() -> None:
    for label, mask in MASKS.items():
        c = rb.case(mask=mask, bias=True)
        rec = CaseRecord.from_json(rb.case_record(RUN, c))
        assert derive.mask_label(rec) == c.mask_label == f"{label}+bias".removeprefix("+")


def test_a_case_that_no_longer_parses_is_labelled_so() -> None:
    rec = CaseRecord.from_json({**rb.case_record(RUN, rb.case()), "case": {"batch": "one"}})
    assert derive.mask_label(rec) == "unreadable case"


def test_a_failure_reads_the_same_live_and_recorded() -> None:
    rec = CaseRecord.from_json(rb.case_record(RUN, rb.case(), fail_quantity="dq"))
    assert derive.failure_line(rec) == "dq: err 5e-05 > bound 1e-05"
    raised = CaseRecord.from_json(rb.case_record(RUN, rb.case(), error="ValueError: bad\nmore"))
    assert derive.failure_line(raised) == "ValueError: bad"


def test_replay_commands_quote_what_a_shell_would_split() -> None:
    rec = CompileRecord.from_json(rb.compile_record(RUN, implementation="tests._fakes:X Y"))
    assert derive.compile_replay(rec) == (
        "python -m harness compile --kernel 'tests._fakes:X Y' --topology v5e:1x1 --shape mha_f32_256 --pass fwd"
    )
    assert derive.repro_command("/a b/f.json") == "python -m harness repro '/a b/f.json'"


def test_bench_times_with_the_garbage_collector_off(real_store: Path) -> None:
    # `bench` passes --benchmark-disable-gc (as timeit does, and mosaic.staged for the compile stages).
    benches = [d for _, d in _docs(real_store) if d["kind"] == "bench"]
    assert benches and all(d.get("gc_disabled") is True for d in benches)
