"""The scheduling mechanisms the benchmarks weigh against the rungs alone (PROTOCOL v4):
escalation and Hyperband's hedge, the warm-up, the look-ahead, the rung checks and the
rank readings that serve them. None of them earned its place on every family of curves
(``benchmarks/RESULTS.md``), so none is in costtune; :class:`LabHyperband` adds them to
costtune's :class:`~costtune.core.policy.AsyncHyperband` through its hooks, for
``families.py``'s ablations and the archived experiments. Off, it decides as the rungs.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Iterable
from dataclasses import dataclass, field
from typing import Any

from costtune.core.policy import Decision, StopReason
from costtune.core.policy.defaults import DEFAULTS
from costtune.core.policy.hyperband import AsyncHyperband, TrialState, _decode, _encode, bracket_weights
from costtune.core.policy.successive_halving import Rung, RungEntry, _key, rung_epochs, validate_geometry
from costtune.errors import ConfigError
from lab.promotion import Keep, PromotionRule, is_promotable, promoted_count

#: ``warmup_trials: auto`` holds back at most this share of a sweep's trials
WARMUP_MAX_SHARE = 0.1
#: (``escalate``) how many trials bracket 0's first rung kept must have reached its second rung
#: before their orders at the two rungs are compared (:meth:`LabHyperband._misranked`)
MISRANK_MIN = 6


def nth_longest(epochs: Iterable[int], n: int) -> int | None:
    """The epochs of the n-th longest of these runs, or ``None`` with fewer than n: the least a
    run must have lasted to be among the n longest, ties included (BOHB's largest budget with n
    observations). Read by :meth:`LabHyperband.searcher_min_epochs` and
    ``CpuGPSampler(longest_min=n)``."""
    ran = sorted(epochs, reverse=True)
    return ran[n - 1] if len(ran) >= n else None


def auto_warmup_trials(eta: int, trials: int) -> int | None:
    """``warmup_trials: auto`` for a sweep of ``trials`` trials: 2η, but at most a tenth of the
    trials (``None``, off, below 2).

    2η was chosen on LCBench's dev tasks (benchmarks/ARCHIVE.md). The cap bounds what the
    warm-up can lose: the trials it stops at the first rung are ones that a rung with more to
    compare would have judged, and among them may be the sweep's best (in random order, with
    probability (w − 1) / trials); a searcher that was told their losses may come back to
    their region, random search does not.
    """
    w = min(2 * eta, int(trials * WARMUP_MAX_SHARE))
    return w if w >= 2 else None


class LabHyperband(AsyncHyperband):
    """:class:`~costtune.core.policy.AsyncHyperband` with the mechanisms the benchmarks ablate.

    Args (beyond the rungs'):
        lookahead: m, or ``None`` (off). Between rungs, a trial stops (``lookahead_pruned``)
            when it is at least as bad as m trials that reached its next rung and that were,
            at the same epoch, worse than every trial that makes that rung's cut today. What the
            curves seen so far say is hopeless stops before its rung is paid for; how far
            early ranks predict later ones is measured on the sweep's own curves, so on
            curves whose early ranks say little the rule rarely fires. See :meth:`_hopeless`.
        warmup_trials: w, or ``None`` (off). A bracket's first rung promotes no trial until
            it holds w trials (the one arriving included): the first w − 1 to reach it stop
            there (``rung_pruned``). An asynchronous rung otherwise promotes its first
            arrival, and every new best among its first few, with nothing to compare them
            with; on LCBench those early promotions were a large share of what a run spent
            before it reached the target (``benchmarks/ARCHIVE.md``). Later rungs
            are not warmed up: only trials the first rung judged reach them.
        escalate: Hyperband's hedge, paid for only once early ranks have visibly misled. The
            ``brackets`` open from the start; when the sweep stalls (:meth:`_stalled`: it has
            spent as much since its best loss last improved as it had spent before, and started
            at least η² trials since), every bracket that fits opens, and new trials are spread
            over them in Hyperband's proportions (the later brackets judge a trial first at
            η·r, η²·r, … epochs). Where the first rung ranks well the sweep keeps improving and
            nothing opens. Where it misleads (slow starters that end best, pruned every time by
            a first rung full of fast starters that plateau), the best stops moving and the
            later brackets run some trials long enough to show it. Measured (``benchmarks/
            ARCHIVE.md``): on LCBench's dev tasks trained 4× longer, 40 of 40 runs
            reached the target against 36 of 40; on the test tasks level (off by default;
            ``scheduler.escalate`` turns it on; it was the default when curves whose slow
            starters end best failed 9 of 9 runs without it). With it, only bracket 0's first
            rung is warmed up: the brackets it opens open late, with few trials to come, and
            their first rungs judge later epochs. A second sign opens them too, sooner than a
            stall where a trickle of tiny gains keeps ending it: the trials the first rung kept
            reach the second in no better agreement with their first-rung order than reversed
            (:meth:`_misranked`; at least ``misrank_min`` of them, :data:`MISRANK_MIN` by
            default; ``None``: the stall alone). On curves whose slow starters end best it
            opened the brackets in 2 of 9 runs the stall had left closed (8 of 9 reached the
            target against 6 of 9); on LCBench's test tasks it changed 7 of 480 runs, mostly
            dearer where it fired: +0.3% of the dollars a run (``benchmarks/ARCHIVE.md``).
        stall_min_gain: (``escalate``) the least gain of the sweep's best, as a share of what
            it had gained below the first loss it saw, that ends a stall (default 0: any gain).
            Where a first rung full of fast starters that plateau finds a trickle of tiny
            gains, counting them holds the brackets closed: on curves whose slow starters end
            best 0.02 reached the target in 8 of 9 runs against 6 of 9, but on LCBench's test
            tasks it changed 24 of 160 runs, 19 of them dearer, where small late gains are what
            reach the target (``benchmarks/ARCHIVE.md``). Not a default; an option.
        rung_checks: c, or 0 (off). The first rung checks itself: a bracket-0 trial it prunes by
            rank (past its warm-up) whose curve is still falling fast (its loss less its fall
            over its last doubling of epochs, :data:`CHECK_PACES` times, is below the best loss
            at the rung) runs on as a *probe*, one at a time, unjudged by the rungs. A probe
            that is better at some epoch than every trial the first rung promoted was at that
            epoch shows that the rung prunes what ends best: every bracket opens (with
            ``escalate``; as on a stall, but at once) and probes go on. A probe whose fall no
            longer promises to beat the sweep's best (the same paces) stops, and it or a probe
            that ended otherwise counts as a check the rung passed; after c of them, and none
            it failed, nothing more is probed. The policy must hear every end (:meth:`on_end`):
            Ray's scheduler tells it, as does the simulator. See :meth:`_check`. Measured
            (``benchmarks/ARCHIVE.md``; c = 5): on curves whose slow starters end best
            the sweep reached the target in 8 of 9 runs against 5 of 9; level on LCBench's dev
            tasks, but on its test tasks 13% dearer at GRID (dearer in 70 of 106 changed runs,
            p = 0.001), where a pruned trial does at times beat the promoted ones and the opened
            brackets do not pay. An option, off by default (:data:`RUNG_CHECKS_DEFAULT`).
        hedge: (with ``escalate``) Hyperband's most conservative bracket among those a stall
            opens: plain full runs, no rungs. A trial of a later bracket is not judged by the
            stopping rule's pace before its bracket's first rung, and one of this bracket never
            (:meth:`stopper_waits_until`; a sweep's stopper asks it). Once a full run (with
            ``judge_every_bracket``, any later bracket's trial) that bracket 0's first rung would
            have pruned at its epoch is the sweep's best, the rung has been shown to prune what
            ends best, and every new trial is a full run (the sweep *switches*;
            :meth:`_hedge_result`). Where early losses rank well, the sweep rarely
            stalls and nothing changes; where curves stay flat before they drop (the late
            droppers end best), every early judgment is wrong and full runs are what find the
            best (``benchmarks/ARCHIVE.md``).
        judge_every_bracket: (with ``hedge``; a sweep's ``scheduler.hedge_judges:
            every_bracket``, the default; ``False``: the full runs alone, ``full_runs``) every
            later bracket's trials test bracket 0's first rung for the switch, not only the full
            runs. A stall opens 8 trials of the middle bracket to every 3 full runs at η = 5, so
            the evidence comes about three times as fast: on ``benchmarks/slow_starters.py``'s
            curves 0.070 against 0.106 of the recorded dollars (``plateau``), 0.093 against 0.127
            (``slow``), and cheaper in 10 of 27 runs, dearer in none, on three tables of each kind
            no setting was chosen on; on LCBench it changes about 1 run-target in 150, either way
            (4 cheaper and 6 dearer of 1,480 over dev, test and the 18 wider tasks; one test
            success lost). The default (``benchmarks/ARCHIVE.md``).
        weak_rank_tau: θ, or None (off, the default). A prototype, not in a sweep's config: while
            the first rung's order barely holds (:meth:`ranks_weak`: Kendall's τ of its kept
            trials between the first two rungs below θ), the Gaussian-process searcher fits only
            the trials that ran as long as the ``misrank_min``-th longest
            (:meth:`searcher_min_epochs`). Measured (``benchmarks/ARCHIVE.md``; θ = 0.3):
            on ``benchmarks/slow_starters.py``'s three kinds cheaper than the default in 29 runs
            and dearer in 8 of 102 (fresh tables: 9 and 5 of 36; crossing curves 1 and 1), one
            more success; on LCBench's dev tasks it changes 7–8 of 160 runs, mostly dearer, and
            loses 2–3 successes of 160, in the runs already far above the floor.
        weak_rank_fit: n, the trials ``weak_rank_tau``'s fit keeps (the n longest; ``None``:
            ``misrank_min``). BOHB keeps at least d + 1 for d hyperparameters; a prototype: at
            n = 8 on LCBench's 7 it was dearer in all 6 dev runs it changed and lost 2 of 160
            (``benchmarks/ARCHIVE.md``).
        misrank_tau: θ (default 0): the brackets open once the kept trials' τ ≤ θ, not only
            ≤ 0 (a prototype: at 0.3 and 0.5 it changed 1 of 18 crossing runs and 2–10 of 320
            LCBench run-targets; ``benchmarks/ARCHIVE.md``).
    """

    def next_promotion(self, candidates: Collection[str] | None = None) -> str | None:
        """No late promotion: these rungs are Optuna's ``SuccessiveHalvingPruner`` decision for
        decision (the ``rungs`` row), and every mechanism here was measured on them."""
        return None

    def __init__(
        self,
        max_epochs: int,
        grace_epochs: int = DEFAULTS.grace_epochs,
        eta: int = DEFAULTS.eta,
        brackets: int | None = DEFAULTS.brackets,
        promotion: PromotionRule | str = PromotionRule.LOSS,
        keep: Keep | str = Keep.FLOOR,
        lookahead: int | None = None,
        warmup_trials: int | None = None,
        escalate: bool = False,
        stall_min_gain: float = 0.0,
        rung_checks: int = 0,
        hedge: bool = False,
        misrank_min: int | None = MISRANK_MIN,
        judge_every_bracket: bool = True,
        weak_rank_tau: float | None = None,
        misrank_tau: float = 0.0,
        weak_rank_fit: int | None = None,
    ) -> None:
        validate_geometry(grace_epochs, eta, max_epochs)
        ranks_read = escalate and misrank_min is not None
        if weak_rank_tau is not None and not (ranks_read and -1 <= weak_rank_tau <= 1):
            raise ConfigError(
                "scheduler.weak_rank_tau: a Kendall τ in [-1, 1], with escalate and misrank_min set; "
                f"got {weak_rank_tau!r}"
            )
        self.weak_rank_tau = None if weak_rank_tau is None else float(weak_rank_tau)
        if weak_rank_fit is not None and (
            isinstance(weak_rank_fit, bool) or not isinstance(weak_rank_fit, int) or weak_rank_fit < 1
        ):
            raise ConfigError(f"scheduler.weak_rank_fit: a whole number >= 1, got {weak_rank_fit!r}")
        self.weak_rank_fit = weak_rank_fit
        if not -1 <= misrank_tau < 1:
            raise ConfigError(f"scheduler.misrank_tau: a Kendall τ in [-1, 1), got {misrank_tau!r}")
        self.misrank_tau = float(misrank_tau)
        if hedge and not escalate:
            raise ConfigError("scheduler.hedge: needs scheduler.escalate (the hedge opens on a stall)")
        if isinstance(rung_checks, bool) or not isinstance(rung_checks, int) or rung_checks < 0:
            raise ConfigError(f"scheduler.rung_checks: must be a whole number >= 0; got {rung_checks!r}")
        self.rung_checks = rung_checks
        if not 0 <= stall_min_gain < 1:
            raise ConfigError(f"scheduler: stall_min_gain must be in [0, 1); got {stall_min_gain!r}")
        self.stall_min_gain = float(stall_min_gain)
        self.warmup_trials = _positive_or_none(warmup_trials, "warmup_trials")
        self.misrank_min = _positive_or_none(misrank_min, "misrank_min")
        self.lookahead = _positive_or_none(lookahead, "lookahead")
        self.escalate = bool(escalate)
        self.hedge = bool(hedge)
        try:
            self.promotion = PromotionRule(promotion)
        except ValueError:
            choices = ", ".join(r.value for r in PromotionRule)
            raise ConfigError(f"scheduler.promotion: must be one of {choices}; got {promotion!r}") from None
        try:
            self.keep = Keep(keep)
        except ValueError:
            raise ConfigError(f"scheduler.keep: must be one of ceil, floor; got {keep!r}") from None
        super().__init__(max_epochs, grace_epochs, eta, brackets)
        #: (``hedge``) whether a full run the first rung would have pruned has been the sweep's
        #: best: from then on every new trial goes to the bracket without rungs
        self.switched = False
        #: (``hedge``) the trials started when it switched
        self.switched_at: int | None = None
        #: (``hedge``) the trials of later brackets that bracket 0's first rung would have pruned
        #: at its epoch
        self.judged_wrong: set[str] = set()
        #: (``hedge``) every later bracket's trials are judged so, not only the full runs'
        self.judge_every_bracket = bool(judge_every_bracket)
        #: (``escalate``) the first- and second-rung losses of bracket 0's trials that reached its
        #: second rung, and how many pairs of them those rungs put in the same / reversed order
        self.ranked: list[tuple[float, float]] = []
        self.concordant = self.discordant = 0
        #: (``escalate``) what opened every bracket: ``"stall"``, ``"misranked"``,
        #: ``"rung check"``, and how many trials had started then; ``None`` while they are as set
        self.opened_by: str | None = None
        self.opened_at: int | None = None
        #: (``escalate``) the sweep's spend (each trial's last reported dollars), its first and
        #: best losses, and the spend and trial count when the best last improved (by at least
        #: ``stall_min_gain`` of the gain)
        self.spent: dict[str, float] = {}
        self.total_usd = 0.0
        self.first_loss: float | None = None
        self.best_loss = math.inf
        self.mark_usd = 0.0
        self.mark_trials = 0
        #: each trial's loss by epoch, below its bracket's last rung (what ``lookahead`` reads)
        self.curves: dict[str, dict[int, float]] = {}
        #: a look-ahead-pruned trial's estimated loss at the rung it was judged for
        self.estimates: dict[str, float] = {}
        #: (``rung_checks``) what the checks read and decided (:class:`_Checks`)
        self.checks = _Checks()

    def _ladders(self, most: int, brackets: int) -> list[list[int]]:
        """With ``escalate``, the rungs of every bracket that fits (the first ``brackets``
        open); with ``hedge``, Hyperband's bracket without rungs after them."""
        ladders = [
            rung_epochs(self.grace_epochs, self.eta, self.max_epochs, b)
            for b in range(most if self.escalate else brackets)
        ]
        if self.hedge and ladders[-1]:  # the last that fits may have no rungs already
            ladders.append([])
        return ladders

    def _next_bracket(self) -> int:
        if self.switched:
            return len(self.rungs_by_bracket) - 1
        return super()._next_bracket()

    def _before_rungs(
        self, trial_id: str, state: TrialState, epoch: int, loss: float, cost_usd: float
    ) -> Decision | None:
        if self.escalate:
            if self.hedge and not self.switched and self._in_hedge(state):
                self._hedge_result(trial_id, epoch, loss)
            self._track(trial_id, loss, cost_usd)
        if self.rung_checks:
            return self._probe_result(trial_id, epoch, loss)
        return None

    def _judge(
        self, trial_id: str, state: TrialState, rung_at: int, rung: Rung, loss: float
    ) -> Decision | None:
        if self.escalate and state.bracket == 0 and rung_at != self.rungs_by_bracket[0][0]:
            self._rank(trial_id, rung_at, loss)
        warming_up = (
            self.warmup_trials is not None
            and rung_at == self.rungs_by_bracket[state.bracket][0]
            and len(rung) < self.warmup_trials
            and not (self.escalate and state.bracket > 0)
        )
        if warming_up or not self._promotable(trial_id, rung):
            if self.rung_checks and not warming_up and self._check(trial_id, state, rung_at, loss):
                return Decision.CONTINUE
            state.stop_reason = StopReason.RUNG_PRUNED
            return Decision.STOP
        return None

    def _between_rungs(
        self, trial_id: str, state: TrialState, epoch: int, loss: float, cost_usd: float
    ) -> Decision:
        if self.lookahead is not None:
            ladder = self.rungs_by_bracket[state.bracket]
            if ladder and epoch < ladder[-1]:
                self.curves.setdefault(trial_id, {})[epoch] = loss
                self.version += 1
                upcoming = next(r for r in ladder if r > epoch)
                rung = self.rungs[state.bracket][upcoming]
                estimate = self._hopeless(loss, epoch, rung)
                if estimate is not None:
                    state.stop_reason = StopReason.LOOKAHEAD_PRUNED
                    self.estimates[trial_id] = estimate
                    # it counts at the rung it was judged for, below the cut (loss +inf): the
                    # rung still keeps 1/η of the trials that came to it, not 1/η of those
                    # the look-ahead let through (which would tighten every later cut)
                    rung.record(trial_id, RungEntry(loss=math.inf, cost_usd=cost_usd))
                    return Decision.STOP
        return Decision.CONTINUE

    def _in_hedge(self, state: TrialState) -> bool:
        """Whether the trial tests bracket 0's first rung: it runs past that rung's epoch
        unjudged, as the full runs do and, with ``judge_every_bracket``, every later bracket's
        trials (which a stall opens far more of: 8 to every 3 full runs at η = 5)."""
        if self.judge_every_bracket:
            return self.hedge and state.bracket > 0
        return self.hedge and state.bracket == len(self.rungs_by_bracket) - 1

    def _hedge_result(self, trial_id: str, epoch: int, loss: float) -> None:
        """(``hedge``) At the first rung's epoch, note whether bracket 0's first rung would have
        pruned this trial of a later bracket (by rank, against the trials it holds); once a trial
        it would have pruned is the sweep's best, the sweep switches to full runs. A trial that
        the rung would have kept becoming the best says nothing against the rungs: the searcher
        found a better configuration, which the rungs would have let through too."""
        first = self.rungs_by_bracket[0][0]
        if epoch == first:
            rung = self.rungs[0][first]
            kept = promoted_count(len(rung) + 1, self.eta, self.keep)
            if len(rung) >= kept and _key(loss) > rung.nth_loss(kept - 1):
                self.judged_wrong.add(trial_id)
                self.version += 1
        if trial_id in self.judged_wrong and loss < self.best_loss:
            self.switched = True  # a trial the first rung would have pruned is the sweep's best
            self.switched_at = len(self.trials)
            self.version += 1

    def searcher_min_epochs(self) -> int | None:
        """The fewest epochs a trial must have run for the searcher to learn from its loss:
        ``max_epochs`` once the hedge has switched (the rungs shown to prune what ends best, the
        losses they stopped trials at mislead a model of the final loss as much); with
        ``weak_rank_tau``, while the first rung's order barely holds (:meth:`ranks_weak`), the
        epochs of the ``weak_rank_fit``-th (else ``misrank_min``-th) longest of the ended trials
        (BOHB's model on the largest budget with enough observations: the losses the first rung
        stopped trials at no longer shape the model once that many ran longer); else ``None``
        (every trial). Read by the benchmarks' searchers (``benchmarks/slow_starters.py``); the product's
        searchers, Optuna's own samplers, learn from every trial."""
        if self.switched:
            return self.max_epochs
        if self.ranks_weak():
            ended = (t.epochs for t in self.trials.values() if t.stop_reason is not None)
            n = self.weak_rank_fit or self.misrank_min or MISRANK_MIN
            floor = nth_longest(ended, n)
            if floor is not None and floor > self.rungs_by_bracket[0][0]:
                return floor
        return None

    def ranks_weak(self) -> bool:
        """(``weak_rank_tau`` θ) Whether the first rung's order barely holds: at least
        ``misrank_min`` trials it kept reached the second rung, and Kendall's τ between their
        losses at the two rungs is below θ. Read on the kept trials alone (the others never
        reached the second rung), τ is lower than over every configuration, but its sign and
        size still tell the kinds apart: a few kept pairs on LCBench's dev tasks, τ 0.7–1.0;
        curves whose paces are each configuration's own, τ −0.5–0.6. Counted until the sweep
        ends (not only until every bracket opens), so the answer follows the evidence."""
        theta = self.weak_rank_tau
        tau = self._kept_tau()
        return theta is not None and tau is not None and tau < theta

    def _kept_tau(self) -> float | None:
        """Kendall's τ of the first rung's kept trials between their losses at the first two
        rungs (0 where every pair ties), or ``None`` while fewer than ``misrank_min`` are ranked."""
        need = self.misrank_min
        if need is None or len(self.ranked) < need:
            return None
        pairs = self.concordant + self.discordant
        return (self.concordant - self.discordant) / pairs if pairs else 0.0

    def stopper_waits_until(self, trial_id: str) -> int:
        """(``hedge``) The epoch before which the stopping rule's pace does not stop this trial:
        a later bracket's first rung (what the bracket is for), ``max_epochs`` + 1 in the
        bracket without rungs, 0 otherwise (and for a trial the policy does not know)."""
        state = self.trials.get(trial_id)
        if not self.hedge or state is None or state.bracket == 0:
            return 0
        ladder = self.rungs_by_bracket[state.bracket]
        return ladder[0] if ladder else self.max_epochs + 1

    def _probe_result(self, trial_id: str, epoch: int, loss: float) -> Decision | None:
        """(``rung_checks``) Book a result for the checks: the probe's decision, or ``None`` for
        any other trial (the rungs decide)."""
        c = self.checks
        first = self.rungs_by_bracket[0][0]
        state = self.trials[trial_id]
        if trial_id != c.probe:
            c.others_best = min(c.others_best, loss)  # NaN never lowers it
            if state.bracket == 0 and epoch > first and loss < c.promoted_best.get(epoch, math.inf):
                c.promoted_best[epoch] = loss
                self.version += 1
            if state.bracket == 0 and epoch < first and (c.failed or c.passed < self.rung_checks):
                c.early.setdefault(trial_id, {})[epoch] = loss
            elif epoch > first and c.early.pop(trial_id, None) is not None:  # promoted: not read again
                self.version += 1
            return None
        curve = c.early.setdefault(trial_id, {})
        curve[epoch] = loss
        self.version += 1
        if not c.showed:
            half = curve.get(epoch // 2)
            if half is not None and not _falling(loss, half, c.others_best):
                state.stop_reason = StopReason.RUNG_PRUNED  # its fall no longer promises the best
                self._end_probe(trial_id)
                return Decision.STOP
            if loss < c.promoted_best.get(epoch, -math.inf):
                c.showed = True
                if not c.failed:
                    c.failed = True
                    if self.escalate and self.open_brackets < len(self.rungs_by_bracket):
                        self._open_every_bracket("rung check")
        if epoch >= self.max_epochs:
            state.stop_reason = StopReason.COMPLETED
            self._end_probe(trial_id)
            return Decision.STOP
        return Decision.CONTINUE

    def _check(self, trial_id: str, state: TrialState, rung_at: int, loss: float) -> bool:
        """(``rung_checks``) Whether the trial the first rung just pruned by rank runs on as the
        probe: no probe is running, checks are left (or the rung failed one), and its curve is
        still falling fast (:func:`_falling` against the best loss at the rung). A probe that
        flattens stops at once; where slow starters end best (``benchmarks/slow_starters.py``)
        the rung fails a check within a few probes, but on LCBench's test tasks it failed
        often enough, where opening the brackets did not pay, to cost 13% (benchmarks/ARCHIVE.md)."""
        c = self.checks
        curve = c.early.pop(trial_id, {})
        if state.bracket != 0 or rung_at != self.rungs_by_bracket[0][0] or c.probe is not None:
            return False
        if not (c.failed or c.passed < self.rung_checks):
            return False
        half = curve.get(rung_at // 2)
        if half is None or not _falling(loss, half, self.rungs[0][rung_at].nth_loss(0)):
            return False
        curve[rung_at] = loss
        c.early[trial_id] = curve
        c.probe, c.showed = trial_id, False
        c.probes += 1
        self.version += 1
        return True

    def _end_probe(self, trial_id: str) -> None:
        c = self.checks
        if trial_id != c.probe:
            return
        c.passed += not c.showed
        c.probe = None
        c.early.pop(trial_id, None)
        self.version += 1

    def _track(self, trial_id: str, loss: float, cost_usd: float) -> None:
        """Keep the sweep's spend and best; open every bracket when the sweep has stalled."""
        if math.isfinite(cost_usd):
            self.total_usd += cost_usd - self.spent.get(trial_id, 0.0)
            self.spent[trial_id] = cost_usd
        # the spend alone does not bump the version: a resumed sweep's trials report their
        # dollars again, and each trial's next report sets its share right
        if self.first_loss is None and math.isfinite(loss):
            self.first_loss = loss
        if loss < self.best_loss:  # NaN never improves
            first, best = self.first_loss, self.best_loss
            gained = first - best if first is not None and math.isfinite(best) else math.inf
            if not best - loss < self.stall_min_gain * gained:  # the first best always counts
                self.mark_usd, self.mark_trials = self.total_usd, len(self.trials)
            self.best_loss = loss
            self.version += 1
        elif self._stalled():
            self._open_every_bracket("stall")
            self.version += 1

    def _rank(self, trial_id: str, rung_at: int, loss: float) -> None:
        """(``escalate``) Book a bracket-0 trial's loss at its second rung against its loss at
        the first; open every bracket if the first rung now looks misranked. Once every bracket
        is open nothing is booked, unless ``weak_rank_tau`` still reads the order."""
        every_open = self.open_brackets >= len(self.rungs_by_bracket)
        if (
            self.misrank_min is None
            or rung_at != self.rungs_by_bracket[0][1]
            or (every_open and self.weak_rank_tau is None)  # nothing left to decide
        ):
            return
        first = self.rungs[0][self.rungs_by_bracket[0][0]].get(trial_id)
        if first is None or not (math.isfinite(first.loss) and math.isfinite(loss)):
            return
        self._add_ranked(first.loss, loss)
        if not every_open and self._misranked():
            self._open_every_bracket("misranked")

    def _count_ranked(self) -> None:
        """Rebuild :attr:`ranked` and its pair counts from bracket 0's first two rungs."""
        self.ranked, self.concordant, self.discordant = [], 0, 0
        ladder = self.rungs_by_bracket[0]
        if len(ladder) < 2:
            return
        first, second = self.rungs[0][ladder[0]], self.rungs[0][ladder[1]]
        for trial_id in second:
            a, b = first.get(trial_id), second[trial_id]
            if a is not None and math.isfinite(a.loss) and math.isfinite(b.loss):
                self._add_ranked(a.loss, b.loss)

    def _add_ranked(self, first: float, second: float) -> None:
        """Count the pairs a trial at (first, second) makes with those ranked before it."""
        for a, b in self.ranked:
            order = (first - a) * (second - b)
            self.concordant += order > 0
            self.discordant += order < 0
        self.ranked.append((first, second))

    def _misranked(self) -> bool:
        """Whether the first rung's order looks wrong: at least ``misrank_min`` trials it
        kept reached the second rung, and no more pairs of them are in the same order at both
        rungs than in reversed order (Kendall's τ ≤ 0). Read on the trials it kept, the sign
        is what matters: where early ranks hold, the kept trials mostly keep their order
        (on LCBench's test tasks τ ≤ 0 came in 7 of 480 runs); where the faster
        starters end worse, the kept ones reverse. Only bracket 0's trials are read, and only
        until every bracket is open: O(n) per arrival at the second rung."""
        tau = self._kept_tau()
        return tau is not None and tau <= self.misrank_tau

    def _open_every_bracket(self, why: str) -> None:
        """(``escalate``) From now on new trials are spread over every bracket that fits."""
        self.opened_by, self.opened_at = why, len(self.trials)
        self.open_brackets = len(self.rungs_by_bracket)
        self._weights = bracket_weights(self.open_brackets, self.eta)
        self._wrr = [0] * self.open_brackets

    def _stalled(self) -> bool:
        """Whether the closed brackets open: one is closed, the spend since the best last
        improved (by at least ``stall_min_gain`` of what the sweep had gained) is at least the
        spend up to then, and η² trials started since. Doubling the spend without a gain is the
        sign that more of the same first rung will not find a better trial; η² trials since
        (25 at η = 5) keep one unlucky stretch of a young sweep from opening them."""
        return (
            self.open_brackets < len(self.rungs_by_bracket)
            and self.total_usd - self.mark_usd >= self.mark_usd
            and len(self.trials) - self.mark_trials >= self.eta**2
        )

    def _hopeless(self, loss: float, epoch: int, rung: Rung) -> float | None:
        """Whether ``loss`` at ``epoch`` is at least as bad as m (``lookahead``) trials of
        ``rung`` that were all worse at ``epoch`` than every trial within the rung's cut now
        (its top max(1, ⌊n/η⌋) or ⌈n/η⌉ by loss, whatever the promotion rule).

        Monotone: what is judged hopeless, anything worse is too (a diverged run worse than
        any seen included). The chance that m trials all miss a cut that 1 in η makes, by
        luck, if their early loss said nothing, is (1 − 1/η)^m: 11% for m = 10 at η = 5.
        Nonparametric: no curve shape is assumed, only the order of losses is read, and
        where early ranks say little (trials that were as bad make the cut) it stops nothing.

        Returns ``None`` (not hopeless), or an optimistic estimate of its loss at the rung: the
        best rung loss among the trials behind the cut that were no worse than it at
        ``epoch`` (:meth:`rung_estimate`).
        """
        m = self.lookahead
        if m is None or math.isnan(loss) or len(rung) < m:
            return None
        kept = promoted_count(len(rung), self.eta, self.keep)
        cutoff = rung.nth_loss(kept - 1)  # the rung keeps its entries sorted: no sort per result
        then = [
            (v, rung[t].loss, _key(rung[t].loss) <= cutoff)
            for t in rung
            if (v := self.curves.get(t, {}).get(epoch)) is not None and rung[t].loss != math.inf
        ]  # evidence: trials that reached the rung, not those the look-ahead counted there
        best_made = max((v for v, _, made in then if made), default=-math.inf)
        behind = [(v, at_rung) for v, at_rung, _ in then if v > best_made]
        if len(behind) < m or loss < min(v for v, _ in behind):
            return None
        # the best the rung saw of the trials behind the cut that were no worse than it then
        return min(_key(at_rung) for v, at_rung in behind if v <= loss)

    def rung_estimate(self, trial_id: str) -> float | None:
        """What a look-ahead-pruned trial would likely have reached at the rung it was judged
        for (optimistic: the best of the trials like it), or ``None`` for any other trial.

        A searcher told a pruned trial's last loss compares an epoch-1 loss with the epoch-5
        and epoch-52 losses of others; told this, it compares trials at the rung, as it would
        have without the look-ahead."""
        return self.estimates.get(trial_id)

    def on_end(self, trial_id: str, reason: StopReason = StopReason.STOPPED) -> None:
        super().on_end(trial_id, reason)
        if self.rung_checks:
            self._end_probe(trial_id)
            if self.checks.early.pop(trial_id, None) is not None:
                self.version += 1

    # ------------------------------------------------------------------- state
    def _promotable(self, trial_id: str, rung: Rung) -> bool:
        if self.promotion is PromotionRule.LOSS and self.keep is Keep.FLOOR:
            return super()._promotable(trial_id, rung)
        return is_promotable(trial_id, rung, self.eta, self.promotion, self.keep)

    def geometry(self) -> dict[str, Any]:
        return {
            **super().geometry(),
            **({"promotion": self.promotion.value} if self.promotion is not PromotionRule.LOSS else {}),
            **({"keep": self.keep.value} if self.keep is not Keep.FLOOR else {}),
            **({"escalate": True} if self.escalate else {}),
            **({"rung_checks": self.rung_checks} if self.rung_checks else {}),
            **({"hedge": True} if self.hedge else {}),
            **({"hedge_judges": "every_bracket"} if self.hedge and self.judge_every_bracket else {}),
        }

    def state_dict(self) -> dict[str, Any]:
        return {
            **super().state_dict(),
            "curves": {t: {str(e): _encode(v) for e, v in c.items()} for t, c in self.curves.items()},
            "estimates": {t: _encode(v) for t, v in self.estimates.items()},
            **({"checks": self.checks.to_dict()} if self.rung_checks else {}),
            **(
                {
                    "escalation": {
                        "open": self.open_brackets,
                        "spent": self.spent,
                        "best": _encode(self.best_loss),
                        "first": None if self.first_loss is None else _encode(self.first_loss),
                        "mark_usd": self.mark_usd,
                        "mark_trials": self.mark_trials,
                        **(
                            {"opened_by": self.opened_by, "opened_at": self.opened_at}
                            if self.opened_by
                            else {}
                        ),
                        **(
                            {
                                "switched": self.switched,
                                "judged_wrong": sorted(self.judged_wrong),
                                **({"switched_at": self.switched_at} if self.switched_at is not None else {}),
                            }
                            if self.hedge
                            else {}
                        ),
                    }
                }
                if self.escalate
                else {}
            ),
        }

    def _load_open(self, state: dict[str, Any]) -> int:
        escalation = state.get("escalation") if self.escalate else None
        open_brackets = escalation["open"] if escalation else len(self._wrr)
        if escalation:
            self.open_brackets = open_brackets
            self._weights = bracket_weights(open_brackets, self.eta)
            self.spent = {t: float(v) for t, v in escalation["spent"].items()}
            self.total_usd = sum(self.spent.values())
            self.best_loss = _decode(escalation["best"])
            # a state saved before the first loss was kept: gains count from its best on
            first = escalation.get("first", escalation["best"])
            self.first_loss = None if first is None else _decode(first)
            if self.first_loss is not None and not math.isfinite(self.first_loss):
                self.first_loss = None
            self.mark_usd = float(escalation["mark_usd"])
            self.mark_trials = int(escalation["mark_trials"])
            self.switched = bool(escalation.get("switched", False)) and self.hedge
            self.judged_wrong = set(escalation.get("judged_wrong", [])) if self.hedge else set()
            switched_at = escalation.get("switched_at") if self.switched else None
            self.switched_at = int(switched_at) if switched_at is not None else None
            opened_by, opened_at = escalation.get("opened_by"), escalation.get("opened_at")
            self.opened_by = str(opened_by) if opened_by is not None else None
            self.opened_at = int(opened_at) if opened_at is not None else None
        return open_brackets

    def _load_more(self, state: dict[str, Any]) -> None:
        self.curves = {
            t: {int(e): _decode(v) for e, v in c.items()} for t, c in state.get("curves", {}).items()
        }
        self.estimates = {t: _decode(v) for t, v in state.get("estimates", {}).items()}
        if self.escalate:
            self._count_ranked()
        # a state saved without the checks (off then, or before they existed): none made yet
        checks = state.get("checks") if self.rung_checks else None
        self.checks = _Checks.from_dict(checks) if checks else _Checks()


#: (``rung_checks``) how many more of its last falls (over its last doubling of epochs) a curve is
#: credited with when a check asks whether it still falls fast enough to beat a loss: one
CHECK_PACES = 1.0


def _falling(loss: float, half: float, bar: float) -> bool:
    """Whether a curve at ``loss`` that was at ``half`` at half its epochs would beat ``bar``
    should it fall :data:`CHECK_PACES` times as far again."""
    return loss - CHECK_PACES * max(half - loss, 0.0) < bar


@dataclass(slots=True)
class _Checks:
    """(``rung_checks``) The first rung's checks: the losses they read (bracket-0 trials up to
    the first rung, and the probe's curve), the probe running (one at a time) and whether it
    has shown the rung wrong, how many probes ran and how many checks the rung passed, whether
    it failed one, the best loss of the trials that are not probes, and by epoch the best loss of
    the trials the first rung promoted."""

    early: dict[str, dict[int, float]] = field(default_factory=dict)
    probe: str | None = None
    showed: bool = False
    probes: int = 0
    passed: int = 0
    failed: bool = False
    others_best: float = math.inf
    promoted_best: dict[int, float] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "early": {t: {str(e): _encode(v) for e, v in c.items()} for t, c in self.early.items()},
            "probe": self.probe,
            "showed": self.showed,
            "probes": self.probes,
            "passed": self.passed,
            "failed": self.failed,
            "others_best": _encode(self.others_best),
            "promoted_best": {str(e): _encode(v) for e, v in self.promoted_best.items()},
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> _Checks:
        return cls(
            early={t: {int(e): _decode(v) for e, v in c.items()} for t, c in d["early"].items()},
            probe=d["probe"],
            showed=bool(d["showed"]),
            probes=int(d["probes"]),
            passed=int(d["passed"]),
            failed=bool(d["failed"]),
            others_best=_decode(d["others_best"]),
            promoted_best={int(e): _decode(v) for e, v in d["promoted_best"].items()},
        )


def _positive_or_none(value: int | None, name: str) -> int | None:
    if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
        raise ConfigError(f"scheduler.{name}: must be a positive integer or null; got {value!r}")
    return value
