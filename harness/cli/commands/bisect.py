"""`bisect FILE --package P --good A --bad B`: the release between A and B where a failure file's verdict changes."""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

from harness.cli import EXIT_FAIL, EXIT_OK, UsageError, progress
from harness.environments import bisect, envs, pythons

NAME = "bisect"
HELP = "find the release of a package (jax, torch, libtpu) between --good and --bad where a failure changes verdict"
ROOT = Path(__file__).resolve().parents[3]
DEFAULT_CONSTRAINTS = ROOT / "constraints" / "default.txt"


def add_index_arguments(p: argparse.ArgumentParser) -> None:
    """Where packages come from (shared with `upgrade`); any of them replaces pip's configuration."""
    g = p.add_argument_group("package index (default: pip's configuration, as `pip config list` shows it)")
    g.add_argument("--index-url", metavar="URL", help="base URL of the package index")
    g.add_argument("--extra-index-url", action="append", default=[], metavar="URL", help="another index (repeatable)")
    g.add_argument(
        "--find-links", action="append", default=[], metavar="DIR", help="a directory of wheels (repeatable)"
    )
    g.add_argument("--no-index", action="store_true", help="use only --find-links")
    g.add_argument("--envs", type=Path, metavar="DIR", help=f"environment cache (default {envs.default_cache()})")
    g.add_argument(
        "--constraints",
        type=Path,
        default=DEFAULT_CONSTRAINTS,
        metavar="FILE",
        help="the pins every environment starts from (default constraints/default.txt)",
    )


def add_python_argument(p: argparse.ArgumentParser, *, flag: str = "--python", help: str = "") -> None:
    p.add_argument(
        flag,
        metavar="X.Y|PATH",
        help=help
        or "the interpreter of every environment (default: the first its pins install on: the constraints file's "
        "declared Pythons installed here, newest first, then this interpreter and the others installed)",
    )


def interpreter(value: str, flag: str) -> str:
    """A --python value as an interpreter path: X.Y is looked up among those installed (UsageError if none)."""
    if "/" in value:
        if not Path(value).is_file():
            raise UsageError(f"{flag} {value}: no such interpreter")
        return value
    found = pythons.find(value)
    if not found:
        raise UsageError(f"{flag} {value}: {pythons.missing((value,), what='it')}")
    return found


def python_order(args: argparse.Namespace, constraints: str) -> list[str]:
    """The interpreters to build on, in order: --python alone where given, else pythons.for_constraints."""
    if args.python:
        return [interpreter(args.python, "--python")]
    return pythons.for_constraints(constraints)


def index_options(args: argparse.Namespace) -> envs.IndexOptions:
    if args.index_url or args.extra_index_url or args.find_links or args.no_index:
        return envs.IndexOptions(
            index_url=args.index_url,
            extra_index_urls=tuple(args.extra_index_url),
            find_links=tuple(str(Path(d).resolve()) for d in args.find_links),
            no_index=args.no_index,
        )
    return envs.IndexOptions.from_pip()


def read_constraints(path: Path) -> str:
    try:
        return path.read_text()
    except OSError as e:
        raise UsageError(f"cannot read --constraints {path}: {e.strerror}") from None


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("file", type=Path, metavar="FILE", help="a failure file (replayed with `python -m harness repro`)")
    p.add_argument("--package", required=True, metavar="NAME", help="the package to bisect: jax, torch, libtpu, ...")
    p.add_argument("--good", required=True, metavar="VERSION", help="a release where the replay passes")
    p.add_argument(
        "--bad", required=True, metavar="VERSION", help="a release where it fails (older than --good: a fix)"
    )
    p.add_argument("--timeout", type=float, metavar="S", help="give up on one replay after S seconds (then skipped)")
    add_python_argument(p)
    add_index_arguments(p)


def main(args: argparse.Namespace) -> int:
    if not args.file.is_file():
        raise UsageError(f"FILE {args.file} does not exist; give a failure file written by `run`")
    if args.timeout is not None and args.timeout <= 0:
        raise UsageError(f"--timeout={args.timeout} must be positive")
    constraints = read_constraints(args.constraints)
    index = index_options(args)
    released = envs.available_versions(args.package, index)
    seq = bisect.between(released, args.good, args.bad)
    older = released.index(args.good) < released.index(args.bad)
    direction = "regression" if older else "fix"
    print(f"bisect {args.package}: {len(seq)} releases, {seq[0]} (good) .. {seq[-1]} (bad), a {direction}")

    def env_for(version: str) -> envs.EnvSpec:
        reqs = envs.requirements_with(constraints, {args.package: version})
        label = f"{args.package}=={version}"
        return envs.EnvSpec(python=sys.executable, requirements=reqs, index=index, editable=(str(ROOT),), label=label)

    # At most: the bad end, a halving of the releases between the ends, the good end (more only where some are skipped).
    most = 2 + math.ceil(math.log2(max(len(seq) - 1, 1)))
    with progress.Steps(most, f"bisect {args.package}", unit="replays at most") as bar:
        replay = bisect.replayer(
            env_for,
            bisect.harness_replay(args.file.resolve()),
            root=args.envs,
            timeout=args.timeout,
            log=bar.print,
            pythons=python_order(args, constraints),
        )

        def try_version(version: str) -> bisect.Step:
            bar.note(f"{args.package} {version}")
            step = replay(version)
            bar.done()
            return step

        result = bisect.search(args.package, seq, try_version, direction=direction)
    print(bisect.format_result(result))
    if result.found:
        return EXIT_OK
    if result.first_bad is None and result.steps[0].outcome == bisect.SKIPPED:
        # Nothing to search from: the bad end's environment cannot be built or replayed here.
        raise UsageError(result.problem)
    return EXIT_FAIL
