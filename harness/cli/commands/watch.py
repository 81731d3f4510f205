"""`watch`: every release of a pinned package newer than its pin, gated by `upgrade`, on one page.

Exit 0: nothing newer, or every release gated SAFE; 1: a release NOT SAFE or that cannot install;
4: nothing could be compared for any release (each CANNOT TELL); 2: bad usage (an unreadable
constraints file, a baseline that cannot be built).
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import difflib
import json
import shlex
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from harness import cli
from harness.cli import EXIT_CANNOT_RUN, EXIT_FAIL, EXIT_HARNESS, EXIT_OK, EXIT_USAGE, UsageError
from harness.cli.commands._shared import add_out
from harness.cli.commands.bisect import add_index_arguments, index_options, read_constraints
from harness.environments import envs, pythons, watch
from harness.report import watch_page

NAME = "watch"
HELP = "list the releases of the pinned packages newer than the pins, gate each with `upgrade`, write one page"
DEFAULT_OUT = Path("reports/watch")
# Beside the page: the whole result as data, and the constraints file a pull request would commit.
# proposal.md: the pull request's description.
JSON_NAME, PROPOSAL_NAME, PROPOSAL_BODY = "watch.json", "proposal.txt", "proposal.md"
# `upgrade` options passed through unchanged (the budget of every gate).
PASSED = ("kernel", "examples", "seed", "case_timeout", "no_compile", "no_bench", "bench_rounds", "jobs")


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--package",
        action="append",
        default=[],
        metavar="NAME",
        help=f"watch only these pinned packages (default: {', '.join(watch.WATCHED)})",
    )
    p.add_argument("--every-release", action="store_true", help="gate each newer release alone, not only the newest")
    p.add_argument("--list-only", action="store_true", help="list the newer releases and gate nothing")
    b = p.add_argument_group("budget of each gate (as `upgrade`)")
    b.add_argument("--kernel", action="append", default=[], metavar="K", help="only these kernels")
    b.add_argument("--examples", type=int, metavar="N", help="cases per kernel")
    b.add_argument("--seed", type=int, metavar="S", help="Hypothesis seed")
    b.add_argument("--case-timeout", type=float, metavar="S", help="per-case time limit")
    b.add_argument("--no-compile", action="store_true", help="skip the TPU compile checks")
    b.add_argument("--no-bench", action="store_true", help="skip the benchmarks")
    b.add_argument("--bench-rounds", type=int, metavar="N", help="benchmark processes per side")
    b.add_argument("--jobs", type=int, metavar="N", help="run steps at once")
    add_out(p, default=DEFAULT_OUT, what="one upgrade directory per release, the page and watch.json")
    add_index_arguments(p)


@dataclasses.dataclass(frozen=True, kw_only=True)
class Outcome:
    """One proposal's gate, as the page and watch.json show it."""

    label: str  # the --to pins
    together: bool
    verdict: str  # SAFE, NOT SAFE, CANNOT TELL, CANNOT INSTALL, DID NOT RUN
    code: int
    headline: str
    regressions: tuple[str, ...] = ()  # each failing gate row, in words, with its evidence (replay commands)
    report: str = ""  # the upgrade's report, relative to the page
    log: str = ""
    pythons: tuple[str, str] = ("", "")  # baseline's, candidate's
    constraints_diff: str = ""  # what taking it changes in the constraints file (SAFE only)
    constraints: str = ""  # the whole new constraints file (SAFE only)


def _listed(name: str, index: envs.IndexOptions) -> list[str]:
    """Every release the index offers for `name` on some Python the harness knows: pip hides from each
    interpreter the releases that need another."""

    def listed(version: str | None) -> list[str]:
        try:
            return envs.available_versions(name, index, python_version=version)
        except envs.EnvError:
            return []  # no wheel for that Python

    with ThreadPoolExecutor(max_workers=len(pythons.KNOWN) + 1) as pool:
        return sorted({v for vs in pool.map(listed, [None, *pythons.KNOWN]) for v in vs})


