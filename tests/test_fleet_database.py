"""`run --database URL`: the example database a fleet of runners shares (harness.running.database).

The fast tests parse URLs, refuse bad ones (exit 2, one line), and degrade a shared database that fails to
its local directory with one warning. The slow one starts a real redis-server on loopback and runs two
`python -m harness run` processes against it: runner B's first case is the failure runner A found, and the
server killed under B costs one warning and no record.
"""

from __future__ import annotations

import io
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import types
from pathlib import Path

import pytest
from hypothesis.database import ExampleDatabase

from harness import pytest_plugin
from harness.cli import main
from harness.running import database
from harness.running import runner as harness_runner
from harness.running import search as search_module
from harness.running.database import DATABASE_ENV, Degrading, GitHub, Redis
from harness.running.plan import RunPlan
from harness.running.search import search
from tests import _fakes
from tests.test_search import StandInRunner

ROOT = Path(__file__).resolve().parents[1]
# A planted bug that about half of drawn cases meet, and Hypothesis's simplest case does not.
PLANTED = "jax_xla=tests.fixtures.fleet:dot_product_attention"


@pytest.mark.parametrize(
    ("url", "parsed"),
    [
        pytest.param("reports/db", Path("reports/db"), id="directory"),
        pytest.param("redis://10.0.0.5:6380/3", Redis(host="10.0.0.5", port=6380, db=3), id="redis"),
        pytest.param("redis://cache", Redis(host="cache"), id="redis-defaults"),
        pytest.param("github://org/repo", GitHub(owner="org", repo="repo"), id="github"),
        pytest.param(
            "github://org/repo/nightly-db", GitHub(owner="org", repo="repo", artifact="nightly-db"), id="gh-a"
        ),
    ],
)
def test_a_database_url_is_parsed_into_its_backend(url, parsed):
    if isinstance(parsed, Redis):
        pytest.importorskip("redis", reason="the fleet extra: pip install 'attention-harness[fleet]'")
    assert database.parse(url) == parsed
    assert isinstance(parsed, Path) or database.parse(str(parsed)) == parsed  # its URL written out whole


def test_a_redis_url_without_the_redis_package_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "redis", None)
    with pytest.raises(ValueError, match=r"needs the redis package: pip install 'attention-harness\[fleet\]'"):
        database.parse("redis://h:1/0")


