"""The README and the docs/ pages against the code: the README stays one page, every relative link
and anchor resolves, and what the pages name (files, a module's names, tests, nox sessions,
`harness` commands) exists, so a rename that leaves a page stale fails here, not in a reader's hands.

The kernel table (docs/kernels.md) is generated from the kernels' declarations and checked by its
generator's own test. `nox -s docs` builds the site with `mkdocs build --strict` on top of these.
"""

from __future__ import annotations

import ast
import re
import unicodedata
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
DOCS = ROOT / "docs"
MKDOCS = ROOT / "mkdocs.yml"
PAGES = [README, *sorted(DOCS.rglob("*.md"))]
# The handwritten pages; a finding's note (docs/findings/, docs/divergences/) cites upstream's paths too.
OWN_PAGES = [README, *sorted(DOCS.glob("*.md"))]
# "One page": what a newcomer reads before the first command and the four workflows (issue 27).
README_MAX_LINES = 200

FENCED = re.compile(r"^(```|~~~).*?^\1", re.S | re.M)
CODE_SPAN = re.compile(r"(`+)(.+?)\1", re.S)
LINK = re.compile(r"(?<!!)\[(?P<text>[^\]]*)\]\((?P<target>[^)\s]+)\)")
EXTERNAL = re.compile(r"^[a-z][a-z0-9+.-]*:", re.I)  # https:, mailto:, ...


def _rel(path: Path) -> str:
    return str(path.relative_to(ROOT))


def _prose(text: str) -> str:
    """The text outside fenced code blocks (a finding's `+++` TOML block included) and code spans."""
    text = re.sub(r"\A\+\+\+\n.*?^\+\+\+$", "", text, flags=re.S | re.M)
    return CODE_SPAN.sub("", FENCED.sub("", text))


