"""Peak resident memory of a whole run: `python -m harness run --examples 30 --seed 1` and its workers.

The run is started as a subprocess; every POLL_S seconds the resident set sizes of it and
all its descendants (read from /proc: Linux only) are summed, and the largest sum is the
peak. A nightly run must fit its machine: the target is TARGET_BYTES.

    python benchmarks/peak_rss.py [--examples N] [--seed S] [--out FILE] [-- extra run arguments]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from harness.runtime import compat  # noqa: E402 - after the path set-up, so this checkout is the one measured
from harness.store.files import atomic_write_json  # noqa: E402

TARGET_BYTES = int(1.5 * 2**30)  # issue 9: a 30-case run within 1.5 GB
POLL_S = 0.2
PAGE = os.sysconf("SC_PAGE_SIZE")


def _children() -> dict[int, list[int]]:
    tree: dict[int, list[int]] = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/stat") as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        tree.setdefault(ppid, []).append(int(entry.name))
    return tree


def tree_rss(pid: int) -> int:
    """Resident bytes of `pid` and every descendant, now."""
    tree, total, todo = _children(), 0, [pid]
    while todo:
        p = todo.pop()
        todo += tree.get(p, [])
        try:
            with open(f"/proc/{p}/statm") as f:
                total += int(f.read().split()[1]) * PAGE
        except (OSError, ValueError, IndexError):
            pass
    return total


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--examples", type=int, default=30)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "peak_rss.json")
    p.add_argument("extra", nargs="*", help="more `run` arguments, after --")
    args = p.parse_args()
    with tempfile.TemporaryDirectory() as store:
        argv = ["run", "--examples", str(args.examples), "--seed", str(args.seed), "--out", store, *args.extra]
        env = {**os.environ, "PYTHONPATH": str(ROOT), "JAX_PLATFORMS": os.environ.get("JAX_PLATFORMS", "cpu")}
        start = time.perf_counter()
        proc = subprocess.Popen([sys.executable, "-m", "harness", *argv], cwd=ROOT, env=env, stdout=subprocess.PIPE)
        peak, trace = 0, []
        while proc.poll() is None:
            now = tree_rss(proc.pid)
            peak = max(peak, now)
            trace.append(now)
            time.sleep(POLL_S)
        output = proc.stdout.read().decode()
        seconds = time.perf_counter() - start
    cases = sum(line.startswith("[") for line in output.splitlines())
    result = {
        "command": "python -m harness " + " ".join(a if a != store else "STORE" for a in argv),
        "exit_code": proc.returncode,
        "cases": cases,
        "peak_rss_bytes": peak,
        "peak_rss_gib": round(peak / 2**30, 3),
        "target_bytes": TARGET_BYTES,
        "passed": proc.returncode == 0 and peak <= TARGET_BYTES,
        "wall_seconds": seconds,
        "poll_seconds": POLL_S,
        # Every 25th sample: the shape of the curve (flat, or climbing per case).
        "rss_trace_gib": [round(x / 2**30, 3) for x in trace[::25]],
        "versions": compat.library_versions(),
    }
    atomic_write_json(args.out, result)
    print(f"peak RSS {peak / 2**30:.2f} GiB over {cases} cases (target {TARGET_BYTES / 2**30:.1f} GiB), "
          f"exit {proc.returncode}, {seconds:.0f} s -> {args.out}")  # fmt: skip
    sys.exit(0 if result["passed"] else 1)


if __name__ == "__main__":
    main()
