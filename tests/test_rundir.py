"""A run directory belongs to one sweep: never overwritten, never shared, locked while used."""

from __future__ import annotations

import json
import pickle
import zipfile
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from costtune.cli import main
from costtune.core.rundir import claim_existing, claim_new
from costtune.errors import ConfigError

CONFIG = {
    "name": "rundir",
    "max_epochs": 5,
    "num_samples": 1,
    "search_space": {"lr": {"type": "loguniform", "low": 1.0e-4, "high": 1.0e-1}},
    "cost": {"epoch_seconds": 1.0},
}


def test_a_new_run_takes_only_a_missing_or_empty_directory(tmp_path) -> None:
    fresh = tmp_path / "a" / "b"
    claim_new(fresh).release()
    assert fresh.is_dir()
    (tmp_path / "empty").mkdir()
    claim_new(tmp_path / "empty").release()
    (tmp_path / "file").write_text("x")
    with pytest.raises(ConfigError, match=r"^output: .*file is a file, not a directory$"):
        claim_new(tmp_path / "file")
    with pytest.raises(ConfigError, match=r"^output: cannot create .*under"):
        claim_new(tmp_path / "file" / "under")
    run = tmp_path / "run"
    run.mkdir()
    (run / "ledger.jsonl").write_text("")
    with pytest.raises(ConfigError, match=r"already holds a sweep; continue it with costtune sweep --resume"):
        claim_new(run)


def test_a_new_run_inside_another_run_is_refused_and_nothing_is_made(tmp_path) -> None:
    run = tmp_path / "run"
    run.mkdir()
    (run / "ledger.jsonl").write_text("")
    started = tmp_path / "started"  # killed before any report: config and source, no ledger yet
    started.mkdir()
    (started / "config.yaml").write_text("name: x\n")
    (started / "source.json").write_text("{}")
    for outer, inner in ((run, run / "sub"), (run, run / "ray" / "deeper"), (started, started / "sub")):
        with pytest.raises(
            ConfigError, match=rf"^output: {inner} lies inside the costtune run {outer}; give"
        ):
            claim_new(inner)
        assert not inner.exists() and not inner.parent.joinpath(".costtune.lock").exists()
    project = tmp_path / "project"  # a config.yaml of the user's own is not a run
    project.mkdir()
    (project / "config.yaml").write_text("model: resnet\n")
    claim_new(project / "runs" / "a").release()
    assert (project / "runs" / "a").is_dir()


def test_a_directory_with_the_users_files_is_refused_and_left_untouched(tmp_path) -> None:
    mine = tmp_path / "results"
    mine.mkdir()
    (mine / "summary.json").write_text('{"mine": true}')
    (mine / "trials.csv").write_text("a,b\n1,2\n")
    with pytest.raises(
        ConfigError, match=r"^output: .* is not empty and holds no costtune run \(2 entries\)"
    ):
        claim_new(mine)
    assert (mine / "summary.json").read_text() == '{"mine": true}'
    config = tmp_path / "sweep.yaml"
    config.write_text(yaml.safe_dump(CONFIG))
    result = CliRunner().invoke(main, ["sweep", str(config), "--output", str(mine), "--no-progress"])
    assert result.exit_code == 2 and result.output.count("\n") == 1, result.output
    assert "is not empty and holds no costtune run" in result.output
    # not even a lock file is left behind
    assert sorted(p.name for p in mine.iterdir()) == ["summary.json", "trials.csv"]
    assert (mine / "trials.csv").read_text() == "a,b\n1,2\n"


def test_a_locked_run_refuses_a_second_sweep_or_resume_until_released(tmp_path) -> None:
    run = tmp_path / "run"
    lock = claim_new(run)
    with pytest.raises(ConfigError, match=r"^--resume: .* is in use by another costtune sweep$"):
        claim_existing(run)
    with pytest.raises(ConfigError, match=r"^output: .* is in use by another costtune sweep$"):
        claim_new(run)
    lock.release()
    claim_existing(run).release()  # the lock went with its holder


def test_a_request_no_node_can_hold_is_named() -> None:
    from costtune.sweep import unfit_request

    cluster = {"CPU": 2.0, "memory": 1e9, "accelerator_type:A100": 1.0, "GPU": 8.0}
    assert unfit_request({"cpu": 1.0, "gpu": 0.0}, cluster) is None
    assert unfit_request({"cpu": 1.0, "gpu": 8.0, "accelerator_type:A100": 0.001}, cluster) is None
    assert unfit_request({"cpu": 100.0, "gpu": 0.0}, cluster) == (
        "resources.cpus: each trial asks for 100 CPU, the Ray cluster has 2 in all; no trial could ever start"
    )
    assert unfit_request({"cpu": 1.0, "gpu": 1.0}, {"CPU": 2.0}).startswith("resources.gpus: each trial asks")
    assert unfit_request({"cpu": 1, "gpu": 1, "accelerator_type:H100": 0.001}, cluster) == (
        "resources.accelerator_type: no node of the Ray cluster has H100 accelerators"
    )


