"""harness.gate.forks: a fork's records paired with the built-in it replaces, whichever side holds which."""

from __future__ import annotations

import pytest

from harness.core.case import Case
from harness.gate import forks
from harness.store.read import Records
from tests import record_builders as rb

FORK = "pallas_flash=mymod:flash_attention"
SMALL = Case(batch=1, q_heads=1, kv_heads=1, q_len=128, kv_len=128, head_dim=64)


@pytest.mark.parametrize(
    ("name", "upstream"),
    [
        pytest.param(FORK, "pallas_flash", id="named"),
        pytest.param("mymod:flash_attention", "pallas_flash", id="bare: the default kernel"),
        pytest.param("pallas_splash=a.b:make_splash_mha", "pallas_splash", id="another kernel"),
        pytest.param("pallas_flash", None, id="a built-in"),
    ],
)
def test_a_drop_in_replaces_the_kernel_its_name_says(name: str, upstream: str | None) -> None:
    assert forks.upstream_of(name) == upstream


def _records(impl: str, run_id: str) -> Records:
    out = Records()
    out.add(rb.run_record(run_id), "test")
    out.add(rb.case_record(run_id, SMALL, implementation=impl), "test")
    return out


def test_the_fork_is_read_as_upstream_on_either_side_and_its_rows_name_both() -> None:
    up, fork = _records("pallas_flash", "20261201T000000Z-a-aaaaaa"), _records(FORK, "20261201T000000Z-b-bbbbbb")
    assert forks.pairs(up, fork) == {FORK: "pallas_flash"} and forks.pairs(fork, up) == {}
    renamed = forks.as_upstream(fork, forks.pairs(up, fork))
    assert [r.implementation for r in renamed.cases] == ["pallas_flash"]
    assert forks.labelled("pallas_flash fwd mha_f32_256 on v5e:1x1", {FORK: "pallas_flash"}) == (
        f"{FORK} vs pallas_flash fwd mha_f32_256 on v5e:1x1"
    )
    assert forks.labelled("pallas_flash_other x", {FORK: "pallas_flash"}) == "pallas_flash_other x"
    # Both on one side: the fork is a kernel of its own there, nothing is renamed.
    both = _records("pallas_flash", "20261201T000000Z-c-cccccc")
    both.add(rb.case_record("20261201T000000Z-c-cccccc", SMALL, implementation=FORK), "test")
    assert forks.pairs(up, both) == {}
