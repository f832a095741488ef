"""Recorded curves: the table format, the simulator, the replay trainable, the LCBench source."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner

from costtune.cli import main
from costtune.core.curves import Curve, curves_from_frame, load_curves
from costtune.core.policy import (
    AsyncHyperband,
    MarginalRoiStopping,
    StoppingRule,
)
from costtune.core.simulate import simulate
from costtune.errors import ConfigError
from tests.policy.test_hyperband import CURVES

SHARED_LCBENCH = Path(__file__).resolve().parents[2] / "shared" / "benchmarks" / "yahpo_lcbench"


def _table(curves: dict[str, list[float]], seconds: dict[str, float]) -> pd.DataFrame:
    rows = []
    for config_id, losses in curves.items():
        for epoch, loss in enumerate(losses, start=1):
            rows.append(
                {
                    "config_id": config_id,
                    "hp.lr": 0.1 * (len(rows) % 3 + 1),
                    "epoch": epoch,
                    "val_loss": loss,
                    "epoch_seconds": seconds[config_id],
                    "devices": 1,
                    "val_accuracy": 1 - loss,
                }
            )
    return pd.DataFrame(rows)


def _write_table(tmp_path: Path, curves: dict[str, list[float]]) -> Path:
    """``curves`` as ``tmp_path/curves.csv``, every epoch 600 s."""
    path = tmp_path / "curves.csv"
    _table(curves, dict.fromkeys(curves, 600.0)).to_csv(path, index=False)
    return path


# the hyperband golden curves (tests/policy/test_hyperband.py), as a recorded table
SECONDS = {"t0": 3600.0, "t1": 3600.0, "t2": 1800.0, "t3": 3600.0, "t4": 900.0, "t5": 3600.0}


@pytest.fixture
def table_path(tmp_path) -> Path:
    path = tmp_path / "curves.csv"
    _table(CURVES, SECONDS).to_csv(path, index=False)
    return path


def test_curves_table_is_validated() -> None:
    with pytest.raises(ConfigError, match="^curves: missing column 'epoch_seconds'"):
        curves_from_frame(_table(CURVES, SECONDS).drop(columns="epoch_seconds"))
    gappy = _table(CURVES, SECONDS)
    with pytest.raises(ConfigError, match="epochs must run 1, 2"):
        curves_from_frame(gappy[gappy["epoch"] != 4])
    curves = curves_from_frame(_table(CURVES, SECONDS))
    assert curves["t2"].seconds_until(3) == 5400.0 and curves["t0"].hyperparameters["lr"] > 0
    assert set(curves["t0"].extra) == {"val_accuracy"}


def test_simulator_drives_the_policy_like_the_golden_sequence(table_path) -> None:
    curves = list(load_curves(str(table_path)).values())
    policy = AsyncHyperband(max_epochs=9, grace_epochs=1, eta=3, brackets=1)
    sim = simulate(curves, policy, workers=1, usd_per_device_hour=1.0)
    assert sim.stopped_at == {"t0": 9, "t1": 9, "t2": 1, "t3": 9, "t4": 1, "t5": 3}
    # one worker: the clock is every epoch run back to back (the host's decision time is not
    # charged unless asked: the simulated clock alone decides the order of events)
    run_seconds = sum(SECONDS[t] * n for t, n in sim.stopped_at.items())
    assert sim.wall_clock_s == run_seconds
    assert sim.total_usd == pytest.approx(run_seconds / 3600)
    full = simulate(curves, None, workers=3, usd_per_device_hour=1.0)
    assert full.stopped_at == dict.fromkeys(CURVES, 9)
    assert full.cost_to_target(0.3 / 9) is not None and sim.cost_to_target(0.3 / 9) < full.cost_to_target(
        0.3 / 9
    )


def test_simulator_is_deterministic_on_tied_epoch_times() -> None:
    """30 runs, one decision log: with every epoch the same length, events tie on the clock all
    the time, and only a clock that never reads the host's keeps their order."""
    curves = [
        Curve(f"c{i}", {"lr": i}, np.array([1.0 / (e + (i * 7) % 5) for e in range(1, 10)]), np.ones(9), 1.0)
        for i in range(24)
    ]
    logs = set()
    for _ in range(30):
        policy = AsyncHyperband(max_epochs=9, grace_epochs=1, eta=3, brackets=1)
        sim = simulate(curves, policy, workers=4, usd_per_device_hour=1.0)
        logs.add(tuple((e.clock_s, e.config_id, e.epoch) for e in sim.epochs))
    assert len(logs) == 1