def _own(constraints: str, index: envs.IndexOptions) -> list[str]:
    """What the constraints file's own pins cannot install with: each companion extra (jax[tpu]==X) resolved
    on the first declared Python installed here. A line per extra that does not resolve."""
    pins = envs.pinned(constraints)
    python = pythons.for_constraints(constraints)[0]
    out = []
    for name, (extra, companions) in envs.COMPANIONS.items():
        version = watch.pinned_version(pins.get(name, ""))
        if version is None:
            continue
        failure = envs.resolution((f"{extra}=={version}",), python, index)
        if failure:
            held = ", ".join(pins[c] for c in companions if c in pins)
            out.append(f"{extra}=={version} cannot install: {failure} (the constraints pin {held} instead)")
    return out


def _upgrade_argv(args: argparse.Namespace, proposal: watch.Proposal, out: Path) -> list[str]:
    argv = ["upgrade", *proposal.to_args(), "--out", str(out), "--constraints", str(args.constraints)]
    for name in PASSED:
        value = getattr(args, name)
        flag = "--" + name.replace("_", "-")
        if value is True:
            argv.append(flag)
        elif isinstance(value, list):
            argv += [a for v in value for a in (flag, str(v))]
        elif value not in (None, False):
            argv += [flag, str(value)]
    for url in [args.index_url] if args.index_url else []:
        argv += ["--index-url", url]
    argv += [a for url in args.extra_index_url for a in ("--extra-index-url", url)]
    argv += [a for d in args.find_links for a in ("--find-links", str(Path(d).resolve()))]
    argv += ["--no-index"] if args.no_index else []
    argv += ["--envs", str(args.envs)] if args.envs else []
    return argv


def _upgrade(argv: list[str], log: Path) -> int:
    """`upgrade` with these arguments, its output into `log`; its exit code (2 for bad usage or an environment
    that cannot be built, 3 for a crash, whose traceback is saved as for any command)."""
    with open(log, "w") as f, contextlib.redirect_stdout(f), contextlib.redirect_stderr(f):
        print(f"$ python -m harness {shlex.join(argv)}", flush=True)
        try:
            parsed = cli.build_parser().parse_args(argv)
            return int(parsed._main(parsed))
        except cli.INPUT_ERRORS as e:
            print(f"error: {str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__}")
            return EXIT_USAGE
        except Exception as e:  # noqa: BLE001 - one release's crash stops no other release's gate
            print(f"harness failure: {type(e).__name__}: {e} (traceback saved to {cli.save_traceback(e, argv)})")
            return EXIT_HARNESS


def _gate(args: argparse.Namespace, proposal: watch.Proposal, constraints: str, out: Path) -> Outcome:
    """Run `upgrade` for one proposal, and read its summary."""
    where = out / proposal.slug
    where.mkdir(parents=True, exist_ok=True)
    log = where / "watch.log"
    code = _upgrade(_upgrade_argv(args, proposal, where), log)
    lines = [ln.strip() for ln in log.read_text(errors="replace").splitlines() if ln.strip()]
    last = lines[-1] if lines else f"exit {code}"
    common = {"label": proposal.label, "together": proposal.together, "code": code, "log": str(log.relative_to(out))}
    summary_path = where / "summary.json"
    if code == EXIT_USAGE and "cannot build the baseline" in last:
        raise UsageError(f"{proposal.label}: {last}")
    if code == EXIT_USAGE and "cannot build the candidate" in last:
        return Outcome(verdict="CANNOT INSTALL", headline=last, **common)
    if not summary_path.exists():
        return Outcome(verdict="DID NOT RUN", headline=f"upgrade exited {code}: {last}", **common)
    summary = json.loads(summary_path.read_text())
    versions = summary.get("versions") or {}
    base, cand = versions.get("baseline", {}), versions.get("candidate", {})
    regressions = tuple(f"{r['category']}: {r['subject']}: {r['change']}. {r['detail']}" for r in summary["failures"])
    taken = _taken(proposal, cand, constraints)
    new = watch.constraints_with(constraints, taken, python=_minor(cand.get("python"))) if code == EXIT_OK else ""
    diff = "".join(difflib.unified_diff(constraints.splitlines(True), new.splitlines(True), n=0)) if new else ""
    return Outcome(
        verdict=summary["verdict"],
        headline=summary["headline"],
        regressions=regressions,
        report=str((where / "index.html").relative_to(out)) if (where / "index.html").exists() else "",
        pythons=(base.get("python") or "", cand.get("python") or ""),
        constraints_diff="\n".join(ln for ln in diff.splitlines() if not ln.startswith(("---", "+++", "@@"))),
        constraints=new,
        **common,
    )


