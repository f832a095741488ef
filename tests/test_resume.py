"""A sweep whose driver is killed with SIGKILL mid-run, resumed with `costtune sweep --resume`."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
import warnings
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pandas as pd
import pytest
import yaml

from costtune.core.ledger import ledger_digest
from costtune.sweep import resume_sweep
from tests.conftest import SMALL

pytestmark = pytest.mark.ray
REPO = Path(__file__).resolve().parent.parent


def _events(run: Path) -> list[dict]:
    return [json.loads(line) for line in (run / "ledger.jsonl").read_text().splitlines() if line.strip()]


def _running_with_epochs(events: list[dict], epochs: int) -> bool:
    ended = {e["trial_id"] for e in events if e["event"] == "end"}
    return any(e["event"] == "result" and e["trial_id"] not in ended and e["epoch"] >= epochs for e in events)


def _started_sweep(
    tmp_path: Path, name: str, output: int = subprocess.DEVNULL
) -> tuple[subprocess.Popen, Path]:
    """A real sweep driven by the CLI in a session of its own (its Ray instance with it)."""
    config = {**SMALL, "name": name, "max_epochs": 9, "num_samples": 6}
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(config))
    run = tmp_path / name
    driver = subprocess.Popen(
        [sys.executable, "-m", "costtune.cli", "sweep", str(path), "--output", str(run), "--no-progress"],
        cwd=REPO,
        start_new_session=True,
        stdout=output,
        stderr=output,
        text=True,
        env={**os.environ, "RAY_AUTH_MODE": "disabled"},
    )
    return driver, run


def _wait_for(run: Path, ended: int = 2, running_epochs: int = 0, timeout: float = 300) -> bool:
    """Until ``ended`` trials ended and one still running has ``running_epochs`` epochs (True),
    or the sweep ended first, or ``timeout`` (False)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if (run / "ledger.jsonl").exists():
            try:
                events = _events(run)
            except json.JSONDecodeError:  # a line being written as we read
                continue
            if sum(e["event"] == "end" for e in events) >= ended and (
                not running_epochs or _running_with_epochs(events, running_epochs)
            ):
                return True
            if len({e["trial_id"] for e in events if e["event"] == "end"}) >= 6:
                return False  # the sweep ended first (a loaded machine)
        time.sleep(0.1)
    return False


_NEVER = "the sweep never had the ended and running trials the test needs (it ended first, or timed out)"


def _killed_run(tmp_path: Path, name: str, ended: int = 2, running_epochs: int = 0) -> Path:
    """A real sweep, SIGKILLed (driver and its Ray) once ``ended`` trials ended."""
    driver, run = _started_sweep(tmp_path, name)
    reached = _wait_for(run, ended, running_epochs)
    os.killpg(driver.pid, signal.SIGKILL)  # the driver and the Ray instance it started
    driver.wait()
    _wait_for_session_to_die(driver.pid)
    assert reached, _NEVER
    return run


@pytest.fixture(scope="module")
def killed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """One real sweep SIGKILLed with two trials ended and one unfinished at its second epoch
    or later, for every test here that resumes or damages a killed run: each works on a copy
    of its own (`_copy_of_killed`). Not one byte of it may change.

    Every copy is resumed in the one Ray session of the tests, so each resume after the first
    meets the files an earlier copy of the same run staged there (Tune names its driver staging
    folder by the run's first start; a resume that took those restored the other copy's
    finished search): each test's own count of finished trials checks that it did not."""
    run = _killed_run(tmp_path_factory.mktemp("killed"), "killed", running_epochs=2)
    untouched = _digest(run)
    yield run
    assert _digest(run) == untouched, "a test wrote into the shared killed run, not into its copy"


def _copy_of_killed(killed: Path, tmp_path: Path, name: str) -> Path:
    """The shared killed run, copied as a user copies a folder (``cp -a``)."""
    run = tmp_path / name
    shutil.copytree(killed, run, symlinks=True)
    return run