def test_simulator_feeds_the_stopper_every_epoch_as_ray_does(table_path) -> None:
    """Ray's stopper sees every result, the one a rung or the last epoch ends included: the
    simulator's too, so the stopper's books (the sweep's spend, its best, the curve model's
    references) hold every epoch the simulator ran."""

    class Counting(MarginalRoiStopping):
        def __init__(self) -> None:
            super().__init__(StoppingRule(max_epochs=9))
            self.usd: dict[str, float] = {}
            self.reports = 0

        def _charged(self, trial_id: str, usd: float) -> None:
            self.usd[trial_id] = usd
            self.reports += 1

    curves = list(load_curves(str(table_path)).values())
    policy = AsyncHyperband(max_epochs=9, grace_epochs=1, eta=3, brackets=1)
    stopping = Counting()
    sim = simulate(curves, policy, stopping=stopping, workers=1, usd_per_device_hour=1.0)
    assert sim.stopped_at == {"t0": 9, "t1": 9, "t2": 1, "t3": 9, "t4": 1, "t5": 3}  # no rule: stops none
    assert stopping.reports == len(sim.epochs)
    assert sum(stopping.usd.values()) == pytest.approx(sim.total_usd)


def test_simulator_stops_at_the_budget(table_path) -> None:
    curves = list(load_curves(str(table_path)).values())
    sim = simulate(curves, None, workers=2, usd_per_device_hour=1.0, budget_usd=10.0)
    assert 10.0 <= sim.total_usd < 10.0 + 1.0  # at most one epoch over


def test_replay_cli_compares_recorded_with_costtune(table_path) -> None:
    result = CliRunner().invoke(
        main,
        [
            "replay",
            str(table_path),
            "--grace-epochs",
            "1",
            "--eta",
            "3",
            "--brackets",
            "1",
            "--price",
            "1",
            "--json",
        ],
    )
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    recorded, ours = data["runs"]["recorded"], data["runs"]["costtune"]
    assert recorded["epochs"] == 54 and ours["epochs"] == 9 + 9 + 1 + 9 + 1 + 3
    assert ours["cost_usd"] < recorded["cost_usd"]
    assert ours["best_val_loss"] == recorded["best_val_loss"] == pytest.approx(0.3 / 9)
    bad = CliRunner().invoke(main, ["replay", str(table_path.parent / "nope.csv")])
    assert bad.exit_code == 2 and "curves: no such file" in bad.output


def test_replay_cli_says_when_its_saving_ended_short_of_the_target(tmp_path) -> None:
    # nine fast starters that plateau at 0.5, and a slow starter that ends best: a first rung at
    # epoch 1 (η 3) prunes it, so costtune's replay is cheaper and never reaches the recorded best
    curves = {f"f{i}": [0.5 + 0.01 * i] * 9 for i in range(9)}
    curves["slow"] = [2.0] * 6 + [0.1] * 3
    path = _write_table(tmp_path, curves)
    args = ["replay", str(path), "--grace-epochs", "1", "--eta", "3"]
    short = CliRunner().invoke(main, args)
    assert short.exit_code == 0, short.output
    saved = next(line for line in short.output.splitlines() if line.startswith("saved:"))
    assert "did not reach the target: best val_loss 0.5 against 0.1" in saved
    assert "nor did the recorded sweep" not in saved
    neither = CliRunner().invoke(main, [*args, "--target", "0.05"])
    assert "did not reach the target (nor did the recorded sweep)" in neither.output
    # where it reaches the target, the line is the saving alone
    reached = CliRunner().invoke(main, [*args, "--target", "0.6"])
    saved = next(line for line in reached.output.splitlines() if line.startswith("saved:"))
    assert saved.endswith("of the recorded cost"), saved


def _replay_sweep(table_path: Path, config_ids: list[str], **overrides: object) -> dict:
    """A sweep's config replaying the recorded curves of ``table_path``: a grid over
    ``config_ids``, one trial at a time, 9 epochs, the recorded seconds priced $1 an hour."""
    return {
        "name": "replayed",
        "trainable": {"name": "replay", "args": {"curves": str(table_path)}},
        "max_epochs": 9,
        "num_samples": 1,
        "max_concurrent_trials": 1,
        "search_space": {"config_id": {"type": "choice", "values": config_ids}},
        "searcher": {"type": "grid"},
        "cost": {"time_field": "sim_seconds", "prices": {"cpu": 1.0}},
        "approval": {
            "justification": "replay recorded curves",
            "estimated_resources": "none",
            "stop_conditions": "rungs",
            "approver": "tests",
        },
        **overrides,
    }


