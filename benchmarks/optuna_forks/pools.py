"""The forks (:mod:`optuna_forks.gp`, :mod:`optuna_forks.tpe`) as the archived experiments ask
them: :func:`gp_sampler` with every option costtune's gp searcher once had, and pools over
recorded curves that use them (:class:`GpPool`, :class:`TpePool`)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from optuna_forks.gp import COST_ATTR, EPOCHS_ATTR, FAST_ASK_FROM, CpuGPSampler
from optuna_forks.tpe import QuickTPESampler

from costtune.core.curves import Curve
from costtune.search.pool import SamplerPool

#: the gp searcher's random start-up trials (as costtune's: costtune.search.GP_STARTUP_TRIALS)
GP_STARTUP_TRIALS = 5
#: the model check's θ costtune's gp searcher once defaulted to
MODEL_CHECK_DEFAULT = 0.4


def gp_sampler(
    seed: int,
    n_startup_trials: int = 10,
    cost_exponent: float = 0.0,
    value_transform: str | None = None,
    fast_from: int | None = None,
    fast_search: dict[str, int] | None = None,
    believer: bool = True,
    fidelity_epochs: int | None = None,
    longest_min: int | None = None,
    model_check: float | None = None,
) -> CpuGPSampler:
    """:class:`CpuGPSampler` with these options (see its docstring)."""
    return CpuGPSampler(
        fast_from=FAST_ASK_FROM if fast_from is None else fast_from,
        fast_search=fast_search,
        believer=believer,
        fidelity_epochs=fidelity_epochs,
        longest_min=longest_min,
        model_check=model_check,
        seed=seed,
        n_startup_trials=n_startup_trials,
        cost_exponent=cost_exponent,
        value_transform=value_transform,
    )


class ForkPool(SamplerPool):
    """A pool over a fork: each trial also tells its epochs and seconds per epoch (the GP's
    ``fidelity_epochs`` and ``cost_exponent`` read them), and, with a ``policy``, the GP is
    told to forget trials shorter than ``policy.searcher_min_epochs()``."""

    policy: Any = None

    def _user_attrs(self, curve: Curve, epoch: int) -> dict[str, Any]:
        seconds = curve.seconds_until(epoch) if 0 < epoch <= len(curve.epoch_seconds) else 0.0
        attrs: dict[str, Any] = {EPOCHS_ATTR: epoch}
        if seconds > 0:
            attrs[COST_ATTR] = seconds / epoch
        return attrs

    def tell(self, config_id: str, epoch: int, loss: float) -> None:
        super().tell(config_id, epoch, loss)
        if self.policy is not None and isinstance(self.study.sampler, CpuGPSampler):
            self.study.sampler.forget_below(self.policy.searcher_min_epochs())


class TpePool(ForkPool):
    """:class:`QuickTPESampler` over a pool."""

    def __init__(self, curves: Sequence[Curve], seed: int = 0, n_startup_trials: int = 10) -> None:
        super().__init__(curves, sampler=QuickTPESampler(seed=seed, n_startup_trials=n_startup_trials))


class GpPool(ForkPool):
    """:class:`CpuGPSampler` over a pool, with costtune's former gp searcher's defaults."""

    def __init__(
        self,
        curves: Sequence[Curve],
        seed: int = 0,
        n_startup_trials: int | None = None,
        value_transform: str | None = "clip",
        fidelity_epochs: int | None = None,
        longest_min: int | None = None,
        model_check: float | None = MODEL_CHECK_DEFAULT,
        cost_exponent: float = 0.0,
    ) -> None:
        sampler = gp_sampler(
            seed,
            n_startup_trials=GP_STARTUP_TRIALS if n_startup_trials is None else n_startup_trials,
            value_transform=value_transform,
            fidelity_epochs=fidelity_epochs,
            longest_min=longest_min,
            model_check=model_check,
            cost_exponent=cost_exponent,
        )
        super().__init__(curves, sampler=sampler)
