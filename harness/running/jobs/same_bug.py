"""One bug found by several shards of a `run --jobs`, filed once: the others' files move to failures/same-bug/."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

from harness.running import signatures
from harness.running.jobs.stores import case_records, read, shard_index
from harness.store.bug import Found
from harness.store.failures import FailureRecord
from harness.store.files import atomic_write_json
from harness.store.records import CaseRecord, RunRecord
from harness.store.schema import RecordError

# Where the parent of a `run --jobs` moves a shard's failure file whose bug another shard's failure
# explains (same_bugs): kept, beside the bug's own file, which lists it.
SAME_BUG_DIR = "same-bug"


@dataclasses.dataclass(frozen=True, kw_only=True)
class _Reported:
    """One failure a worker reported: its file, signature, and the records (kernel and oracles) naming it."""

    shard: int
    order: int  # the worker's "n of m"
    kernel: str
    path: Path
    signature: signatures.Signature
    shrunk: bool
    reduced: bool  # its features are its trigger (search info "trigger"): one trigger, one bug
    records: tuple[Path, ...]
    finding: str | None = None  # the known finding it was named as (harness.running.known): one finding, one bug


@dataclasses.dataclass(frozen=True, kw_only=True)
class SameBug:
    """A failure one shard reported that another shard's failure explains: one bug, reported once."""

    kernel: str
    kept: Path  # the bug's failure file
    moved: Path | None  # where the other file is now (failures/same-bug/); None: both shrank to one case, one file
    signature: str

    def line(self) -> str:
        where = f"{self.moved} is" if self.moved is not None else "two shards' failures are"
        return f"{self.kernel}: {where} the same bug as {self.kept} ({self.signature})"


def _reported(store: Path, runs: list[RunRecord]) -> list[_Reported]:
    """Every failure the workers reported with a signature, in shard order, then in the order each found them."""
    out = []
    for run in runs:
        named: dict[Path, list[Path]] = {}
        for path, rec in case_records(store, run.run_id):
            if rec.shrunk and rec.failure_file:
                named.setdefault(_located(store, rec.failure_file), []).append(path)
        for file, paths in named.items():
            doc = read(file, FailureRecord.from_json)
            try:
                found = Found.of(doc) if doc is not None else None
            except RecordError:
                continue  # its search info unreadable: never merged
            if doc is None or found is None or found.signature_parts is None:
                continue  # unreadable, written by another command, or from before signatures were written
            try:
                sig = signatures.Signature.from_json(found.signature_parts)
            except (ValueError, KeyError, TypeError):
                continue  # a signature this harness cannot read: never merged
            out.append(
                _Reported(
                    shard=shard_index(run),
                    order=found.order,
                    kernel=doc.kernel,
                    path=file,
                    signature=sig,
                    shrunk=found.shrunk is not False,
                    reduced=found.trigger is not None,
                    records=tuple(paths),
                    finding=found.finding,
                )
            )
    return sorted(out, key=lambda r: (r.shard, r.order))


def _located(store: Path, recorded: str) -> Path:
    path = Path(recorded)
    return path if path.exists() else store / "failures" / path.name


def _explains(known: _Reported, other: _Reported) -> bool:
    if known.kernel != other.kernel:
        return False
    if known.finding is not None or other.finding is not None:
        # Named as one finding (its proven fix passes both cases): one bug, whatever the shards shrank to. Named
        # as another, or not named (the fix leaves it failing): another bug, whatever the features say.
        return known.finding == other.finding
    return signatures.subsumes(known.signature, other.signature, anywhere=not known.shrunk, trigger=known.reduced)


def _replaces(other: _Reported, known: _Reported) -> bool:
    """Whether `other`, one bug with `known`, is the better file of it: one finding's, reduced to its trigger where
    `known` is not (a shard whose shrink budget ran out before the trigger search)."""
    return other.finding is not None and other.finding == known.finding and other.reduced and not known.reduced