def _replay_in_ray(table_path: Path, run_dir: Path, **overrides: object) -> tuple[pd.DataFrame, list[str]]:
    """A real sweep over the recorded curves (grid over config_id, one trial at a time);
    returns the trial table by config_id and the order Ray ran the configurations in."""
    from costtune.core.config import parse_config
    from costtune.sweep import run_sweep

    config = parse_config(_replay_sweep(table_path, list(CURVES), **overrides))
    result = run_sweep(config, run_dir)
    ran: list[str] = []
    for line in (run_dir / "ledger.jsonl").read_text().splitlines():
        event = json.loads(line)
        if "config" in event and event["config"]["config_id"] not in ran:
            ran.append(event["config"]["config_id"])
    return result.trials.set_index("hp.config_id"), ran


@pytest.mark.ray
def test_replay_trainable_in_ray_decides_like_the_simulator(ray_session, table_path, tmp_path) -> None:
    frame, ran = _replay_in_ray(
        table_path,
        tmp_path / "run",
        scheduler={"grace_epochs": 1, "eta": 3, "brackets": 1},
    )
    # the simulator, fed the configurations in the order Ray ran them (one at a time),
    # decides exactly what the Ray run decided
    curves = load_curves(str(table_path))
    policy = AsyncHyperband(max_epochs=9, grace_epochs=1, eta=3, brackets=1)
    expected = simulate([curves[c] for c in ran], policy, workers=1).stopped_at
    assert frame["epochs"].to_dict() == expected
    if ran == list(CURVES):  # Tune started them in grid order: the hand-worked golden list
        assert expected == {"t0": 9, "t1": 9, "t2": 1, "t3": 9, "t4": 1, "t5": 3}
    # cost from the recorded seconds, not this machine's: epochs × recorded epoch seconds at $1/h
    for config_id, row in frame.iterrows():
        assert row["cost_usd"] == pytest.approx(SECONDS[config_id] * row["epochs"] / 3600)


def test_lcbench_source_needs_its_data_directory(monkeypatch, tmp_path) -> None:
    from costtune.lcbench import ENV_VAR, LCBench

    monkeypatch.delenv(ENV_VAR, raising=False)
    with pytest.raises(ConfigError, match="^lcbench: no data directory"):
        LCBench()
    with pytest.raises(ConfigError, match="is not the LCBench surrogate directory"):
        LCBench(tmp_path)


@pytest.mark.skipif(
    not SHARED_LCBENCH.is_dir(), reason="the shared LCBench surrogate is not beside this checkout"
)
def test_lcbench_curves_follow_the_protocol() -> None:
    pytest.importorskip("onnxruntime")
    from costtune.lcbench import LCBench, reference_grid

    frame = LCBench(SHARED_LCBENCH).curves("3945", reference_grid()[:4])
    curves = curves_from_frame(frame)
    assert len(curves) == 4 and all(c.epochs == 52 for c in curves.values())
    assert all((c.epoch_seconds >= 0).all() for c in curves.values())
    assert frame["val_loss"].between(0, 10).all() and frame["val_accuracy"].between(0, 1).all()
    with pytest.raises(ConfigError, match="unknown task"):
        LCBench(SHARED_LCBENCH).curves("167083", reference_grid()[:1])  # in the encoding, not the space


def test_simulator_asks_a_searcher_and_tells_it_how_each_trial_ended(table_path) -> None:
    curves = load_curves(str(table_path))
    order = iter(["t3", "t0", "t4"])
    told: list[tuple[str, int, float]] = []

    def next_curve():
        config_id = next(order, None)
        return None if config_id is None else curves[config_id]

    policy = AsyncHyperband(max_epochs=9, grace_epochs=1, eta=3, brackets=1)
    sim = simulate([], policy, next_curve=next_curve, on_trial_end=lambda *end: told.append(end))
    assert [t for t, _, _ in told] == ["t3", "t0", "t4"]
    assert sim.stopped_at == {"t3": 9, "t0": 1, "t4": 1}  # after t3, both are worse at rung 1
    assert told[1] == ("t0", 1, pytest.approx(0.5))


