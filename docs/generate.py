"""Writes the documentation's generated parts from the code's declarations, so the two cannot drift.

    python -m docs.generate          # rewrite every generated part
    python -m docs.generate --check  # exit 1 naming each stale part; 0 when all are current

Generated, in docs/kernels.md: the kernel table, between the markers `<!-- kernels:begin -->` and
`<!-- kernels:end -->`: one row per implementation the code defines (harness.core.contract.defined():
those registered only on a GPU or TPU included), every cell read from its declarations (Capabilities,
Conventions, About); and between `<!-- restrictions:begin -->` and `<!-- restrictions:end -->`, every
restriction each kernel applies with its source (About.restrictions). In docs/cli.md, between
`<!-- cli:begin -->` and `<!-- cli:end -->`: every `harness` subcommand and every argument of each, read from
the argument parser (harness.cli.build_parser). In docs/history.md, between `<!-- bugs:begin -->` and
`<!-- bugs:end -->` and between `<!-- commits:begin -->` and `<!-- commits:end -->`: the list of bugs and the
commits that are not bugs, from their recorded files (docs/data/history_*.json); in docs/performance.md,
between `<!-- results:begin -->` and `<!-- results:end -->`, every benchmark run recorded under
benchmarks/results/ that compares sides, with its command, and between `<!-- run-phases:begin -->` and
`<!-- run-phases:end -->` where a 60-case run's CPU goes by phase (benchmarks/run_phases.py). Exits 2
when a file lacks its markers, and 4 ("cannot run here") where a kernel module cannot be imported because
an optional framework is missing: the table would lack its rows. A kernel whose upstream module the
installed jax lacks (jax 0.12.1 removed the Pallas GPU attention modules) keeps the rows generated where
it loads.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import shlex
import sys
from collections.abc import Iterable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
KERNELS_PAGE = ROOT / "docs" / "kernels.md"
BEGIN, END = "<!-- kernels:begin -->", "<!-- kernels:end -->"
RESTRICTIONS_BEGIN, RESTRICTIONS_END = "<!-- restrictions:begin -->", "<!-- restrictions:end -->"
CLI_PAGE = ROOT / "docs" / "cli.md"
CLI_BEGIN, CLI_END = "<!-- cli:begin -->", "<!-- cli:end -->"
# Benchmark runs as recorded (benchmarks/results/*.json with a "sides" table): rendered in docs/performance.md.
PERFORMANCE_PAGE = ROOT / "docs" / "performance.md"
FOUND_PAGE = ROOT / "docs" / "found.md"
RESULTS = ROOT / "benchmarks" / "results"
RESULTS_BEGIN, RESULTS_END = "<!-- results:begin -->", "<!-- results:end -->"
RESULT_COLUMNS = {
    "cases": "cases",
    "cpu_s": "CPU s",
    "wall_s": "wall s",
    "cases_per_cpu_minute": "cases per CPU-minute",
}
# The README's table of what torch costs a fresh machine, from its record.
README = ROOT / "README.md"
TORCH_COST = RESULTS / "torch_cost.json"
TORCH_COST_BEGIN, TORCH_COST_END = "<!-- torch-cost:begin -->", "<!-- torch-cost:end -->"
# Where the default suite's time goes (benchmarks/suite_time.py's record), in docs/tests.md.
TESTS_PAGE = ROOT / "docs" / "tests.md"
SUITE_TIME = RESULTS / "suite_time.json"
SUITE_TIME_BEGIN, SUITE_TIME_END = "<!-- suite-time:begin -->", "<!-- suite-time:end -->"
SUITE_TIME_MODULES = 12  # the modules listed by name; the rest summed in one row
SUITE_TIME_SLOWEST = 15  # the tests listed by name, of the record's every test: enough to show where a cut would pay
# Where a 60-case run's CPU goes by phase (benchmarks/run_phases.py's record), in docs/performance.md.
RUN_PHASES = RESULTS / "run_phases.json"
RUN_PHASES_BEGIN, RUN_PHASES_END = "<!-- run-phases:begin -->", "<!-- run-phases:end -->"
RUN_PHASES_SHOWN = 0.5  # CPU seconds: a phase under this in every run is summed into one row
# The bug history's list and its walk of the commits that are not bugs: recorded data, rendered.
HISTORY_PAGE = ROOT / "docs" / "history.md"
HISTORY_BUGS = ROOT / "docs" / "data" / "history_bugs.json"
HISTORY_COMMITS = ROOT / "docs" / "data" / "history_commits.json"
BUGS_BEGIN, BUGS_END = "<!-- bugs:begin -->", "<!-- bugs:end -->"
COUNTS_BEGIN, COUNTS_END = "<!-- counts:begin -->", "<!-- counts:end -->"
COMMITS_BEGIN, COMMITS_END = "<!-- commits:begin -->", "<!-- commits:end -->"
COLUMNS = (
    "implementation",
    "role",
    "wraps",
    "dtypes",
    "mask components",
    "bias",
    "GQA",
    "block sizes searched",
    "rows with no visible key",
    "cases per matrix cell",
    "notes",
)
SHORT_DTYPES = {"float64": "f64", "float32": "f32", "bfloat16": "bf16", "float16": "f16"}


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _masks(impl) -> str:  # noqa: ANN001 - a harness.core.contract.Implementation
    from harness.core.masks import MASK_COMPONENTS

    caps = impl.capabilities
    parts = [", ".join(sorted(caps.mask_components & MASK_COMPONENTS)) or "none"]
    if caps.restrictions:
        parts.append(f"restricted: {', '.join(sorted(caps.restrictions))}")
    extras = [name.replace("_", " ") for name in ("soft_cap", "sinks", "residuals") if getattr(caps, name)]
    if extras:
        parts.append(", ".join(extras))
    return "; ".join(parts)


def row(impl) -> list[str]:  # noqa: ANN001 - a harness.core.contract.Implementation
    """The kernel table's cells for one implementation, from its declarations alone."""
    from harness.core.contract import NEEDS

    caps, conv, about = impl.capabilities, impl.conventions, impl.about
    name = f"`{impl.name}`" + (f" (only with {NEEDS[about.needs]})" if about.needs else "")
    role = impl.role + ("" if caps.grads else ", forward only")
    role += f", q_len {'/'.join(map(str, caps.q_lens))}" if caps.q_lens else ""
    dtypes = ", ".join(SHORT_DTYPES.get(d, d) for d in caps.dtypes)
    dtypes += f"; K/V also as {', '.join(caps.kv_formats)}" if caps.kv_formats else ""
    bias = conv.bias + ("" if caps.dbias else "; no dbias") if "bias" in caps.mask_components else "none"
    cases = str(about.cases) if impl.role == "kernel" else "-"
    wraps = f"{about.summary} (`{about.source}`)"
    cells = [name, role, wraps, dtypes, _masks(impl), bias, conv.gqa, about.blocks, conv.empty_rows, cases, about.notes]
    return [_cell(c) for c in cells]


