"""harness.environments.bisect and `python -m harness bisect`, without the network: a local index of a tiny package.

The index is a directory of wheels built here, `tinykernel` 1.0 to 1.7, where 1.5 introduces a
wrong result. Environments are built for real (harness.environments.envs: uv against that directory only);
the replay is a tiny failure-file replayer instead of `python -m harness repro`, which needs
the harness's own dependencies in every environment.
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import pytest

from harness.cli import main
from harness.environments import bisect, envs
from tests.wheels import build_wheel

VERSIONS = [f"1.{i}" for i in range(8)]
WRONG_FROM = "1.5"
# A failure file's replay, in miniature: recompute, compare with the recorded truth,
# exit 0 (passes), 1 (still wrong) or 3 (could not run), as `python -m harness repro` does.
REPLAY = """
import json, sys
try:
    import tinykernel
    doc = json.load(open(sys.argv[1]))
    got = tinykernel.attend(doc["scores"])
except Exception as e:
    print(f"could not replay: {e!r}")
    sys.exit(3)
ok = abs(got - doc["expected"]) <= 1e-9
print(("PASSES NOW" if ok else "STILL FAILS") + f": got {got}, expected {doc['expected']}")
sys.exit(0 if ok else 1)
"""


def _source(version: str) -> str:
    # The softmax-weighted mean position of the scores; from WRONG_FROM on, positions count
    # from 1 (an off-by-one a release could ship): a wrong result, not a crash.
    start = 1 if tuple(map(int, version.split("."))) >= (1, 5) else 0
    return (
        "import math\n"
        f"__version__ = {version!r}\n"
        "def attend(scores):\n"
        "    m = max(scores)\n"
        "    w = [math.exp(s - m) for s in scores]\n"
        f"    return sum(i * x for i, x in enumerate(w, start={start})) / sum(w)\n"
    )


@pytest.fixture(scope="module")
def index(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("index")
    for v in VERSIONS:
        build_wheel(out, "tinykernel", v, {"tinykernel/__init__.py": _source(v)})
    return out


SCORES = [3.0, 2.0, 1.0]


def _failure_file(tmp_path: Path, expected: float) -> Path:
    path = tmp_path / "failure.json"
    path.write_text(json.dumps({"scores": SCORES, "expected": expected}))
    return path


def _correct(start: int = 0) -> float:
    w = [math.exp(s - max(SCORES)) for s in SCORES]
    return sum(i * x for i, x in enumerate(w, start=start)) / sum(w)


def _try(index: Path, tmp_path: Path, file: Path, log: list[str]) -> tuple:
    local = envs.IndexOptions(no_index=True, find_links=(str(index),))
    calls: list[str] = []

    def env_for(version: str) -> envs.EnvSpec:
        calls.append(version)
        return envs.EnvSpec(python=sys.executable, requirements=(f"tinykernel=={version}",), index=local)

    script = tmp_path / "replay.py"
    script.write_text(REPLAY)
    argv = lambda env: [str(env.python), str(script), str(file)]  # noqa: E731
    return bisect.replayer(env_for, argv, root=tmp_path / "envs", log=log.append), calls


def test_finds_the_release_that_broke_it_in_log2_replays(index: Path, tmp_path: Path) -> None:
    log: list[str] = []
    try_version, calls = _try(index, tmp_path, _failure_file(tmp_path, _correct()), log)
    versions = envs.available_versions("tinykernel", envs.IndexOptions(no_index=True, find_links=(str(index),)))
    assert versions == VERSIONS  # listed from the index, oldest first
    seq = bisect.between(versions, "1.0", "1.7")
    result = bisect.search("tinykernel", seq, try_version, direction="regression")
    assert result.found, bisect.format_result(result)
    assert (result.last_good.version, result.first_bad.version) == ("1.4", WRONG_FROM)
    assert result.replays <= math.ceil(math.log2(len(VERSIONS))) + 1
    assert len(calls) == len(set(calls)) == result.replays  # one environment per release tried
    text = bisect.format_result(result)
    assert "last good release: tinykernel==1.4" in text and "first bad release: tinykernel==1.5" in text
    assert f"replay bad:  {result.first_bad.command}" in text and str(tmp_path / "envs") in result.first_bad.command
    # Each environment holds the release it was built for, and a second search reuses them all.
    again, _ = _try(index, tmp_path, _failure_file(tmp_path, _correct()), log)
    assert bisect.search("tinykernel", seq, again, direction="regression").first_bad.version == WRONG_FROM
    assert sum("reusing" in line for line in log) == result.replays


def test_either_direction_a_fix(index: Path, tmp_path: Path) -> None:
    # A file recording what 1.5 and later compute: on 1.0..1.4 it fails. --bad older than
    # --good asks which release has the change, i.e. which release to require.
    try_version, _ = _try(index, tmp_path, _failure_file(tmp_path, _correct(start=1)), [])
    seq = bisect.between(VERSIONS, "1.7", "1.0")
    assert seq == VERSIONS[::-1]
    result = bisect.search("tinykernel", seq, try_version, direction="fix")
    assert (result.last_good.version, result.first_bad.version) == (WRONG_FROM, "1.4")
    assert result.replays <= math.ceil(math.log2(len(VERSIONS))) + 1
    text = bisect.format_result(result)
    assert "first release with the fix: tinykernel==1.5 (require >= 1.5)" in text
    assert "last release that fails:    tinykernel==1.4" in text


def test_unreachable_releases_are_skipped_never_counted(index: Path, tmp_path: Path) -> None:
    broken = tmp_path / "index"
    broken.mkdir()
    for wheel in index.iterdir():
        (broken / wheel.name).write_bytes(wheel.read_bytes())
    # 1.3 needs a package the index does not have (cannot install); 1.4 raises on import (cannot run).
    (broken / "tinykernel-1.3-py3-none-any.whl").unlink()
    build_wheel(broken, "tinykernel", "1.3", {"tinykernel/__init__.py": _source("1.3")}, requires=("no-such-dep>=1",))
    (broken / "tinykernel-1.4-py3-none-any.whl").unlink()
    build_wheel(broken, "tinykernel", "1.4", {"tinykernel/__init__.py": "raise ImportError('broken build')\n"})
    try_version, _ = _try(broken, tmp_path, _failure_file(tmp_path, _correct()), [])
    result = bisect.search("tinykernel", VERSIONS, try_version, direction="regression")
    outcome = {s.version: s for s in result.steps}
    assert outcome["1.3"].outcome == bisect.SKIPPED and "no-such-dep" in outcome["1.3"].detail
    assert outcome["1.4"].outcome == bisect.SKIPPED and "could not run (exit 3)" in outcome["1.4"].detail
    # The boundary is named with the untried releases between its sides.
    assert (result.last_good.version, result.first_bad.version) == ("1.2", WRONG_FROM)
    assert result.untested == ("1.3", "1.4")
    assert "skipped (could not install or run here, counted neither good nor bad): " in bisect.format_result(result)


# The replay, where the release refuses the input with its own error: exit 5, as `repro` does for a
# case the installed library refuses (harness.core.contract.Refusal).
REFUSING_REPLAY = REPLAY.replace(
    "except Exception as e:",
    "except ValueError as e:\n    print(f'REFUSED: {e}')\n    sys.exit(5)\nexcept Exception as e:",
)


def test_a_release_that_refuses_the_case_is_the_fixed_side(index: Path, tmp_path: Path) -> None:
    # As MHA-3 (docs/history.md): 1.0..1.4 answer wrong, from 1.5 the library raises for the input.
    local = tmp_path / "index"
    local.mkdir()
    for wheel in index.iterdir():
        (local / wheel.name).write_bytes(wheel.read_bytes())
    refusing = "__version__ = {v!r}\ndef attend(scores):\n    raise ValueError('scores must be sorted ascending')\n"
    for v in VERSIONS[5:]:
        (local / f"tinykernel-{v}-py3-none-any.whl").unlink()
        build_wheel(local, "tinykernel", v, {"tinykernel/__init__.py": refusing.format(v=v)})
    opts = envs.IndexOptions(no_index=True, find_links=(str(local),))
    script = tmp_path / "replay.py"
    script.write_text(REFUSING_REPLAY)
    file = _failure_file(tmp_path, _correct(start=1))  # what 1.0..1.4 do not compute

    def env_for(version: str) -> envs.EnvSpec:
        return envs.EnvSpec(python=sys.executable, requirements=(f"tinykernel=={version}",), index=opts)

    argv = lambda env: [str(env.python), str(script), str(file)]  # noqa: E731
    try_version = bisect.replayer(env_for, argv, root=tmp_path / "envs", log=[].append)
    result = bisect.search("tinykernel", bisect.between(VERSIONS, "1.7", "1.0"), try_version, direction="fix")
    assert (result.last_good.version, result.first_bad.version) == ("1.5", "1.4"), bisect.format_result(result)
    assert result.last_good.outcome == bisect.REFUSED and "scores must be sorted" in result.last_good.detail
    text = bisect.format_result(result)
    assert "first release with the fix: tinykernel==1.5 (require >= 1.5) (it refuses the case" in text
    assert "1.5          REFUSED  REFUSED: scores must be sorted ascending" in text
    # A refusal is never a wrong answer: at the bad end there is nothing to bisect.
    regression = bisect.search("tinykernel", VERSIONS, try_version, direction="regression")
    assert not regression.found and regression.problem == "the replay is refused at the bad end 1.7: nothing to bisect"


@pytest.mark.parametrize(
    ("good", "bad", "message"),
    [
        pytest.param("1.0", "1.9", "version 1.9 is not a release the index lists; available: 1.0, 1.1", id="unknown"),
        pytest.param("1.2", "1.2", "--good and --bad are the same release 1.2", id="same"),
    ],
)
def test_bad_usage_is_one_line_exit_2(index: Path, tmp_path: Path, capsys, good: str, bad: str, message: str) -> None:
    file = _failure_file(tmp_path, 0.0)
    argv = ["bisect", str(file), "--package", "tinykernel", "--good", good, "--bad", bad]
    assert main([*argv, "--no-index", "--find-links", str(index)]) == 2
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1


def test_pins_follow_the_resolver() -> None:
    default = "jax==0.10.2\njaxlib==0.10.2\n# c\nlibtpu==0.0.42.1\ntorch==2.13.0\nnumpy==2.4.6\n"
    assert envs.requirements_with(default, {"jax": "0.9.2"}) == ("jax[tpu]==0.9.2", "torch==2.13.0", "numpy==2.4.6")
    assert envs.requirements_with(default, {"torch": "2.14.1"})[3] == "torch==2.14.1"
    with pytest.raises(envs.EnvError, match="jaxlib follows jax"):
        envs.requirements_with(default, {"jax": "0.9.2", "jaxlib": "0.9.2"})


def test_pip_configuration_is_read_not_hard_coded() -> None:
    lines = [
        "global.extra-index-url='file:///a/simple file:///b/simple'",
        "global.find-links='/w'",
        ":env:.find-links='/x /y'",
        "global.constraint='/c.txt'",
    ]
    opts = envs.IndexOptions.from_config_lines(lines)
    assert opts.extra_index_urls == ("file:///a/simple", "file:///b/simple") and opts.find_links == ("/x", "/y")
    assert opts.args(constraints=False)[-4:] == ["--find-links", "/x", "--find-links", "/y"]
    assert opts.args()[-2:] == ["--constraint", "/c.txt"]


def test_an_optional_package_that_cannot_install_beside_a_release_is_left_out_and_said(
    index: Path, tmp_path: Path
) -> None:
    # As tokamax 0.0.12 needs jax >= 0.9.2: this "tokamax" needs tinykernel >= 1.5, so 1.0..1.4 go without it.
    local = tmp_path / "index"
    local.mkdir()
    for wheel in index.iterdir():
        (local / wheel.name).write_bytes(wheel.read_bytes())
    build_wheel(local, "tokamax", "0.0.12", {"tokamax/__init__.py": ""}, requires=("tinykernel>=1.5",))
    opts = envs.IndexOptions(no_index=True, find_links=(str(local),))
    log: list[str] = []

    def env_for(version: str) -> envs.EnvSpec:
        return envs.EnvSpec(
            python=sys.executable, requirements=(f"tinykernel=={version}", "tokamax==0.0.12"), index=opts
        )

    script = tmp_path / "replay.py"
    script.write_text(REPLAY)
    file = _failure_file(tmp_path, _correct())
    argv = lambda env: [str(env.python), str(script), str(file)]  # noqa: E731
    try_version = bisect.replayer(env_for, argv, root=tmp_path / "envs", log=log.append)
    result = bisect.search("tinykernel", VERSIONS, try_version, direction="regression")
    assert (result.last_good.version, result.first_bad.version) == ("1.4", WRONG_FROM)
    said = {
        s.version: "[built without tokamax==0.0.12: cannot install beside this release]" in s.detail
        for s in result.steps
    }
    assert said == {s.version: s.version < WRONG_FROM for s in result.steps} and any(said.values())
    assert any("left out tokamax==0.0.12, which cannot install beside it: Because" in line for line in log)
    text = bisect.format_result(result)
    assert "built without tokamax==0.0.12" in text
    # The environment holds no tokamax where it was left out, and says why when reused.
    env = envs.build(env_for("1.4"), tmp_path / "envs", log=log.append)
    assert "tokamax" not in env.installed() and "tinykernel>=1.5" in env.left_out()["tokamax==0.0.12"]
    assert "tokamax" in envs.build(env_for("1.5"), tmp_path / "envs", log=log.append).installed()


def test_jax_without_its_tpu_extra_where_the_extra_pins_a_libtpu_no_index_serves() -> None:
    failure = "Because there is no version of libtpu-nightly==0.1.dev20240617 and jax[tpu]==0.4.30 depends on it"
    reqs = ("jax[tpu]==0.4.30", "tokamax==0.0.12", "numpy==2.4.6")
    assert envs.leave_out(reqs, failure) == (
        ("tokamax==0.0.12", "numpy==2.4.6", "jax==0.4.30", "jaxlib==0.4.30"),
        "the [tpu] extra of jax==0.4.30",
    )
    tokamax = "Because tokamax==0.0.12 depends on jaxlib>=0.9.2 and jax==0.7.0 depends on jaxlib==0.7.0"
    assert envs.leave_out(reqs, tokamax) == (("jax[tpu]==0.4.30", "numpy==2.4.6"), "tokamax==0.0.12")
    assert envs.leave_out(reqs, "Because numpy==2.4.6 needs python>=3.11") is None  # nothing optional named


def test_the_resolvers_reason_is_its_whole_sentence_when_uv_wraps_it() -> None:
    # uv wraps a long reason at the terminal's width: the part after the first line names the release.
    wrapped = (
        "error: No solution found when resolving dependencies:\n"
        "  ╰─▶ Because jax was not found in the provided package locations and\n"
        "      you require jax[tpu]==0.12.1, we can conclude that your requirements\n"
        "      are unsatisfiable.\n"
        "\n"
        "      hint: Packages were unavailable because index lookups were disabled\n"
    )
    assert envs.resolution_failure(wrapped) == (
        "Because jax was not found in the provided package locations and you require jax[tpu]==0.12.1,"
        " we can conclude that your requirements are unsatisfiable."
    )
    one_line = "error: No solution found\n  cause: Because numpy==2.4.6 needs python>=3.11, we can conclude ...\n"
    assert envs.resolution_failure(one_line) == "Because numpy==2.4.6 needs python>=3.11, we can conclude ..."