def _minor(version: str | None) -> str | None:
    return ".".join(version.split(".")[:2]) if version else None


def _taken(proposal: watch.Proposal, candidate: dict, constraints: str) -> dict[str, str]:
    """The pins a SAFE proposal moves: its releases, and the companions the candidate's installer picked."""
    pins = envs.pinned(constraints)
    taken = dict(proposal.changes)
    for name in list(taken):
        for companion in envs.COMPANIONS.get(name, ("", ()))[1]:
            if companion in pins and candidate.get(companion):
                taken[companion] = str(candidate[companion]).split("+")[0]
    return taken


def _body(o: Outcome, constraints: Path) -> str:
    """The pull request's description: the verdict, the change to the constraints file, where the report is."""
    return (
        f"`harness watch` gated {o.label}: **{o.headline}**\n\n"
        f"Baseline on Python {o.pythons[0]}, candidate on Python {o.pythons[1]}. The change to `{constraints}`:\n\n"
        f"```diff\n{o.constraints_diff}\n```\n\nThe upgrade's report is `{o.report}` on the watch page.\n"
    )


def _code(outcomes: list[Outcome]) -> int:
    if any(o.verdict in ("NOT SAFE", "CANNOT INSTALL", "DID NOT RUN") for o in outcomes):
        return EXIT_FAIL
    if outcomes and all(o.verdict == "CANNOT TELL" for o in outcomes):
        return EXIT_CANNOT_RUN
    return EXIT_OK


def main(args: argparse.Namespace) -> int:
    constraints = read_constraints(args.constraints)
    index = index_options(args)
    pins = {n: v for n, r in envs.pinned(constraints).items() if (v := watch.pinned_version(r))}
    wanted = [envs._name(n) for n in args.package] or [n for n in watch.WATCHED if n in pins]
    unknown = [n for n in wanted if n not in pins]
    if unknown:
        pinned = ", ".join(pins)
        raise UsageError(f"--package {unknown[0]} is not pinned with == in {args.constraints}; pinned: {pinned}")
    found = watch.newer(pins, {n: _listed(n, index) for n in wanted})
    for name in wanted:
        later = found.get(name)
        print(f"{name} {pins[name]}: " + (f"newer {', '.join(later)}" if later else "the newest on the index"))
    own = _own(constraints, index)
    for line in own:
        print(f"note: {line}")
    proposals = [] if args.list_only else watch.proposals(found, every_release=args.every_release)
    out = args.out.resolve()
    outcomes = []
    for i, proposal in enumerate(proposals, 1):
        print(f"[{i}/{len(proposals)}] upgrade {' '.join(proposal.to_args())} ...", flush=True)
        outcome = _gate(args, proposal, constraints, out)
        where = f" (report {out / outcome.report})" if outcome.report else ""
        print(f"  {outcome.verdict}: {outcome.headline}{where}")
        outcomes.append(outcome)
    out.mkdir(parents=True, exist_ok=True)
    proposal = next((o for o in reversed(outcomes) if o.verdict == "SAFE" and o.together), None) or next(
        (o for o in outcomes if o.verdict == "SAFE"), None
    )
    for name in (PROPOSAL_NAME, PROPOSAL_BODY):
        (out / name).unlink(missing_ok=True)
    if proposal is not None:
        (out / PROPOSAL_NAME).write_text(proposal.constraints)
        (out / PROPOSAL_BODY).write_text(_body(proposal, args.constraints))
        print(f"take {proposal.label}: {out / PROPOSAL_NAME} is {args.constraints} with it")
    data = {
        "schema": 1,
        "constraints": str(args.constraints),
        "pins": {n: pins[n] for n in wanted},
        "newer": found,
        "notes": own,
        "outcomes": [dataclasses.asdict(o) for o in outcomes],
        "proposal": proposal.label if proposal else None,
    }
    (out / JSON_NAME).write_text(json.dumps(data, indent=2) + "\n")
    page = watch_page.write(data, out / "index.html")
    print(f"page -> {page}")
    return _code(outcomes)
