"""The max_epochs stopper counts epochs by number, not results: a re-run epoch does not cut a trial short."""

from __future__ import annotations

from ray.tune.stopper import MaximumIterationStopper

from costtune.ray.stoppers import EpochLimit


def test_a_trial_that_re_ran_an_epoch_still_gets_all_its_epochs() -> None:
    # restored from a checkpoint one epoch behind its last result (a lost node): epoch 4 twice
    reported = [1, 2, 3, 4, 4, 5, 6, 7, 8, 9, 10, 11, 12]
    ours, rays = EpochLimit(12), MaximumIterationStopper(12)
    stops = [ours("t", {"training_iteration": e}) for e in reported]
    assert stops == [False] * 12 + [True]  # ends at epoch 12
    rays_stops = [rays("t", {"training_iteration": e}) for e in reported]
    assert rays_stops.index(True) == 11  # Ray's counter ended it at epoch 11, one short
