"""Every private Ray name costtune relies on, in one module, for the Ray series that
``pyproject.toml`` pins (``ray[tune]>=2.60,<2.61``).

Each hook is one function, context manager or class below, and says why no public route
does the job. ``tests/test_ray_private.py`` holds one contract test per hook: on a Ray that
renames or reshapes what a hook reads, that test fails and names the hook. Nothing here
changes Ray at import; the three that change a Ray class for a while
(:func:`staging_of_its_own`, :func:`storage_rebased`, :func:`trials_created_at_least`) are
context managers that put the class back on exit.

The rest of costtune reaches Ray only through its public API and these names.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ray.tune.schedulers import PopulationBasedTraining

if TYPE_CHECKING:
    from ray.tune.experiment import Trial

#: the Ray series these hooks are written for (and tested on)
RAY_SERIES = "2.60"

#: Ray loggers whose errors a sweep folds into one line (``ray.train._internal.syncer`` is a
#: private module; a logger that no longer exists is simply never called)
RAY_LOGGERS = (
    "ray.tune.tune",
    "ray.tune.execution.tune_controller",
    "ray.tune.execution.experiment_state",
    "ray.train._internal.syncer",
    "ray.tune.search.optuna.optuna_search",
)


def _storage_context() -> Any:
    from ray.train._internal.storage import StorageContext

    return StorageContext


def new_staging_name() -> str:
    """A name for Ray's driver staging folder that no other sweep or resume has: Ray's own is
    the second an experiment started."""
    from ray.tune.utils import date_str

    return f"{date_str()}-{uuid.uuid4().hex[:8]}"


@contextmanager
def staging_of_its_own() -> Iterator[str]:
    """While a sweep runs, every ``StorageContext`` created (the experiment's; trials copy
    it) stages the driver's files in a folder of this sweep's own; yields its name.

    Hook: ``StorageContext.__init__`` and its ``_timestamp``. Ray names the staging folder
    ``<Ray session>/artifacts/<the second the experiment started>/<its name>`` and syncs the
    whole folder into the run's ``ray/``; costtune names every experiment ``ray``, so two
    sweeps started in one second on one Ray (a cluster's head node, or one process) shared
    it, and each run received the other's trial folders. Ray has no setting for the name.
    """
    storage = _storage_context()
    original = storage.__init__
    stamp = new_staging_name()

    def init(self: Any, *args: Any, **kwargs: Any) -> None:
        original(self, *args, **kwargs)
        self._timestamp = stamp

    storage.__init__ = init
    try:
        yield stamp
    finally:
        storage.__init__ = original


@contextmanager
def storage_rebased(run_dir: Path, experiment_name: str) -> Iterator[str]:
    """While a resume unpickles Tune's saved experiment, its storage points into ``run_dir``
    and its driver staging folder gets a name of its own; yields that name.

    Hook: ``StorageContext.__setstate__`` (Ray defines none), ``_timestamp``,
    ``storage_fs_path``, ``experiment_dir_name`` and ``trial_dir_name``. Tune restores its
    search generator's saved experiment with the storage path the run was saved with: new
    trials of a copied or moved run would write their checkpoints into the original.
    ``Tuner.restore`` takes the run's path but not a storage to rebase onto. And Tune names
    the staging folder by the run's first start and restores the search generator from the
    newest state file there: a second resume of the same run, or of a copy of it, in one Ray
    session met the first one's files and ended short of ``num_samples``.
    """
    storage = _storage_context()
    if "__setstate__" in storage.__dict__:
        raise RuntimeError("Ray's StorageContext defines __setstate__ now: storage_rebased must be revisited")
    stamp = new_staging_name()

    def setstate(self: Any, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        if "_timestamp" in state:  # every context alike: one folder
            self._timestamp = stamp
        # the experiment's own context (new trials copy it); a trial's context is left to
        # Tune, which moves it and its tracked checkpoints together (Trial.set_storage)
        if state.get("experiment_dir_name") == experiment_name and state.get("trial_dir_name") is None:
            self.storage_fs_path = run_dir.as_posix()

    storage.__setstate__ = setstate
    try:
        yield stamp
    finally:
        del storage.__setstate__


@contextmanager
def trials_created_at_least(created: int) -> Iterator[None]:
    """While a resume restores Tune's search generator, its count of trials created is at
    least ``created``.

    Hook: ``SearchGenerator.set_state`` and ``_counter``. Tune's snapshot lags the run by up
    to a save interval: a trial that started and ended after the last one is in costtune's
    books (it ran, it was paid, it has its stop reason) but not in the generator's count, so
    the resumed sweep sampled one more trial in its place (``num_samples`` + 1 in all).
    """
    from ray.tune.search.search_generator import SearchGenerator

    original = SearchGenerator.set_state

    def set_state(self: Any, state: dict[str, Any]) -> None:
        original(self, state)
        self._counter = max(self._counter, created)

    SearchGenerator.set_state = set_state
    try:
        yield
    finally:
        SearchGenerator.set_state = original


def checkpoint_exists(checkpoint: Any) -> bool:
    """Whether a ``ray.train.Checkpoint``'s folder is still there, on whatever filesystem
    holds it. Hook: ``ray.train._internal.storage._exists_at_fs_path`` (pyarrow's ``FileSystem``
    has no one-call public equivalent that Ray's other storage code agrees with)."""
    from ray.train._internal.storage import _exists_at_fs_path

    return bool(_exists_at_fs_path(checkpoint.filesystem, checkpoint.path))


def forget_missing_checkpoints(trial: Trial, exists: Callable[[Any], bool] = checkpoint_exists) -> None:
    """Cut a restored trial's tracked checkpoints to those that exist; one whose latest is gone
    resumes from its newest existing one, or from the start.

    Hook: ``trial.run_metadata.checkpoint_manager`` and its ``_checkpoint_results`` and
    ``_latest_checkpoint_result``. Tune keeps the list it saved, and a restore whose latest
    checkpoint was deleted (a disk clean-up, a partial copy) fails the trial; Ray has no
    public call to drop a tracked checkpoint.
    """
    manager = trial.run_metadata.checkpoint_manager
    tracked = list(manager._checkpoint_results or ())
    latest = manager.latest_checkpoint_result
    if not tracked and latest is None:
        return
    kept = [r for r in tracked if exists(r.checkpoint)]
    if len(kept) != len(tracked):
        manager._checkpoint_results = kept
    if latest is not None and not exists(latest.checkpoint):
        newest = [r for r in kept if r is not latest]
        manager._latest_checkpoint_result = newest[-1] if newest else None


def actor_id(trial: Trial) -> str | None:
    """The hex id of the actor a trial runs in, or ``None`` (not placed). Hook: the trial's
    ``temporary_state.ray_actor`` and the handle's ``_actor_id``; Tune gives a callback the
    trial, not its actor."""
    actor = getattr(getattr(trial, "temporary_state", None), "ray_actor", None)
    found = getattr(actor, "_actor_id", None)
    return found.hex() if found is not None else None


def gcs_actor(actor_hex: str) -> dict[str, Any]:
    """The GCS actor table's record of an actor (``StartTime``, ``EndTime`` in ms,
    ``Address.NodeID``); ``{}`` where there is none. Hook: ``ray._private.state.actors``.
    Ray's public state API (``ray.util.state``) needs the dashboard, which costtune does not
    start."""
    from ray._private import state

    return dict(state.actors(actor_hex) or {})


class PopulationHooks(PopulationBasedTraining):
    """Ray's ``PopulationBasedTraining`` with its decisions handed to public-named methods.

    Hooks: the ``_trial_state`` table (``last_score``, ``last_result``), the
    ``_quantile_fraction`` and ``_resample_probability`` settings, and the methods
    ``_quantiles``, ``_checkpoint_or_exploit`` and ``_get_new_config``. Ray's scheduler keeps
    the checkpoint plumbing (save the donor, restore it into the clone) in the same methods
    as its decisions and offers no public way to make them; a subclass overrides
    :meth:`quantiles`, :meth:`donors` and :meth:`new_config` instead.
    """

    def trial_states(self) -> dict[Trial, Any]:
        """Each trial's PBT record (``last_score``: the metric signed so that higher is
        better; ``last_result``)."""
        return self._trial_state

    @property
    def quantile_fraction(self) -> float:
        return float(self._quantile_fraction)

    @property
    def resample_probability(self) -> float:
        return float(self._resample_probability)

    def quantiles(self) -> tuple[list[Trial], list[Trial]]:
        """``(bottom, top)``: who copies, and who may be copied."""
        return super()._quantiles()

    def donors(self, trial: Trial, top: list[Trial]) -> list[Trial]:
        """Which of the top quantile ``trial`` (in the bottom one) may copy; Ray picks one."""
        return top

    def new_config(self, trial: Trial, donor: Trial) -> tuple[dict, dict]:
        """``(config, operations)`` for ``trial`` cloned from ``donor``."""
        return super()._get_new_config(trial, donor)

    def _quantiles(self) -> tuple[list[Trial], list[Trial]]:
        return self.quantiles()

    def _checkpoint_or_exploit(
        self, trial: Trial, tune_controller: Any, upper_quantile: list[Trial], lower_quantile: list[Trial]
    ) -> None:
        if trial in lower_quantile and upper_quantile:
            upper_quantile = self.donors(trial, upper_quantile)
        super()._checkpoint_or_exploit(trial, tune_controller, upper_quantile, lower_quantile)

    def _get_new_config(self, trial: Trial, trial_to_clone: Trial) -> tuple[dict, dict]:
        return self.new_config(trial, trial_to_clone)