def kernel_table(impls: Iterable) -> str:
    """The markdown table of `impls`: kernels first, then oracles, each by name."""
    ordered = sorted(impls, key=lambda i: (i.role != "kernel", i.name))
    lines = ["| " + " | ".join(COLUMNS) + " |", "|" + "---|" * len(COLUMNS)]
    lines += ["| " + " | ".join(row(impl)) + " |" for impl in ordered]
    return "\n".join(lines)


def _source(r) -> str:  # noqa: ANN001 - a harness.core.contract.Restriction
    if r.upstream:
        return f"upstream `{r.upstream}`: `{r.check}`"
    if r.probe:
        return f"probed: `{r.probe}`"
    return f"finding `{r.finding}`" if r.finding else f"choice: {r.choice}"


def restriction_table(impls: Iterable) -> str:
    """Every restriction of every kernel in `impls` with its source, kernels by name."""
    lines = ["| kernel | restricts | rule | source |", "|---|---|---|---|"]
    for impl in sorted((i for i in impls if i.role == "kernel"), key=lambda i: i.name):
        for r in impl.about.restrictions:
            lines.append("| " + " | ".join(_cell(c) for c in (f"`{impl.name}`", r.on, r.rule, _source(r))) + " |")
    return "\n".join(lines)


def _default(value: object) -> str:
    """An option's default as the page shows it: "" where there is none to show (None, off, empty); a path
    relative to the checkout or the home directory, so that the page reads the same on every machine."""
    if value is None or value is False or value == [] or value == argparse.SUPPRESS:
        return ""
    text = str(value)
    if isinstance(value, Path) and value.is_absolute():
        text = str(value.relative_to(ROOT)) if value.is_relative_to(ROOT) else text
    return f"`{_portable(text)}`"


