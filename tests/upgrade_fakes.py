"""upgrade's environments and steps faked over real records (tests.record_builders.real_store): the gate,
the verdict, the report and every view of them run for real, in seconds. For test_upgrade and test_watch."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.cli.commands import upgrade as upgrade_cmd
from harness.environments import envs, upgrade
from tests import record_builders as rb


def copy_run(src: Path, store: Path, run_id: str) -> None:
    """One real run's records under a new run id, as another process would have written them."""
    dest = store / "records" / run_id
    dest.mkdir(parents=True)
    for f in src.glob("*.json"):
        doc = json.loads(f.read_text())
        doc["run_id"] = run_id
        (dest / f.name).write_text(json.dumps(doc))


def real_runs(store: Path) -> dict[str, Path]:
    """step name -> the real store's run directory for it."""
    out = {}
    for d in (store / "records").iterdir():
        mode = json.loads((d / "run.json").read_text()).get("mode", "run")
        out[mode] = d
    return out


RAGGED_ERROR = "AttributeError: 'ReshapeTransform' object has no attribute 'indices'"


def fake_steps(
    monkeypatch: pytest.MonkeyPatch,
    real: Path,
    *,
    crash: set[tuple[str, str]] = frozenset(),
    versions: dict[str, dict[str, str]] | None = None,
) -> list:
    """Environments and steps faked: each step copies the real records of its kind into its side's store.

    Kernels: "tests._fakes:CORRECT" (the real run's records), "ragged" (cannot run here on either
    side, as pallas_ragged_paged under the interpreter). crash: (side, step label) that exit 3.
    versions: "baseline"/"candidate" -> the library versions the side reports (default jax 0.10.2, torch 2.13.0).
    """
    runs, calls = real_runs(real), []

    def run_step(side, env, step, *, store, cwd, logs):  # noqa: ANN001, ANN202 - upgrade.run_step's
        calls.append((side, step.label))  # list.append is atomic: run steps call this from two threads
        logs.mkdir(parents=True, exist_ok=True)
        log = logs / f"{side}-{step.label.replace(' ', '-')}.log"
        run_id = f"20261201T000000Z-{side}-{step.label.replace(' ', '-').replace('#', '')}"
        code = 0
        if (side, step.label) in crash:
            log.write_text("$ python -m harness ...\nImportError: cannot import name 'x' from 'jax'\n")
            code = 3
        elif step.kernel == "ragged":
            store.joinpath("records", run_id).mkdir(parents=True)
            doc = rb.run_record(run_id, status="cannot run here", cannot_run={"ragged": RAGGED_ERROR})
            (store / "records" / run_id / "run.json").write_text(json.dumps(doc))
            code = 4
        else:
            copy_run(runs[step.name], store, run_id)
            code = 1 if step.name == "run" else 0  # the real run records BROKEN's failure: in both, not new
        if code != 3:
            log.write_text(f"$ python -m harness {step.name}\nok\n")
        new = (run_id,) if code != 3 else ()
        return upgrade.StepResult(side=side, step=step, code=code, seconds=0.1, log=log, command="x", runs=new)

    def environments(args, changes):  # noqa: ANN001, ANN202
        spec = envs.EnvSpec(python="python", requirements=(), index=envs.IndexOptions())
        return envs.Env(Path("base"), spec), envs.Env(Path("cand"), spec)

    def query(env, code, *, cwd):  # noqa: ANN001, ANN202
        if code == upgrade.KERNELS:  # each with its About.cases: 0, so EXTRA_DRAWN cases each
            return {"tests._fakes:CORRECT": 0, "ragged": 0}
        side = "baseline" if env.path == Path("base") else "candidate"
        return (versions or {}).get(side, {"jax": "0.10.2", "torch": "2.13.0"})

    monkeypatch.setattr(upgrade, "run_step", run_step)
    monkeypatch.setattr(upgrade, "query", query)
    monkeypatch.setattr(upgrade_cmd, "_environments", environments)
    return calls
