"""A resumed sweep's pieces meet on one governor: Tune pickles the stopper, the scheduler and
the callbacks in separate pieces, and each comes back with a governor of its own."""

from __future__ import annotations

from ray import cloudpickle  # what Tune pickles its pieces with

from costtune.core.cost import CostModel
from costtune.core.ledger import Ledger, LedgerSpec
from costtune.core.policy import Governor, MarginalRoiStopping, StoppingRule, SweepBudget
from costtune.ray.governed import CostAwareFIFO, GovernorHooks, forget_governors
from costtune.ray.stoppers import CostStopper


def _pieces(tmp_path):
    ledger = Ledger(
        LedgerSpec(metric="loss", mode="min", cost_model=CostModel(prices={"cpu": 3.6})), tmp_path
    )
    governor = Governor(usd_per_second=0.001, budget=SweepBudget(None))
    rule = StoppingRule(patience_epochs=2, min_delta=0.1, window_epochs=1, min_epochs=1)
    stopper = CostStopper(
        governor, metric="loss", mode="min", devices=1.0, ledger=ledger, stopping=MarginalRoiStopping(rule)
    )
    return ledger, stopper, CostAwareFIFO(governor), GovernorHooks(governor)


def test_separately_unpickled_pieces_share_one_governor(tmp_path) -> None:
    _, stopper, scheduler, hooks = _pieces(tmp_path)
    pickled = [cloudpickle.dumps(piece) for piece in (stopper, stopper, scheduler, hooks)]
    forget_governors()  # what a resume does before Tune unpickles
    tunes_stopper, books_stopper, tunes_scheduler, books_hooks = (cloudpickle.loads(p) for p in pickled)
    assert tunes_stopper is not books_stopper
    governor = tunes_stopper.governor
    assert books_stopper.governor is governor and tunes_scheduler.governor is governor
    assert books_hooks.governor is governor
    # the stopper Tune calls ends a flat trial; the copy the books ask says why, not "completed"
    stopped = [
        tunes_stopper("t1", {"loss": 1.0, "time_total_s": e, "training_iteration": e}) for e in (1, 2, 3, 4)
    ]
    assert stopped[-1] and books_stopper.stop_reason("t1") == "patience"
    # a charge the books make between reports reaches the budget the scheduler admits by
    books_hooks.charged("t2", 1, 5.0)
    assert governor.budget.spent_usd >= 5.0
    # a sweep ended as a whole is seen by every copy
    governor.sweep_stopped = True
    assert books_stopper.stop_all() and books_stopper.stop_reason("t9") == "sweep_marginal_roi"


def test_a_second_resume_does_not_meet_the_first_resumes_governor(tmp_path) -> None:
    _, stopper, _, _ = _pieces(tmp_path)
    pickled = cloudpickle.dumps(stopper)
    forget_governors()
    first = cloudpickle.loads(pickled)
    first.governor.last_report["t1"] = (0.0, 1.0)  # what the first resume saw
    forget_governors()
    second = cloudpickle.loads(pickled)
    assert second.governor is not first.governor and "t1" not in second.governor.last_report
