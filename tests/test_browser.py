"""The report in a real browser: headless Chromium opens it from disk, with no network, and renders it.

Needs Debian's `chromium` (`apt-get install -y chromium`; .ci/run installs it). Without it the
test skips, except in CI (CI=true), where a missing browser is a failure. The screenshots are kept
under reports/screenshots/. Layout is measured as the browser laid it out: no element wider than its
container, no text of a plot over another, on a report of a fork named by its import path; no word split across
two lines, and each bug named in the banner's first screen, at a laptop's and a desktop's width.
"""

from __future__ import annotations

import json
import math
import os
import re
import shutil
import subprocess
from html import unescape
from html.parser import HTMLParser
from pathlib import Path

import pytest

from harness.cli.commands import upgrade as upgrade_cmd
from harness.core.case import Case
from harness.gate import thresholds, verdict
from harness.report import compose, render
from harness.store.failures import FailureRecord
from harness.store.read import load
from tests import record_builders as rb

ROOT = Path(__file__).resolve().parents[1]
SCREENSHOT = ROOT / "reports" / "screenshots" / "report.png"
SCRIPT = "<script>document.title='pwned'</script>"
FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--hide-scrollbars",
    # Any host name the page tried to reach would fail to resolve: the report must need none.
    "--host-resolver-rules=MAP * ~NOTFOUND",
]


def _chromium() -> str:
    found = os.environ.get("CHROMIUM") or shutil.which("chromium") or shutil.which("chromium-browser")
    if found:
        return found
    if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
        pytest.fail("chromium is not installed; CI must install it: apt-get install -y chromium")
    pytest.skip("chromium is not installed (apt-get install -y chromium); CI=true makes this a failure")


