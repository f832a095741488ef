"""Asynchronous Hyperband: one asynchronous successive-halving ladder per bracket.

Li et al., "Hyperband" (2018) and its asynchronous form (ASHA, 2020). Bracket s starts
trials at grace × η^s epochs; trials are spread over brackets in Hyperband's proportions
n_s = ⌈(s_max+1)/(s_max−s+1) · η^(s_max−s)⌉, in arrival order by a smooth weighted
round-robin, so the assignment needs no random numbers and is the same on every run.

Pure: no Ray, no clock. A Ray scheduler, a simulator or a test drives it through
:meth:`AsyncHyperband.on_result` with numbers and acts on the returned :class:`Decision`.
The mechanisms the benchmarks weigh against these rungs (``benchmarks/lab/``) subclass it
through the hooks named ``_ladders``, ``_next_bracket``, ``_before_rungs``, ``_judge``,
``_promotable`` and ``_between_rungs``.
"""

from __future__ import annotations

import math
from collections.abc import Collection
from dataclasses import asdict, dataclass
from typing import Any

from costtune.core.policy.decisions import Decision, StopReason
from costtune.core.policy.defaults import DEFAULTS
from costtune.core.policy.successive_halving import (
    Rung,
    RungEntry,
    is_promotable,
    max_bracket_index,
    rung_epochs,
    validate_geometry,
)
from costtune.errors import ConfigError


@dataclass(slots=True)
class TrialState:
    bracket: int
    epochs: int = 0
    stop_reason: StopReason | None = None


def bracket_weights(n_brackets: int, eta: int) -> list[int]:
    """Hyperband's number of configurations per bracket, bracket 0 most aggressive."""
    s_max = n_brackets - 1
    return [math.ceil((s_max + 1) / (s_max - b + 1) * eta ** (s_max - b)) for b in range(n_brackets)]


