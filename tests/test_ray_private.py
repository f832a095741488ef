"""One contract test per hook of :mod:`costtune.ray.private`, run against the installed Ray.

Each asserts what its hook reads or replaces is there and behaves as the hook assumes; on a
Ray that moved one, the failing test names it. The last test keeps the rule that no other
module of the package names a private Ray module or attribute.
"""

from __future__ import annotations

import importlib.util
import inspect
import pickle
import re
from pathlib import Path
from types import SimpleNamespace

import pytest

ray = pytest.importorskip("ray")

from ray.train import Checkpoint  # noqa: E402
from ray.train._internal.storage import StorageContext  # noqa: E402
from ray.tune.schedulers import PopulationBasedTraining  # noqa: E402
from ray.tune.search import Searcher  # noqa: E402
from ray.tune.search.search_generator import SearchGenerator  # noqa: E402

from costtune.ray import private  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


def test_the_pinned_ray_is_the_series_the_hooks_are_written_for() -> None:
    assert ray.__version__.startswith(private.RAY_SERIES + "."), ray.__version__
    pinned = re.search(r'"ray\[tune\]>=([0-9.]+),<', (ROOT / "pyproject.toml").read_text())
    assert pinned is not None and pinned.group(1) == private.RAY_SERIES


def test_the_cores_copy_of_rays_accelerator_labels_is_rays() -> None:
    """The core bills Ray's node labels without importing Ray: its copy is Ray's set."""
    from ray.util.accelerators import accelerators

    from costtune.core.cost import RAY_ACCELERATOR_LABELS

    ours = {v for k, v in vars(accelerators).items() if k.isupper() and isinstance(v, str)}
    assert ours == RAY_ACCELERATOR_LABELS


def test_staging_of_its_own_names_every_storage_context_made_meanwhile(tmp_path) -> None:
    before, init = StorageContext(str(tmp_path), "ray"), StorageContext.__init__
    with private.staging_of_its_own() as stamp:
        inside = [
            StorageContext(str(tmp_path), "ray"),
            StorageContext(str(tmp_path), "ray", trial_dir_name="t"),
        ]
    after = StorageContext(str(tmp_path), "ray")
    assert all(c._timestamp == stamp for c in inside)
    assert stamp not in (before._timestamp, after._timestamp)
    assert StorageContext.__init__ is init  # Ray's own again


def test_storage_rebased_moves_the_experiment_and_renames_staging_but_leaves_trials_to_tune(tmp_path) -> None:
    old, new = tmp_path / "old", tmp_path / "new"
    old.mkdir(), new.mkdir()
    experiment = pickle.dumps(StorageContext(str(old), "ray"))
    trial = pickle.dumps(StorageContext(str(old), "ray", trial_dir_name="trial_1"))
    assert "__setstate__" not in StorageContext.__dict__  # the hook adds one; Ray has none
    with private.storage_rebased(new, "ray") as stamp:
        moved, kept = pickle.loads(experiment), pickle.loads(trial)
    assert moved.storage_fs_path == new.as_posix() and moved._timestamp == stamp
    assert kept.storage_fs_path == old.as_posix() and kept._timestamp == stamp
    assert moved.experiment_dir_name == "ray" and kept.trial_dir_name == "trial_1"
    assert "__setstate__" not in StorageContext.__dict__
    assert pickle.loads(experiment).storage_fs_path == old.as_posix()  # outside: unchanged


def test_trials_created_at_least_raises_the_restored_generators_count() -> None:
    generator = SearchGenerator(Searcher(metric="loss", mode="min"))
    state = generator.get_state()
    assert {"counter", "total_samples", "finished"} <= set(state)
    state["counter"] = 3
    with private.trials_created_at_least(5):
        generator.set_state(state)
    assert generator._counter == 5
    generator.set_state(state)  # outside: Ray's own
    assert generator._counter == 3


def test_checkpoint_exists_sees_a_folder_come_and_go(tmp_path) -> None:
    folder = tmp_path / "checkpoint_000001"
    folder.mkdir()
    checkpoint = Checkpoint.from_directory(str(folder))
    assert private.checkpoint_exists(checkpoint)
    folder.rmdir()
    assert not private.checkpoint_exists(checkpoint)


def _trial_with_checkpoints(tmp_path: Path, names: list[str]) -> SimpleNamespace:
    from ray.train import CheckpointConfig
    from ray.train._internal.checkpoint_manager import _CheckpointManager, _TrainingResult

    manager = _CheckpointManager(CheckpointConfig())
    for i, name in enumerate(names):
        (tmp_path / name).mkdir()
        result = _TrainingResult(
            Checkpoint.from_directory(str(tmp_path / name)), {"training_iteration": i + 1}
        )
        manager.register_checkpoint(result)
    return SimpleNamespace(run_metadata=SimpleNamespace(checkpoint_manager=manager))