@pytest.mark.ray
def test_an_impossible_sweep_fails_fast_and_leaves_nothing(ray_session, tmp_path) -> None:
    from costtune.core.config import parse_config
    from costtune.sweep import run_sweep

    config = parse_config({**CONFIG, "resources": {"cpus": 100}})
    with pytest.raises(ConfigError, match=r"^resources\.cpus: each trial asks for 100 CPU"):
        run_sweep(config, tmp_path / "run")
    assert not (tmp_path / "run").exists()
    mine = tmp_path / "mine"  # an empty folder the user made: left empty, without a lock file
    mine.mkdir()
    with pytest.raises(ConfigError, match=r"^resources\.cpus: each trial asks for 100 CPU"):
        run_sweep(config, mine)
    assert list(mine.iterdir()) == []


def _tune_save(experiment: Path, session: str, trials: int) -> None:
    """What one of Tune's saves writes: the experiment state, then the searcher's files."""
    (experiment / f"experiment_state-{session}.json").write_text(
        json.dumps({"trial_data": list(range(trials))})
    )
    (experiment / f"searcher-state-{session}.pkl").write_bytes(pickle.dumps(f"optuna:{trials}"))
    (experiment / f"search_gen_state-{session}.json").write_text(json.dumps({"counter": trials}))


def _state(experiment: Path, session: str) -> tuple[int, str, int]:
    return (
        len(json.loads((experiment / f"experiment_state-{session}.json").read_text())["trial_data"]),
        pickle.loads((experiment / f"searcher-state-{session}.pkl").read_bytes()),
        json.loads((experiment / f"search_gen_state-{session}.json").read_text())["counter"],
    )


def test_a_cut_ray_state_is_put_back_from_its_last_complete_snapshot(tmp_path) -> None:
    from costtune.core.rundir import keep_ray_state, repair_ray_state

    experiment = tmp_path / "ray"
    experiment.mkdir()
    session = "2026-12-01_10-00-00"
    _tune_save(experiment, session, 2)
    seen: dict = {}
    keep_ray_state(tmp_path, seen)
    assert repair_ray_state(tmp_path) is None  # whole and snapshotted: nothing to do
    state = experiment / f"experiment_state-{session}.json"
    state.write_text('{"trial_data": [1, 2, ')  # cut mid-write: never snapshotted over the good one
    keep_ray_state(tmp_path, seen)
    state.write_text("")  # the kill's truncation
    note = repair_ray_state(tmp_path)
    assert note is not None and state.name in note and "cut off" in note
    assert _state(experiment, session) == (2, "optuna:2", 2)
    assert repair_ray_state(tmp_path) is None  # repaired once


def test_the_snapshot_is_taken_from_the_drivers_staging_folder_not_from_a_copy_in_flight(tmp_path) -> None:
    """Tune saves into the driver's staging folder, then a background thread copies the files
    into the run, each truncated and rewritten. Read from the run mid-copy, a whole experiment
    state beside an empty searcher state made a snapshot that put back an empty file (CI, stop
    27: Tune failed to restore and restarted the sweep without a search space)."""
    from costtune.core.rundir import keep_ray_state, repair_ray_state

    experiment, staging = tmp_path / "ray", tmp_path / "staging"
    experiment.mkdir()
    staging.mkdir()
    session = "2026-12-01_10-00-00"
    _tune_save(staging, session, 3)
    _tune_save(experiment, session, 3)
    searcher = experiment / f"searcher-state-{session}.pkl"
    searcher.write_bytes(b"")  # the copy thread has truncated it and not yet written it
    keep_ray_state(tmp_path, {})  # read from the run: the set is not whole, nothing is kept
    assert not (tmp_path / ".ray_state").exists()
    keep_ray_state(tmp_path, {}, staging)  # what the callback does: the staging folder's set
    (experiment / f"experiment_state-{session}.json").write_text("")  # then the kill
    assert "cut off" in (repair_ray_state(tmp_path) or "")
    assert _state(experiment, session) == (3, "optuna:3", 3)