def _portable(text: str) -> str:
    """`text` as it reads on a machine with the defaults: a $XDG_CACHE_HOME that is set as ~/.cache (the CLI's
    cache folders follow it), then the home directory as ~."""
    cache = os.environ.get("XDG_CACHE_HOME", "").rstrip("/")
    if cache:
        text = text.replace(cache, str(Path.home() / ".cache"))
    return text.replace(str(Path.home()), "~")


def cli_reference(parser: argparse.ArgumentParser) -> str:
    """Every subcommand of `parser` (harness.cli.build_parser): its purpose, its usage, and a table of every
    argument with its value, default and help, each read from the parser."""
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    out = []
    for name, command in sorted(sub.choices.items()):
        fmt = argparse.HelpFormatter(command.prog, width=100)
        fmt.add_usage(command.usage, command._actions, command._mutually_exclusive_groups, prefix="")
        usage = _portable(fmt.format_help().strip())
        out += [f"### {name}", "", _cell(command.description or ""), "", "```text", usage, "```", ""]
        out += ["| argument | value | default | what it does |", "|---|---|---|---|"]
        for action in command._actions:
            if isinstance(action, argparse._HelpAction):
                continue
            names = ", ".join(f"`{o}`" for o in action.option_strings) or f"`{action.metavar or action.dest}`"
            takes = action.nargs != 0 and not isinstance(action, argparse._CountAction)
            value = f"`{action.metavar or action.dest.upper()}`" if takes and action.option_strings else ""
            if action.choices is not None:
                value = " \\| ".join(f"`{c}`" for c in action.choices)
            value += " (repeatable)" if isinstance(action, (argparse._AppendAction, argparse._CountAction)) else ""
            value += " (required)" if action.required and action.option_strings else ""
            said = _portable(_cell(fmt._expand_help(action) if action.help else ""))
            out.append(f"| {names} | {value} | {_default(action.default)} | {said} |")
        out.append("")
    return "\n".join(out).rstrip()


