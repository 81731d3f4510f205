"""The docs explain the tool; they do not keep a diary of its runs (issue 60).

A figure that matters lives in a committed record (benchmarks/results/*.json, docs/history/*.json) or in
a table docs/generate.py writes; the prose says what the tool does and points there. The rule, for
README.md and every docs/**/*.md page, applied to hand-written prose only:

- Not prose, never scanned: a finding's `+++` front matter (its TOML record fields, which cite the
  upstream commits and dates that introduced and fixed a bug), fenced code blocks, `inline code`,
  HTML comments, generated blocks (`<!-- NAME:begin -->` to `<!-- NAME:end -->`), and links to another
  project's web page (an `https://` target: text and address both), which is where an upstream
  commit (jax, torch) is cited as evidence.
- No commit hash: a word of 7 to 40 hex digits holding a letter a-f and a digit. This project's
  commits belong in commit messages; an upstream commit is cited as a link or in `inline code`.
  A decimal such as 0.0654467 holds no letter and is no hash.
- No date (YYYY-MM-DD, a timestamp's too): the day a run was made is diary; a record carries its own.
- No narration of the machine a run used: a count of cores in digits ("2 cores", "2-core", "1.3 cores busy"),
  "load average", "machine load", "loaded machine", "idle machine", "measured idle", "beside other
  work" (or beside N other jobs). Cores spelt as words ("one-core TPU", "two simulated cores") and an
  option's default ("the number of cores") describe the tool, not a run, and are allowed.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]

FRONT_MATTER = re.compile(r"\A\+\+\+\n.*?^\+\+\+$", re.S | re.M)
FENCED = re.compile(r"^[ \t]*(```|~~~).*?^[ \t]*\1[^\n]*$", re.S | re.M)
GENERATED = re.compile(r"^<!-- (?P<name>[\w-]+):begin -->$.*?^<!-- (?P=name):end -->$", re.S | re.M)
COMMENT = re.compile(r"<!--.*?-->", re.S)
CODE_SPAN = re.compile(r"(`+).+?\1", re.S)
EXTERNAL_LINK = re.compile(r"(?<!!)\[[^\]]*\]\(https?://[^)\s]+\)")

RULES: dict[str, re.Pattern[str]] = {
    "commit hash": re.compile(r"\b(?=[0-9a-f]*[a-f])(?=[0-9a-f]*[0-9])[0-9a-f]{7,40}\b"),
    "date of a run": re.compile(r"(?<!\d)(?:19|20)\d\d-[01]\d-[0-3]\d(?!\d)"),
    "machine narration": re.compile(
        r"\b\d+(?:\.\d+)?(?:\s+to\s+\d+(?:\.\d+)?)?[\s-]+(?:shared\s+|CPU\s+|idle\s+)?cores?\b"
        r"|\bcores?\s+busy\b|\bload\s+average\b|\bmachine\s+load\b|\bloaded\s+machine\b"
        r"|\bidle\s+(?:machine|host|\d+-core)\b|\bmeasured\s+idle\b"
        r"|\bbeside\s+(?:other|another|several|two|three|four|five|\d+)\b",
        re.I,
    ),
}

# Not this agent's page to rewrite: its prose (the planted-bug timings, lines 74-88) narrates runs.
PENDING: dict[str, str] = {}


def _blank(match: re.Match[str]) -> str:
    """The match as spaces, its newlines kept, so line numbers stay those of the file."""
    return re.sub(r"[^\n]", " ", match.group(0))


def prose(text: str) -> str:
    """The page with everything that is not hand-written prose blanked out."""
    for pattern in (FRONT_MATTER, GENERATED, FENCED, COMMENT, CODE_SPAN, EXTERNAL_LINK):
        text = pattern.sub(_blank, text)
    return text


def offences(text: str) -> list[tuple[int, str, str]]:
    """(line number, rule, offending words) for each breach of the rule in a page's text."""
    found = []
    for number, line in enumerate(prose(text).splitlines(), start=1):
        for rule, pattern in RULES.items():
            found += [(number, rule, m.group(0)) for m in pattern.finditer(line)]
    return found


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        pytest.param("Fixed in f84fa82 by the adapter.", [(1, "commit hash", "f84fa82")], id="bare-hash"),
        pytest.param("See `git log 54ac172b4c`.", [], id="hash-in-code"),
        pytest.param("[42735d04f1](https://github.com/jax-ml/jax/commit/42735d04f1)", [], id="upstream-link"),
        pytest.param("[f84fa82](history.md)", [(1, "commit hash", "f84fa82")], id="local-link-checked"),
        pytest.param("float64 -0.0654467, 1234567 draws", [], id="decimals-are-no-hash"),
        pytest.param("x\n```\nf84fa82 2026-12-01\n```\ny", [], id="fenced"),
        pytest.param("<!-- t:begin -->\nf84fa82 on 2 cores\n<!-- t:end -->\n", [], id="generated"),
        pytest.param('+++\nintroduced = "1c82484c9b, 2024-11-22"\n+++\nok', [], id="front-matter"),
        pytest.param("Run 2026-12-02:", [(1, "date of a run", "2026-12-02")], id="date"),
        pytest.param("recorded 2026-12-07T15:13:32Z", [(1, "date of a run", "2026-12-07")], id="timestamp"),
        pytest.param("measured on 2 cores", [(1, "machine narration", "2 cores")], id="cores"),
        pytest.param("an idle 2-core machine", [(1, "machine narration", "idle 2-core")], id="idle"),
        pytest.param("keeps 1.27 to 1.30 cores busy", [(1, "machine narration", "1.27 to 1.30 cores")], id="busy"),
        pytest.param("27 min beside two bisects", [(1, "machine narration", "beside two")], id="beside"),
        pytest.param("two simulated cores; default: the number of cores", [], id="tool-facts"),
        pytest.param("it leaves idle slots", [], id="idle-slots"),
    ],
)
def test_the_rule(text: str, expected: list[tuple[int, str, str]]) -> None:
    assert offences(text) == expected


@pytest.mark.parametrize(
    "page",
    [
        pytest.param(page, marks=pytest.mark.xfail(strict=True, reason=PENDING[rel]))
        if (rel := str(page.relative_to(ROOT))) in PENDING
        else page
        for page in PAGES
    ],
    ids=lambda page: str(page.relative_to(ROOT)),
)
def test_page_explains_instead_of_logging(page: Path) -> None:
    rel = page.relative_to(ROOT)
    found = [f"{rel}:{line}: {rule}: {words!r}" for line, rule, words in offences(page.read_text())]
    assert not found, "a page keeps a run's diary; point to the record instead:\n" + "\n".join(found)