def slug(heading: str) -> str:
    """The anchor Python-Markdown's toc extension (MkDocs' default) gives a heading."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link's text only
    text = re.sub(r"[`*_]", "", text)
    text = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode()
    text = re.sub(r"[^\w\s-]", "", text).strip().lower()
    return re.sub(r"[-\s]+", "-", text)


def anchors(page: Path) -> set[str]:
    headings = re.findall(r"^#{1,6}\s+(.+?)\s*#*\s*$", FENCED.sub("", page.read_text()), flags=re.M)
    return {slug(h) for h in headings}


def links(page: Path) -> list[str]:
    return [m["target"] for m in LINK.finditer(_prose(page.read_text()))]


def test_the_readme_is_one_page() -> None:
    lines = len(README.read_text().splitlines())
    assert lines <= README_MAX_LINES, (
        f"README.md has {lines} lines, at most {README_MAX_LINES}: it is the one-page start (what it is, "
        f"the two commands, the four workflows, where to go next); move the detail to a docs/ page"
    )


# A page says what the harness does and how to use it; how one machine was loaded when a figure was taken,
# a tracker's issue numbers, throwaway scripts' paths and cache paths are a lab notebook's. The project's own
# cache directory is documentation: where a user finds it.
NOTEBOOK = re.compile(r"load average|issue [0-9]+|/tmp/|\.cache/", re.I)
OWN_CACHE = "~/.cache/attention-harness"
# A page a reader can take in at one sitting; the generated tables (between `<!-- X:begin -->` and
# `<!-- X:end -->`) are reference data and do not count.
MAX_WORDS = 3000
GENERATED = re.compile(r"<!-- ([\w-]+):begin -->.*?<!-- \1:end -->", re.S)


@pytest.mark.parametrize("page", PAGES, ids=_rel)
def test_no_page_is_a_lab_notebook(page: Path) -> None:
    lines = page.read_text().replace(OWN_CACHE, "").splitlines()
    found = [f"{_rel(page)}:{n}: {ln.strip()[:100]}" for n, ln in enumerate(lines, 1) if NOTEBOOK.search(ln)]
    assert not found, "machine load, issue numbers, temporary or cache paths:\n" + "\n".join(found)


@pytest.mark.parametrize("page", PAGES, ids=_rel)
def test_no_page_is_over_3000_words_outside_its_generated_tables(page: Path) -> None:
    words = len(GENERATED.sub("", page.read_text()).split())
    assert words <= MAX_WORDS, f"{_rel(page)}: {words} words outside its generated blocks, at most {MAX_WORDS}"


def test_a_notebook_line_and_a_long_page_are_found() -> None:
    assert NOTEBOOK.search("measured at load average 10 on 2 cores") and NOTEBOOK.search("as issue 24 asked")
    assert not NOTEBOOK.search(f"cached under `{OWN_CACHE}/jax`".replace(OWN_CACHE, ""))
    page = "word " * 10 + "<!-- t:begin -->\n" + "cell " * 5000 + "\n<!-- t:end -->"
    assert len(GENERATED.sub("", page).split()) == 10


def test_the_readme_keeps_the_two_commands_ci_runs() -> None:
    text = README.read_text()
    assert "nox -s tpu" in text and "nox -s tests" in text
    assert "nox -s tests" in (ROOT / ".ci" / "run").read_text()


@pytest.mark.parametrize("page", PAGES, ids=_rel)
def test_every_relative_link_and_anchor_resolves(page: Path) -> None:
    broken = []
    for target in links(page):
        if EXTERNAL.match(target):
            continue
        path, _, anchor = target.partition("#")
        dest = (page.parent / path).resolve() if path else page
        if not dest.exists():
            broken.append(f"{target} (no file {dest.relative_to(ROOT) if dest.is_relative_to(ROOT) else dest})")
        elif anchor and dest.suffix == ".md" and anchor not in anchors(dest):
            broken.append(f"{target} (no heading with anchor #{anchor} in {_rel(dest)})")
    assert not broken, f"{_rel(page)}: broken links: {broken}"


def _nav_files(node: object) -> list[str]:
    if isinstance(node, str):
        return [node]
    if isinstance(node, list):
        return [f for item in node for f in _nav_files(item)]
    if isinstance(node, dict):
        return [f for value in node.values() for f in _nav_files(value)]
    return []


def test_every_docs_page_is_in_the_site_nav() -> None:
    # `mkdocs build --strict` fails on a page missing from the nav too; this says so in `nox -s tests`.
    nav = set(_nav_files(yaml.safe_load(MKDOCS.read_text())["nav"]))
    pages = {str(p.relative_to(DOCS)) for p in DOCS.rglob("*.md")}
    assert not pages - nav, f"docs pages missing from the nav in mkdocs.yml: {sorted(pages - nav)}"


# What the pages name, checked against the tree. A path in a code span (`harness/core/compare.py`),
# optionally with a name in it (`harness/core/compare.py: TOLERANCES`); placeholders (<id>, DIR) skipped.
TOP = ("harness", "kernels", "oracles", "tests", "benchmarks", "docs", "tools", "constraints", ".github", ".ci")
PATH_SPAN = re.compile(rf"^(?P<path>(?:{'|'.join(re.escape(t) for t in TOP)})/[\w./-]*)(?::\s*(?P<name>[A-Za-z_]\w*))?")


def _spans(page: Path) -> list[str]:
    return [m[2].strip() for m in CODE_SPAN.finditer(FENCED.sub("", page.read_text()))]


def _named_paths(page: Path) -> list[tuple[str, str | None]]:
    out = []
    for span in _spans(page):
        m = PATH_SPAN.match(span)
        if m and not re.search(r"[<>*{]", span):
            out.append((m["path"].rstrip("/."), m["name"]))
    return out


@pytest.mark.parametrize("page", OWN_PAGES, ids=_rel)
def test_every_file_a_page_names_exists_with_the_names_it_cites(page: Path) -> None:
    stale = []
    for path, name in _named_paths(page):
        target = ROOT / path
        if not target.exists():
            stale.append(f"`{path}` does not exist")
        elif name and target.is_file() and not re.search(rf"\b{name}\b", target.read_text()):
            stale.append(f"`{path}: {name}`: {path} defines no {name}")
    assert not stale, f"{_rel(page)} names what the tree does not hold: {stale}"


def _sessions() -> set[str]:
    tree = ast.parse((ROOT / "noxfile.py").read_text())
    return {
        f.name
        for f in tree.body
        if isinstance(f, ast.FunctionDef) and any("session" in ast.unparse(d) for d in f.decorator_list)
    }


def _commands() -> set[str]:
    from harness.cli import _commands

    return set(_commands())


COMMANDS = _commands()  # each module's NAME: compare_fork.py is `compare-fork`


@pytest.mark.parametrize("page", PAGES, ids=_rel)
def test_every_session_and_command_a_page_names_exists(page: Path) -> None:
    text = page.read_text()
    sessions = set(re.findall(r"\bnox -s \"?(\w+)", text))
    commands = set(re.findall(r"\bpython -m harness ([\w-]+)", text))
    assert sessions <= _sessions(), f"{_rel(page)} names nox sessions noxfile.py lacks: {sessions - _sessions()}"
    assert commands <= COMMANDS, f"{_rel(page)} names harness commands that do not exist: {commands - COMMANDS}"


# The claim table (docs/tests.md): each claim and the tests that check it, by file and test name.
CLAIMS = DOCS / "tests.md"
TEST_FILE = re.compile(r"(?:tests/)?(test_\w+\.py)")


def _tests_in(file: str) -> set[str]:
    tree = ast.parse((ROOT / "tests" / file).read_text())
    return {n.name for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name.startswith("test")}


def claim_rows() -> list[tuple[str, str]]:
    """(claim, checked-by cell) of each row of the table in docs/tests.md."""
    rows = [ln for ln in CLAIMS.read_text().splitlines() if ln.startswith("| ") and not ln.startswith("| claim")]
    return [tuple(c.strip() for c in ln.strip().strip("|").split(" | ", 1)) for ln in rows]


def test_the_claim_table_has_rows() -> None:
    assert len(claim_rows()) >= 30, "docs/tests.md: the claim table was not found (a row is `| claim | tests |`)"


@pytest.mark.parametrize(("claim", "cell"), claim_rows(), ids=[c[:60] for c, _ in claim_rows()])
def test_each_claim_names_tests_that_exist(claim: str, cell: str) -> None:
    """A test name belongs to the test file named last before it in the cell."""
    missing, file = [], None
    for token in re.findall(r"(?:tests/)?test_\w+\.py|(?<=::)test_\w+|`test_\w+`", cell):
        if m := TEST_FILE.fullmatch(token):
            file = m[1]
            if not (ROOT / "tests" / file).exists():
                missing.append(f"tests/{file}")
        elif file is not None and token.strip("`") not in _tests_in(file):
            missing.append(f"{file}::{token.strip('`')}")
    assert not missing, f"docs/tests.md claim {claim!r} names tests that do not exist: {missing}"


def test_a_notes_toml_block_renders_as_toml_under_its_title() -> None:
    from docs.hooks import front_matter_as_code

    note = '+++\ntitle = "x"\nkind = "bug"\n+++\n\n# The title\n\nBody.\n'
    assert front_matter_as_code(note) == '# The title\n\n```toml\ntitle = "x"\nkind = "bug"\n```\n\n\nBody.\n'
    page = "# A page\n\n+++ not front matter\n"
    assert front_matter_as_code(page) == page
    assert front_matter_as_code("+++\nunclosed\n") == "+++\nunclosed\n"


# A page's claim that the test suite runs something, and the test file it names.
SUITE_CLAIM = re.compile(r"by the test suite \(`(?P<path>tests/test_\w+\.py)`\)")


def _slow_tests(path: Path) -> list[str]:
    """The test functions of a test module marked slow (`@pytest.mark.slow`): not run by `nox -s tests`."""
    tree = ast.parse(path.read_text())
    return [
        node.name
        for node in tree.body
        if isinstance(node, ast.FunctionDef)
        and node.name.startswith("test_")
        and any("slow" in ast.unparse(d) for d in node.decorator_list)
    ]


def _sessions_run_by_ci() -> set[str]:
    """The nox sessions a workflow or .ci/run runs."""
    texts = [p.read_text() for p in (ROOT / ".github" / "workflows").glob("*.yml")] + [
        (ROOT / ".ci" / "run").read_text()
    ]
    return {m for t in texts for m in re.findall(r"nox -s (\w+)", t)}


def _sessions_naming(path: str) -> set[str]:
    """The noxfile's sessions whose body names `path`."""
    tree = ast.parse((ROOT / "noxfile.py").read_text())
    return {n.name for n in tree.body if isinstance(n, ast.FunctionDef) and path in ast.unparse(n)}


@pytest.mark.parametrize("page", OWN_PAGES, ids=_rel)
def test_a_page_that_says_the_test_suite_runs_it_names_a_test_ci_runs(page: Path) -> None:
    # "Every command below is run by the test suite (`tests/test_tutorial.py`)": where the test is slow, left out
    # of `nox -s tests`, a session that CI runs must run it, or the page claims what nothing checks.
    for m in SUITE_CLAIM.finditer(page.read_text()):
        test = ROOT / m["path"]
        assert test.is_file(), f"{_rel(page)} names {m['path']}, which does not exist"
        if _slow_tests(test):
            run = _sessions_naming(m["path"]) & _sessions_run_by_ci()
            assert run, f"{_rel(page)}: {m['path']} is marked slow and no session that CI runs runs it"