class _Dom(HTMLParser):
    """Tag counts and the text inside elements with an id."""

    def __init__(self) -> None:
        super().__init__()
        self.tags: dict[str, int] = {}
        self.text_by_id: dict[str, str] = {}
        self._open: list[tuple[str, str | None]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags[tag] = self.tags.get(tag, 0) + 1
        self._open.append((tag, dict(attrs).get("id")))

    def handle_endtag(self, tag: str) -> None:
        while self._open:
            if self._open.pop()[0] == tag:
                break

    def handle_data(self, data: str) -> None:
        for _, ident in self._open:
            if ident:
                self.text_by_id[ident] = self.text_by_id.get(ident, "") + data


def _run(browser: str, tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    profile = tmp_path / "chromium-profile"
    cmd = [browser, *FLAGS, f"--user-data-dir={profile}", *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120, check=False)


@pytest.fixture
def report_file(tmp_path: Path) -> Path:
    base = "20261129T100000Z-ci-aaaaaa"
    cand = "20261129T110000Z-ci-bbbbbb"
    # 8 bench processes a side: the speed rule judges one sample per process (docs/report.md).
    recs = rb.environment(base, bench_processes=8)
    recs += rb.environment(cand, versions={"jax": "0.11.0", "jaxlib": "0.11.0"}, fail_seed=3, bench_processes=8)
    for r in recs:
        if r["run_id"].startswith(cand) and r["kind"] == "bench":
            r["samples"] = rb.timings(0.014 if r["pass"] == "fwd" else 0.042)
        if r["run_id"] == cand and r["kind"] == "compile" and r["topology"] == "v5e:1x1":
            r["memory"]["temp"] = int(rb.MEMORY["temp"] * 1.25)
    recs.append(rb.case_record(cand, rb.case(11), error=SCRIPT, shrunk=True, failure_file="/tmp/f.json"))
    store = rb.write_store(tmp_path / "store", recs)
    report, _ = compose.make(load([store]), thresholds=thresholds.load(), baseline="jax=0.10.2")
    return render.write(report, tmp_path / "index.html")


def test_report_renders_in_chromium_from_disk(report_file: Path, tmp_path: Path) -> None:
    browser = _chromium()
    proc = _run(browser, tmp_path, "--dump-dom", report_file.as_uri())
    assert proc.returncode == 0, proc.stderr[-2000:]
    dom = _Dom()
    dom.feed(proc.stdout)
    verdict = " ".join(dom.text_by_id["verdict"].split())
    assert verdict.startswith("GATE FAILED: 5 regressions (correctness 1, memory 2, speed 2)")
    assert "compared with baseline jax=0.10.2 (8 runs)" in verdict  # a run and 7 more bench processes
    for section in ("gate", "matrix", "distribution", "versions", "failures", "conventions", "runs"):
        assert section in dom.text_by_id, f"section #{section} missing from the rendered DOM"
    assert dom.tags.get("table", 0) >= 8
    # Plots: two histograms, speed for fwd and fwd_bwd, memory for v5e and v6e, the trace, lowering and
    # compile times; bars and points drawn.
    assert dom.tags.get("svg") == 9
    assert dom.tags.get("rect", 0) >= 24 and dom.tags.get("circle", 0) >= 8 and dom.tags.get("polyline", 0) >= 4
    # The exception message is text on the page, never an element that ran.
    assert "script" not in dom.tags
    assert SCRIPT in dom.text_by_id["failures"]
    assert "&lt;script&gt;document.title='pwned'&lt;/script&gt;" in proc.stdout
    assert "<title>pwned</title>" not in proc.stdout


def test_report_screenshot(report_file: Path, tmp_path: Path) -> None:
    browser = _chromium()
    shot = tmp_path / "report.png"
    proc = _run(browser, tmp_path, f"--screenshot={shot}", "--window-size=1400,2000", report_file.as_uri())
    assert proc.returncode == 0, proc.stderr[-2000:]
    data = shot.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    assert len(data) > 50_000  # a blank or error page compresses to a few KB
    SCREENSHOT.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(shot, SCREENSHOT)


def test_a_missing_browser_fails_in_ci_and_skips_elsewhere(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CHROMIUM", raising=False)
    monkeypatch.setattr(shutil, "which", lambda name: None)
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match="chromium is not installed"):
        _chromium()
    monkeypatch.delenv("CI")
    with pytest.raises(pytest.skip.Exception, match="CI=true makes this a failure"):
        _chromium()


# --- the upgrade report: its verdict groups, and a drift table that fits one screen width ---

# A splash case's block sizes: the longest case text the drift table shows (hundreds of characters).
SPLASH_BLOCKS = {
    "block_q": 128,
    "block_kv": 128,
    "block_kv_compute": 128,
    "block_q_dkv": 128,
    "block_kv_dkv": 128,
    "block_kv_dkv_compute": 128,
    "block_q_dq": 128,
    "block_kv_dq": 128,
    "block_b": 1,
    "block_k_major": 512,
    "block_k_major_dkv": 512,
    "block_q_major_dkv": 512,
}
SCREEN = (1280, 900)  # a laptop's browser window
UPGRADE_SHOT = ROOT / "reports" / "screenshots" / "upgrade-drift.png"
FORK_SHOT = ROOT / "reports" / "screenshots" / "fork-failures.png"
# Run in a copy of the report (its Content-Security-Policy, which forbids scripts, taken out): the
# browser's own layout, measured. A drift row is one case: its height says whether its cells wrap.
MEASURE = """<script>
const t = document.querySelector('table.drift');
const heights = [...t.querySelectorAll('tbody tr')].map(r => r.getBoundingClientRect().height);
document.body.setAttribute('data-measured', JSON.stringify({
  page: document.documentElement.scrollWidth, view: window.innerWidth,
  right: t.getBoundingClientRect().right, rows: heights.length, tallest: Math.max(...heights)}));
</script>"""
# Run in a copy of the report without its Content-Security-Policy. First the banner's lines in the first screen;
# then, every <details> opened, each word of the page's text (a run of it without white space, in one text node)
# that the browser laid out on two lines or more, cut where it broke. A break is one the text offers (after a
# comma, slash or hyphen; after a dot or colon before a name; or a <wbr>, which ends a text node), never
# inside a word. Preformatted blocks (JSON, tracebacks) and plots are left out.
WORDS = """<script>{
const seen = [...document.querySelectorAll('#verdict .headline, #verdict li')]
  .filter(e => e.getBoundingClientRect().bottom <= innerHeight).map(e => e.textContent.replace(/\\s+/g, ' ').trim());
for (const d of document.querySelectorAll('details')) d.open = true;
const split = [], range = document.createRange();
const offered = (a, b) => /[,\\/-]$/.test(a) || (/[.:]$/.test(a) && /^[A-Za-z_]/.test(b));
const lineOf = (n, i) => { range.setStart(n, i); range.setEnd(n, i + 1); const r = range.getBoundingClientRect();
  return r.width ? r.top : null; };
const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
for (let n; (n = walker.nextNode()); ) {
  const p = n.parentElement;
  if (p.closest('pre, svg, style, script, title')) continue;
  for (const m of n.data.matchAll(/\\S+/g)) {
    range.setStart(n, m.index); range.setEnd(n, m.index + m[0].length);
    if ([...range.getClientRects()].filter(r => r.width).length < 2) continue;
    const pieces = []; let start = 0, line = null;
    for (let i = 0; i < m[0].length; i++) {
      const t = lineOf(n, m.index + i);
      if (t === null) continue;
      if (line !== null && t > line + 1) { pieces.push(m[0].slice(start, i)); start = i; }
      line = t;
    }
    pieces.push(m[0].slice(start));
    if (pieces.slice(1).some((b, i) => !offered(pieces[i], b)))
      split.push(`${p.tagName.toLowerCase()}${p.className ? '.' + p.className : ''} in #${p.closest('[id]')?.id}: ` +
        pieces.join(' | '));
  }
}
document.body.setAttribute('data-words', JSON.stringify({view: innerWidth, height: innerHeight, seen, split}));
}</script>"""


@pytest.fixture
def upgrade_report(tmp_path: Path) -> Path:
    """An upgrade's report as `python -m harness upgrade` writes it: drift in 20 splash cases, with replays."""
    base_id, cand_id = "20261129T100000Z-ci-aaaaaa", "20261129T110000Z-ci-bbbbbb"
    base = [rb.run_record(base_id)]
    cand = [rb.run_record(cand_id, versions={"jax": "0.9.2", "jaxlib": "0.9.2"})]
    for s in range(20):
        c = rb.case(s, blocks=SPLASH_BLOCKS, q_len=256 + s)
        base.append(rb.case_record(base_id, c, implementation="pallas_splash", used=0.1))
        cand.append(rb.case_record(cand_id, c, implementation="pallas_splash", used=0.1 * (1 + s / 10)))
    base += rb.environment(base_id, bench_processes=8)[1:]
    cand += rb.environment(cand_id, bench_processes=8)[1:]
    # A deep output directory, as CI's checkouts have: the replay commands name absolute paths.
    out = tmp_path / "home" / "runner" / "work" / "attention-harness" / "reports" / "upgrade"
    stores = {"baseline": rb.write_store(out / "baseline", base), "candidate": rb.write_store(out / "candidate", cand)}
    th = thresholds.load()
    result, recs = upgrade_cmd._judge(stores, th, set())
    v = verdict.verdict(change="jax 0.10.2 -> 0.9.2, jaxlib 0.10.2 -> 0.9.2", result=result)
    return render.write(upgrade_cmd._report(v, result, recs, th), out / "index.html")


def test_the_upgrade_report_says_the_verdict_in_groups_and_its_drift_table_fits_the_screen(
    upgrade_report: Path, tmp_path: Path
) -> None:
    browser = _chromium()
    html = upgrade_report.read_text()
    proc = _run(browser, tmp_path, "--dump-dom", upgrade_report.as_uri())
    assert proc.returncode == 0, proc.stderr[-2000:]
    dom = _Dom()
    dom.feed(proc.stdout)
    verdict = " ".join(dom.text_by_id["verdict"].split())
    assert verdict.startswith("NOT SAFE: jax 0.10.2 -> 0.9.2, jaxlib 0.10.2 -> 0.9.2 (1 regression: drift 1;")
    assert "Regressions (1):" in verdict and "drift: pallas_splash paired cases: 14 drifted" in verdict
    for group in ("Improvements (0): none", "New (0): none", "Not compared (0): none"):
        assert group in verdict
    assert "Within noise (compared, nothing beyond its limit):" in verdict
    assert dom.tags.get("details", 0) >= 20  # each case's block sizes folded away
    measured = tmp_path / "measured.html"
    csp = re.search(r'<meta http-equiv="Content-Security-Policy"[^>]*>', html)
    assert csp, "the report no longer sets its Content-Security-Policy"
    measured.write_text(html.replace(csp.group(0), "").replace("</body>", MEASURE + WORDS + "</body>"))
    proc = _run(browser, tmp_path, f"--window-size={SCREEN[0]},{SCREEN[1]}", "--dump-dom", measured.as_uri())
    assert proc.returncode == 0, proc.stderr[-2000:]
    m = json.loads(unescape(re.search(r'data-measured="([^"]*)"', proc.stdout).group(1)))
    split = json.loads(unescape(re.search(r'data-words="([^"]*)"', proc.stdout).group(1)))["split"]
    assert not split, "words split across two lines:\n" + "\n".join(split)
    assert m["rows"] == 19  # case 0 did not move (bit-identical): not listed
    assert m["page"] <= m["view"] == SCREEN[0], m  # no horizontal scroll
    assert m["right"] <= m["view"], m
    # A row of text that wraps to at most a few lines; unwrapped splash cases made cells hundreds of px tall.
    assert m["tallest"] <= 120, m
    shot = tmp_path / "drift.png"
    proc = _run(browser, tmp_path, f"--screenshot={shot}", f"--window-size={SCREEN[0]},2600", upgrade_report.as_uri())
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    UPGRADE_SHOT.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(shot, UPGRADE_SHOT)


# --- layout as a person sees it: a fork's import path as the kernel's name, failures with non-finite values ---

# A fork named by its import path (run --kernel MODULE:ATTR): the longest names a report shows.
FORK = "acme_research.attention.forks.flash_attention_v3_experimental:flash_attention_with_sinks"
NONFINITE = "64 non-finite values where the truth is finite"
# Run in a copy of the report without its Content-Security-Policy: every element's box against its parent's,
# and every text of each plot against the plot and every other text in it, as the browser laid them out.
# Inside an element that scrolls on purpose (code, the failure's picture) only that element is measured.
LAYOUT = """<script>
const wide = [], overlaps = [];
const name = e => e.tagName.toLowerCase() + (e.id ? '#' + e.id : '') + (e.className && e.className.baseVal === undefined
  ? '.' + String(e.className).trim().split(/\\s+/).join('.') : '');
const scrolls = e => ['auto', 'scroll'].includes(getComputedStyle(e).overflowX);
for (const e of document.querySelectorAll('main *')) {
  const p = e.parentElement;
  if (!p || e.closest('svg') || (p !== document.querySelector('main') && p.closest('pre, code, svg')) ||
      [...ancestors(p)].some(scrolls)) continue;
  const r = e.getBoundingClientRect(), q = p.getBoundingClientRect();
  if (r.width && r.right > q.right + 1)
    wide.push(`${name(e)} ends at ${Math.round(r.right)}, past ${name(p)} at ${Math.round(q.right)}: ` +
      e.textContent.trim().slice(0, 60));
}
function* ancestors(e) { for (; e && e.tagName !== 'MAIN'; e = e.parentElement) yield e; }
for (const svg of document.querySelectorAll('main svg')) {
  const texts = [...svg.querySelectorAll('text')].map(t => [t.textContent, t.getBoundingClientRect()]);
  const box = svg.getBoundingClientRect();
  for (const [a, r] of texts) if (r.left < box.left - 1 || r.right > box.right + 1)
    wide.push(`${svg.querySelector('title')?.textContent}: "${a}" runs out of its plot`);
  for (let i = 0; i < texts.length; i++) for (let j = i + 1; j < texts.length; j++) {
    const [a, r] = texts[i], [b, s] = texts[j];
    if (r.left < s.right - 1 && s.left < r.right - 1 && r.top < s.bottom - 1 && s.top < r.bottom - 1)
      overlaps.push(`${svg.querySelector('title')?.textContent}: "${a}" over "${b}"`);
  }
}
document.body.setAttribute('data-layout', JSON.stringify({page: document.documentElement.scrollWidth,
  view: window.innerWidth, wide: wide.slice(0, 20), overlaps: overlaps.slice(0, 20)}));
</script>"""


@pytest.fixture
def fork_report(tmp_path: Path) -> Path:
    """A run of a fork named by its import path: passing cases in three dtypes and masks, shrunk failures whose
    gradients are non-finite (as a planted off-by-one in the causal mask gives), and other failing examples."""
    run_id = "20261129T100000Z-ci-aaaaaa"
    recs = [rb.run_record(run_id)]
    for seed, (dtype, causal) in enumerate([("float32", False), ("bfloat16", False), ("float16", True)] * 2):
        c = rb.case(seed, dtype=dtype, causal=causal)
        recs.append(rb.case_record(run_id, c, implementation=FORK, used=0.26))
        recs.append(rb.case_record(run_id, c, implementation="torch_sdpa", role="oracle", backend="cpu"))
    for seed in (10, 11):
        c = rb.case(seed, causal=True, bias=True)
        rec = rb.case_record(
            run_id, c, implementation=FORK, fail_quantity="out", shrunk=True, failure_file=f"/x/{seed}.json"
        )
        nonfinite = {q: rb.comparison(q, math.inf, ratio=math.inf, note=NONFINITE) for q in ("dq", "dk")}
        rec["comparisons"] = [nonfinite.get(x["quantity"], x) for x in rec["comparisons"]]
        rec["comparisons"][0] |= {"max_abs": 2.92, "ratio": 2.38e38 / 5.6e-7, "bound": 3.06e-5}
        recs.append(rec)
        recs.append(rb.case_record(run_id, c, implementation="torch_sdpa", role="oracle", backend="cpu"))
    # Failing examples met on the way down to the shrunk ones: the report's table of other failures.
    for seed in range(20, 23):
        c = rb.case(seed, causal=True, blocks=SPLASH_BLOCKS)  # the longest case text: every block size
        recs.append(rb.case_record(run_id, c, implementation=FORK, fail_quantity="dq"))
    store = rb.write_store(tmp_path / "store", recs)
    report, _ = compose.make(load([store]), thresholds=thresholds.load())
    return render.write(report, tmp_path / "index.html")


def test_a_forks_report_with_non_finite_failures_fits_its_boxes_and_no_plot_text_overlaps(
    fork_report: Path, tmp_path: Path
) -> None:
    browser = _chromium()
    html = fork_report.read_text()
    assert FORK in html and NONFINITE in html
    csp = re.search(r'<meta http-equiv="Content-Security-Policy"[^>]*>', html)
    assert csp, "the report no longer sets its Content-Security-Policy"
    measured = tmp_path / "measured.html"
    measured.write_text(html.replace(csp.group(0), "").replace("</body>", LAYOUT + "</body>"))
    proc = _run(browser, tmp_path, f"--window-size={SCREEN[0]},{SCREEN[1]}", "--dump-dom", measured.as_uri())
    assert proc.returncode == 0, proc.stderr[-2000:]
    found = re.search(r'data-layout="([^"]*)"', proc.stdout)
    assert found, "the layout script did not run"
    m = json.loads(unescape(found.group(1)))
    scroll = [f"the page is {m['page']} px wide in a {m['view']} px window"] if m["page"] > m["view"] else []
    assert m["view"] == SCREEN[0]
    assert not (scroll or m["wide"] or m["overlaps"]), "\n".join(scroll + m["wide"] + m["overlaps"])
    shot = tmp_path / "fork.png"
    proc = _run(browser, tmp_path, f"--screenshot={shot}", f"--window-size={SCREEN[0]},2400", fork_report.as_uri())
    assert proc.returncode == 0 and shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", proc.stderr[-2000:]
    FORK_SHOT.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(shot, FORK_SHOT)


# --- a report's bugs as a person sees them: named on the first screen, and no word split across two lines ---

PLANTED = "tests.planted.fwd_causal_off_by_one:flash_attention"
# Every block size pallas_flash takes: a case label whose last word is some 250 characters long.
FLASH_BLOCKS = dict.fromkeys(
    ["block_q", "block_k_major", "block_k", "block_q_major_dkv", "block_k_major_dkv", "block_k_dkv", "block_q_dkv"]
    + ["block_k_major_dq", "block_k_dq", "block_q_dq"],
    128,
) | {"block_b": 1}
# A laptop's and a desktop's browser window: what a person sees first, without scrolling.
WINDOWS = [(1024, 768), (1400, 900)]


def _bug(
    store: Path, run_id: str, kernel: str, trigger: str, shrunk: Case, drawn: list[Case], failing: int
) -> tuple[list[dict], tuple[str, ...]]:
    """A bug as `run` leaves it in `store`: its failure file (its trigger in words, its error table), its shrunk
    case's record and `kernel`'s drawn cases, the first `failing` of them failing. Returns (records, the bug's
    line as the banner words its facts: kernel, trigger, failing drawn cases, replay command)."""
    path = store / "failures" / f"{shrunk.case_id}-5f1c2d.json"
    comparisons = [rb.comparison(q, 5.0 if q == "out" else 0.3) for q in rb.QUANTITIES]
    result = {"passed": False, "backend": "tpu_interpret", "empty_rows": "uniform", "comparisons": comparisons}
    doc = FailureRecord(
        kernel=kernel, oracles=("torch_sdpa",), grads=True, case=shrunk.to_json(), results={kernel: result},
        search={"trigger_words": trigger, "shrunk": True, "explains": [str(c) for c in drawn[:failing]]},
    )  # fmt: skip
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(doc.to_json()))
    recs = [rb.case_record(run_id, c, implementation=kernel, fail_quantity="out" if i < failing else None)
            for i, c in enumerate(drawn)]  # fmt: skip
    recs.append(
        rb.case_record(run_id, shrunk, implementation=kernel, fail_quantity="out", shrunk=True, failure_file=str(path))
    )
    facts = (kernel, trigger, f"{failing} of {len(drawn)} drawn cases failed", f"python -m harness repro {path}")
    return recs, facts


@pytest.fixture(scope="module")
def bugs_report(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[tuple[str, ...]]]:
    """A candidate gated against its baseline, with two bugs: the planted kernel's (an import path for its name,
    a case label of every block size) and pallas_splash's, each with its failure file in a CI checkout's store."""
    base, cand = "20261129T100000Z-ci-aaaaaa", "20261129T110000Z-ci-bbbbbb"
    out = tmp_path_factory.mktemp("bugs") / "home" / "runner" / "work" / "attention-harness" / "reports"
    recs = rb.environment(base) + rb.environment(cand, versions={"jax": "0.11.0", "jaxlib": "0.11.0"})
    bf16 = [rb.case(s, dtype="bfloat16", causal=True) for s in (30, 31, 32)]
    bugs = []
    for kernel, trigger, cases, failing in [
        (PLANTED, "fails when: a causal_top_left mask alone; passes without it",
         [rb.case(s, causal=True, blocks=FLASH_BLOCKS) for s in range(20, 25)], 2),
        ("pallas_splash", "fails when: bfloat16 and a causal_top_left mask together", bf16, 1),
    ]:  # fmt: skip
        found, facts = _bug(out / "store", cand, kernel, trigger, cases[0], cases[1:], failing)
        recs += found
        bugs.append(facts)
    store = rb.write_store(out / "store", recs)
    report, _ = compose.make(load([store]), thresholds=thresholds.load(), baseline="jax=0.10.2")
    return render.write(report, out / "index.html"), bugs


@pytest.mark.parametrize(("width", "height"), WINDOWS, ids=[f"{w}px" for w, _ in WINDOWS])
def test_the_first_screen_names_each_bug_and_no_word_is_split_across_two_lines(
    bugs_report: tuple[Path, list[tuple[str, ...]]], tmp_path: Path, width: int, height: int
) -> None:
    browser = _chromium()
    page, bugs = bugs_report
    html = page.read_text()
    csp = re.search(r'<meta http-equiv="Content-Security-Policy"[^>]*>', html)
    assert csp, "the report no longer sets its Content-Security-Policy"
    measured = tmp_path / "measured.html"
    measured.write_text(html.replace(csp.group(0), "").replace("</body>", WORDS + LAYOUT + "</body>"))
    proc = _run(browser, tmp_path, f"--window-size={width},{height}", "--dump-dom", measured.as_uri())
    assert proc.returncode == 0, proc.stderr[-2000:]
    found = re.search(r'data-words="([^"]*)"', proc.stdout), re.search(r'data-layout="([^"]*)"', proc.stdout)
    assert all(found), "the measuring scripts did not run"
    words, layout = (json.loads(unescape(f.group(1))) for f in found)
    assert words["view"] == width
    # Each bug in one line of the banner, whole within the first screen: its kernel, its trigger in words, its
    # kernel's failing drawn cases and the command that replays it.
    for facts in bugs:
        assert any(all(fact in line for fact in facts) for line in words["seen"]), (
            f"no line of the first screen ({width}x{words['height']} px) says {facts}:\n" + "\n".join(words["seen"])
        )
    assert not words["split"], "words split across two lines:\n" + "\n".join(words["split"])
    scroll = [f"the page is {layout['page']} px wide in a {width} px window"] if layout["page"] > width else []
    assert not (scroll or layout["wide"]), "\n".join(scroll + layout["wide"])
