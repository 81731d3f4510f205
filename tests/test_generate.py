"""docs/generate.py: the generated documentation is current, and --check says which part is stale."""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from docs import generate
from harness.cli import build_parser
from harness.core import contract

ROOT = Path(__file__).resolve().parent.parent


def _missing_frameworks() -> dict[str, str]:
    """Kernel modules whose framework is not installed here: the table would lose their rows. (A module whose
    upstream the installed jax lacks keeps the rows generated where it loads: docs.generate carries them.)"""
    return {m: why for m, why in contract.unavailable().items() if not why.startswith(generate.LACKS)}


def _lacking() -> list[str]:
    return [m for m, why in contract.unavailable().items() if why.startswith(generate.LACKS)]


def test_the_kernel_table_is_current() -> None:
    # The table is the declarations of every implementation the code defines; one missing here would drop its row.
    if _missing_frameworks():
        pytest.skip(f"modules cannot be imported here: {_missing_frameworks()}")
    page = generate.KERNELS_PAGE
    want = generate.parts(_lacking())[page]
    assert want == page.read_text(), "docs/kernels.md is stale: run `python -m docs.generate`"


def test_a_kernel_the_release_lacks_keeps_its_rows_in_their_place() -> None:
    old = "| a | b |\n|---|---|\n| `pallas_flash` | kernel |\n| `pallas_gpu` | kernel |\n| `pallas_gpu` | x |\n"
    table = "| a | b |\n|---|---|\n| `jax_xla` | kernel |\n| `pallas_flash` | kernel |\n| `torch_sdpa` | oracle |"
    got = generate._with_carried(table, old, ["pallas_gpu"]).splitlines()[2:]
    assert got == ["| `jax_xla` | kernel |", "| `pallas_flash` | kernel |", "| `pallas_gpu` | kernel |"] + [
        "| `pallas_gpu` | x |",
        "| `torch_sdpa` | oracle |",
    ]


def test_the_table_has_one_row_per_implementation_with_every_column() -> None:
    table = generate.kernel_table(contract.defined().values()).splitlines()
    header, _, *rows = table
    assert header.count("|") == len(generate.COLUMNS) + 1
    assert [r.split("|")[1].split("`")[1] for r in rows[:1]] == ["jax_cudnn"]  # kernels first, by name
    assert len(rows) == len(contract.defined())
    assert all(r.count("|") - r.count("\\|") == len(generate.COLUMNS) + 1 for r in rows)


def test_the_cli_reference_is_current() -> None:
    page = generate.CLI_PAGE
    want = generate._filled(page, [(generate.cli_reference(build_parser()), generate.CLI_BEGIN, generate.CLI_END)])
    assert want == page.read_text(), "docs/cli.md is stale: run `python -m docs.generate`"


def test_the_bug_history_is_rendered_from_its_records() -> None:
    page = generate.HISTORY_PAGE
    assert generate.history_page() == page.read_text(), "docs/history.md is stale: run `python -m docs.generate`"
    bugs = json.loads(generate.HISTORY_BUGS.read_text())["rows"]
    # The count the page opens its list with is the records' own.
    assert f"{len(bugs)} bugs: " in page.read_text() and len({b["id"] for b in bugs}) == len(bugs)


def test_the_recorded_benchmark_runs_are_rendered_from_their_files() -> None:
    page = generate.PERFORMANCE_PAGE
    body = generate.benchmark_results(generate.RESULTS)
    want = generate._filled(page, [(body, generate.RESULTS_BEGIN, generate.RESULTS_END)])
    assert want == page.read_text(), "docs/performance.md is stale: run `python -m docs.generate`"
    throughput = json.loads((generate.RESULTS / "throughput.json").read_text())
    assert f"`{throughput['command']}`" in body and "| warm_cache | 20 | 28.9 | 21.9 | 41.5 | 0 |" in body


def _commands() -> dict[str, argparse.ArgumentParser]:
    parser = build_parser()
    return next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices


def test_every_option_of_every_subcommand_is_in_its_section_of_the_reference() -> None:
    text = generate.CLI_PAGE.read_text()
    sections = dict(re.findall(r"^### ([\w-]+)\n(.*?)(?=^### |<!-- cli:end -->)", text, flags=re.S | re.M))
    assert set(sections) == set(_commands()), "docs/cli.md: a subcommand without its section (or one too many)"
    missing = [
        f"{name} {option}"
        for name, command in _commands().items()
        for action in command._actions
        if not isinstance(action, argparse._HelpAction)
        for option in action.option_strings or [action.metavar or action.dest]
        if f"`{option}`" not in sections[name]
    ]
    assert not missing, f"docs/cli.md lacks these arguments: {missing}"


