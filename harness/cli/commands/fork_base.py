"""`fork-base KERNEL=MODULE:ATTR`: the fork's upstream base, its drift, and every upstream fix replayed on it.

Reads the fork's module, finds the jax release whose module of that kernel is closest (each release's
source read from its wheel, downloaded once into the cache), prints the fork's own edits against it,
upstream's hunks since (carried, missing or conflicts), and runs the trigger of every bug of
docs/data/history_bugs.json fixed after the base in that kernel on the fork (harness.upstream).
Exit 0 no replayed fix missing, 1 the fork still has a bug upstream fixed, 2 bad input.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from harness.cli import EXIT_FAIL, EXIT_OK
from harness.upstream import Fork, examine, replays, sources, views

NAME = "fork-base"
HELP = (
    "a fork's (KERNEL=MODULE:ATTR) closest upstream jax release, its own edits, upstream's hunks since, and every "
    "upstream fix replayed on it: exit 1 if it still has a bug upstream fixed"
)


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("fork", metavar="KERNEL=MODULE:ATTR", help="the fork, as `run --kernel` names it")
    p.add_argument(
        "--sources",
        type=Path,
        metavar="DIR",
        help="read releases from DIR (RELEASE/jax/...py) and download nothing (default: the cache, "
        "$ATTN_HARNESS_UPSTREAM_SOURCES or ~/.cache/attention-harness/upstream-sources, filled from the wheels "
        "on the package index)",
    )
    p.add_argument("--offline", action="store_true", help="use the cache as it is: download nothing")
    p.add_argument("--hunks", action="store_true", help="print every upstream hunk's text (default: headers only)")
    p.add_argument("--no-replay", action="store_true", help="skip the replays of upstream's fixes")
    p.add_argument(
        "--replay-timeout",
        type=float,
        default=replays.DEFAULT_TIMEOUT_S,
        metavar="S",
        help=f"limit per replay (default {replays.DEFAULT_TIMEOUT_S:g})",
    )


def main(args: argparse.Namespace) -> int:
    fork = Fork.named(args.fork)
    store = args.sources or sources.cache_dir()
    if args.sources is None and not args.offline:
        sources.fetch(store, sources.published())
    found = examine(fork, sources.sources(store, fork.kernel))
    bugs = replays.bugs(fork.kernel)
    print("\n".join(views.base(fork, found)))
    print("\n".join(views.hunks(found, bugs, text=args.hunks)))
    if args.no_replay:
        return EXIT_OK
    after = replays.fixed_after(fork.kernel, found.base.release)
    done = [replays.replay(bug, fork.spec, timeout_s=args.replay_timeout) for bug in after]
    print("\n".join(views.replays(fork.kernel, found.base.release, done)))
    print(views.verdict(done))
    return EXIT_FAIL if any(r.verdict is replays.Verdict.STILL for r in done) else EXIT_OK