def test_forget_missing_checkpoints_falls_back_to_the_newest_one_on_disk(tmp_path) -> None:
    trial = _trial_with_checkpoints(tmp_path, ["c1", "c2", "c3"])
    manager = trial.run_metadata.checkpoint_manager
    assert len(manager._checkpoint_results) == 3
    (tmp_path / "c3").rmdir()
    private.forget_missing_checkpoints(trial)
    assert [Path(r.checkpoint.path).name for r in manager._checkpoint_results] == ["c1", "c2"]
    assert Path(manager.latest_checkpoint_result.checkpoint.path).name == "c2"
    for name in ("c1", "c2"):
        (tmp_path / name).rmdir()
    private.forget_missing_checkpoints(trial)
    assert manager._checkpoint_results == [] and manager.latest_checkpoint_result is None


def test_actor_id_reads_a_trials_actor_handle_and_none_before_placement(ray_session) -> None:
    from ray.tune.experiment import Trial

    trial = Trial("__fake", stub=True)
    assert hasattr(trial, "temporary_state") and trial.temporary_state.ray_actor is None
    assert private.actor_id(trial) is None

    @ray.remote(num_cpus=0)
    class Probe:
        def ping(self) -> int:
            return 1

    handle = Probe.remote()
    ray.get(handle.ping.remote())
    trial.temporary_state.ray_actor = handle
    found = private.actor_id(trial)
    assert found == handle._actor_id.hex() and re.fullmatch(r"[0-9a-f]+", found)
    record = private.gcs_actor(found)  # the GCS actor table's record of the same actor
    assert record["StartTime"] > 0 and record["Address"]["NodeID"] in {n["NodeID"] for n in ray.nodes()}
    assert private.gcs_actor("ff" * 16) == {}
    trial.temporary_state.ray_actor = None
    ray.kill(handle)


def test_population_hooks_override_the_private_methods_ray_pbt_calls() -> None:
    names = {
        "_quantiles": ["self"],
        "_checkpoint_or_exploit": ["self", "trial", "tune_controller", "upper_quantile", "lower_quantile"],
        "_get_new_config": ["self", "trial", "trial_to_clone"],
    }
    for name, params in names.items():
        assert list(inspect.signature(getattr(PopulationBasedTraining, name)).parameters) == params, name
        assert name in private.PopulationHooks.__dict__, name
    pbt = private.PopulationHooks(
        metric="loss", mode="min", quantile_fraction=0.3, resample_probability=0.1, custom_explore_fn=dict
    )
    assert pbt.trial_states() is pbt._trial_state and pbt.trial_states() == {}
    assert (pbt.quantile_fraction, pbt.resample_probability) == (0.3, 0.1)
    # Ray's PBT calls _quantiles from its own decision path: the hook hands it to quantiles()
    calls = []
    pbt.quantiles = lambda: calls.append(1) or ([], [])
    assert pbt._quantiles() == ([], []) and calls == [1]
    source = inspect.getsource(PopulationBasedTraining._checkpoint_or_exploit)
    assert "_get_new_config" in inspect.getsource(PopulationBasedTraining._exploit)
    assert "upper_quantile" in source and "_exploit" in source


def test_the_loggers_folded_into_one_line_exist_in_this_ray() -> None:
    for name in private.RAY_LOGGERS:
        assert importlib.util.find_spec(name) is not None, name


def test_no_other_module_of_the_package_names_a_private_ray_module_or_attribute() -> None:
    pattern = re.compile(
        r"ray\._private|_internal\b|\._trial_state\b|\._quantile_fraction\b|\._resample_probability\b"
        r"|\._actor_id\b|\._checkpoint_results\b|\._latest_checkpoint_result\b|\._counter\b|\._timestamp\b"
        r"|def _quantiles\b|def _checkpoint_or_exploit\b|def _get_new_config\b|StorageContext|SearchGenerator"
    )
    found = []
    for path in sorted((ROOT / "costtune").rglob("*.py")):
        if path.name == "private.py" and path.parent.name == "ray":
            continue
        for number, line in enumerate(path.read_text().splitlines(), 1):
            if pattern.search(line):
                found.append(f"{path.relative_to(ROOT)}:{number}: {line.strip()}")
    assert found == []
