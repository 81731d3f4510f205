"""Where the default suite's time goes: `nox -s tests`' pytest, run as that session runs it, timed test by test.

Runs `pytest -m "not slow"` with the session's options (noxfile.PARALLEL: one worker per core) and a
JUnit XML file, in this interpreter, and records:

- wall_seconds: the pytest run's wall time (installation excluded), and the machine's core count;
- cpu_seconds: user + system time of pytest and everything it started (workers, the runs they start);
- load_before, load_after: the machine's 1-minute load average before the run, and its 15-minute one
  after it (about the mean over the run's end; the suite alone keeps it near the core count): a record
  made beside other work says so here, never in prose;
- per module: tests, seconds summed over its tests (the time a worker spent on them), failures;
- durations: every test's seconds (setup, call and teardown), slowest first.

    python benchmarks/suite_time.py [--out FILE] [-- PYTEST-ARGS...]

docs/tests.md gives the tables of the committed record (benchmarks/results/suite_time.json).
"""

from __future__ import annotations

import argparse
import ast
import collections
import datetime as dt
import json
import os
import platform
import resource
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "benchmarks" / "results" / "suite_time.json"


def _noxfile_parallel() -> tuple[str, ...]:
    """noxfile.PARALLEL, read from the file (importing the noxfile would need nox)."""
    for line in (ROOT / "noxfile.py").read_text().splitlines():
        if line.startswith("PARALLEL = "):
            return tuple(ast.literal_eval(line.partition("=")[2].strip()))
    raise SystemExit("noxfile.py has no PARALLEL line")


def tests_of(junit: Path) -> list[dict]:
    """One dict per test case of a JUnit XML file: module, name, seconds, outcome."""
    out = []
    for case in ET.parse(junit).iter("testcase"):
        outcome = next((c.tag for c in case if c.tag in ("failure", "error", "skipped")), "passed")
        # pytest's classname is tests.test_x (or tests.test_x.TestClass): the module is its test_x part.
        parts = (case.get("classname") or "").split(".")
        module = next((f"tests/{p}.py" for p in parts if p.startswith("test_")), ".".join(parts))
        seconds = float(case.get("time") or 0)
        out.append({"module": module, "test": case.get("name"), "seconds": seconds, "outcome": outcome})
    return out


def summarize(tests: list[dict]) -> dict:
    """Per-module totals and every test's seconds, each slowest first, from `tests_of`."""
    modules: dict[str, dict] = collections.defaultdict(lambda: {"tests": 0, "seconds": 0.0, "failed": 0})
    for t in tests:
        m = modules[t["module"]]
        m["tests"] += 1
        m["seconds"] += t["seconds"]
        m["failed"] += t["outcome"] in ("failure", "error")
    ranked = sorted(modules.items(), key=lambda kv: -kv[1]["seconds"])
    return {
        "tests": len(tests),
        "failed": sum(t["outcome"] in ("failure", "error") for t in tests),
        "test_seconds": round(sum(t["seconds"] for t in tests), 1),
        "modules": {k: {**v, "seconds": round(v["seconds"], 1)} for k, v in ranked},
        "durations": [{**t, "seconds": round(t["seconds"], 2)} for t in sorted(tests, key=lambda t: -t["seconds"])],
    }


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", type=Path, default=OUT)
    p.add_argument("pytest_args", nargs="*", help="more pytest arguments, after --")
    args = p.parse_args()
    parallel = _noxfile_parallel()
    env = {**os.environ, "JAX_PLATFORMS": "cpu", "ATTN_HARNESS_PROFILE": "ci"}
    with tempfile.TemporaryDirectory() as tmp:
        junit = Path(tmp) / "junit.xml"
        cmd = [sys.executable, "-m", "pytest", "-m", "not slow", *parallel, "--junitxml", str(junit), "-q"]
        load = os.getloadavg()[0]
        start, before = time.perf_counter(), resource.getrusage(resource.RUSAGE_CHILDREN)
        code = subprocess.run([*cmd, *args.pytest_args], cwd=ROOT, env=env).returncode
        wall, after = time.perf_counter() - start, resource.getrusage(resource.RUSAGE_CHILDREN)
        load_after = os.getloadavg()[2]
        tests = tests_of(junit) if junit.exists() else []
    record = {
        "benchmark": "suite_time",
        "time": dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "host": {"machine": platform.machine(), "cores": os.cpu_count(), "python": platform.python_version()},
        "command": ["pytest", "-m", "not slow", *parallel, *args.pytest_args],
        "exit": code,
        "load_before": round(load, 2),
        "load_after": round(load_after, 2),
        "wall_seconds": round(wall, 1),
        "cpu_seconds": round((after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime), 1),
        **summarize(tests),
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(record, indent=1) + "\n")
    print(
        f"{record['tests']} tests ({record['failed']} failed) in {wall:.0f} s wall, {record['cpu_seconds']:.0f} CPU s, "
        f"{record['host']['cores']} cores, load {load:.2f} before, {load_after:.2f} after -> {args.out}"
    )
    return code


if __name__ == "__main__":
    sys.exit(main())
