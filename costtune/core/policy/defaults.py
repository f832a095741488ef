"""The default decisions, in one place.

``CostAwareHyperBand(metric=..., mode=...)`` in a plain ``tune.Tuner``, ``costtune sweep`` (the
YAML config and the Python API) and ``costtune replay`` all take their defaults from
:data:`DEFAULTS`, so the three decide alike on the same events (a test says so).

The default is the rungs with late promotion: one bracket of asynchronous successive halving,
a first rung at 5 epochs, the best fifth (⌊n/η⌋, at least one) of each rung going on — Optuna's
``SuccessiveHalvingPruner(min_resource=5, reduction_factor=5)`` decision for decision — until no
configuration is left; then a free worker takes up a trial a rung stopped that makes that rung's
cut as it stands (:meth:`~costtune.core.policy.AsyncHyperband.next_promotion`): never dearer to
a target on any family, cheaper on LCBench's best. Each other mechanism built on the rungs
(escalation and the hedge, the warm-up, the look-ahead, the rung checks, the relative stopping
rule and its readings) was dearer than the rungs alone on at least one family of curves,
significantly, and is no longer a sweep's option; they live in ``benchmarks/lab/`` for the
benchmarks' ablations. The searcher is Optuna's univariate TPE: with the same rungs it reached
the targets cheaper than random search on LCBench (p < 0.01) and was level elsewhere
(``benchmarks/RESULTS.md``, "Choosing the default on several families").
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Defaults:
    """What a sweep decides with unless told otherwise (units in the names)."""

    grace_epochs: int = 5  # the first rung: every trial runs this many epochs
    eta: int = 5  # η: the best 1/η of a rung goes on to η times the epochs
    brackets: int | None = 1  # one bracket (asynchronous successive halving); None: all that fit
    searcher: str = "optuna"  # Optuna's univariate TPE (10 random start-up trials)


DEFAULTS = Defaults()