def test_a_cut_searcher_state_beside_a_whole_experiment_state_is_repaired_or_refused(tmp_path) -> None:
    """Tune loads the searcher's state as well as the experiment's: a cut one fails the restore,
    and Tune then starts the sweep again from nothing. Put back from the snapshot; with none,
    the session before it stands in (this one set aside whole); with neither, one line."""
    from costtune.core.rundir import keep_ray_state, repair_ray_state

    experiment = tmp_path / "ray"
    experiment.mkdir()
    first, second = "2026-12-01_10-00-00", "2026-12-01_11-00-00"
    _tune_save(experiment, first, 3)
    keep_ray_state(tmp_path, {})
    searcher = experiment / f"searcher-state-{first}.pkl"
    searcher.write_bytes(searcher.read_bytes()[:5])
    note = repair_ray_state(tmp_path)
    assert note is not None and searcher.name in note and "put back" in note
    assert _state(experiment, first) == (3, "optuna:3", 3)

    _tune_save(experiment, second, 4)  # a resumed session, never snapshotted, its searcher cut
    (experiment / f"searcher-state-{second}.pkl").write_bytes(b"")
    for snapshot in (tmp_path / ".ray_state").iterdir():
        snapshot.unlink()
    note = repair_ray_state(tmp_path)
    assert note is not None and f"searcher-state-{second}.pkl" in note and first in note
    assert sorted(p.name for p in experiment.glob(f"*{second}*")) == [
        f"experiment_state-{second}.json.corrupt",
        f"search_gen_state-{second}.json.corrupt",
        f"searcher-state-{second}.pkl.corrupt",
    ]

    _tune_save(experiment, second, 4)  # both sessions' searcher states cut: the older cannot stand in
    (experiment / f"searcher-state-{second}.pkl").write_bytes(b"")
    searcher.write_bytes(b"")
    with pytest.raises(ConfigError, match=f"searcher-state-{second}.pkl was cut"):
        repair_ray_state(tmp_path)
    assert (experiment / f"experiment_state-{second}.json").is_file()  # refused: nothing moved

    for path in experiment.glob(f"*{first}*"):
        path.unlink()
    _tune_save(experiment, second, 4)
    (experiment / f"search_gen_state-{second}.json").write_bytes(b"\x80\x05\x95")  # a cut pickle
    with pytest.raises(
        ConfigError, match=f"--resume: Ray's run state .*search_gen_state-{second}.json was cut"
    ):
        repair_ray_state(tmp_path)


def test_a_kill_between_the_files_of_one_save_resumes_from_the_last_whole_save(tmp_path) -> None:
    """Tune writes the experiment state, then the searcher's state and its trial count. A kill
    in between leaves an experiment of 3 trials and a searcher that counts 2 (Tune would create
    one trial too many; or too few the other way round): the last whole save is put back."""
    from costtune.core.rundir import keep_ray_state, repair_ray_state

    experiment = tmp_path / "ray"
    experiment.mkdir()
    session = "2026-12-01_10-00-00"
    _tune_save(experiment, session, 2)
    keep_ray_state(tmp_path, {})
    (experiment / f"experiment_state-{session}.json").write_text(json.dumps({"trial_data": [0, 1, 2]}))
    note = repair_ray_state(tmp_path)  # the kill landed here, before the searcher's files
    assert note is not None and "mid-save" in note
    assert _state(experiment, session) == (2, "optuna:2", 2)


def test_a_resumed_session_killed_in_its_first_save_resumes_from_the_session_before(tmp_path) -> None:
    from costtune.core.rundir import keep_ray_state, repair_ray_state

    experiment = tmp_path / "ray"
    experiment.mkdir()
    first, second = "2026-12-01_10-00-00", "2026-12-01_11-00-00"
    _tune_save(experiment, first, 3)
    keep_ray_state(tmp_path, {})
    (experiment / f"experiment_state-{second}.json").write_text(json.dumps({"trial_data": [0, 1, 2, 3]}))
    note = repair_ray_state(tmp_path)
    assert note is not None and first in note
    assert sorted(p.name for p in experiment.glob("experiment_state-*.json")) == [
        f"experiment_state-{first}.json"
    ]
    assert (experiment / f"experiment_state-{second}.json.unsaved").exists()  # set aside, not deleted
    assert _state(experiment, first) == (3, "optuna:3", 3)


def test_a_damaged_snapshot_is_not_taken_for_a_missing_one(tmp_path) -> None:
    """A snapshot cut or corrupted (by hand, a full disk) is ignored: the live state, whole, is
    resumed as it is, not set aside for the session before it."""
    from costtune.core.rundir import RAY_STATE_COPIES, keep_ray_state, repair_ray_state

    experiment = tmp_path / "ray"
    experiment.mkdir()
    first, second = "2026-12-01_10-00-00", "2026-12-01_11-00-00"
    _tune_save(experiment, first, 3)
    _tune_save(experiment, second, 4)
    keep_ray_state(tmp_path, {})
    snapshot = tmp_path / RAY_STATE_COPIES / f"snapshot-{second}.zip"
    snapshot.write_bytes(snapshot.read_bytes()[:40])
    assert repair_ray_state(tmp_path) is None
    assert _state(experiment, second) == (4, "optuna:4", 4)
    # a snapshot whole as a zip but holding a file cut mid-copy (as an older costtune took them)
    with zipfile.ZipFile(snapshot, "w") as archive:
        for path in experiment.glob(f"*{second}*"):
            archive.writestr(path.name, b"" if path.suffix == ".pkl" else path.read_bytes())
    assert repair_ray_state(tmp_path) is None
    assert _state(experiment, second) == (4, "optuna:4", 4)


