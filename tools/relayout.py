"""Move the harness's modules into folders named for their layer, and rewrite every reference.

    python tools/relayout.py           # move, rewrite, print what it did
    python tools/relayout.py --check   # print what it would do; change nothing

The layers are docs/layout.md's and tests/test_layers.py's: core, the store, tooling
(TPU), running, environments, gate, report, CLI. Moves are `git mv`, so history follows the
files; then every text file git tracks (Python, Markdown, TOML, templates) has its references
rewritten: dotted module names (harness.case -> harness.core.case), file paths
(harness/case.py -> harness/core/case.py), and `from harness import a, b` statements, split per
new package. Paths computed from __file__ that depend on a module's depth are adjusted.

Idempotent: a module already moved is skipped, and rewriting an already rewritten tree changes
nothing, so it can be rerun over a tree that merged other branches since. The rewritten Python
files are import-sorted and formatted with ruff; a line that a longer module name pushed past
the line length is printed ("too long now") and the exit status is 1: shorten it by hand.
Needs a clean work tree (commit first); moves are staged, rewrites are left for `git add -A`.
"""

from __future__ import annotations

import argparse
import ast
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# old module (under harness/) -> new package (under harness/). A module moved to the package of
# its own name becomes that package's __init__ (harness/gate.py -> harness/gate/__init__.py).
MOVES: dict[str, str] = {
    **dict.fromkeys(
        (
            "errors exit_codes case masks paging inputs compare magnitudes locate strips contract compat "
            "placement jaxvjp torchvjp reference extended coverage shapes strategies profiles features smoke"
        ).split(),
        "core",
    ),
    **dict.fromkeys("native bench compile crosscheck".split(), "tpu"),
    **dict.fromkeys("execute runner worker search failures leak shards".split(), "running"),
    **dict.fromkeys("envs matrix upgrade bisect".split(), "environments"),
    **dict.fromkeys("gate drift thresholds stats".split(), "gate"),
    **dict.fromkeys("cli console commands".split(), "cli"),
}
# Data files that move with a module.
DATA = {"gate_thresholds.toml": "gate"}
PACKAGE_DOC = {
    "core": "The core: the case model, inputs, comparison, the contract and registry, the reference computation.",
    "tpu": "Tooling around the accelerator: native timing, benchmarks, ahead-of-time TPU compiles, cross-checks.",
    "running": "Running implementations on cases: one execution, the runner, the worker, the search, failure files.",
    "environments": "Other library versions: building environments, the version matrix, upgrade and bisect.",
}
TEXT_SUFFIXES = {".py", ".md", ".toml", ".j2", ".txt", ".cfg", ".ini", ".yml", ".yaml"}
# Paths computed from __file__ whose depth changes with the move: (file after the move, old, new).
DEPTH_FIXES = [
    ("harness/running/worker.py", "Path(__file__).resolve().parent.parent", "Path(__file__).resolve().parents[2]"),
    ("harness/cli/commands/bench.py", "Path(__file__).resolve().parents[2]", "Path(__file__).resolve().parents[3]"),
    ("harness/cli/commands/bisect.py", "Path(__file__).resolve().parents[2]", "Path(__file__).resolve().parents[3]"),
]
# The noxfile loads stdlib-only modules by path, before the harness's dependencies are installed.
NOXFILE_LOADER = (
    'spec = importlib.util.spec_from_file_location(f"_harness_{name}", ROOT / "harness" / f"{name}.py")',
    'spec = importlib.util.spec_from_file_location(f"_harness_{Path(name).name}", ROOT / "harness" / f"{name}.py")',
)


def git(*args: str) -> str:
    return subprocess.run(["git", *args], cwd=ROOT, check=True, capture_output=True, text=True).stdout


def old_path(module: str) -> Path:
    return Path("harness") / (module if module == "commands" else f"{module}.py")


def new_path(module: str) -> Path:
    package = Path("harness") / MOVES[module]
    if module == "commands":
        return package / "commands"
    return package / "__init__.py" if module == MOVES[module] else package / f"{module}.py"


def new_name(module: str) -> str:
    return f"harness.{MOVES[module]}" + ("" if module == MOVES[module] else f".{module}")


def move(check: bool) -> list[str]:
    done = []
    for package, doc in PACKAGE_DOC.items():
        init = ROOT / "harness" / package / "__init__.py"
        if not init.exists():
            done.append(f"create {init.relative_to(ROOT)}")
            if not check:
                init.parent.mkdir(parents=True, exist_ok=True)
                init.write_text(f'"""{doc}"""\n')
                git("add", str(init.relative_to(ROOT)))
    for module in MOVES:
        src, dst = old_path(module), new_path(module)
        if not (ROOT / src).exists():
            continue  # moved already
        done.append(f"git mv {src} {dst}")
        if not check:
            (ROOT / dst).parent.mkdir(parents=True, exist_ok=True)
            git("mv", str(src), str(dst))
    for name, package in DATA.items():
        src, dst = Path("harness") / name, Path("harness") / package / name
        if (ROOT / src).exists():
            done.append(f"git mv {src} {dst}")
            if not check:
                git("mv", str(src), str(dst))
    return done


