"""After a kernel's search, before its summary: each failure confirmed, named and written.

The verdict words are harness.core.verdicts'. Here: a Pallas TPU kernel the fast interpreter refused on
its probe case, with no such refusal declared, has that case checked (`check_fast_refusal`); every failure
is replayed once under the interpreter that failed it, so a flaky one is told apart (`replay_failures`);
a failure that is a written-up finding is named (harness.running.known); and each gets its failure file,
with how it was found, its trigger in words, the finding it is, and for a drop-in whether the built-in it
derives from fails it alike (`write_failures`).
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Protocol

from harness.core import contract
from harness.running import known, runner, signatures
from harness.running.distinct import ShrinkStats
from harness.running.failures import write_failure
from harness.running.jobs import same_bug
from harness.running.runner import CaseResult
from harness.running.search import SearchOutcome
from harness.store.bug import Bug, Found
from harness.store.derive import repro_command
from harness.store.failures import FailureRecord


class _Sink(Protocol):
    def write_case(self, result: CaseResult, *, shrunk: bool = False, failure_file: str | None = None) -> None: ...

    def say(self, line: str) -> None: ...


@dataclasses.dataclass(frozen=True, kw_only=True)
class Failure:
    """One reported failure: the kernel, the failing case (shrunk), and its replayable failure file."""

    kernel: str
    result: CaseResult
    path: Path
    trigger: str | None = None  # its trigger in words (signatures.trigger_words), where the search found it
    known: known.Known | None = None  # the finding it is (harness.running.known), where it is one
    same_bug_as: Path | None = None  # the file of an earlier failure named as the same finding: one bug, one file
    inherited: str | None = None  # the built-in a drop-in derives from, where it fails the case alike (known.inherited)
    bug: Bug  # what every view shows of it: its failure file read as one value (harness.store.bug)

    @property
    def replay(self) -> str:
        return repro_command(str(self.path))


@dataclasses.dataclass(frozen=True, kw_only=True)
class Settle:
    """One kernel's search settled: what its failures are checked with, and where they go."""

    check: runner.Check  # the kernel, its oracles and how its cases ran
    out: Path
    profile: str
    known: tuple[str, ...]  # findings the run was told to expect (run --known)
    sink: _Sink

    @property
    def kernel(self) -> contract.Implementation:
        return self.check.kernel

    def confirm(self, outcome: SearchOutcome) -> dict[int, known.Known]:
        """The search's failures checked and replayed, in `outcome`; the findings (by failure index) they are."""
        self.check_fast_refusal(outcome)
        self.replay_failures(outcome)
        return self.name_known(outcome)

    def check_fast_refusal(self, outcome: SearchOutcome) -> None:
        """A Pallas TPU kernel that raised under the fast interpreter on its probe case while the faithful one
        runs it, with no such refusal declared (kernels/_pallas.py TpuKernel.fast_gap): its probe case is
        checked under the fast interpreter, so that the error is the kernel's failure, never a pass."""
        kernel = self.kernel
        refusal = getattr(kernel, "fast_refusal", lambda: None)()
        if refusal is None or getattr(kernel, "fast_gap", None) is not None or "faithful" not in kernel.interpreters():
            return
        self.sink.say(f"   the fast interpreter refused it on its probe case ({refusal}): checked as a case")
        result = self.check.under("fast").run(kernel.probe_case, [kernel])
        outcome.results.append(result)
        self.sink.write_case(result)
        if not result.passed:
            outcome.failures.append(result)
            outcome.shrinks.append(ShrinkStats(shrunk=False))

    def replay_failures(self, outcome: SearchOutcome) -> None:
        """Each failure replayed once under the interpreter that failed it, where the runner has not yet: one
        that passes on replay is a flaky failure (harness.core.verdicts)."""
        outcome.failures[:] = [runner.replayed(f, self.check) for f in outcome.failures]

    def name_known(self, outcome: SearchOutcome) -> dict[int, known.Known]:
        """The failures (by index) that are a finding already written up (harness.running.known)."""
        found = known.candidates(self.kernel) if outcome.failures else []
        named = {}
        for i, failure in enumerate(outcome.failures if found else []):
            got = known.match(failure, self.check, found, expected=self.known)
            if got is not None:
                named[i] = got
        return named

    def expected_that_pass(self, named: dict[int, known.Known]) -> list[str]:
        """For each finding the run expects that is this kind of kernel's and that no failure of this search was
        named as: what to report where its own case passes now (strict)."""
        seen = {k.name for k in named.values()}
        mine = {f.name for f in known.candidates(self.kernel)} if self.known else set()
        lines = (known.still_fails(name, self.check) for name in self.known if name in mine and name not in seen)
        return [line for line in lines if line]

    def write_failures(self, outcome: SearchOutcome, named: dict[int, known.Known]) -> list[Failure]:
        """Every distinct failure of the search, each with its own failure file and replay line, a drop-in's
        shrunk failure run on its upstream too (known.inherited: one more case each); a failure named
        as a finding an earlier one was named as is the same bug: its file goes to failures/same-bug/, listed
        in the first one's (same_bug.file_as_same_bug), as the shards of `run --jobs` file one bug once."""
        kernel, out = self.kernel, []
        by_finding: dict[str, Path] = {}
        sigs = [
            signatures.signature(f, kernel, s.trigger) for f, s in zip(outcome.failures, outcome.shrinks, strict=True)
        ]
        reduced = [s.trigger is not None for s in outcome.shrinks]
        explains = self._explains(outcome, sigs, reduced)
        for n, (failure, shrink) in enumerate(zip(outcome.failures, outcome.shrinks, strict=True), 1):
            found, words = self._found(n, shrink, sigs, reduced, cases=len(outcome.results))
            finding = named.get(n - 1)
            if finding is not None:
                found = dataclasses.replace(
                    found, finding=finding.name, expected=finding.expected, finding_line=finding.line()
                )
            # A drop-in's shrunk failure that is no finding: upstream's own where the built-in it derives from fails
            # alike (never after a stop: its files are written without another case run).
            asked = finding is None and shrink.shrunk and not outcome.interrupted
            upstream = known.inherited(failure, self.check) if asked else None
            found = dataclasses.replace(found, inherited_from=upstream, explains=explains.get(n - 1, ()))
            path = write_failure(self.out, failure, self.check, search=found.to_json())
            first = path
            if finding is not None:
                first = by_finding.setdefault(finding.name, path)
                if first != path:
                    also = {"file": f"{same_bug.SAME_BUG_DIR}/{path.name}", "finding": finding.name}
                    path = same_bug.file_as_same_bug(path, first, also)
            self.sink.write_case(failure, shrunk=True, failure_file=str(first))
            out.append(
                Failure(
                    kernel=kernel.name,
                    result=failure,
                    path=path,
                    trigger=words,
                    known=finding,
                    same_bug_as=None if first == path else first,
                    inherited=upstream,
                    bug=Bug.of(FailureRecord.from_json(json.loads(path.read_text()), str(path)), path),
                )
            )
        return out

    def _explains(
        self, outcome: SearchOutcome, sigs: list[signatures.Signature], reduced: list[bool]
    ) -> dict[int, tuple[str, ...]]:
        """Failure index -> the failing drawn cases (in words) it explains: each case the first failure's that does."""
        out: dict[int, list[str]] = {}
        for result in (r for r in outcome.results if not r.passed):
            for i, sig in enumerate(sigs):
                if signatures.explains(sig, result, self.kernel, anywhere=not reduced[i], trigger=reduced[i]):
                    out.setdefault(i, []).append(str(result.case))
                    break
        return {i: tuple(cases) for i, cases in out.items()}

    def _found(
        self, n: int, shrink: ShrinkStats, sigs: list[signatures.Signature], reduced: list[bool], *, cases: int
    ) -> tuple[Found, str | None]:
        """How the search's failure `n` (from 1) was found, as its failure file keeps it, and its trigger in words:
        where another failure's trigger nests in its own (signatures.nests), said, not merged."""
        sig = sigs[n - 1]
        held = [j for j, other in enumerate(sigs, 1) if reduced[j - 1] and signatures.nests(other, sig)]
        base = self.kernel.drops_into
        found = Found(
            replaces=base if base is not None and base != self.kernel.name else None,
            profile=self.profile,
            cases=cases,
            failure=f"{n} of {len(sigs)}",
            signature=str(sig),
            # For the parent of a `run --jobs`, which finds the shards' failures of one bug (same_bug.same_bugs).
            signature_parts=sig.to_json(),
            shrunk=shrink.shrunk,
            shrink_runs=shrink.runs,
            shrink_exhausted=shrink.exhausted,
            nests=tuple(str(sigs[j - 1]) for j in held),
        )
        nested = "; ".join(f"failure {j} ({sigs[j - 1]})" for j in held)
        if shrink.trigger is None:  # its shrink budget spent: its case's features, not a trigger
            return found, f"not reduced to a trigger; its case has the trigger of {nested}" if held else None
        plainest = signatures.plain(self.kernel)
        words = signatures.trigger_words(shrink.trigger, shrink.needs, shrink.otherwise, plainest)
        words += f"; its trigger holds that of {nested}" if held else ""
        trigger = {"trigger": tuple(shrink.trigger), "needs": tuple(sorted(shrink.needs))}
        trigger["otherwise"] = tuple(sorted(shrink.otherwise))
        return dataclasses.replace(found, trigger_words=words, **trigger), words
