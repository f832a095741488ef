"""TPE told a stopped trial as Optuna's own pruner would leave it: ``PRUNED``, with its loss as
the intermediate value of the epoch it stopped at, instead of ``COMPLETE`` with that loss.

Optuna's TPE ranks the trials it learns from with completed ones first (by value), then the
pruned ones by the step they reached (deepest first) and their value there, so a trial
stopped at the first rung never counts as better than one that ran in full. A sweep's
``OptunaSearch`` (Ray) tells every trial ``COMPLETE`` with its last result; this pool tells
the searcher the way a study run with ``trial.should_prune()`` would be.
"""

from __future__ import annotations

from costtune.search.pool import SamplerPool


class PrunedTellPool(SamplerPool):
    """:class:`~costtune.search.pool.SamplerPool`, a trial stopped before its curve's last
    epoch told as ``PRUNED`` with its loss at ``epoch``."""

    def tell(self, config_id: str, epoch: int, loss: float) -> None:
        curve = self._pending[config_id]
        if epoch >= curve.epochs or loss != loss:  # ran in full, or NaN: as before
            super().tell(config_id, epoch, loss)
            return
        del self._pending[config_id]
        optuna = self._optuna
        self.study.add_trial(
            optuna.trial.create_trial(
                params=self._params(curve),
                distributions=self.space,
                state=optuna.trial.TrialState.PRUNED,
                intermediate_values={epoch: loss},
                user_attrs=self._user_attrs(curve, epoch),
            )
        )
