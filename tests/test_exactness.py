"""Exactness per quantity (harness.core.exactness, harness.running.exactness): the declaration refined by
the installed upstream kernel's own behaviour, its cache, and a fork that loses what upstream keeps."""

from __future__ import annotations

import dataclasses

import pytest

from harness import cli
from harness.core import contract
from harness.core.case import Case
from harness.core.exactness import Measured, refine
from harness.running import batch, exactness
from harness.running.failures import write_failure
from harness.running.runner import Check, run_case
from harness.runtime import caches
from tests._fakes import FakeKernel
from tests.planted import spec

BASE = FakeKernel.conventions
LOOSE = dataclasses.replace(BASE, batch_invariant="an ulp somewhere", batch_varies=())  # every quantity
FLASH_LIKE = dataclasses.replace(BASE, batch_invariant="dq and dk by an ulp", batch_varies=("dq", "dk", "dbias"))


def _measured(batch_diffs: dict[str, float], rerun: dict[str, float] | None = None) -> Measured:
    rerun = rerun if rerun is not None else dict.fromkeys(batch_diffs, 0.0)
    return Measured(kernel="k", where="here", cases=1, diffs={"reproducible": rerun, "batch_invariant": batch_diffs})


@pytest.mark.parametrize(
    ("declared", "diffs", "varies", "contradicted"),
    [
        # A reason about every quantity, upstream exact on out, dv and lse: those are checked bitwise.
        pytest.param(
            LOOSE, {"out": 0.0, "dq": 3e-7, "dk": 2e-7, "dv": 0.0, "lse": 0.0}, ("dq", "dk", "dbias", "dsinks"), ""
        ),
        # Declared dbias varies, measured exact: tightened; dq and dk stay within the tolerance.
        pytest.param(FLASH_LIKE, {"out": 0.0, "dq": 3e-7, "dk": 2e-7, "dbias": 0.0}, ("dq", "dk"), ""),
        # Every declared quantity measured exact: the declaration becomes True, the reason dropped.
        pytest.param(FLASH_LIKE, {"out": 0.0, "dq": 0.0, "dk": 0.0, "dbias": 0.0}, (), ""),
        # Declared exact, measured to vary: still bitwise, and said.
        pytest.param(FLASH_LIKE, {"out": 1e-7, "dq": 3e-7}, ("dq", "dk", "dbias"), "differs in out (1e-07)"),
        pytest.param(BASE, {"out": 0.0, "dv": 6e-8}, (), "differs in dv (6e-08)"),
    ],
)
def test_the_probe_tightens_what_upstream_keeps_and_reports_what_it_contradicts(declared, diffs, varies, contradicted):
    got = refine(declared, _measured(diffs))
    assert got.conventions.varies("batch_invariant") == varies
    assert (got.conventions.batch_invariant is True) is (not varies)
    assert got.conventions.varies("reproducible") == ()
    assert (contradicted in " ".join(got.contradictions)) and bool(got.contradictions) is bool(contradicted)
    assert got.conventions.probed.startswith("exactness probe of k (here, 1 cases)")


def test_a_declared_rerun_reason_is_refined_per_quantity_and_a_failed_probe_changes_nothing():
    declared = dataclasses.replace(BASE, reproducible="atomics in the backward")
    got = refine(declared, _measured({"out": 0.0}, rerun={"out": 0.0, "dq": 2e-7})).conventions
    assert got.reproducible == "atomics in the backward" and "out" not in got.varies("reproducible")
    assert "dq" in got.varies("reproducible") and "dbias" in got.varies("reproducible")  # not measured: as declared
    failed = refine(declared, Measured(kernel="k", where="here", error="boom")).conventions
    assert dataclasses.replace(failed, probed="") == declared and "measured nothing: boom" in failed.probed