@pytest.mark.skipif(
    not SHARED_LCBENCH.is_dir(), reason="the shared LCBench surrogate is not beside this checkout"
)
def test_lcbench_cli_writes_a_table_that_replay_reads(tmp_path) -> None:
    pytest.importorskip("onnxruntime")
    out = tmp_path / "grid.csv"
    made = CliRunner().invoke(
        main, ["lcbench", "3945", "--grid", "--out", str(out), "--data-dir", str(SHARED_LCBENCH)]
    )
    assert made.exit_code == 0, made.output
    assert len(load_curves(str(out))) == 64
    replayed = CliRunner().invoke(main, ["replay", str(out), "--workers", "4", "--json"])
    data = json.loads(replayed.output)
    assert data["runs"]["costtune"]["cost_usd"] < data["runs"]["recorded"]["cost_usd"]
    both = CliRunner().invoke(main, ["lcbench", "3945", "--grid", "--random", "3", "--out", str(out)])
    assert both.exit_code == 2


@pytest.mark.parametrize("checkpoint", [True, False])
def test_replay_trainable_checkpoints_each_epoch_unless_told_not_to(
    ray_session, table_path, tmp_path, checkpoint
) -> None:
    from ray import tune

    from costtune.trainables.replay import replay

    tuner = tune.Tuner(
        replay,
        param_space={"curves": str(table_path), "config_id": "t2", "checkpoint": checkpoint},
        run_config=tune.RunConfig(storage_path=str(tmp_path), verbose=0),
    )
    [result] = tuner.fit()
    assert result.metrics["training_iteration"] == len(CURVES["t2"])
    assert result.metrics["val_loss"] == pytest.approx(CURVES["t2"][-1])
    assert result.metrics["sim_seconds"] == pytest.approx(SECONDS["t2"] * len(CURVES["t2"]))
    assert (result.checkpoint is not None) is checkpoint


@pytest.mark.ray
def test_a_sweep_that_judged_flat_starts_says_so_in_its_report_and_replay(
    ray_session, tmp_path, capsys
) -> None:
    """Curves flat at their first loss until epoch 3 + i, the late droppers ending best: a real
    sweep (the replay trainable in Ray, the default stopping rule, rungs at 2 and 6) stops
    most of them flat, and the sweep's output, its report (text and JSON), its Python result
    and ``costtune replay`` of the same curves all say so in one line each."""
    from costtune.cli import _print_result
    from costtune.core.config import parse_config
    from costtune.sweep import run_sweep

    curves = {
        f"c{i:02d}": [2.3 + 0.001 * i if e < 3 + i else 0.5 - 0.02 * i for e in range(1, 13)]
        for i in range(14)
    }
    path = _write_table(tmp_path, curves)
    config = parse_config(
        _replay_sweep(
            path,
            list(curves),
            max_epochs=12,
            max_concurrent_trials=2,
            scheduler={"grace_epochs": 2, "eta": 3},
        )
    )
    result = run_sweep(config, tmp_path / "run")
    [note] = result.findings
    assert note.code == "stopped_before_moving"
    judged = result.trials[result.trials["stop_reason"].isin(["rung_pruned", "marginal_roi"])]
    assert f"of the {len(judged)} trials the rungs or the stopping rule stopped" in note.message
    assert int(note.message.split()[0]) >= len(judged) / 2 >= 5
    _print_result(result, as_json=False)
    assert f"note: {note.message}\n" in capsys.readouterr().out
    _print_result(result, as_json=True)
    assert json.loads(capsys.readouterr().out)["findings"] == [{"code": note.code, "message": note.message}]
    text = CliRunner().invoke(main, ["report", str(tmp_path / "run")])
    assert text.exit_code == 0 and f"note: {note.message}" in " ".join(text.output.split())
    data = json.loads(CliRunner().invoke(main, ["report", str(tmp_path / "run"), "--format", "json"]).output)
    assert [f["code"] for f in data["findings"]] == ["stopped_before_moving"]
    replayed = CliRunner().invoke(main, ["replay", str(path), "--grace-epochs", "2", "--eta", "3", "--json"])
    assert [f["code"] for f in json.loads(replayed.output)["findings"]] == ["stopped_before_moving"]
    # curves that fall from their first epoch, the same settings: nothing to say
    falling = {t: [1.0 / (e + 0.1 * i) for e in range(1, 13)] for i, t in enumerate(curves)}
    (tmp_path / "falling").mkdir()  # another path: load_curves caches a table by its path
    calm = CliRunner().invoke(
        main,
        ["replay", str(_write_table(tmp_path / "falling", falling)), "--grace-epochs", "2", "--eta", "3"],
    )
    assert calm.exit_code == 0 and "note:" not in calm.output


