"""A fork's examination as one JSON record: `fork-base --json` prints it, `fork-base` writes it to
STORE/forks/<fork>.json, and the report's fork section (harness.report.fork) reads it back.

The record has its own schema version (FORK_SCHEMA) and kind ("fork_base"). It sits beside the
store's records/ folder, as failures/ does, so a reader of run records never meets it: one file per
fork, holding the latest examination. `from_json` is strict: a missing or mistyped key raises
RecordError (one line, naming the file and the key).
"""

from __future__ import annotations

import dataclasses
import importlib.metadata
import json
import re
from collections import Counter
from pathlib import Path
from typing import Any, ClassVar, Self

from harness.store.files import atomic_write_json
from harness.store.records import now
from harness.store.schema import RecordError, check_schema
from harness.upstream import Fork, Lineage
from harness.upstream.lineage import State
from harness.upstream.replays import Bug, Replay, Verdict, links

FORK_SCHEMA = 1
KIND = "fork_base"
FOLDER = "forks"  # STORE/forks/<fork>.json
BY_WORD, BY_RELEASE = "fix word", "release"  # how a hunk is linked to a bug (replays.links)
JSON = dict[str, Any]


class _Row:
    """JSON round trip of a frozen dataclass whose fields are JSON values; TYPES: key -> the type it must have."""

    TYPES: ClassVar[dict[str, type | tuple[type, ...]]]

    def to_json(self) -> JSON:
        return dataclasses.asdict(self)  # type: ignore[call-overload]

    @classmethod
    def from_json(cls, doc: Any, where: str) -> Self:
        if not isinstance(doc, dict):
            raise RecordError(f"{where}: {doc!r} is not a JSON object")
        bad = [f"{k}={doc.get(k)!r}" for k, t in cls.TYPES.items() if not isinstance(doc.get(k), t)]
        if bad:
            want = ", ".join(f"{k} a {t.__name__ if isinstance(t, type) else 'number'}" for k, t in cls.TYPES.items())
            raise RecordError(f"{where}: {', '.join(bad)}; expected {want}: write it again with `fork-base`")
        return cls(**{k: doc[k] for k in cls.TYPES})


@dataclasses.dataclass(frozen=True, kw_only=True)
class BaseRow(_Row):
    """The fork's base release and how close the fork is to it (harness.upstream.lineage.Base)."""

    TYPES = {"release": str, "same_through": str, "changed": int, "base_lines": int, "similarity": (int, float)}
    release: str
    same_through: str
    changed: int  # lines removed plus added, base -> fork
    base_lines: int
    similarity: float


@dataclasses.dataclass(frozen=True, kw_only=True)
class HunkRow(_Row):
    """One upstream hunk since the base; links: [{"bug": "SPL-5", "by": "fix word" | "release"}]."""

    TYPES = {"header": str, "state": str, "arrived": str, "links": list, "text": str}
    header: str
    state: str  # a lineage.State
    arrived: str
    links: list[dict[str, str]]
    text: str


@dataclasses.dataclass(frozen=True, kw_only=True)
class BugRow(_Row):
    """A history bug fixed upstream after the base, and its verdict on the fork (a replays.Verdict)."""

    TYPES = {"id": str, "fixed_in": str, "symptom": str, "verdict": str, "why": str, "command": str}
    id: str
    fixed_in: str
    symptom: str
    verdict: str
    why: str
    command: str  # the replay, "" when there is nothing to run