def test_measured_round_trips_and_rejects_unknown_fields():
    m = _measured({"out": 0.0, "dq": 3e-7})
    assert Measured.from_json(m.to_json()) == m
    with pytest.raises(ValueError, match="no fields \\['extra'\\]"):
        Measured.from_json({**m.to_json(), "extra": 1})


def test_a_drop_in_is_held_to_its_upstream_and_a_kernel_of_its_own_to_its_declaration():
    flash = contract.resolve("pallas_flash")
    assert exactness.upstream_of(contract.resolve(spec("flash_batch_ulp"))) is flash
    assert exactness.upstream_of(flash) is flash
    assert exactness.upstream_of(flash.with_conventions(LOOSE)) is flash
    assert exactness.upstream_of(FakeKernel("tests.test_exactness:fake")) is None
    assert exactness.upstream_of(contract.resolve("torch_sdpa")) is None  # an oracle: a judge


def test_the_answer_is_kept_on_disk_once_per_installation(tmp_path, monkeypatch):
    monkeypatch.setenv(caches.PROBE_CACHE_ENV, str(tmp_path))
    monkeypatch.setattr(exactness, "_MEASURED", {})
    calls = []
    monkeypatch.setattr(exactness, "measure", lambda impl, i: calls.append(impl) or _measured({"out": 0.0}))
    xla = contract.resolve("jax_xla")
    assert exactness.probed(xla) == _measured({"out": 0.0})
    monkeypatch.setattr(exactness, "_MEASURED", {})  # a new process: read back from the file
    assert exactness.probed(xla) == _measured({"out": 0.0}) and len(calls) == 1
    assert len(list(tmp_path.glob("exactness-jax_xla-*.json"))) == 1


def test_a_fork_whose_out_moves_with_the_batch_fails_where_upstream_passes(tmp_path, monkeypatch, capsys):
    """Even under a declaration that lets every quantity vary with the batch (the reason was about dq and
    dk), the probe finds upstream's out the same bits: the fork's ulp on out fails, upstream passes.

    The probe's answer is this installation's, read from the disk cache that every run of pallas_flash fills (it
    depends on the releases and the adapter's source alone, not on the declaration patched here): measured here
    only where no run has yet, as a user's first run does."""
    flash = contract.resolve("pallas_flash")
    monkeypatch.setattr(type(flash), "conventions", dataclasses.replace(flash.conventions, batch_varies=()))
    fork = contract.resolve(spec("flash_batch_ulp"))
    assert "out" in fork.conventions.varies("batch_invariant")  # as declared: within the tolerance
    said: list[str] = []
    checked = exactness.refined([fork, flash], said.append)
    assert not said and all("out" not in k.conventions.varies("batch_invariant") for k in checked)
    # Upstream's own dq: an ulp apart by batch size where the release's XLA reduces di by shape (jax 0.10.2,
    # docs/findings/pallas_flash_dq_batch_dependent.md), the same bits on jax 0.12.1: as the probe measured.
    dq_varies = exactness.probed(flash).diffs["batch_invariant"]["dq"] > 0
    assert all(("dq" in k.conventions.varies("batch_invariant")) == dq_varies for k in checked)
    base = Case(batch=2, q_heads=2, kv_heads=1, q_len=128, kv_len=128, head_dim=64)
    case = next(c for c in (base.replace(seed=s) for s in range(20)) if batch.wanted(flash, c, passed=True))
    result = run_case(case, checked, grads=True)
    bad, good = result.subjects
    assert [c.quantity for c in bad.comparisons if not c.passed] == [batch.BATCH_INVARIANT], bad.failure
    assert "worst out" in next(c.note for c in bad.comparisons if c.quantity == batch.BATCH_INVARIANT)
    assert good.passed and batch.BATCH_INVARIANT in good.checks, good.failure
    # Its failure file replays through the CLI under the same refined conventions.
    path = write_failure(tmp_path, result, Check(kernel=fork, grads=True))
    assert cli.main(["repro", str(path)]) == cli.EXIT_FAIL, capsys.readouterr().out