def history_bugs(doc: dict) -> str:
    """The bug list of docs/data/history_bugs.json: a count per kernel, then one table row per bug."""
    rows, columns = doc["rows"], doc["columns"]
    counts: dict[str, int] = {}
    for r in rows:
        counts[r["kernel"]] = counts.get(r["kernel"], 0) + 1
    said = ", ".join(f"{kernel} {n}" for kernel, n in counts.items())
    lines = [f"{len(rows)} bugs: {said}.", "", "| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    lines += ["| " + " | ".join(r[c] for c in columns) + " |" for r in rows]
    return "\n".join(lines)


def history_commits(doc: dict) -> str:
    """The commits of docs/data/history_commits.json that are not bugs: a list per path, with its counts."""
    out = []
    for group in doc["groups"]:
        listed = len(group["commits"])
        touching = group["commits_touching"]
        counts = f": {touching} commits, {listed} listed here" if touching is not None else ""
        out += [f"### {group['title']}{counts}", ""]
        out += [f"- `{c['sha']}` ({c['release']}) {c['subject']}" for c in group["commits"]]
        out.append("")
    return "\n".join(out).rstrip()


def benchmark_results(folder: Path) -> str:
    """Every recorded benchmark run of `folder` that compares sides: its command, then a row per side with
    the figures it recorded (cases, CPU and wall seconds, cases per CPU-minute, exit status)."""
    out = []
    for path in sorted(folder.glob("*.json")):
        doc = json.loads(path.read_text())
        if not isinstance(doc, dict) or not isinstance(doc.get("sides"), dict) or "command" not in doc:
            continue
        cpus = f" on {doc['cpus']} CPUs" if doc.get("cpus") else ""
        out += [f"`benchmarks/results/{path.name}`{cpus}: `{doc['command']}`", ""]
        out += ["| side | " + " | ".join(RESULT_COLUMNS.values()) + " | exit |"]
        out += ["|---|" + "---|" * len(RESULT_COLUMNS) + "---|"]
        for side, figures in doc["sides"].items():
            cells = [_figure(figures.get(key)) for key in RESULT_COLUMNS]
            out.append(f"| {side} | " + " | ".join(cells) + f" | {figures.get('exit_code', '')} |")
        out.append("")
    return "\n".join(out).rstrip()


def _figure(x: object) -> str:
    if isinstance(x, bool) or not isinstance(x, (int, float)):
        return ""
    return str(x) if isinstance(x, int) else f"{x:.1f}"


class MarkersMissing(ValueError):
    """A page without the markers its generated part goes between."""


def replace_between(text: str, body: str, *, begin: str = BEGIN, end: str = END) -> str:
    """`text` with what lies between `begin` and `end` replaced by `body` (on lines of its own)."""
    if text.count(begin) != 1 or text.count(end) != 1 or text.index(begin) > text.index(end):
        raise MarkersMissing(f"expected one {begin!r} before one {end!r}")
    head, rest = text.split(begin, 1)
    _, tail = rest.split(end, 1)
    return f"{head}{begin}\n{body}\n{end}{tail}"


# What harness.core.contract records for an adapter whose upstream module the installed jax lacks.
LACKS = "this jax release lacks it"


def carried_rows(text: str, names: Iterable[str]) -> list[str]:
    """The table rows of `text` (a generated table) whose first cell names one of `names`: a kernel the installed
    release lacks keeps the rows generated where it loads (pallas_gpu: every jax up to 0.12.0.1)."""
    wanted = {f"`{n}`" for n in names}
    return [ln for ln in text.splitlines() if ln.startswith("| ") and ln[2:].split(" ", 1)[0] in wanted]


def _row_key(row: str) -> tuple[bool, str]:
    """Where a row sits in its table: kernels before oracles, then by name (the first cell, backticks off)."""
    cells = [c.strip() for c in row.split("|")]
    return cells[2].startswith("oracle"), cells[1].split(" ", 1)[0].strip("`")


def _with_carried(table: str, old: str, names: list[str]) -> str:
    """`table` with the rows of `names` from the page's `old` table put where they belong, in their own order."""
    lines = table.splitlines()
    head, rows = lines[:2], lines[2:]
    for row in carried_rows(old, names):
        at = next((i for i, r in enumerate(rows) if _row_key(r) > _row_key(row)), len(rows))
        rows.insert(at, row)
    return "\n".join(head + rows)


def _between(text: str, begin: str, end: str) -> str:
    return text.split(begin, 1)[1].split(end, 1)[0] if begin in text and end in text else ""


def parts(lacking: Iterable[str] = ()) -> dict[Path, str]:
    """Every generated page as it should read now: path -> text. `lacking`: the kernel modules the installed
    release lacks, whose rows are carried from the page as it is."""
    from harness.cli import build_parser
    from harness.core import contract

    impls = contract.defined().values()
    names = [m.rpartition(".")[2] for m in lacking]
    page = KERNELS_PAGE.read_text()
    table = _with_carried(kernel_table(impls), _between(page, BEGIN, END), names)
    restrictions = _with_carried(restriction_table(impls), _between(page, RESTRICTIONS_BEGIN, RESTRICTIONS_END), names)
    kernels = [(table, BEGIN, END), (restrictions, RESTRICTIONS_BEGIN, RESTRICTIONS_END)]
    return {
        KERNELS_PAGE: _filled(KERNELS_PAGE, kernels),
        CLI_PAGE: _filled(CLI_PAGE, [(cli_reference(build_parser()), CLI_BEGIN, CLI_END)]),
        HISTORY_PAGE: history_page(),
        PERFORMANCE_PAGE: _filled(
            PERFORMANCE_PAGE,
            [
                (benchmark_results(RESULTS), RESULTS_BEGIN, RESULTS_END),
                (run_phases(RUN_PHASES), RUN_PHASES_BEGIN, RUN_PHASES_END),
            ],
        ),
        FOUND_PAGE: _filled(FOUND_PAGE, [(finding_counts(), COUNTS_BEGIN, COUNTS_END)]),
        README: _filled(README, [(torch_cost(TORCH_COST), TORCH_COST_BEGIN, TORCH_COST_END)]),
        TESTS_PAGE: _filled(TESTS_PAGE, [(suite_time(SUITE_TIME), SUITE_TIME_BEGIN, SUITE_TIME_END)]),
    }


def suite_time(path: Path) -> str:
    """docs/tests.md's tables of where the default suite's time goes (benchmarks/suite_time.py's record)."""
    r = json.loads(path.read_text())
    # The record names its host (cores, load before and after) and commit; the page shows the figures.
    lines = [
        "| tests | failed | wall (s) | CPU (s) | Python | command |",
        "|---|---|---|---|---|---|",
        f"| {r['tests']} | {r['failed']} | {r['wall_seconds']:.0f} | {r['cpu_seconds']:.0f}"
        f" | {r['host']['python']} | `{shlex.join(r['command'])}` |",
        "",
        "| module | tests | seconds (summed over its tests) | share |",
        "|---|---|---|---|",
    ]
    modules = list(r["modules"].items())
    total = r["test_seconds"] or 1.0
    for name, m in modules[:SUITE_TIME_MODULES]:
        lines.append(f"| `{name}` | {m['tests']} | {m['seconds']:.0f} | {m['seconds'] / total:.0%} |")
    rest = modules[SUITE_TIME_MODULES:]
    rest_s, rest_n = sum(m["seconds"] for _, m in rest), sum(m["tests"] for _, m in rest)
    lines.append(f"| {len(rest)} other modules | {rest_n} | {rest_s:.0f} | {rest_s / total:.0%} |")
    lines += ["", "| slowest tests | seconds |", "|---|---|"]
    lines += [f"| `{t['module']}::{t['test']}` | {t['seconds']:.0f} |" for t in r["durations"][:SUITE_TIME_SLOWEST]]
    return "\n".join(lines)


def _compile_floor(goal: dict) -> list[str]:
    """The sentence on the compile floor, where the record has a cold and a warm run (benchmarks/run_phases.py)."""
    floor, warm = goal.get("compile_floor_cpu_s"), goal.get("warm_cpu_s")
    if floor is None or not warm:
        return []
    return [
        "",
        f"The compile floor: the cold run's compile phases cost {floor:.1f} CPU s more than the warm run's (XLA "
        f"compiling programs the persistent cache had not seen), so no run on empty caches costs less than "
        f"{warm + floor:.1f} CPU s (x{(warm + floor) / warm:.2f} warm); "
        f"the cold run cost x{goal['cold_over_floor']:.2f} that floor.",
    ]


def run_phases(path: Path) -> str:
    """docs/performance.md's tables of a 60-case run's CPU by phase, per run (benchmarks/run_phases.py's record)."""
    r = json.loads(path.read_text())
    runs, host, goal = r["runs"], r["host"], r["goal"]
    lines = [
        # The record names its host, commit and time; the page the command and the versions it ran on.
        f"`{shlex.join(r['command'])}` on Python {host['python']}, "
        f"jax {r['versions']['jax']}, torch {r['versions']['torch']}.",
        "",
        "| run | exit | cases | programs | CPU s | wall s | worker compile requests | served by the cache | verdicts |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for name, run in runs.items():
        c = run["compiles"]
        verdicts = ", ".join(f"{k} {v}" for k, v in run["verdicts"].items())
        lines.append(
            f"| {name} | {run['exit_code']} | {run['cases']} | {run['programs']} | {run['cpu_s']:.1f}"
            f" | {run['wall_s']:.0f} | {c.get('workers_compile_requests', 0)} | {c.get('workers_cache_hits', 0)}"
            f" | {verdicts} |"
        )
    ratio, failing = goal["cold_over_warm"], goal.get("failing_over_warm")
    lines += [
        "",
        f"Goal: at least 40 programs ({goal['programs']}), at most 110 CPU s warm ({_figure(goal['warm_cpu_s'])}), "
        f"cold at most 1.3x warm ({'x' + format(ratio, '.2f') if ratio else 'not run'}), "
        f"a failing run at most 2x warm ({'x' + format(failing, '.2f') if failing else 'not run'}). "
        f"Every run came to the same verdicts: {'yes' if goal.get('same_verdicts') else 'no'}.",
        *_compile_floor(goal),
        "",
        "| where: phase | " + " | ".join(f"{name} CPU s" for name in runs) + " |",
        "|---|" + "---|" * len(runs),
    ]
    names = sorted({k for run in runs.values() for k in run["phases"]})
    cpu = {k: [run["phases"].get(k, {}).get("cpu_s", 0.0) for run in runs.values()] for k in names}
    shown = sorted((k for k in names if max(cpu[k]) >= RUN_PHASES_SHOWN), key=lambda k: -max(cpu[k]))
    rest = [sum(cpu[k][i] for k in names if k not in shown) for i in range(len(runs))]
    lines += [f"| {k} | {_cells(cpu[k])} |" for k in shown]
    lines.append(f"| {len(names) - len(shown)} smaller phases | {_cells(rest)} |")
    unwritten = [run["cpu_s"] - run["phased_cpu_s"] for run in runs.values()]
    lines.append("| after the phases: process exits, processes that wrote none | " + _cells(unwritten) + " |")
    steps = ("trace", "lower", "backend", "cache read")
    lines += ["", "| run: compile steps, wall s | " + " | ".join(steps) + " |", "|---|" + "---|" * len(steps)]
    for name, run in runs.items():
        for where in ("run", "workers"):
            got = [run["compiles"].get(f"{where}_wall_s_{step}", 0.0) for step in steps]
            lines.append(f"| {name}: {where} | {_cells(got)} |")
    return "\n".join(lines)


def _cells(figures: list[float]) -> str:
    return " | ".join(f"{x:.1f}" for x in figures)


def torch_cost(path: Path) -> str:
    """The README's table of what the default's torch costs a fresh machine (benchmarks/torch_cost.py's record)."""
    r = json.loads(path.read_text())
    gib = lambda n: f"{n / 2**30:.1f} GiB"  # noqa: E731
    lines = [
        "| torch | Python | packages | to download | installed | of it torch and CUDA | install (s) |",
        "|---|---|---|---|---|---|---|",
        f"| `{r['torch']}` | {r['python']} | {r['packages']} | {gib(r['download_bytes'])} | {gib(r['installed_bytes'])}"
        f" | {gib(r['torch_and_cuda_bytes'])} | {r['install_seconds']:.0f} |",
    ]
    return "\n".join(lines)


def finding_counts() -> str:
    """The catalogue in numbers (docs/found.md): notes by kind, the fixes the harness proves, and the
    releases each note records as measured, so that no count in the docs is typed by hand."""
    from harness import findings

    notes = findings.catalogue()
    kinds = collections.Counter(f.kind for f in notes)
    proved = [f for f in notes if f.fix is not None and f.fix.fixed]
    upstream = [f for f in notes if f.fix is not None and f.fix.upstream]
    by_kind = ", ".join(f"{kinds[k]} {k}{'s' if kinds[k] != 1 else ''}" for k in findings.KINDS if kinds[k])
    lines = [
        f"{len(notes)} notes ({by_kind}); {len(proved)} with a fix the harness proves "
        f"(`nox -s findings`), {len(upstream)} fixed upstream.",
        "",
        "| finding | kind | releases measured | fix |",
        "| --- | --- | --- | --- |",
    ]
    for f in notes:
        where = f"{f.note.parent.name}/{f.note.name}"  # docs/findings/ or docs/divergences/, from found.md
        measured = ", ".join(f"{r}: {state}" for r, state in f.releases.items()) or "none"
        fix = "proved" if f in proved else ("upstream" if f in upstream else "")
        lines.append(f"| [{f.name}]({where}) | {f.kind} | {measured} | {fix} |")
    return "\n".join(lines)


def history_page() -> str:
    """docs/history.md with its list and its commits rendered from their recorded files."""
    bugs = json.loads(HISTORY_BUGS.read_text())
    commits = json.loads(HISTORY_COMMITS.read_text())
    bodies = [(history_bugs(bugs), BUGS_BEGIN, BUGS_END), (history_commits(commits), COMMITS_BEGIN, COMMITS_END)]
    return _filled(HISTORY_PAGE, bodies)


def _filled(page: Path, bodies: list[tuple[str, str, str]]) -> str:
    """`page` with each (body, begin, end) put between its markers; MarkersMissing naming the page."""
    text = page.read_text()
    try:
        for body, begin, end in bodies:
            text = replace_between(text, body, begin=begin, end=end)
    except MarkersMissing as e:
        raise MarkersMissing(f"{page.relative_to(ROOT)}: {e}") from None
    return text


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m docs.generate", description=__doc__.splitlines()[0])
    p.add_argument("--check", action="store_true", help="write nothing; exit 1 naming each stale part")
    args = p.parse_args(argv)
    sys.path.insert(0, str(ROOT))  # this checkout's harness and kernels
    from harness.core import contract
    from harness.core.exit_codes import EXIT_CANNOT_RUN, EXIT_USAGE

    missing = contract.unavailable()
    lacking = [m for m, why in missing.items() if why.startswith(LACKS)]
    if set(missing) - set(lacking):
        # A framework is not installed: its kernels' rows would be lost, not carried from another release.
        print(f"cannot generate the kernel table here: {missing}", file=sys.stderr)
        return EXIT_CANNOT_RUN
    try:
        wanted = parts(lacking)
    except MarkersMissing as e:
        print(e, file=sys.stderr)
        return EXIT_USAGE
    stale = [path for path, text in wanted.items() if path.read_text() != text]
    for path in stale:
        rel = path.relative_to(ROOT)
        if args.check:
            print(f"{rel}: its generated tables are stale; run `python -m docs.generate`", file=sys.stderr)
        else:
            path.write_text(wanted[path])
            print(f"wrote {rel}")
    return 1 if args.check and stale else 0


if __name__ == "__main__":
    sys.exit(main())