def _wait_for_session_to_die(sid: int, timeout: float = 30.0) -> None:
    """Ray's trial workers run in process groups of their own and outlive a killed driver by
    a second or two (still writing checkpoints): wait until no live process of the session is left."""

    def alive() -> list[int]:
        pids = []
        for stat in Path("/proc").glob("[0-9]*/stat"):
            try:
                fields = stat.read_text().rpartition(")")[2].split()
            except OSError:
                continue
            if int(fields[3]) == sid and fields[0] != "Z":
                pids.append(int(stat.parent.name))
        return pids

    deadline = time.monotonic() + timeout
    while alive() and time.monotonic() < deadline:
        time.sleep(0.2)


def test_sigkilled_sweep_resumes_without_losing_or_double_counting(ray_session, killed, tmp_path) -> None:
    run = _copy_of_killed(killed, tmp_path, "killed")
    before = _events(run)
    ended_before = {e["trial_id"] for e in before if e["event"] == "end"}
    assert ended_before, "the sweep was killed before any trial ended"
    time.sleep(3)  # downtime that must not be charged

    resumed_at = time.time()
    result = resume_sweep(run)

    after = _events(run)
    assert after[: len(before)] == before  # the ledger was continued, not rewritten
    frame = result.trials.set_index("trial_id")
    assert frame.index.is_unique
    # a trial started after Tune's last snapshot is invisible to the restored experiment:
    # it is closed as interrupted with what it ran charged, and the searcher fills its place
    live = frame[frame["stop_reason"] != "interrupted"]
    assert len(live) == 6
    assert set(frame["stop_reason"]) <= {"rung_pruned", "marginal_roi", "completed", "interrupted"}
    ends = Counter(e["trial_id"] for e in after if e["event"] == "end")
    for trial_id in ended_before:
        assert ends[trial_id] == 1  # a trial finished before the kill was not run again
    for trial_id in frame.index:
        epochs = sorted({e["epoch"] for e in after if e["event"] == "result" and e["trial_id"] == trial_id})
        assert epochs == list(range(1, frame.loc[trial_id, "epochs"] + 1))  # nothing lost
    increments = [e["increment"] for e in after if e["event"] == "result"]
    # downtime not charged: every epoch charged after the resume ran after the resume began
    # (an epoch charged across the downtime would be ≥ 3 s longer than that window allows)
    for e in after[len(before) :]:
        if e["event"] == "result":
            assert e["increment"] <= e["time"] - resumed_at + 1.0, e
    # what trials held untimed (start-up, hand-offs, shutdown), never the downtime (3 s)
    held = [e["seconds"] for e in after if e["event"] == "charge"]
    assert all(0 < s < 2.0 for s in held), held
    assert frame["seconds"].sum() == pytest.approx(sum(increments) + sum(held))  # every epoch charged once
    assert result.summary["total_cost_usd"] == pytest.approx(frame["cost_usd"].sum())
    assert json.loads((run / "summary.json").read_text())["trials"] == len(frame)


def test_a_resume_puts_back_rays_state_file_that_the_kill_cut_off(ray_session, killed, tmp_path) -> None:
    """Tune rewrites its experiment state in place: a kill mid-write leaves it empty, and Tune
    would restart the sweep from nothing (its searcher without a search space). The resume
    puts back costtune's last complete copy, says so in one line, and finishes the sweep."""
    run = _copy_of_killed(killed, tmp_path, "cut")
    states = sorted((run / "ray").glob("experiment_state-*.json"))
    session = states[-1].name.removeprefix("experiment_state-").removesuffix(".json")
    assert states and (run / ".ray_state" / f"snapshot-{session}.zip").is_file()
    states[-1].write_text("")  # what the kill leaves when it lands in Tune's write
    with pytest.warns(UserWarning, match="was cut off by the interruption; put back its last complete copy"):
        result = resume_sweep(run)
    assert (result.trials["stop_reason"] != "interrupted").sum() == 6
    assert json.loads(states[-1].read_text())["trial_data"]


def _resume_in_a_new_process(run: Path) -> subprocess.CompletedProcess:
    """``costtune sweep --resume RUN`` as a user types it, in a process of its own."""
    return subprocess.run(
        [sys.executable, "-m", "costtune.cli", "sweep", "--resume", str(run), "--no-progress"],
        cwd=REPO,
        capture_output=True,
        text=True,
        env={**os.environ, "RAY_AUTH_MODE": "disabled"},
        timeout=300,
    )


