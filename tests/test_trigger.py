"""The trigger search (harness.running.trigger) on a stand-in verdict: which candidates it runs, what it keeps."""

import contextlib

from harness.core import contract, features
from harness.core.case import Case
from harness.core.masks import Mask
from harness.running import signatures, trigger
from harness.running.distinct import Shrink
from harness.running.runner import CaseResult


def _search(best: Case, fails, budget: int, otherwise=lambda case: False):
    """A failure at `best` reduced over its features, each candidate failing alike where `fails(case)` (else
    failing another way where `otherwise(case)`), within `budget` runs, driven as Search.reduce_features drives
    it; the shrink and the candidates run, in order."""
    kernel = contract.resolve("jax_xla")
    shrink = Shrink(target=CaseResult(best, []), best=CaseResult(best, []), since=0.0)
    ran: list[Case] = []

    def run(case: Case) -> str:
        if len(ran) >= budget:
            shrink.exhausted = True
            return "passed"  # not run: the budget is spent
        ran.append(case)
        if fails(case):
            shrink.best = CaseResult(case, [])
            return "alike"
        return "otherwise" if otherwise(case) else "passed"

    reducing, verdict = trigger.reduce(shrink, kernel), None
    with contextlib.suppress(StopIteration):
        while True:
            verdict = run(reducing.send(verdict))
    return shrink, ran, kernel


def test_the_smallest_case_with_exactly_the_trigger_is_reported_with_the_trigger_shown_on_the_bigger_case():
    # A causal bug found on a big case with a bias: the bias goes, causal stays (its leaving out passes), then the
    # smallest case with causal alone fails alike and is the one reported, its features not left out again.
    big = Case(batch=2, q_heads=4, kv_heads=4, q_len=256, kv_len=256, head_dim=128, mask=Mask(causal="top_left"))
    big = big.replace(bias=True)
    causal = lambda c: c.mask.causal is not None  # noqa: E731
    shrink, ran, kernel = _search(big, causal, budget=99)
    assert shrink.trigger == ("mask:causal_top_left",) and shrink.needs == {"mask:causal_top_left"}
    smallest = shrink.best.case
    assert (smallest.batch, smallest.q_heads) == (1, 1) and smallest != big.replace(bias=False)
    assert ran[-1] == smallest and not shrink.exhausted  # the last run: nothing left out of it
    assert features.of(smallest, kernel) - signatures.plain(kernel) == {"mask:causal_top_left"}
    # The same search, its budget spent just before the smallest case: the trigger stands, on the bigger case.
    again, _, _ = _search(big, causal, budget=ran.index(smallest))
    assert again.exhausted and again.best.case != smallest
    assert again.trigger == ("mask:causal_top_left",) and again.needs == {"mask:causal_top_left"}
    # Spent before the trigger is shown: no trigger, the case as found kept (it is no bigger than the best).
    early, _, _ = _search(big, causal, budget=1)
    assert early.trigger is None


def test_a_case_holds_a_trigger_naming_a_family_by_any_member_and_nothing_else():
    # The planted splash_soft_cap_after_mask's trigger, shown at a causal mask; its smallest case swapped the causal
    # mask for a window (a member of the same family) before the ci budget ran out: the trigger still holds.
    from harness.core.masks import Window

    splash = contract.resolve("pallas_splash")
    shown = ("mask:computable", "option:soft_cap")
    case = Case(batch=1, q_heads=1, kv_heads=1, q_len=128, kv_len=128, head_dim=64, soft_cap=1.0)
    assert signatures.holds(case.replace(mask=Mask(window=Window(63, 0))), shown, splash)
    assert signatures.holds(case.replace(mask=Mask(causal="top_left")), shown, splash)
    assert not signatures.holds(case, shown, splash)  # no member of the family
    assert not signatures.holds(case.replace(mask=Mask(causal="top_left"), sinks=True), shown, splash)  # one more


def test_a_feature_whose_leaving_out_fails_another_way_stays_in_the_trigger_but_is_not_shown_needed():
    # A bug that needs the causal mask; without the bias the case fails, but as another bug (say, the kernel
    # refuses it): the bias cannot be left out, so it stays in the trigger, said as "otherwise", never as needed.
    big = Case(batch=1, q_heads=1, kv_heads=1, q_len=128, kv_len=128, head_dim=128, mask=Mask(causal="top_left"))
    big = big.replace(bias=True)
    causal = lambda c: c.mask.causal is not None and c.bias  # noqa: E731
    no_bias = lambda c: not c.bias  # noqa: E731
    shrink, ran, _ = _search(big, causal, budget=99, otherwise=no_bias)
    assert shrink.trigger is not None and set(shrink.trigger) >= {"mask:causal_top_left", "mask:bias"}
    assert "mask:bias" in shrink.otherwise and "mask:bias" not in shrink.needs
    assert "mask:causal_top_left" in shrink.needs
