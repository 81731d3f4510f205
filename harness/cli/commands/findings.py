"""`findings`: every finding in docs/findings/ and docs/divergences/, with its status on the installed versions.

Each finding's standalone script runs in a child process: exit 1 is "still shows it", 0 "fixed since",
4 "cannot run here" (harness.findings). The command exits 0 when every script gave one of those three,
3 (the harness failed) when a script crashed or overran its limit: the catalogue itself is then broken.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from harness import findings
from harness.cli import EXIT_HARNESS, EXIT_OK, UsageError, progress

NAME = "findings"
HELP = "run every finding's script on the installed versions: still shows it / fixed since / cannot run here"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("names", nargs="*", metavar="NAME", help="only these findings (default: all)")
    p.add_argument(
        "--dir",
        type=Path,
        action="append",
        metavar="DIR",
        help="a folder of notes (repeatable; default docs/findings and docs/divergences)",
    )
    p.add_argument("--timeout", type=float, metavar="S", help="per-script limit (default: each note's timeout_s)")
    p.add_argument("--list", action="store_true", help="list the findings and their metadata; run nothing")
    p.add_argument("--json", action="store_true", help="print the results as JSON (one object per finding)")


def _select(args: argparse.Namespace) -> list[findings.Finding]:
    dirs = tuple(args.dir) if args.dir else findings.DIRS
    missing = [d for d in dirs if not d.is_dir()]
    if missing:
        raise UsageError(f"--dir {missing[0]} is not a folder")
    catalogue = findings.catalogue(dirs)
    unknown = sorted(set(args.names) - {f.name for f in catalogue})
    if unknown:
        raise UsageError(f"unknown finding {unknown[0]!r}; known: {', '.join(f.name for f in catalogue)}")
    return [f for f in catalogue if not args.names or f.name in args.names]


def _row(f: findings.Finding, r: findings.ScriptResult | None) -> dict[str, object]:
    out: dict[str, object] = {
        "name": f.name,
        "kind": f.kind,
        "title": f.title,
        "note": str(f.note.relative_to(findings.ROOT)) if f.note.is_relative_to(findings.ROOT) else str(f.note),
        "releases": f.releases,
        "fixed_in": f.fixed_in,
        "fix": None if f.fix is None else (f.fix.upstream or f.fix.fixed),
    }
    if r is not None:
        out.update(status=r.status.value, returncode=r.returncode, seconds=round(r.seconds, 1), detail=r.detail)
    return out


def main(args: argparse.Namespace) -> int:
    if args.timeout is not None and not args.timeout > 0:
        raise UsageError(f"--timeout={args.timeout} must be a positive number of seconds")
    selected = _select(args)
    if args.list:
        rows = [_row(f, None) for f in selected]
        if args.json:
            print(json.dumps(rows, indent=1))
        for row in [] if args.json else rows:
            measured = ", ".join(f"{v} {k}" for k, v in row["releases"].items())
            print(f"{row['name']:45s} {row['kind']:10s} measured: {measured}")
        return EXIT_OK
    results = []
    # With --json, stdout is the JSON alone: the lines and the progress line go nowhere.
    with progress.Steps(len(selected), "findings", unit="scripts", quiet=args.json) as bar:
        for f in selected:
            bar.note(f.name)
            r = findings.run_script(f, timeout_s=args.timeout)
            results.append(r)
            line = f"{f.name:45s} {f.kind:10s} {r.status.value:15s} {r.seconds:5.1f}s  {r.detail}"
            bar.done(None if args.json else line)
    if args.json:
        print(json.dumps([_row(r.finding, r) for r in results], indent=1))
    else:
        counts = {s: sum(r.status is s for r in results) for s in findings.Status}
        print(", ".join(f"{n} {s.value}" for s, n in counts.items() if n))
    return EXIT_HARNESS if any(r.status is findings.Status.BROKEN for r in results) else EXIT_OK
