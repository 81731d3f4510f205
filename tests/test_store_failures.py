"""harness.store.failures: failure files as typed records, their JSON round trip and the strict check on load."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.store.bug import Found
from harness.store.failures import CompileFailureRecord, FailureRecord, failure_from_json
from harness.store.files import MergeError, merge_stores
from harness.store.schema import RecordError
from tests import record_builders as rb

OLD_STORE = Path(__file__).parent / "fixtures" / "store_2e1da82"


@pytest.fixture(scope="session")
def real_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return rb.real_store(tmp_path_factory)


@pytest.mark.parametrize("store", ["current", "2e1da82"])
def test_every_failure_file_round_trips_through_its_class(store: str, real_store: Path) -> None:
    paths = sorted(((real_store if store == "current" else OLD_STORE) / "failures").glob("*.json"))
    assert paths, "the store's run shrank a failure of the broken fake"
    for path in paths:
        doc = json.loads(path.read_text())
        rec = failure_from_json(doc, str(path))
        assert isinstance(rec, FailureRecord) and rec.kernel == "tests._fakes:BROKEN"
        assert rec.to_json() == doc, path
        assert failure_from_json(rec.to_json(), str(path)) == rec
        # How it was found, typed: a file from before a field existed lacks it, and reads all the same.
        found = Found.of(rec)
        assert found is not None and found.profile == "ci" and Found.from_json(found.to_json()) == found


def test_a_compile_failure_round_trips() -> None:
    from harness.core import shapes
    from harness.tpu.compile import CompileResult, failure_record

    shape = next(iter(shapes.SHAPES))
    result = CompileResult(
        implementation="pallas_flash",
        topology="v5e:1x1",
        shape=shape,
        case=shapes.SHAPES[shape].case,
        pass_="fwd",
        ok=False,
        error="XlaRuntimeError: out of memory",
    )
    doc = failure_record(result).to_json()
    assert doc["kind"] == "compile_failure" and doc["pass"] == "fwd" and doc["replay"].startswith("python -m harness")
    rec = failure_from_json(doc, "c.json")
    assert isinstance(rec, CompileFailureRecord) and rec.to_json() == doc


VALID = {
    "schema": 1,
    "kind": "failure",
    "kernel": "pallas_flash",
    "oracles": ["torch_sdpa"],
    "grads": False,
    "case": {"batch": 1},
}


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        pytest.param({"schema": 2}, "schema=2 is not supported; this harness reads failure schema 1", id="schema"),
        pytest.param({"kind": "timing"}, "field kind='timing' must be 'failure'", id="kind"),
        pytest.param({"kernel": None}, "field kernel=None must be a kernel name or MODULE:ATTR", id="kernel"),
        pytest.param({"oracles": "torch_sdpa"}, "field oracles='torch_sdpa' must be a list", id="oracles"),
        pytest.param({"case": [1]}, "field case=[1] must be a case", id="case"),
        pytest.param({"time_limit": True}, "field time_limit=True must be a positive number", id="time-limit"),
        pytest.param({"colour": "red"}, "unknown fields ['colour']", id="unknown"),
    ],
)
def test_a_failure_file_that_cannot_be_replayed_says_why_in_one_line(changes: dict, message: str) -> None:
    with pytest.raises(RecordError, match="f.json: ") as e:
        failure_from_json({**VALID, **changes}, "f.json")
    assert message in str(e.value) and "\n" not in str(e.value)


def test_merge_refuses_a_failure_file_that_no_longer_reads(tmp_path: Path) -> None:
    source = rb.write_store(tmp_path / "a", [rb.run_record("20261129T100000Z-ci-aaaaaa")])
    (source / "failures").mkdir()
    (source / "failures" / "x.json").write_text(json.dumps({**VALID, "schema": 9}))
    dest = tmp_path / "dest"
    with pytest.raises(MergeError, match=r"x.json: schema=9 is not supported.*nothing was merged"):
        merge_stores([source], dest)
    assert not dest.exists()


def test_how_a_failure_was_found_reads_typed_and_strictly() -> None:
    found = Found(
        profile="ci",
        failure="2 of 3",
        trigger=("mask:causal_top_left",),
        needs=("mask:causal_top_left",),
        trigger_words="fails when: a causal_top_left mask alone",
        inherited_from="pallas_splash",
        also_found=({"file": "same-bug/x.json", "shard": 1},),
    )
    assert Found.from_json(json.loads(json.dumps(found.to_json()))) == found and found.order == 2
    assert Found().to_json() == {} and Found().order == 1 and Found().trigger is None
    # The plainest case's trigger is empty, and is one: never read back as "not reduced".
    assert Found.from_json(Found(trigger=()).to_json()).trigger == ()
    for bad in ("", "²2 of 3", "2 of"):
        with pytest.raises(RecordError, match='must be "N of M"'):
            Found.from_json({"failure": bad}, "f.json")
    with pytest.raises(RecordError, match="search field trigger='mask:causal_top_left' must be a list of feature"):
        Found.from_json({"trigger": "mask:causal_top_left"}, "f.json")
    with pytest.raises(RecordError, match=r"f.json: unknown search fields \['triger'\]"):
        Found.from_json({"triger": []}, "f.json")
    with pytest.raises(RecordError, match="failure='second' must be \"N of M\""):
        Found.from_json({"failure": "second"}, "f.json")