def _digest(run: Path) -> dict[str, str]:
    return {
        str(p.relative_to(run)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(run.rglob("*"))
        if p.is_file() and p.name != ".costtune.lock"
    }


def test_a_copied_or_moved_run_resumes_into_itself_and_leaves_the_original_untouched(
    ray_session, killed, tmp_path
) -> None:
    original = killed  # its digest is checked here and again when the module's tests are done
    untouched = _digest(original)
    copy = _copy_of_killed(original, tmp_path, "copy")
    ledger_before = _events(copy)

    result = resume_sweep(copy)  # Tune restores callbacks pickled with the original's paths

    assert _digest(original) == untouched  # not one byte written into the original
    assert result.output_dir == copy
    assert _events(copy)[: len(ledger_before)] == ledger_before
    summary = json.loads((copy / "summary.json").read_text())
    assert summary["output_dir"] == str(copy)
    frame = result.trials
    assert (frame["stop_reason"] != "interrupted").sum() == 6  # the copy finished its sweep
    # every trial's checkpoints, new trials' included, lie in the copy
    trial_dirs = {p.name.split("_")[2] for p in (copy / "ray").iterdir() if p.is_dir()}
    assert set(frame["trial_id"]) - {t for t in frame["trial_id"] if t in trial_dirs} <= set(
        frame.loc[frame["stop_reason"] == "interrupted", "trial_id"]
    )

    # a copy moved before its resume, resumed by the CLI in a process of its own
    staged, moved = _copy_of_killed(original, tmp_path, "staged"), tmp_path / "moved"
    shutil.move(staged, moved)
    done = _resume_in_a_new_process(moved)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "Traceback" not in done.stdout + done.stderr
    assert not staged.exists()  # the old path is not recreated
    assert _digest(original) == untouched
    moved_frame = pd.read_csv(moved / "trials.csv")
    assert (moved_frame["stop_reason"] != "interrupted").sum() == 6
    for line in (moved / "ledger.jsonl").read_text().splitlines():
        assert str(staged) not in line and str(original) not in line


def test_a_resume_survives_checkpoints_that_vanished_after_tunes_last_snapshot(
    ray_session, killed, tmp_path, capfd
) -> None:
    """Tune's snapshot lags the run: it may name checkpoints that are gone (deleted by
    num_to_keep, or never finished by a killed worker). The worst case, forced here: every
    checkpoint of the unfinished trials is gone; they resume from the start."""
    run = _copy_of_killed(killed, tmp_path, "vanished")
    ended = {e["trial_id"] for e in _events(run) if e["event"] == "end"}
    removed = []
    for trial_dir in (run / "ray").iterdir():
        if trial_dir.is_dir() and trial_dir.name.split("_")[2] not in ended:
            for checkpoint in trial_dir.glob("checkpoint_*"):
                shutil.rmtree(checkpoint)
                removed.append(checkpoint)
    assert removed
    capfd.readouterr()

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = resume_sweep(run)

    output = "".join(capfd.readouterr())
    # Ray's Optuna searcher tells a re-run epoch again; Optuna warned once per epoch (stop 32)
    assert not [w for w in caught if "is already reported" in str(w.message)]
    assert "Traceback" not in output
    assert "Could not recover from checkpoint" not in output
    frame = result.trials.set_index("trial_id")
    assert "error" not in set(frame["stop_reason"])
    assert (frame["stop_reason"] != "interrupted").sum() == 6
    events = _events(run)
    for trial_id in frame.index:
        epochs = sorted({e["epoch"] for e in events if e["event"] == "result" and e["trial_id"] == trial_id})
        assert epochs == list(range(1, frame.loc[trial_id, "epochs"] + 1))


def _forget_in_tunes_snapshot(run: Path, trial_id: str) -> None:
    """Tune's newest save, as if taken before ``trial_id`` was created: the experiment state
    without it and the search generator counting one trial fewer (and costtune's snapshot of
    that save to match, or the resume would put the real one back)."""
    from ray import cloudpickle

    from costtune.core.rundir import keep_ray_state

    experiment = run / "ray"
    state_path = sorted(experiment.glob("experiment_state-*.json"))[-1]
    state = json.loads(state_path.read_text())
    kept = [t for t in state["trial_data"] if json.loads(t[0])["trial_id"] != trial_id]
    if len(kept) == len(state["trial_data"]):
        return  # the kill landed before Tune saved the trial at all: its newest save is that already
    assert len(kept) == len(state["trial_data"]) - 1
    state["trial_data"] = kept
    state_path.write_text(json.dumps(state))
    generator_path = sorted(experiment.glob("search_gen_state-*.json"))[-1]
    generator = cloudpickle.loads(generator_path.read_bytes())
    generator["counter"] -= 1
    generator_path.write_bytes(cloudpickle.dumps(generator))
    keep_ray_state(run, {})


def test_a_trial_that_ended_after_tunes_last_snapshot_counts_toward_num_samples(
    ray_session, killed, tmp_path
) -> None:
    """A trial can start and end between two of Tune's saves: the books hold it (judged,
    paid), the restored experiment does not. The resumed sweep must not sample a trial more in
    its place: num_samples in all, the lost one kept with its stop reason."""
    run = _copy_of_killed(killed, tmp_path, "lag")
    lost = [e["trial_id"] for e in _events(run) if e["event"] == "end"][-1]
    _forget_in_tunes_snapshot(run, lost)

    result = resume_sweep(run)

    frame = result.trials.set_index("trial_id")
    assert frame.loc[lost, "stop_reason"] in {"rung_pruned", "marginal_roi", "completed"}
    assert (frame["stop_reason"] != "interrupted").sum() == 6


def test_ctrl_c_exits_130_with_costtune_hint_and_resume_continues_the_paused_trials(
    ray_session, tmp_path
) -> None:
    # The trial running at the signal may end (9 tiny epochs) before the signal lands on a loaded
    # machine, leaving nothing to pause (a CI run, stop 48): then the race, not the pause, is what
    # was tested, and a second sweep tries again.
    for attempt in range(2):
        driver, run = _started_sweep(tmp_path, f"ctrlc{attempt}", output=subprocess.PIPE)
        # a trial past the rungs at 1 and 3 (the next is max_epochs, 9): one at epoch 1 may be pruned
        # there while the signal is on its way, and then nothing is running to pause (a CI run, stop 46)
        if not _wait_for(run, ended=2, running_epochs=4):
            os.killpg(driver.pid, signal.SIGKILL)
            driver.wait()
            pytest.fail(_NEVER)
        driver.send_signal(signal.SIGINT)  # Ctrl-C: the terminal signals the driver
        stdout, stderr = driver.communicate(timeout=120)
        _wait_for_session_to_die(driver.pid)

        assert driver.returncode == 130, stderr[-2000:]
        assert f"costtune sweep --resume {run}" in stderr.splitlines()[-1]
        assert "Tuner.restore" not in stdout + stderr
        table = pd.read_csv(run / "trials.csv")
        paused = set(table.loc[table["status"] == "PAUSED", "trial_id"])
        if paused:
            break
    assert paused, "nothing was running at the interruption, twice"
    assert set(table.loc[table["status"] == "PAUSED", "stop_reason"]) == {"interrupted"}
    before = _events(run)
    assert not any(e["event"] == "end" and e["trial_id"] in paused for e in before)  # not closed in the log

    result = resume_sweep(run)

    assert not result.interrupted
    frame = result.trials.set_index("trial_id")
    assert "interrupted" not in set(frame["stop_reason"])  # every paused trial was continued
    assert (frame.loc[sorted(paused), "status"] == "TERMINATED").all()
    after = _events(run)
    assert after[: len(before)] == before
    for trial_id in paused:
        ran = [e["epoch"] for e in before if e["event"] == "result" and e["trial_id"] == trial_id]
        resumed = [
            e["epoch"] for e in after[len(before) :] if e["event"] == "result" and e["trial_id"] == trial_id
        ]
        assert resumed, f"{trial_id} was not continued"
        # from its last checkpoint (at most the epoch in flight at Ctrl-C again), not from scratch
        assert max(ran) - 1 <= resumed[0] - 1 <= max(ran)
        assert sorted(set(ran + resumed)) == list(range(1, resumed[-1] + 1))


def test_a_resume_refuses_a_config_edited_away_from_the_scheduler_that_ran(small_run, tmp_path) -> None:
    """Tune restores the scheduler that ran; the books come from config.yaml. An edited
    geometry would make them disagree silently: refused in one line, nothing started."""
    from click.testing import CliRunner

    from costtune.cli import main
    from costtune.core.config import parse_config
    from costtune.errors import ConfigError
    from costtune.sweep import check_scheduler_state

    run = tmp_path / "run"
    shutil.copytree(small_run.output_dir, run)
    config = yaml.safe_load((run / "config.yaml").read_text())
    before = (run / "ledger.jsonl").read_bytes()

    def refused(edit: dict, says: str) -> None:
        """config.yaml edited by ``edit`` after the run: the resume is refused in one line
        saying ``says``, exit 2, the ledger untouched; the edit is then undone."""
        undo = {k: config["scheduler"][k] for k in edit if k in config["scheduler"]}
        added = [k for k in edit if k not in config["scheduler"]]
        config["scheduler"].update(edit)
        (run / "config.yaml").write_text(yaml.safe_dump(config))
        result = CliRunner().invoke(main, ["sweep", "--resume", str(run)])
        assert result.exit_code == 2, result.output
        assert f"config.yaml: {says}" in result.output
        assert len(result.output.strip().splitlines()) == 1
        assert (run / "ledger.jsonl").read_bytes() == before
        config["scheduler"].update(undo)
        for k in added:
            del config["scheduler"][k]

    refused({"eta": 4}, "scheduler.eta is 4, but the sweep ran with 3")
    # a run started with an option this version no longer has (escalation), in its config.yaml
    # or in its saved scheduler: it cannot decide as it did, refused in one line
    refused({"escalate": True}, "scheduler.escalate is set, an option this version of costtune no longer has")
    state = json.loads((run / "scheduler_state.json").read_text())
    state["policy"]["geometry"]["escalate"] = True
    (tmp_path / "escalated_state.json").write_text(json.dumps(state))
    with pytest.raises(ConfigError, match=r"^scheduler state: the sweep ran with scheduler.escalate True"):
        check_scheduler_state(parse_config(config), tmp_path / "escalated_state.json")
    # the rungs' rule and count, once options: a state that held today's resumes, another is refused
    for key, value, fine in (
        ("promotion", "loss", True),
        ("keep", "floor", True),
        ("promotion", "pareto", False),
    ):
        state = json.loads((run / "scheduler_state.json").read_text())
        state["policy"]["geometry"][key] = value
        (tmp_path / "older_state.json").write_text(json.dumps(state))
        if fine:
            check_scheduler_state(parse_config(config), tmp_path / "older_state.json")
            continue
        with pytest.raises(
            ConfigError, match=rf"^scheduler state: the sweep ran with scheduler.{key} '{value}'"
        ):
            check_scheduler_state(parse_config(config), tmp_path / "older_state.json")
    # a state file damaged by hand is named, not a traceback
    config["scheduler"]["eta"] = 3
    (run / "config.yaml").write_text(yaml.safe_dump(config))
    (run / "scheduler_state.json").write_text('{"policy": {"wrr": [0], ')
    result = CliRunner().invoke(main, ["sweep", "--resume", str(run)])
    assert (
        result.exit_code == 2
        and "scheduler_state.json: cannot read the scheduler's rung state" in result.output
    )


def test_a_resume_refuses_a_config_edited_away_from_the_searcher_that_ran(small_run, tmp_path) -> None:
    """Tune restores the searcher as pickled, whatever config.yaml's ``searcher:`` says now. The
    sweep records its searcher in source.json; a resume with that section edited is refused in
    one line, exit 2, nothing changed; a run recorded before the searcher was, or a record
    without a newer field, resumes as before; a damaged source.json is named in one line."""
    from click.testing import CliRunner

    from costtune.cli import main
    from costtune.core.config import parse_config
    from costtune.sweep import check_searcher_record

    run = tmp_path / "run"
    shutil.copytree(small_run.output_dir, run)
    source = json.loads((run / "source.json").read_text())
    assert source["searcher"]["type"] == "optuna" and source["searcher"]["n_startup_trials"] == 3
    config = yaml.safe_load((run / "config.yaml").read_text())
    check_searcher_record(parse_config(config), run / "source.json")  # as it ran: nothing to say
    before = {p.name: p.read_bytes() for p in run.iterdir() if p.is_file()}

    def resume() -> str:
        result = CliRunner().invoke(main, ["sweep", "--resume", str(run)])
        assert result.exit_code == 2, result.output
        assert len(result.output.strip().splitlines()) == 1
        assert {p.name: p.read_bytes() for p in run.iterdir() if p.is_file() and p.name != "config.yaml"} == {
            k: v for k, v in before.items() if k != "config.yaml"
        }
        return result.output

    edited = {**config, "searcher": {**config["searcher"], "n_startup_trials": 5}}
    (run / "config.yaml").write_text(yaml.safe_dump(edited))
    assert "config.yaml: searcher.n_startup_trials is 5, but the sweep ran with 3" in resume()
    edited = {**config, "searcher": {"type": "gp"}}
    (run / "config.yaml").write_text(yaml.safe_dump(edited))
    said = resume()
    assert "searcher.type is 'gp', but the sweep ran with 'optuna'" in said
    assert "also differ: searcher.n_startup_trials)" in said
    # recorded before the searcher was, or before a field existed: not checked / not compared
    older = tmp_path / "older.json"
    older.write_text(json.dumps({"config_dir": None}))
    check_searcher_record(parse_config(edited), older)
    older.write_text(
        json.dumps({"config_dir": None, "searcher": {**source["searcher"], "value_transform": "clip"}})
    )
    older_record = json.loads(older.read_text())
    del older_record["searcher"]["points_to_evaluate"]
    older.write_text(json.dumps(older_record))
    check_searcher_record(parse_config({**config, "searcher": {**config["searcher"]}}), older)
    # a source.json cut by a crash or a hand: named, not a traceback
    (run / "config.yaml").write_bytes(before["config.yaml"])
    (run / "source.json").write_text('{"config_dir": nu')
    before["source.json"] = (run / "source.json").read_bytes()
    assert "source.json: not the record this sweep wrote (JSONDecodeError)" in resume()


def test_a_resume_of_a_run_whose_log_was_cut_short_is_refused_and_writes_nothing(small_run, tmp_path) -> None:
    """Before: the resume derived its tables from what was left of the log and wrote them over
    the run's (an emptied log gave 0 trials, $0, exit 0)."""
    from click.testing import CliRunner

    from costtune.cli import main

    run = tmp_path / "cut"
    shutil.copytree(small_run.output_dir, run, symlinks=True)
    log = run / "ledger.jsonl"
    log.write_bytes(log.read_bytes()[: log.stat().st_size // 2])
    before = _digest(run)
    done = CliRunner().invoke(main, ["sweep", "--resume", str(run), "--no-progress"])
    assert done.exit_code == 2, done.output
    assert done.output.startswith(f"costtune: error: ledger: {log} holds ") and done.output.count("\n") == 1
    assert _digest(run) == before


def test_a_run_killed_before_its_first_tables_is_refused_when_its_log_was_cut_short(killed, tmp_path) -> None:
    """Before: until the sweep first wrote its tables (at a trial's end, at most every few
    seconds) nothing recorded what the log held, and a resume read a cut log as it was. The
    mark saved with each of Ray's state snapshots is that record now, and the fresher one: the
    tables' record lags the log by whatever ran since they were last written."""
    from click.testing import CliRunner

    from costtune.cli import main

    run = _copy_of_killed(killed, tmp_path, "marked")
    log = run / "ledger.jsonl"
    mark = json.loads((run / ".ray_state" / "ledger-mark.json").read_text())
    assert mark["bytes"] > 0 and mark == ledger_digest(log, mark["bytes"])  # lines the log begins with
    for table in ("summary.json", "trials.csv", "trials.parquet"):
        (run / table).unlink(missing_ok=True)  # as a run killed before its first trial ended has it
    log.write_bytes(log.read_bytes()[: mark["bytes"] // 2])
    before = _digest(run)
    for args in (["sweep", "--resume", str(run), "--no-progress"], ["report", str(run)]):
        done = CliRunner().invoke(main, args)
        assert done.exit_code == 2, done.output
        assert (
            done.output.startswith(f"costtune: error: ledger: {log} holds ") and done.output.count("\n") == 1
        )
        assert "the run's last saved state (.ray_state/ledger-mark.json)" in done.output
    assert _digest(run) == before


def test_a_run_saved_by_an_earlier_layout_of_the_package_is_refused_in_one_line(small_run, tmp_path) -> None:
    """Tune pickles the sweep's callbacks and scheduler by module path: a run saved when they
    lived elsewhere cannot be unpickled, and says so instead of a traceback."""
    run = tmp_path / "old"
    shutil.copytree(small_run.output_dir, run, symlinks=True)
    renamed = 0
    for pickled in (run / "ray").rglob("*.pkl"):  # the same length: the pickle stays well formed
        data = pickled.read_bytes()
        renamed += data.count(b"costtune.ray.")
        pickled.write_bytes(data.replace(b"costtune.ray.", b"costtune.old."))
    assert renamed > 0
    ledger = (run / "ledger.jsonl").read_bytes()
    done = _resume_in_a_new_process(run)
    assert done.returncode == 2, done.stderr[-2000:]
    line = done.stderr.strip()
    assert "\n" not in line and "Traceback" not in line
    assert "saved by an earlier costtune (costtune.old no longer exists)" in line
    assert (run / "ledger.jsonl").read_bytes() == ledger


def test_the_scheduler_state_carries_its_version_and_a_newer_one_is_refused(tmp_path) -> None:
    from costtune.errors import ConfigError
    from costtune.ray.hyperband import STATE_VERSION, CostAwareHyperBand, read_state

    path = tmp_path / "scheduler_state.json"
    scheduler = CostAwareHyperBand(metric="loss", mode="min", max_epochs=25, state_path=path)
    scheduler.policy.on_add("a")
    scheduler.policy.on_result("a", 5, 0.5, 0.1)
    scheduler._persist()
    saved = json.loads(path.read_text())
    assert saved["version"] == STATE_VERSION
    assert read_state(path)["policy"]["trials"]
    del saved["version"]  # written before states carried one: the same shape, read as is
    path.write_text(json.dumps(saved))
    assert read_state(path)["policy"] == saved["policy"]
    for version in (STATE_VERSION + 1, "1", True):
        path.write_text(json.dumps({**saved, "version": version}))
        with pytest.raises(
            ConfigError, match=r"^scheduler_state.json: scheduler state version .* reads versions up to"
        ):
            read_state(path)


def test_a_sigterm_is_handed_on_as_a_ctrl_c_while_a_sweep_runs() -> None:
    """``kill``, a job scheduler's time limit or ``docker stop`` send SIGTERM: while a sweep
    runs it becomes the Ctrl-C Tune ends a run cleanly on (without it, Ray's handler killed the
    driver before any table was written), the sweep knows it was interrupted, and the handler
    before it is back afterwards."""
    from costtune.sweep import _watch_interrupts

    before = signal.getsignal(signal.SIGTERM)
    ctrl_c: list[int] = []  # stands in for Tune's Ctrl-C handler (an earlier test's may be left)
    tunes = signal.signal(signal.SIGINT, lambda signum, frame: ctrl_c.append(signum))
    try:
        with _watch_interrupts() as interrupted:
            assert not interrupted()
            os.kill(os.getpid(), signal.SIGTERM)
            deadline = time.monotonic() + 5
            while not ctrl_c and time.monotonic() < deadline:
                time.sleep(0.01)
            assert ctrl_c == [signal.SIGINT]
            assert interrupted()
        assert signal.getsignal(signal.SIGTERM) is before
    finally:
        signal.signal(signal.SIGINT, tunes)