@dataclasses.dataclass(frozen=True, kw_only=True)
class ForkRecord:
    """What `fork-base` found about one fork; `verdict` is its last printed line, `code` its exit code."""

    fork: str  # "pallas_splash=my_splash:make_splash_mha"
    kernel: str
    file: str
    jax: str | None  # the installed jax the replays ran under
    base: BaseRow
    edits: str  # the fork's own edits, a unified diff base -> fork
    newest: str
    drift: dict[str, int]  # hunks by state, every state named
    hunks: list[HunkRow]
    replayed: bool
    bugs: list[BugRow]
    verdict: str
    code: int
    time: str = dataclasses.field(default_factory=now)
    schema: int = FORK_SCHEMA

    def to_json(self) -> JSON:
        out: JSON = {"kind": KIND}
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            out[f.name] = [v.to_json() for v in value] if f.name in ("hunks", "bugs") else value
        out["base"] = self.base.to_json()
        return out

    @classmethod
    def from_json(cls, doc: Any, where: str = "fork record") -> ForkRecord:
        doc = check_schema(doc, where, supported=frozenset({FORK_SCHEMA}))
        if doc.get("kind") != KIND:
            raise RecordError(f"{where}: a {doc.get('kind')!r} record, expected {KIND!r}")
        plain = {"fork": str, "kernel": str, "file": str, "edits": str, "newest": str, "drift": dict}
        plain |= {"replayed": bool, "verdict": str, "code": int, "time": str, "hunks": list, "bugs": list}
        bad = [f"{k}={doc.get(k)!r}" for k, t in plain.items() if not isinstance(doc.get(k), t)]
        if bad or not isinstance(doc.get("jax"), str | None):
            raise RecordError(
                f"{where}: {', '.join(bad) or 'jax'} mistyped or missing: write it again with `fork-base`"
            )
        return cls(
            **{k: doc[k] for k in plain if k not in ("hunks", "bugs")},
            jax=doc["jax"],
            base=BaseRow.from_json(doc.get("base"), f"{where}: base"),
            hunks=[HunkRow.from_json(h, f"{where}: hunk {i}") for i, h in enumerate(doc["hunks"])],
            bugs=[BugRow.from_json(b, f"{where}: bug {i}") for i, b in enumerate(doc["bugs"])],
        )


def not_replayed(bugs: list[Bug]) -> list[Replay]:
    """`bugs` as replays that were not run (`fork-base --no-replay`): none can be told."""
    why = "not replayed (--no-replay)"
    return [Replay(bug=b, verdict=Verdict.UNKNOWN, why=why, command="") for b in bugs]


def of(fork: Fork, found: Lineage, bugs: list[Bug], done: list[Replay], *, replayed: bool, verdict: str) -> ForkRecord:
    """The record of `fork`: its lineage, its kernel's history bugs (`bugs`, to link hunks) and the replays."""
    b = found.base
    counts = Counter(h.state for h in found.hunks)
    hunks = []
    for h in found.hunks:
        rows = [{"bug": i, "by": BY_WORD if by_word else BY_RELEASE} for i, by_word in links(h, bugs)]
        hunks.append(HunkRow(header=h.header, state=str(h.state), arrived=h.arrived, links=rows, text=h.text))
    return ForkRecord(
        fork=fork.spec,
        kernel=fork.kernel,
        file=str(fork.file),
        jax=_installed_jax(),
        base=BaseRow(
            release=b.release,
            same_through=b.same_through,
            changed=b.changed,
            base_lines=b.base_lines,
            similarity=round(b.similarity, 6),
        ),
        edits=b.edits,
        newest=found.newest,
        drift={str(s): counts[s] for s in State},
        hunks=hunks,
        replayed=replayed,
        bugs=[_bug_row(r) for r in done],
        verdict=verdict,
        code=1 if any(r.verdict is Verdict.STILL for r in done) else 0,
    )


def _bug_row(r: Replay) -> BugRow:
    return BugRow(
        id=r.bug.id,
        fixed_in=r.bug.fixed_in,
        symptom=r.bug.symptom,
        verdict=str(r.verdict),
        why=r.why,
        command=r.command,
    )


def _installed_jax() -> str | None:
    try:
        return importlib.metadata.version("jax")
    except importlib.metadata.PackageNotFoundError:
        return None


def path_in(store: Path, fork: str) -> Path:
    """Where `fork`'s record lives in `store`: forks/<the spec, each run of odd characters one "_">.json."""
    return store / FOLDER / (re.sub(r"[^A-Za-z0-9._-]+", "_", fork) + ".json")


def write(record: ForkRecord, store: Path) -> Path:
    path = path_in(store, record.fork)
    atomic_write_json(path, record.to_json())
    return path


def read(store: Path) -> tuple[list[ForkRecord], list[str]]:
    """Every fork record in `store` (its forks/ folder), by fork name, and one line per file that does not read."""
    found, problems = [], []
    folder = store / FOLDER
    for path in sorted(folder.glob("*.json")) if folder.is_dir() else []:
        try:
            found.append(ForkRecord.from_json(json.loads(path.read_text()), str(path)))
        except RecordError as e:
            problems.append(str(e))
        except (OSError, ValueError) as e:  # after RecordError, a ValueError too
            problems.append(f"{path}: unreadable ({type(e).__name__}: {e})")
    return found, problems
