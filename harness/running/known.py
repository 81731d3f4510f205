"""Failures that are a finding already written up (docs/findings/): named, apart from new bugs.

A failure is a finding's when that finding's unfixed kernel fails the failing case the same way and its
proven fix (the note's `[fix] fixed`) passes it: the fix that `nox -s findings` proves is the test, never
a reading of the note's prose. Only bugs with such a fix can be named; a fork with a new bug on a case
upstream gets right is never named as upstream's finding, since upstream does not fail that case.

A drop-in's failure that is no finding but that the built-in it derives from fails the same way on the
same case is said to be inherited (`inherited`): upstream's bug, not the fork's edit. It still fails the
run (the fork gives that wrong answer), reported apart from the fork's own bugs.

`run --known NAME` marks a finding as expected: its failures are reported by name and do not fail the
run. Strict, as pytest's xfail: a finding marked expected whose own case (the note's `[fix] case`) no
longer fails on the kernel under test is reported, and fails the run.
"""

from __future__ import annotations

import dataclasses

from harness import findings
from harness.core import contract
from harness.core.errors import InputError
from harness.running import signatures
from harness.running.failures import FailureFileError, load_failure
from harness.running.runner import CaseResult, Check


@dataclasses.dataclass(frozen=True, kw_only=True)
class Known:
    """A failure named as a finding: which, and whether the run was told to expect it."""

    name: str
    title: str
    note: str  # the note's path, relative to the project
    fixed: str  # the proven fix's spec
    expected: bool

    def line(self) -> str:
        said = "expected: --known" if self.expected else "a known finding"
        return f"{self.name} ({said}): {self.title}; note {self.note}; its proven fix: {self.fixed}"


def check_names(names: tuple[str, ...]) -> None:
    """InputError naming a --known that is no finding's name, and the names there are."""
    if not names:
        return  # every run checks this: read no note when none is named
    known = {f.name for f in findings.catalogue()}
    bad = [n for n in names if n not in known]
    if bad:
        raise InputError(f"--known {bad[0]!r} is no finding; findings: {', '.join(sorted(known))}")


def candidates(kernel: contract.Implementation) -> list[findings.Finding]:
    """The bugs with a proven fix whose unfixed kernel is an adapter of the same kind as `kernel`: each is then
    tested on the failing case itself (`match`), so a loose kinship here names nothing by itself."""
    out = []
    for f in findings.catalogue():
        if f.kind != "bug" or f.fix is None or not f.fix.fixed or not f.fix.unfixed:
            continue
        try:
            unfixed = contract.resolve(f.fix.unfixed)
        except Exception:  # noqa: BLE001 - a fix module that does not load here names nothing (nox -s findings says why)
            continue
        # The same adapter, or one the fix module derives from it (the float64 fix's jax_xla subclass).
        if isinstance(unfixed, type(kernel)) or isinstance(kernel, type(unfixed)):
            out.append(f)
    return out


def _kinds(result: CaseResult) -> list[str]:
    return [kind for _, kind, _ in signatures.how(result)]


def match(
    result: CaseResult, check: Check, found: list[findings.Finding], *, expected: tuple[str, ...] = ()
) -> Known | None:
    """The finding `result` (a failure of the check's kernel) is, or None: its unfixed kernel fails the case the
    same way (the run's own failure, where it is that kernel), and its fix passes it; each run as `check` is."""
    kernel = check.kernel
    mine = dataclasses.replace(result, subjects=[s for s in result.subjects if s.implementation == kernel.name])
    verdict = mine.subjects[0] if mine.subjects else None
    if verdict is None or verdict.passed:
        return None
    under = check.under(verdict.interpreter)
    for f in found:
        assert f.fix is not None
        fixed, unfixed = contract.resolve(f.fix.fixed), contract.resolve(f.fix.unfixed)
        if fixed.violations(result.case) or unfixed.violations(result.case):
            continue
        if unfixed.name != kernel.name:
            upstream = under.run(result.case, [unfixed])
            if upstream.passed or _kinds(upstream) != _kinds(mine):
                continue
        if under.run(result.case, [fixed]).passed:
            return Known(
                name=f.name,
                title=f.title,
                note=str(f.note.relative_to(findings.ROOT)),
                fixed=f.fix.fixed,
                expected=f.name in expected,
            )
    return None


def inherited(result: CaseResult, check: Check) -> str | None:
    """The built-in the check's kernel, a drop-in, derives from (`KERNEL=MODULE:ATTR`: Implementation.drops_into),
    where that built-in, as installed and run as `check` is, fails `result`'s case the same way (the same
    quantities, the same kinds): a bug the fork inherited from upstream, not one its edits made; None for a
    built-in, where upstream passes or fails another way, or where upstream refuses the case."""
    kernel = check.kernel
    base = kernel.drops_into
    mine = [s for s in result.subjects if s.implementation == kernel.name]
    if base is None or base == kernel.name or not mine or mine[0].passed:
        return None
    # Judged as the fork is (its conventions, refined from upstream's own behaviour: harness.running.exactness).
    upstream = contract.resolve(base).with_conventions(kernel.conventions)
    if upstream.cannot_run() is not None or upstream.violations(result.case):
        return None
    got = check.under(mine[0].interpreter).run(result.case, [upstream])
    if got.passed or _how(got) != _how(dataclasses.replace(result, subjects=mine)):
        return None
    return base


def _how(result: CaseResult) -> list[tuple[str, frozenset[str]]]:
    """Each failing subject's kind of failure and failing quantities, whichever implementation it is."""
    return [(kind, bad) for _, kind, bad in signatures.how(result)]


def still_fails(name: str, check: Check) -> str | None:
    """For a finding expected by --known: None where its own case still fails on the check's kernel (within its
    time limit); else why it is reported (it passes now, or its case cannot be replayed on this kernel)."""
    kernel = check.kernel
    finding = next(f for f in findings.catalogue() if f.name == name)
    if finding.fix is None or finding.fix.case is None:
        return None  # no case of its own to replay: nothing to say either way
    try:
        ff = load_failure(finding.fix.case)
        ff.retarget(kernel.name)
    except FailureFileError as e:
        return f"--known {name}: its case cannot be replayed on {kernel.name} ({e})"
    replay = Check(kernel=ff.kernel, grads=ff.grads, interpret=ff.interpret, time_limit=check.time_limit)
    result = replay.run(ff.case)
    if result.passed:
        return f"--known {name}: expected to fail, but {kernel.name} passes its case {finding.fix.case} now"
    return None