def same_bugs(store: Path, runs: list[RunRecord]) -> list[SameBug]:
    """The failures of a `run --jobs`'s workers that another worker's failure explains (as one search
    explains its own, harness.running.distinct): each bug keeps one failure file, the most general
    (fewest features) one (of failures named as one known finding, one reduced to its trigger), and lists the
    others under search.also_found; each other file moves to
    failures/same-bug/ (search.same_bug_as names the kept one) and its records name the kept file,
    so that the summary, the report and the gate count the bug once. Nothing is deleted."""
    reported = _reported(store, runs)
    kept: list[int] = []
    into: dict[int, int] = {}  # a reported failure (its index) -> the one that explains it
    for i, r in enumerate(reported):
        known = next((k for k in kept if _explains(reported[k], r)), None)
        if known is not None and not _replaces(r, reported[known]):
            into[i] = known
            continue
        gone = [k for k in kept if r.shrunk and _explains(r, reported[k])]
        kept = [k for k in kept if k not in gone] + [i]
        into |= {k: i for k in gone}
    out = []
    for i in sorted(into):
        final = into[i]
        while final in into:  # explained by one that a more general failure replaced since
            final = into[final]
        out.append(_merge(reported[i], reported[final]))
    return out


def nested(store: Path, runs: list[RunRecord]) -> list[str]:
    """Failures of two shards kept as two bugs where one's trigger nests in the other's (signatures.nests: one
    holds the other's, failing another way; or in the case of a failure not reduced to its trigger, its shrink
    budget spent): said, not merged. Read after same_bugs."""
    kept = _reported(store, runs)
    return [
        f"{outer.kernel}: the {'trigger' if outer.reduced else 'case'} of {outer.path} "
        f"{'holds that' if outer.reduced else 'has the trigger'} of {inner.path} ({inner.signature})"
        for outer in kept
        for inner in kept
        if inner.reduced and inner.shard != outer.shard and inner.path != outer.path and inner.kernel == outer.kernel
        if signatures.nests(inner.signature, outer.signature)
    ]


def file_as_same_bug(dup: Path, kept: Path, also: dict[str, Any]) -> Path:
    """Move failure file `dup` to failures/same-bug/ beside `kept`, the file of the bug it is one of: the
    moved file's search.same_bug_as names the kept one, whose search.also_found lists `also` (where the
    other file is now, and why it is the same bug). Nothing is deleted. The moved file's path."""
    moved = kept.parent / SAME_BUG_DIR / dup.name
    moved.parent.mkdir(parents=True, exist_ok=True)
    doc = FailureRecord.from_json(json.loads(dup.read_text()), str(dup))
    said = dataclasses.replace(Found.of(doc) or Found(), same_bug_as=kept.name)
    atomic_write_json(moved, dataclasses.replace(doc, search=said.to_json()).to_json())
    dup.unlink()
    bug = FailureRecord.from_json(json.loads(kept.read_text()), str(kept))
    found = Found.of(bug) or Found()
    found = dataclasses.replace(found, also_found=(*found.also_found, also))
    atomic_write_json(kept, dataclasses.replace(bug, search=found.to_json()).to_json())
    return moved


def _merge(dup: _Reported, bug: _Reported) -> SameBug:
    """Move `dup`'s file beside `bug`'s, noted in both, and point `dup`'s records at `bug`'s file."""
    if dup.path == bug.path:  # both shards shrank to the same case: one file already
        return SameBug(kernel=bug.kernel, kept=bug.path, moved=None, signature=str(bug.signature))
    moved = bug.path.parent / SAME_BUG_DIR / dup.path.name
    if dup.path.exists():  # else another shard's records named it too, and it moved with theirs
        also = {"file": f"{SAME_BUG_DIR}/{dup.path.name}", "shard": dup.shard, "signature": str(dup.signature)}
        file_as_same_bug(dup.path, bug.path, also)
    for path in dup.records:
        rec = CaseRecord.from_json(json.loads(path.read_text()), str(path))
        atomic_write_json(path, dataclasses.replace(rec, failure_file=str(bug.path)).to_json())
    return SameBug(kernel=bug.kernel, kept=bug.path, moved=moved, signature=str(bug.signature))