def _dotted(text: str) -> str:
    for module in sorted(MOVES, key=len, reverse=True):
        if module == MOVES[module]:
            continue  # harness.gate and harness.cli keep their names (now packages)
        text = re.sub(rf"\bharness\.{module}\b", new_name(module), text)
        # `from harness import NAME` in strings and prose (code is rewritten from its syntax tree first).
        text = re.sub(
            rf"\bfrom harness import {module}\b(?![ \t]*,)", f"from harness.{MOVES[module]} import {module}", text
        )
    return text


def _paths(text: str) -> str:
    for module in MOVES:
        old = old_path(module).as_posix()
        new = new_path(module).as_posix()
        if module == "commands":
            text = re.sub(rf"(?<![\w/]){re.escape(old)}/", new + "/", text)
        else:
            text = re.sub(rf"(?<![\w/]){re.escape(old)}\b", new, text)
    for name, package in DATA.items():
        text = re.sub(rf"(?<![\w/])harness/{re.escape(name)}", f"harness/{package}/{name}", text)
    return text


def _from_harness_imports(text: str) -> str:
    """`from harness import a, b as c` -> one statement per new package, in the same place."""
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return text
    lines = text.splitlines(keepends=True)
    edits = []
    for node in ast.walk(tree):
        if not (isinstance(node, ast.ImportFrom) and node.module == "harness" and node.level == 0):
            continue
        groups: dict[str, list[str]] = {}
        for alias in node.names:
            name = alias.name
            target = "harness"
            if name in MOVES and MOVES[name] != name:
                target = f"harness.{MOVES[name]}"
            groups.setdefault(target, []).append(name + (f" as {alias.asname}" if alias.asname else ""))
        if list(groups) == ["harness"]:
            continue
        edits.append((node.lineno, node.end_lineno, groups))
    for start, end, groups in sorted(edits, key=lambda e: e[0], reverse=True):
        first, last = lines[start - 1], lines[end - 1]
        indent = first[: len(first) - len(first.lstrip())]
        # A trailing comment (a noqa) applies to each statement the one is split into.
        comment = "  " + last[last.index("#") :].rstrip("\n") if "#" in last else ""
        statements = [f"{indent}from {pkg} import {', '.join(names)}{comment}\n" for pkg, names in groups.items()]
        lines[start - 1 : end] = statements
    return "".join(lines)


def rewrite(text: str, suffix: str) -> str:
    if suffix == ".py":
        text = _from_harness_imports(text)
    return _paths(_dotted(text))


def rewrite_tree(check: bool) -> list[str]:
    changed = []
    for rel in git("ls-files").splitlines():
        path = ROOT / rel
        if path.suffix not in TEXT_SUFFIXES or not path.is_file() or rel.startswith("tests/fixtures/store_"):
            continue
        if path == Path(__file__).resolve():
            continue  # its own table names the old modules
        text = path.read_text()
        new = rewrite(text, path.suffix)
        if rel == "noxfile.py":
            new = new.replace(*NOXFILE_LOADER)
            for module in ("matrix", "compat", "exit_codes"):
                new = new.replace(f'_load("{module}")', f'_load("{MOVES[module]}/{module}")')
        for where, old, fixed in DEPTH_FIXES:
            if rel == where:
                new = new.replace(old, fixed)
        if new != text:
            changed.append(f"rewrite {rel}")
            if not check:
                path.write_text(new)
    return changed


def tidy(paths: list[str]) -> list[str]:
    """Sort and format the rewritten Python files as the project's ruff does (imports moved
    packages); return the lines a longer module name pushed past the line length (fix by hand)."""
    py = [p for p in paths if p.endswith(".py")]
    if not py:
        return []
    ruff = [sys.executable, "-m", "ruff"]
    for args in (["check", "--select", "I", "--fix", "--quiet"], ["format", "--quiet"]):
        subprocess.run([*ruff, *args, *py], cwd=ROOT, check=True)
    long = subprocess.run(
        [*ruff, "check", "--select", "E501", "--output-format", "concise", *py],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    return [f"too long now, shorten by hand: {line}" for line in long.stdout.splitlines() if ": E501 " in line]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--check", action="store_true", help="print what would change; change nothing")
    args = p.parse_args(argv)
    if git("status", "--porcelain", "--untracked-files=no").strip() and not args.check:
        print("the work tree has uncommitted changes: commit or stash them first", file=sys.stderr)
        return 2
    moved = move(args.check)
    rewritten = rewrite_tree(args.check)
    long = [] if args.check else tidy([line.removeprefix("rewrite ") for line in rewritten])
    done = moved + rewritten + long
    print("\n".join(done) if done else "nothing to do: the layout is already by layer")
    return 1 if long else 0


if __name__ == "__main__":
    sys.exit(main())