def test_a_run_from_before_snapshots_still_gets_its_cut_state_put_back(tmp_path) -> None:
    from costtune.core.rundir import RAY_STATE_COPIES, repair_ray_state

    experiment = tmp_path / "ray"
    experiment.mkdir()
    state = experiment / "experiment_state-2026-12-01_10-00-00.json"
    (tmp_path / RAY_STATE_COPIES).mkdir()
    (tmp_path / RAY_STATE_COPIES / state.name).write_text(json.dumps({"trial_data": [1]}))
    state.write_text(json.dumps({"trial_data": [1, 2]}))
    assert repair_ray_state(tmp_path) is None  # whole: the old copy is not forced over it
    state.write_text("")
    assert "cut off" in (repair_ray_state(tmp_path) or "")
    assert json.loads(state.read_text()) == {"trial_data": [1]}


def test_a_cut_ray_state_without_a_copy_falls_back_to_an_older_one_or_is_refused(tmp_path) -> None:
    from costtune.core.rundir import repair_ray_state

    experiment = tmp_path / "ray"
    experiment.mkdir()
    newest = experiment / "experiment_state-2026-12-01_11-00-00.json"
    newest.write_text("")
    with pytest.raises(ConfigError, match="^--resume: Ray's run state .* was cut off"):
        repair_ray_state(tmp_path)
    assert newest.exists()  # nothing moved when refusing
    older = experiment / "experiment_state-2026-12-01_10-00-00.json"
    older.write_text("{}")
    assert older.name in (repair_ray_state(tmp_path) or "")
    assert not newest.exists() and newest.with_name(newest.name + ".corrupt").exists()


def test_a_sweep_stopped_before_any_report_is_named_the_same_by_sweep_and_resume(tmp_path) -> None:
    """Killed while Ray started (config written, no ledger yet): a new sweep into it was told
    to resume it, and the resume that nothing could be resumed. Both now say what happened
    and the way out, and leave the directory as it was."""
    run = tmp_path / "run"
    (run / "ray").mkdir(parents=True)
    (run / "config.yaml").write_text(yaml.safe_dump(CONFIG))
    (run / "source.json").write_text("{}")
    config = tmp_path / "sweep.yaml"
    config.write_text(yaml.safe_dump(CONFIG))
    for args, field in (
        (["sweep", str(config), "--output", str(run), "--no-progress"], "output"),
        (["sweep", "--resume", str(run)], "--resume"),
    ):
        result = CliRunner().invoke(main, args)
        assert result.exit_code == 2 and result.output.count("\n") == 1, result.output
        assert f"{field}: {run} holds a sweep stopped before any trial reported an epoch" in result.output
        assert "start it again into a new directory, or delete this one" in result.output
    # as it was (the lock file is the run's own: every run directory has one)
    assert sorted(p.name for p in run.iterdir() if p.name != ".costtune.lock") == [
        "config.yaml",
        "ray",
        "source.json",
    ]
    assert (run / "config.yaml").read_text() == yaml.safe_dump(CONFIG)
    (run / "ledger.jsonl").write_text('{"kind": "epoch"}\n')  # once something was metered: resume it
    with pytest.raises(ConfigError, match=r"already holds a sweep; continue it with costtune sweep --resume"):
        claim_new(run)


def test_a_relocation_holds_inside_its_context_only(tmp_path) -> None:
    """While a resume unpickles a moved run, paths into the run directory it was saved in point
    into the one passed; outside the ``with``, in another thread, or after an error: unchanged."""
    import threading

    from costtune.core.rundir import relocated, relocating

    old, new, newer = tmp_path / "old", tmp_path / "new", tmp_path / "newer"
    assert relocated(old / "ledger.jsonl") == old / "ledger.jsonl"
    with relocating(new):
        assert relocated(old / "ledger.jsonl") == new / "ledger.jsonl"
        assert relocated(old, is_run_dir=True) == new
        with relocating(newer):
            assert relocated(old, is_run_dir=True) == newer
        assert relocated(old, is_run_dir=True) == new
        seen = []
        thread = threading.Thread(target=lambda: seen.append(relocated(old, is_run_dir=True)))
        thread.start()
        thread.join()
        assert seen == [old]  # another thread's unpickling is not this resume's
    with pytest.raises(RuntimeError), relocating(new):
        raise RuntimeError("restore failed")
    assert relocated(old, is_run_dir=True) == old