def test_the_reference_reads_the_same_on_every_machine() -> None:
    # Defaults under the home directory or the checkout are written as ~ and relative paths.
    text = generate.cli_reference(build_parser())
    assert str(generate.ROOT) not in text and str(generate.Path.home()) not in text
    assert "`--constraints` | `FILE` | `constraints/default.txt` |" in text


@pytest.fixture
def page(tmp_path, monkeypatch):
    path = tmp_path / "docs" / "kernels.md"
    path.parent.mkdir()
    cli = tmp_path / "docs" / "cli.md"
    cli.write_text(f"# CLI\n{generate.CLI_BEGIN}\n{generate.CLI_END}\n")
    monkeypatch.setattr(generate, "ROOT", tmp_path)
    monkeypatch.setattr(generate, "KERNELS_PAGE", path)
    monkeypatch.setattr(generate, "CLI_PAGE", cli)
    history = tmp_path / "docs" / "history.md"
    history.write_text(generate.HISTORY_PAGE.read_text())
    monkeypatch.setattr(generate, "HISTORY_PAGE", history)
    performance = tmp_path / "docs" / "performance.md"
    performance.write_text(generate.PERFORMANCE_PAGE.read_text())
    monkeypatch.setattr(generate, "PERFORMANCE_PAGE", performance)
    found = tmp_path / "docs" / "found.md"
    found.write_text(generate.FOUND_PAGE.read_text())
    monkeypatch.setattr(generate, "FOUND_PAGE", found)
    readme = tmp_path / "README.md"
    readme.write_text(generate.README.read_text())
    monkeypatch.setattr(generate, "README", readme)
    return path


def test_check_names_a_stale_page_and_writing_makes_it_current(page, capsys) -> None:
    if _missing_frameworks():
        pytest.skip(f"modules cannot be imported here: {_missing_frameworks()}")
    tail = f"{generate.RESTRICTIONS_BEGIN}\n{generate.RESTRICTIONS_END}\n"
    page.write_text(f"# Kernels\n\n{generate.BEGIN}\n| old |\n{generate.END}\n\nafter\n{tail}")
    assert generate.main(["--check"]) == 1
    err = capsys.readouterr().err
    assert "docs/kernels.md: its generated tables are stale" in err and "docs/cli.md: its generated" in err
    assert "| old |" in page.read_text()  # --check writes nothing
    assert generate.main([]) == 0
    text = page.read_text()
    assert text.startswith("# Kernels\n\n") and f"{generate.END}\n\nafter\n" in text and "`pallas_flash`" in text
    assert "| `pallas_flash` | violations | block_k a multiple of 128 | upstream " in text
    assert generate.main(["--check"]) == 0


def test_a_page_without_its_markers_is_a_usage_error(page, capsys) -> None:
    if _missing_frameworks():
        pytest.skip(f"modules cannot be imported here: {_missing_frameworks()}")
    page.write_text(f"# Kernels\n{generate.END}\n{generate.BEGIN}\n")
    assert generate.main(["--check"]) == 2
    err = capsys.readouterr().err
    assert "docs/kernels.md: expected one '<!-- kernels:begin -->' before one '<!-- kernels:end -->'" in err


def test_the_findings_counts_are_the_catalogue_s() -> None:
    from harness import findings

    body = generate.finding_counts()
    notes = findings.catalogue()
    assert body.startswith(f"{len(notes)} notes (")
    assert all(f"[{f.name}](" in body for f in notes)


def test_the_generated_pages_are_the_same_at_torchs_lowest_cpu_capability() -> None:
    # torch picks its CPU kernels by the host's capability (AVX-512, AVX2, none): a probed value that depends on it
    # (torch_cpu_flash's rows with no visible key under a finfo.min mask) stays off the page, which every host
    # generates alike. ATEN_CPU_CAPABILITY=default is what a host without AVX2 runs.
    env = {**os.environ, "ATEN_CPU_CAPABILITY": "default", "JAX_PLATFORMS": "cpu"}
    done = subprocess.run(
        [sys.executable, "-m", "docs.generate", "--check"], env=env, cwd=ROOT, capture_output=True, text=True
    )
    assert done.returncode in (0, 4), done.stderr  # 4: a framework not installed here, nothing generated
    assert done.returncode == 0 or _missing_frameworks(), done.stderr
