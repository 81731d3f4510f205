"""After `mutmut run`: the kill rate, and a failure for any survivor not documented as equivalent.

    python tests/mutation/check.py [--min-kill 0.9]
    python tests/mutation/check.py --preflight   # before `mutmut run`

Reads mutmut's verdicts (`mutmut results --all true`) and tests/mutation/equivalent.md, where
each equivalent mutant is a list item "- `NAME`: why no test can tell it from the original".
Exits 1 when a survivor is undocumented, a documented name was killed or no longer exists (the
list must follow the code), or the kill rate (killed over all mutants but the documented
equivalents) is below --min-kill; 0 otherwise.

--preflight imports the modules of tests/mutation/preload.txt, which mutmut's fork server
imports before forking a worker per mutant, and exits 1 if that started a JAX backend (a worker
forked after it hangs at its first compile, and mutmut records a timeout: a kill that proves
nothing) or imported project code (a worker would test that copy, not the mutated one).
"""

from __future__ import annotations

import argparse
import importlib
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path

EQUIVALENT = Path(__file__).with_name("equivalent.md")
PRELOAD = Path(__file__).with_name("preload.txt")
PROJECT = ("harness", "kernels", "oracles", "tests")
# The target of the issue that added mutation testing: at least 90% of the mutants killed.
MIN_KILL = 0.90
KILLED = {"killed", "timeout", "segfault"}  # mutmut's names for a mutant some test noticed


def verdicts() -> dict[str, str]:
    out = subprocess.run(
        [sys.executable, "-m", "mutmut", "results", "--all", "true"], capture_output=True, text=True, check=True
    ).stdout
    found = {}
    for line in out.splitlines():
        name, sep, status = line.strip().rpartition(": ")
        if sep and "__mutmut_" in name:
            found[name] = status.strip()
    return found


def documented() -> dict[str, str]:
    return dict(re.findall(r"^- `([^`]+)`: (.+)$", EQUIVALENT.read_text(), re.MULTILINE))


def preload_modules(path: Path = PRELOAD) -> list[str]:
    lines = (line.strip() for line in path.read_text().splitlines())
    return [line for line in lines if line and not line.startswith("#")]


def preflight(path: Path = PRELOAD) -> int:
    """Import what the fork server preloads; 1 if that started a JAX backend or imported project code."""
    before = set(sys.modules)
    for name in preload_modules(path):
        importlib.import_module(name)
    from jax._src import xla_bridge  # the backends JAX has started, without starting one

    problems = [f"a JAX backend started: {sorted(xla_bridge._backends)}"] if xla_bridge._backends else []
    project = sorted(m for m in set(sys.modules) - before if m.split(".")[0] in PROJECT)
    if project:
        problems.append(f"project code imported: {', '.join(project)}")
    for why in problems:
        print(f"PREFLIGHT: importing {path} {why}; remove the module that does it from that list")
    if not problems:
        print(f"preflight: {path.name} starts no JAX backend and imports no project code")
    return 1 if problems else 0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--min-kill", type=float, default=MIN_KILL)
    p.add_argument("--preflight", action="store_true", help="check tests/mutation/preload.txt before `mutmut run`")
    args = p.parse_args(argv)
    if args.preflight:
        return preflight()
    results, equivalent = verdicts(), documented()
    counts = Counter("killed" if s in KILLED else s for s in results.values())
    unchecked = sorted(n for n, s in results.items() if s == "not checked")
    survivors = sorted(n for n, s in results.items() if s not in KILLED and s != "not checked")
    undocumented = [n for n in survivors if n not in equivalent]
    stale = sorted(n for n in equivalent if results.get(n) in KILLED or n not in results)
    judged = counts["killed"] + len(undocumented)  # checked, and not documented as equivalent
    rate = counts["killed"] / judged if judged else 0.0
    print(f"{len(results)} mutants: {dict(counts)}; {len(survivors) - len(undocumented)} documented equivalent")
    print(
        f"kill rate {rate:.1%} ({counts['killed']} of {judged} non-equivalent), "
        f"{counts['killed'] / max(len(results), 1):.1%} of all"
    )
    for n in undocumented:
        print(f"UNDOCUMENTED SURVIVOR {n} ({results[n]}): kill it with a test, or explain it in {EQUIVALENT}")
    for n in stale:
        print(f"STALE {n}: documented as equivalent but {results.get(n, 'no longer generated')}; remove it")
    if unchecked:
        print(f"{len(unchecked)} mutants not checked: the run stopped early; rerun `mutmut run`")
    ok = not undocumented and not stale and not unchecked and rate >= args.min_kill
    if rate < args.min_kill:
        print(f"kill rate {rate:.1%} is below --min-kill {args.min_kill:.0%}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