@pytest.mark.parametrize(
    ("url", "message"),
    [
        pytest.param("", "--database is empty; give a directory, redis://", id="empty"),
        pytest.param("ftp://host/db", "unknown scheme 'ftp'; give a directory, redis://HOST:PORT/N", id="scheme"),
        pytest.param("redis://host:port/0", "must read redis://HOST:PORT/N (PORT and N numbers)", id="port"),
        pytest.param("redis://:6379/0", "must read redis://HOST:PORT/N", id="host"),
        pytest.param("redis://host:6379/zero", "must read redis://HOST:PORT/N", id="db"),
        pytest.param("github://org", "must read github://OWNER/REPO or github://OWNER/REPO/ARTIFACT", id="gh-repo"),
        pytest.param("github://org/repo/a/b", "must read github://OWNER/REPO", id="gh-deep"),
    ],
)
def test_a_bad_database_url_exits_2_with_one_line_naming_the_fix(url, message, tmp_path, capsys):
    assert main(["run", "--database", url, "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1 and "Traceback" not in err


def test_the_environment_gives_the_default_and_no_database_wins(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv(DATABASE_ENV, str(tmp_path / "shared"))
    plan = RunPlan(out=tmp_path)
    assert plan.example_database() == (tmp_path / "shared", None)
    argv = plan.to_argv()
    assert argv[argv.index("--database") + 1] == str(tmp_path / "shared")  # the workers of --jobs get it
    assert RunPlan(out=tmp_path, database=False).example_database() == (None, None)
    monkeypatch.setenv(DATABASE_ENV, "ftp://nowhere")
    assert RunPlan(out=tmp_path, database=False).example_database() == (None, None)  # not read: no error
    assert main(["run", "--out", str(tmp_path)]) == 2
    assert "unknown scheme 'ftp'" in capsys.readouterr().err


def test_without_a_url_the_database_is_the_stores_directory(tmp_path, monkeypatch):
    monkeypatch.delenv(DATABASE_ENV, raising=False)
    assert RunPlan(out=tmp_path).example_database() == (tmp_path / ".hypothesis", None)
    shared = RunPlan(out=tmp_path, database_url="github://o/r").example_database()
    assert shared == (tmp_path / ".hypothesis", GitHub(owner="o", repo="r"))  # beside the store's directory


class _GoesAway:
    """A shared database that answers `calls` times, then raises ConnectionError on every call."""

    def __init__(self, calls: int) -> None:
        self.calls, self.saved = calls, set()

    def _up(self) -> None:
        self.calls -= 1
        if self.calls < 0:
            raise ConnectionError("Error 111 connecting to 127.0.0.1:6399.\nConnection refused.")

    def fetch(self, key):
        self._up()
        return iter(sorted(v for k, v in self.saved if k == key))

    def save(self, key, value):
        self._up()
        self.saved.add((key, value))

    def delete(self, key, value):
        self._up()

    def move(self, src, dest, value):
        self._up()


def test_a_shared_database_that_goes_away_degrades_to_the_local_one_with_one_warning(tmp_path):
    from hypothesis.database import DirectoryBasedExampleDatabase

    shared, local, err = _GoesAway(calls=3), DirectoryBasedExampleDatabase(str(tmp_path)), io.StringIO()
    shared.saved.add((b"k", b"from the fleet"))
    db = Degrading(shared, local, names=("redis://h:1/0", str(tmp_path)), warn=lambda: err)
    db.save(b"k", b"mine")  # call 1: saved in both
    assert list(db.fetch(b"k")) == [b"from the fleet", b"mine"]  # call 2: the fleet's first, then the local ones
    db.save(b"k", b"second")  # call 3
    for value in (b"third", b"fourth"):
        db.save(b"k", value)  # the first fails: one warning; the next never asks the shared one
    db.delete(b"k", b"second")
    assert sorted(db.fetch(b"k")) == [b"fourth", b"mine", b"third"]  # nothing found locally was lost
    (line,) = err.getvalue().splitlines()
    assert line == (
        f"warning: example database redis://h:1/0 unreachable (Error 111 connecting to 127.0.0.1:6399.); "
        f"examples are saved in {tmp_path} alone from now on"
    )


class _Keys(ExampleDatabase):
    """An empty database that notes the keys Hypothesis asks it for."""

    def __init__(self, asked: set[bytes]) -> None:
        super().__init__()
        self.asked = asked

    def fetch(self, key):
        self.asked.add(key)
        return iter(())

    def save(self, key, value):
        self.asked.add(key)

    def delete(self, key, value):
        pass

    def move(self, src, dest, value):
        pass


def test_the_key_names_no_path(monkeypatch, tmp_path):
    # Each runner's key is Hypothesis's digest of the search's test and the kernel's name: the same from two
    # stores in two working directories, so a shared database hands one runner's failures to another.
    monkeypatch.setattr(harness_runner, "run_case", StandInRunner().run_case)
    asked: dict[Path, set[bytes]] = {}
    monkeypatch.setattr(
        search_module.examples_database, "open_database", lambda d, s: _Keys(asked.setdefault(d, set()))
    )
    kernel = _fakes.FakeKernel("tests._fakes:wide")
    for store in ("a", "b"):
        (tmp_path / store).mkdir()
        monkeypatch.chdir(tmp_path / store)
        search(kernel, [], examples=2, profile="dev", database=tmp_path / store / ".hypothesis", grads=False)
    first, second = asked.values()
    assert first and first == second


def _config(**given):
    """A pytest config with the plugin's options as `given` (others unset)."""
    options = {
        "attention_kernel": "jax_xla",
        "attention_like": None,
        "attention_examples": None,
        "attention_profile": None,
        "attention_out": "out",
        "attention_interpreter": "fast",
        "attention_case_timeout": None,
        "attention_database": None,
    } | given
    return types.SimpleNamespace(getoption=options.get, invocation_params=types.SimpleNamespace(dir=Path(".")))


def test_the_pytest_plugin_takes_the_same_database(monkeypatch):
    monkeypatch.setenv(DATABASE_ENV, "some/dir")
    assert pytest_plugin._options(_config()).database == "some/dir"
    assert pytest_plugin._options(_config(attention_database="other")).database == "other"
    with pytest.raises(pytest.UsageError, match="--attention-database='ftp://x': unknown scheme 'ftp'"):
        pytest_plugin._options(_config(attention_database="ftp://x"))


# --- a fleet: two runners and a real Redis server ---------------------------------------------------------


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def redis_url(tmp_path):
    """A redis-server on loopback, killed (if still up) at the end; its URL and its process."""
    pytest.importorskip("redis", reason="the fleet extra: pip install 'attention-harness[fleet]'")
    binary = shutil.which("redis-server")
    if binary is None:
        pytest.skip("no redis-server binary: apt-get install redis-server")
    port = _free_port()
    args = [binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"]
    server = subprocess.Popen([*args, "--dir", str(tmp_path)], stdout=subprocess.DEVNULL)
    import redis

    client = redis.Redis(port=port)
    for _ in range(100):
        try:
            client.ping()
            break
        except redis.exceptions.ConnectionError:
            time.sleep(0.1)
    yield f"redis://127.0.0.1:{port}/0", server, client
    server.kill()
    server.wait()


def _runner(out: Path, url: str, *extra: str) -> subprocess.Popen:
    """One runner of the fleet: an unseeded run of the planted bug, drawn cases only, its store `out`."""
    argv = ["run", "--kernel", PLANTED, "--profile", "dev", "--no-smoke", "--no-pool", "--no-grads", "--jobs", "1"]
    return subprocess.Popen(
        [sys.executable, "-m", "harness", *argv, "--out", str(out), "--database", url, *extra],
        cwd=ROOT,
        stdout=(out.parent / f"{out.name}.out").open("w"),
        stderr=(out.parent / f"{out.name}.err").open("w"),
        env={**os.environ, "JAX_PLATFORMS": "cpu", "PYTHONUNBUFFERED": "1"},
    )


def _cases(stdout: str) -> list[str]:
    """The run's case lines ("[i/N] ..."), in the order it checked them."""
    return [line for line in stdout.splitlines() if line.startswith("[")]


@pytest.mark.slow
def test_a_fleet_shares_its_failures_and_survives_the_server_going_away(redis_url, tmp_path):
    url, server, client = redis_url
    a = _runner(tmp_path / "a", url, "--examples", "8", "--first-failure")
    assert a.wait(timeout=600) == 1, (tmp_path / "a.out").read_text() + (tmp_path / "a.err").read_text()
    assert client.keys("hypothesis-example:*"), "runner A saved its failure in the shared database"
    (found,) = (tmp_path / "a" / "failures").glob("*.json")  # its id: the failure's case, shrunk and reduced

    b = _runner(tmp_path / "b", url, "--examples", "4")  # its own store and directory: an empty one
    out = tmp_path / "b.out"
    deadline = time.monotonic() + 600
    while not _cases(out.read_text()) and b.poll() is None and time.monotonic() < deadline:
        time.sleep(0.2)
    server.send_signal(signal.SIGKILL)  # gone mid-run: B shrinks and draws on without it
    assert b.wait(timeout=600) == 1, out.read_text() + (tmp_path / "b.err").read_text()
    stdout, stderr = out.read_text(), (tmp_path / "b.err").read_text()

    first, *_ = cases = _cases(stdout)
    # B's first case is A's failure, replayed from Redis (Hypothesis's own shrunk example; both runs then reduce
    # it over its features to one case, so B's failure file has A's name); a fresh draw starts from a passing case.
    assert " FAIL " in first, stdout
    assert (tmp_path / "b" / "failures" / found.name).is_file(), stdout
    # No record lost: every case drawn was checked and written, the run finished.
    assert [c.split("]")[0] for c in cases] == [f"[{i}/4" for i in range(1, 5)]
    (run_dir,) = (tmp_path / "b" / "records").iterdir()
    assert json.loads((run_dir / "run.json").read_text())["status"] == "finished"
    kernel = [json.loads(p.read_text()) for p in run_dir.glob("*--jax_xla*.json")]
    assert len({r["case_id"] for r in kernel if not r.get("shrunk")}) + sum(bool(r.get("shrunk")) for r in kernel) >= 4
    warnings = [line for line in stderr.splitlines() if line.startswith("warning: example database")]
    assert len(warnings) == 1 and url in warnings[0], stderr
    assert any((tmp_path / "b" / ".hypothesis").rglob("*")), "B's examples went to its directory"


def test_the_pytest_plugins_drawn_test_uses_it_unless_derandomized(tmp_path, monkeypatch):
    from hypothesis import settings
    from hypothesis.database import DirectoryBasedExampleDatabase, MultiplexedDatabase

    monkeypatch.setenv("HYPOTHESIS_STORAGE_DIRECTORY", str(tmp_path / "home"))
    item = lambda url: types.SimpleNamespace(options=types.SimpleNamespace(database=url))  # noqa: E731
    drawn = pytest_plugin.DrawnItem._database
    (db,) = drawn(item(str(tmp_path / "db")), settings(derandomize=False)).values()
    assert isinstance(db, DirectoryBasedExampleDatabase) and db.path == tmp_path / "db"
    (db,) = drawn(item("github://o/r"), settings(derandomize=False)).values()
    assert isinstance(db, MultiplexedDatabase)  # Hypothesis's own directory, and the artifact read-only
    assert drawn(item(str(tmp_path / "db")), settings(derandomize=True)) == {}
    assert drawn(item(None), settings(derandomize=False)) == {}