class AsyncHyperband:
    """Asynchronous Hyperband: the rungs of every bracket, and which bracket a new trial joins.

    Args:
        max_epochs: R in the paper; a trial that reaches it is done.
        grace_epochs: r, the first rung (default 5 epochs).
        eta: η, reduction factor: 1/η of a rung goes on (default 5, the top 20%).
        brackets: how many brackets, 1 (default: asynchronous successive halving, every
            trial starts at ``grace_epochs``) to s_max+1; ``None``: all that fit.

    A rung keeps the top max(1, ⌊n/η⌋) of its n trials by loss
    (:mod:`~costtune.core.policy.successive_halving`). With the defaults it decides as
    Optuna's ``SuccessiveHalvingPruner(min_resource=5, reduction_factor=5)``, decision for
    decision, until no configuration is left; then :meth:`next_promotion` takes up the
    stopped trials that make their rung's cut (``benchmarks/RESULTS.md``).
    """

    def __init__(
        self,
        max_epochs: int,
        grace_epochs: int = DEFAULTS.grace_epochs,
        eta: int = DEFAULTS.eta,
        brackets: int | None = DEFAULTS.brackets,
    ) -> None:
        validate_geometry(grace_epochs, eta, max_epochs)
        most = max_bracket_index(grace_epochs, eta, max_epochs) + 1
        if brackets is None:
            brackets = most
        if not isinstance(brackets, int) or not 1 <= brackets <= most:
            raise ConfigError(
                f"scheduler.brackets: must be an integer from 1 to {most} for grace_epochs="
                f"{grace_epochs}, eta={eta}, max_epochs={max_epochs}; got {brackets!r}"
            )
        self.max_epochs = max_epochs
        self.grace_epochs = grace_epochs
        self.eta = eta
        self.start_brackets = brackets
        #: each bracket's rungs (epochs); new trials go to the first ``open_brackets``
        self.rungs_by_bracket = self._ladders(most, brackets)
        self.open_brackets = brackets
        self._weights = bracket_weights(self.open_brackets, eta)
        self._wrr = [0] * self.open_brackets
        self.rungs: list[dict[int, Rung]] = [
            {epochs: Rung() for epochs in ladder} for ladder in self.rungs_by_bracket
        ]
        self.trials: dict[str, TrialState] = {}
        #: bumped whenever the state changes in a way a resumed sweep must not lose
        self.version = 0

    def _ladders(self, most: int, brackets: int) -> list[list[int]]:
        """Each bracket's rungs: ``brackets`` of the ``most`` that fit."""
        return [rung_epochs(self.grace_epochs, self.eta, self.max_epochs, b) for b in range(brackets)]

    # ------------------------------------------------------------------ events
    def on_add(self, trial_id: str) -> int:
        """Assign a new trial to a bracket; returns the bracket index."""
        if trial_id in self.trials:
            return self.trials[trial_id].bracket
        bracket = self._next_bracket()
        self.trials[trial_id] = TrialState(bracket=bracket)
        self.version += 1
        return bracket

    def _next_bracket(self) -> int:
        """The open bracket a new trial joins: a smooth weighted round-robin in Hyperband's
        proportions."""
        total = sum(self._weights)
        for b, w in enumerate(self._weights):
            self._wrr[b] += w
        bracket = max(range(len(self._wrr)), key=lambda b: (self._wrr[b], -b))
        self._wrr[bracket] -= total
        return bracket

    def on_result(self, trial_id: str, epoch: int, loss: float, cost_usd: float) -> Decision:
        """Decide after a trial reported ``loss`` (lower is better) at ``epoch``.

        ``cost_usd`` is the trial's metered spend so far (recorded at the rungs: the saved state
        and a subclass's promotion rules read it).
        """
        state = self.trials.get(trial_id)
        if state is None:
            self.on_add(trial_id)
            state = self.trials[trial_id]
        if state.stop_reason is not None:
            return Decision.STOP
        state.epochs = max(state.epochs, epoch)
        early = self._before_rungs(trial_id, state, epoch, float(loss), float(cost_usd))
        if early is not None:
            return early
        for rung_at in self.rungs_by_bracket[state.bracket]:
            rung = self.rungs[state.bracket][rung_at]
            if epoch < rung_at or trial_id in rung:
                continue
            rung.record(trial_id, RungEntry(loss=float(loss), cost_usd=float(cost_usd)))
            self.version += 1
            decided = self._judge(trial_id, state, rung_at, rung, float(loss))
            if decided is not None:
                return decided
        if epoch >= self.max_epochs:
            state.stop_reason = StopReason.COMPLETED
            return Decision.STOP
        return self._between_rungs(trial_id, state, epoch, float(loss), float(cost_usd))

    def _before_rungs(
        self, trial_id: str, state: TrialState, epoch: int, loss: float, cost_usd: float
    ) -> Decision | None:
        """A decision taken before the rungs read the result (``None``: the rungs decide)."""
        return None

    def _judge(
        self, trial_id: str, state: TrialState, rung_at: int, rung: Rung, loss: float
    ) -> Decision | None:
        """The rung at ``rung_at`` just recorded the trial: ``None`` if it goes on, else the
        decision (a trial outside the rung's cut stops there, ``rung_pruned``)."""
        if self._promotable(trial_id, rung):
            return None
        state.stop_reason = StopReason.RUNG_PRUNED
        return Decision.STOP

    def _promotable(self, trial_id: str, rung: Rung) -> bool:
        """Whether the trial goes on past ``rung`` (:func:`is_promotable`)."""
        return is_promotable(trial_id, rung, self.eta)

    def _between_rungs(
        self, trial_id: str, state: TrialState, epoch: int, loss: float, cost_usd: float
    ) -> Decision:
        """The decision for a result no rung judged (the rungs: go on)."""
        return Decision.CONTINUE

    def stopper_waits_until(self, trial_id: str) -> int:
        """The epoch before which a stopping rule leaves this trial to the rungs (0: none;
        a subclass that runs some trials past the first rung unjudged says until when)."""
        return 0

    def on_end(self, trial_id: str, reason: StopReason = StopReason.STOPPED) -> None:
        """A trial ended outside the policy (finished its loop, errored, was stopped)."""
        state = self.trials.get(trial_id)
        if state is not None and state.stop_reason is None:
            state.stop_reason = reason
            self.version += 1

    def stop_reason(self, trial_id: str) -> StopReason | None:
        state = self.trials.get(trial_id)
        return None if state is None else state.stop_reason

    # -------------------------------------------------------- late promotion
    def next_promotion(self, candidates: Collection[str] | None = None) -> str | None:
        """A trial a rung stopped that makes that rung's cut as the rung stands now, to be taken
        up again where it stopped (``None``: none does); asked when a worker is free and no
        configuration is left to start.

        An asynchronous rung judges each trial against the trials that reached it before. Once
        every configuration has been started, a trial stopped early may rank within the top
        max(1, ⌊n/η⌋) of all its rung's n trials: the trials synchronous successive halving
        would have promoted. The deepest rung goes first, then the best-ranked. The trial named
        is taken up (:meth:`take_up`) and judged at its next rung like any other. When none
        qualifies, the sweep ends by itself. ``candidates``: only these trials may be named
        (those whose run can go on from where it stopped); ``None``: any.
        """
        best: tuple[int, int, str] | None = None
        for trial_id, state in self.trials.items():
            if state.stop_reason is not StopReason.RUNG_PRUNED:
                continue
            if candidates is not None and trial_id not in candidates:
                continue
            rungs = self.rungs[state.bracket]
            at = max((r for r, rung in rungs.items() if trial_id in rung), default=None)
            if at is None or not self._promotable(trial_id, rungs[at]):
                continue
            key = (-at, rungs[at].ahead(trial_id), trial_id)
            if best is None or key < best:
                best = key
        if best is None:
            return None
        self.take_up(best[2])
        return best[2]

    def take_up(self, trial_id: str) -> None:
        """A trial a rung stopped goes on (:meth:`next_promotion` named it; or a resumed
        sweep's books show it went on)."""
        state = self.trials[trial_id]
        if state.stop_reason is StopReason.RUNG_PRUNED:
            state.stop_reason = None
            self.version += 1

    # ------------------------------------------------------------------- state
    def geometry(self) -> dict[str, Any]:
        """What the saved rung state is only valid for."""
        return {
            "max_epochs": self.max_epochs,
            "grace_epochs": self.grace_epochs,
            "eta": self.eta,
            "brackets": self.start_brackets,
        }

    def state_dict(self) -> dict[str, Any]:
        return {
            "geometry": self.geometry(),
            "wrr": list(self._wrr),
            "trials": {
                k: {**asdict(v), "stop_reason": v.stop_reason.value if v.stop_reason else None}
                for k, v in self.trials.items()
            },
            "rungs": [
                {
                    str(at): {t: [_encode(e.loss), _encode(e.cost_usd)] for t, e in rung.items()}
                    for at, rung in b.items()
                }
                for b in self.rungs
            ],
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Take up a saved state; refused (:class:`ConfigError`, naming what differs) when it
        was saved by a scheduler of another geometry, whose rungs mean something else."""
        saved = state.get("geometry")
        if saved is not None:
            saved = plain_geometry(saved)
        if saved is not None and saved != self.geometry():
            now = self.geometry()
            differ = [
                f"{k} {saved.get(k)!r} then, {now.get(k)!r} now"
                for k in [*now, *(k for k in saved if k not in now)]
                if saved.get(k) != now.get(k)
            ]
            raise ConfigError(
                f"scheduler state: saved by a scheduler of another geometry ({'; '.join(differ)})"
            )
        open_brackets = self._load_open(state)
        if len(state["wrr"]) != open_brackets or len(state["rungs"]) != len(self.rungs):
            raise ConfigError(
                f"scheduler state: saved for {len(state['rungs'])} brackets, "
                f"this scheduler has {len(self.rungs)}"
            )
        self._wrr = list(state["wrr"])
        self.trials = {
            k: TrialState(
                bracket=v["bracket"],
                epochs=v["epochs"],
                stop_reason=StopReason(v["stop_reason"]) if v["stop_reason"] else None,
            )
            for k, v in state["trials"].items()
        }
        self.rungs = [
            {
                int(at): Rung((t, RungEntry(_decode(e[0]), _decode(e[1]))) for t, e in rung.items())
                for at, rung in b.items()
            }
            for b in state["rungs"]
        ]
        self._load_more(state)

    def _load_open(self, state: dict[str, Any]) -> int:
        """How many brackets the saved state has open (a subclass may take up more of it)."""
        return len(self._wrr)

    def _load_more(self, state: dict[str, Any]) -> None:
        """What a subclass keeps beyond the rungs, taken up after them."""


#: what a saved geometry says of options every state is now read as having at these values
#: (states saved while the rungs' promotion rule and count were options of their own)
_PLAIN = {"promotion": "loss", "keep": "floor"}


def plain_geometry(saved: dict[str, Any]) -> dict[str, Any]:
    """A saved geometry without the entries that now go without saying (:data:`_PLAIN`)."""
    return {k: v for k, v in saved.items() if _PLAIN.get(k, object()) != v}


def _encode(value: float) -> float | str:
    """A number for strict JSON: +inf (a trial the look-ahead counted below a rung's cut), -inf
    and NaN (a diverged loss) become the strings "inf", "-inf", "nan", which ``jq`` and every
    JSON parser read; Python's own Infinity/NaN tokens are not JSON."""
    value = float(value)
    return value if math.isfinite(value) else str(value)


def _decode(value: float | str) -> float:
    """The inverse of :func:`_encode`; states saved with Infinity/NaN tokens read the same."""
    if isinstance(value, str) and value not in ("inf", "-inf", "nan"):
        raise ConfigError(f"scheduler state: {value!r} is not a number")
    return float(value)
