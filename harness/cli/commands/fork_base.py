"""`fork-base KERNEL=MODULE:ATTR`: the fork's upstream base, its drift, and every upstream fix replayed on it.

Reads the fork's module, finds the jax release whose module of that kernel is closest (each release's
source read from its wheel, downloaded once into the cache), prints the fork's own edits against it,
upstream's hunks since (carried, missing or conflicts), and runs the trigger of every bug of
docs/data/history_bugs.json fixed after the base in that kernel on the fork (harness.upstream).
The same, as one JSON record (harness.upstream.record), is written to STORE/forks/ for the report and,
with --json, printed instead of the text.
Exit 0 no replayed fix missing, 1 the fork still has a bug upstream fixed, 2 bad input.
"""

from __future__ import annotations

import argparse
import functools
import json
import sys
from pathlib import Path

from harness.cli.commands._shared import add_out
from harness.upstream import Fork, examine, record, replays, sources, views

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
    p.add_argument(
        "--json", action="store_true", help="print the record (base, drift, hunks, per-bug verdicts) as JSON, not text"
    )
    add_out(p, what="results store the record is written to, as STORE/forks/<fork>.json")


def main(args: argparse.Namespace) -> int:
    # With --json, stdout holds the record alone: every other line goes to stderr.
    say = functools.partial(print, file=sys.stderr if args.json else sys.stdout)
    fork = Fork.named(args.fork)
    store = args.sources or sources.cache_dir()
    if args.sources is None and not args.offline:
        sources.fetch(store, sources.published(), say=say)
    found = examine(fork, sources.sources(store, fork.kernel))
    bugs = replays.bugs(fork.kernel)
    if not args.json:
        say("\n".join(views.base(fork, found)))
        say("\n".join(views.hunks(found, bugs, text=args.hunks)))
    after = replays.fixed_after(fork.kernel, found.base.release)
    if args.no_replay:
        done = record.not_replayed(after)
    else:
        done = [replays.replay(bug, fork.spec, timeout_s=args.replay_timeout) for bug in after]
        if not args.json:
            say("\n".join(views.replays(fork.kernel, found.base.release, done)))
    last = views.verdict(done, replayed=not args.no_replay)
    made = record.of(fork, found, bugs, done, replayed=not args.no_replay, verdict=last)
    written = record.write(made, args.out)
    if args.json:
        print(json.dumps(made.to_json(), indent=1))
    elif not args.no_replay:
        say(last)
    say(f"record -> {written}")
    return made.code