def test_replay_cli_gp_is_seeded_and_a_removed_gp_option_is_refused(tmp_path) -> None:
    """``costtune replay --searcher gp``: Optuna's GPSampler over the pool; the same seed gives
    the same replay, and a removed option (``--gp-over-epochs``) is refused with exit 2."""
    import numpy as np

    rng = np.random.default_rng(0)
    epochs = np.arange(1, 13)
    curves, hp = {}, {}
    for i, (x, pace) in enumerate(zip(rng.uniform(0, 1, 30), rng.uniform(1, 6, 30), strict=True)):
        final = 0.2 + (x - 0.7) ** 2
        curves[f"c{i:02d}"] = list(final + (2.0 - final) * np.exp(-epochs / pace))
        hp[f"c{i:02d}"] = x
    frame = _table(curves, dict.fromkeys(curves, 600.0))
    frame["hp.lr"] = frame["config_id"].map(hp)  # one value per configuration
    path = tmp_path / "curves.csv"
    frame.to_csv(path, index=False)
    args = ["replay", str(path), "--grace-epochs", "2", "--eta", "3", "--searcher", "gp", "--json"]
    first, again = CliRunner().invoke(main, args), CliRunner().invoke(main, args)
    assert first.exit_code == again.exit_code == 0, first.output
    assert json.loads(first.output) == json.loads(again.output)
    other = CliRunner().invoke(main, [*args, "--seed", "1"])
    assert json.loads(other.output)["settings"]["seed"] == 1
    refused = CliRunner().invoke(main, [*args, "--gp-over-epochs"])
    assert refused.exit_code == 2 and "--gp-over-epochs" in refused.output


@pytest.mark.ray
def test_replay_of_a_run_directory_uses_its_own_curves_prices_and_best(small_run) -> None:
    run = small_run.output_dir
    shown = CliRunner().invoke(main, ["replay", str(run)])
    assert shown.exit_code == 0, shown.output
    assert "$0.5/device-hour, the run's own (cpu)" in shown.output and "(the run's best)" in shown.output
    assert "2 worker(s)" in shown.output  # the run's own max_concurrent_trials
    one = CliRunner().invoke(main, ["replay", str(run), "--workers", "1"])
    assert one.exit_code == 0 and "1 worker(s)" in one.output, one.output
    done = CliRunner().invoke(main, ["replay", str(run), "--json"])
    data = json.loads(done.output)
    assert data["target"] == pytest.approx(small_run.summary["best_metric"])  # val_loss: its own loss
    # the recorded trials, each to its end, reach the run's best; the run's own rungs and two workers,
    # in file order, decide on the same curves (whether they keep the run's best depends on the order
    # the run's two workers happened to bring the trials to a rung in: its epoch times, replayed)
    recorded, ours = data["runs"]["recorded"], data["runs"]["costtune"]
    assert recorded["cost_to_target_usd"] is not None, data["runs"]
    assert recorded["best_val_loss"] == pytest.approx(small_run.summary["best_metric"])
    seen = [m["val_loss"] for r in small_run.ledger.trials.values() for *_, m in r.metric_history]
    assert min(seen, key=lambda v: abs(v - ours["best_val_loss"])) == pytest.approx(ours["best_val_loss"])
    assert recorded["best_val_loss"] <= ours["best_val_loss"] and ours["cost_usd"] <= recorded["cost_usd"]
    # its epochs' metered seconds at its own price (the time held between epochs, billed in the
    # run as charges, is not an epoch's and is not replayed)
    cost = small_run.ledger.spec.cost_model
    metered = sum(
        cost.cost_usd(r.metric_history[-1][1], r.devices, r.device_kind)
        for r in small_run.ledger.trials.values()
    )
    assert data["runs"]["recorded"]["cost_usd"] == pytest.approx(metered, rel=1e-3)
