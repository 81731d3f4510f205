"""docs/tutorial.md as a reader follows it: every `python -m harness` command of its bash blocks, run in
order in an empty directory, exits as the page says (`# exits N` after the command)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "docs" / "tutorial.md"
BLOCK = re.compile(r"^```bash\n(.*?)^```", re.S | re.M)
COMMAND = re.compile(r"^(?P<cmd>python -m harness .+?)\s+# exits (?P<code>\d)$")


def commands(text: str) -> list[tuple[str, int]]:
    """(command, the exit status the page promises) of each command of the page's bash blocks."""
    lines = [ln for block in BLOCK.findall(text) for ln in block.splitlines() if ln.strip()]
    found = [COMMAND.match(ln) for ln in lines]
    assert all(found), f"a command without its `# exits N`: {[ln for ln in lines if not COMMAND.match(ln)]}"
    return [(m["cmd"], int(m["code"])) for m in found if m]


def test_the_page_has_the_four_steps() -> None:
    said = [cmd.split()[3] for cmd, _ in commands(PAGE.read_text())]
    assert said == ["run", "run", "repro", "report"]


@pytest.mark.slow  # four commands of the harness, two of them runs: about four CPU minutes
def test_every_command_of_the_tutorial_exits_as_the_page_says(tmp_path: Path) -> None:
    env = {
        **os.environ,
        "JAX_PLATFORMS": "cpu",
        "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
    }
    for cmd, code in commands(PAGE.read_text()):
        # As the reader's shell: `python` is this interpreter, the glob of step 3 expanded by bash.
        line = cmd.replace("python ", f"{sys.executable} ", 1)
        done = subprocess.run(["bash", "-c", line], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=900)
        assert done.returncode == code, f"{cmd}\nexited {done.returncode}, the page says {code}:\n{done.stdout[-3000:]}"
        assert "Traceback" not in done.stdout + done.stderr, cmd
    assert len(list((tmp_path / "tutorial" / "failures").glob("*.json"))) == 1  # step 3 replays one file
    assert (tmp_path / "tutorial" / "report.html").stat().st_size > 10_000
