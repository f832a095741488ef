"""Recorded curves: the table format, the simulator, the replay trainable, the LCBench source."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner

from costtune.cli import main
from costtune.curves import Curve, curves_from_frame, load_curves
from costtune.errors import ConfigError
from costtune.policy import (
    AsyncHyperband,
    MarginalRoiStopping,
    OutlookRule,
    OutlookStopping,
    StoppingRule,
    StopReason,
)
from costtune.policy.defaults import DEFAULTS
from costtune.simulate import simulate
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
    policy = AsyncHyperband(max_epochs=9, grace_epochs=1, eta=3, brackets=1, promotion="loss")
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
        policy = AsyncHyperband(max_epochs=9, grace_epochs=1, eta=3, brackets=1, promotion="loss")
        sim = simulate(curves, policy, workers=4, usd_per_device_hour=1.0)
        logs.add(tuple((e.clock_s, e.config_id, e.epoch) for e in sim.epochs))
    assert len(logs) == 1


def test_simulator_outlook_stops_trials_that_cannot_beat_the_best(table_path) -> None:
    curves = list(load_curves(str(table_path)).values())
    sim = simulate(curves, None, workers=1, usd_per_device_hour=1.0, outlook=OutlookStopping(OutlookRule(9)))
    # t5 is flat at 0.2 while t3 (0.3/e) has passed it by epoch 4: the flat one stops at its first
    # judgement; t3, the best, runs to the end
    assert sim.stopped_at["t3"] == 9 and sim.stopped_at["t5"] == 4
    full = simulate(curves, None, workers=1, usd_per_device_hour=1.0)
    assert sim.total_usd < full.total_usd and sim.best_loss == full.best_loss


def test_simulator_feeds_the_stopper_every_epoch_as_ray_does(table_path) -> None:
    """Ray's stopper sees every result, the one a rung or the last epoch ends included: the
    simulator's too, so the stopper's books (the sweep's spend, its best, the curve model's
    references) hold every epoch the simulator ran."""
    curves = list(load_curves(str(table_path)).values())
    policy = AsyncHyperband(max_epochs=9, grace_epochs=1, eta=3, brackets=1, promotion="loss")
    stopping = MarginalRoiStopping(StoppingRule(min_relative_roi=0.0, max_epochs=9, expected=True))
    sim = simulate(curves, policy, stopping=stopping, workers=1, usd_per_device_hour=1.0)
    assert sim.stopped_at == {"t0": 9, "t1": 9, "t2": 1, "t3": 9, "t4": 1, "t5": 3}  # ρ = 0 stops none
    assert stopping._spent == pytest.approx(sim.total_usd)
    assert len(stopping._references) == 3  # t0, t1, t3 reached epoch 9


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
            "--promotion",
            "loss",
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
    args = ["replay", str(path), "--grace-epochs", "1", "--eta", "3", "--warmup-trials", "0"]
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
    returns the trial table by config_id and the order Ray ran the configurations in. The
    default relative stopping rule is off unless ``stopping`` sets it."""
    from costtune.config import parse_config
    from costtune.sweep import run_sweep

    overrides["stopping"] = {"min_relative_roi": None, **overrides.get("stopping", {})}  # type: ignore[dict-item]

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
        scheduler={"grace_epochs": 1, "eta": 3, "brackets": 1, "promotion": "loss"},
    )
    # the simulator, fed the configurations in the order Ray ran them (one at a time),
    # decides exactly what the Ray run decided
    curves = load_curves(str(table_path))
    policy = AsyncHyperband(max_epochs=9, grace_epochs=1, eta=3, brackets=1, promotion="loss")
    expected = simulate([curves[c] for c in ran], policy, workers=1).stopped_at
    assert frame["epochs"].to_dict() == expected
    if ran == list(CURVES):  # Tune started them in grid order: the hand-worked golden list
        assert expected == {"t0": 9, "t1": 9, "t2": 1, "t3": 9, "t4": 1, "t5": 3}
    # cost from the recorded seconds, not this machine's: epochs × recorded epoch seconds at $1/h
    for config_id, row in frame.iterrows():
        assert row["cost_usd"] == pytest.approx(SECONDS[config_id] * row["epochs"] / 3600)


@pytest.mark.ray
def test_outlook_rule_in_a_ray_sweep_stops_like_the_simulator(ray_session, table_path, tmp_path) -> None:
    """`stopping: {outlook: {}}` in a real sweep: Ray's stopper ends the same trials at the same
    epochs as the pure rule in the simulator, with stop_reason `outlook`, and meters them."""
    frame, ran = _replay_in_ray(
        table_path, tmp_path / "run", scheduler={"type": "fifo"}, stopping={"outlook": {"optimism": 1.0}}
    )
    curves = load_curves(str(table_path))
    expected = simulate([curves[c] for c in ran], None, outlook=OutlookStopping(OutlookRule(9))).stopped_at
    assert frame["epochs"].to_dict() == expected
    stopped = {c for c, e in expected.items() if e < 9}
    assert stopped  # the flat t5 at least
    assert set(frame.index[frame["stop_reason"] == "outlook"]) == stopped
    for config_id, row in frame.iterrows():
        assert row["cost_usd"] == pytest.approx(SECONDS[config_id] * row["epochs"] / 3600)


@pytest.mark.ray
def test_relative_rule_in_a_ray_sweep_stops_like_the_simulator(ray_session, table_path, tmp_path) -> None:
    """The default stopper (the relative rule) in a real sweep ends the same trials at the
    same epochs as the pure rule in the simulator fed the same events."""
    settings = {"min_relative_roi": 0.3, "window_epochs": 2, "min_epochs": 2}
    frame, ran = _replay_in_ray(table_path, tmp_path / "run", scheduler={"type": "fifo"}, stopping=settings)
    curves = load_curves(str(table_path))
    rule = StoppingRule(spare_best=True, max_epochs=9, **settings)  # type: ignore[arg-type]
    expected = simulate(
        [curves[c] for c in ran], None, stopping=MarginalRoiStopping(rule), usd_per_device_hour=1.0
    ).stopped_at
    assert frame["epochs"].to_dict() == expected
    stopped = {c for c, e in expected.items() if e < 9}
    assert stopped and len(stopped) < len(expected)  # it stops some, not all
    assert set(frame.index[frame["stop_reason"] == "marginal_roi"]) == stopped


@pytest.mark.ray
def test_expected_gain_rule_in_a_ray_sweep_stops_like_the_simulator(
    ray_session, table_path, tmp_path
) -> None:
    """`stopping.expected_gain` in a real sweep: Ray's stopper, judging each trial by the curve
    model's expected gain per dollar, ends the same trials at the same epochs as the pure rule."""
    settings = {"min_relative_roi": 0.3, "window_epochs": 2, "min_epochs": 2}
    frame, ran = _replay_in_ray(
        table_path, tmp_path / "run", scheduler={"type": "fifo"}, stopping={**settings, "expected_gain": True}
    )
    curves = load_curves(str(table_path))
    rule = StoppingRule(spare_best=True, max_epochs=9, expected=True, **settings)  # type: ignore[arg-type]
    expected = simulate(
        [curves[c] for c in ran], None, stopping=MarginalRoiStopping(rule), usd_per_device_hour=1.0
    ).stopped_at
    assert frame["epochs"].to_dict() == expected
    stopped = {c for c, e in expected.items() if e < 9}
    assert stopped and len(stopped) < len(expected)
    assert set(frame.index[frame["stop_reason"] == "marginal_roi"]) == stopped


def _fast_noisy_flat(epochs: int, pace: float) -> dict[str, list[float]]:
    """A fast power law, a slow improver at ``pace`` a epoch under noise σ 0.03, a flat trial."""
    rng = np.random.default_rng(3)
    return {
        "fast": [0.2 + e**-1.5 for e in range(1, epochs + 1)],
        "noisy": [0.6 - pace * e + 0.03 * float(z) for e, z in enumerate(rng.standard_normal(epochs), 1)],
        "flat": [0.6] * epochs,
    }


@pytest.mark.ray
def test_noise_aware_rule_in_a_ray_sweep_stops_like_the_simulator(ray_session, tmp_path) -> None:
    """`stopping.noise_aware` in a real sweep: Ray's stopper ends the same trials at the same
    epochs as the pure rule, and the noisy slow improver runs on where the plain rule, which
    reads its noise as a flat window, stops it early."""
    curves = _fast_noisy_flat(30, pace=0.002)
    path = _write_table(tmp_path, curves)
    settings = {"min_relative_roi": 0.3, "window_epochs": 3, "min_epochs": 3}
    frame, ran = _replay_in_ray(
        path,
        tmp_path / "run",
        max_epochs=30,
        scheduler={"type": "fifo"},
        search_space={"config_id": {"type": "choice", "values": list(curves)}},
        stopping={**settings, "noise_aware": True},
    )
    table = load_curves(str(path))

    def stopped_at(noise_aware: bool) -> dict[str, int]:
        rule = StoppingRule(spare_best=True, max_epochs=30, noise_aware=noise_aware, **settings)  # type: ignore[arg-type]
        stopping = MarginalRoiStopping(rule)
        return simulate([table[c] for c in ran], None, stopping=stopping, usd_per_device_hour=1.0).stopped_at

    assert frame["epochs"].to_dict() == stopped_at(True)
    assert stopped_at(True)["noisy"] > stopped_at(False)["noisy"] + 5


@pytest.mark.ray
def test_lookahead_in_a_ray_sweep_stops_like_the_simulator(ray_session, tmp_path) -> None:
    """`scheduler.lookahead` in a real sweep: Ray's CostAwareHyperBand ends the same trials at
    the same epochs as the pure policy in the simulator fed the same events, with stop_reason
    `lookahead_pruned` before the first rung is paid for."""
    curves = {f"c{i}": [1.0 + i / 10 - 0.01 * e for e in range(1, 10)] for i in range(7)}
    path = _write_table(tmp_path, curves)
    scheduler = {"grace_epochs": 3, "eta": 3, "brackets": 1, "lookahead": 2}
    frame, ran = _replay_in_ray(
        path,
        tmp_path / "run",
        scheduler=scheduler,
        search_space={"config_id": {"type": "choice", "values": list(curves)}},
    )
    table = load_curves(str(path))
    policy = AsyncHyperband(max_epochs=9, grace_epochs=3, eta=3, brackets=1, lookahead=2)
    expected = simulate([table[c] for c in ran], policy, workers=1).stopped_at
    assert frame["epochs"].to_dict() == expected
    looked = {c for c in expected if policy.stop_reason(c) is StopReason.LOOKAHEAD_PRUNED}
    assert looked and all(expected[c] < 3 for c in looked)
    assert set(frame.index[frame["stop_reason"] == "lookahead_pruned"]) == looked
    if ran == list(curves):  # grid order, worked by hand: c0 goes on; c1, c2 pruned at rung 3;
        # c3–c5 behind c1 and c2 at epoch 1, while the cut keeps 1; each counts at rung 3, and
        # at n = 6 the cut keeps 2 (c1 back in it), so c6 runs to the rung
        assert expected == {"c0": 9, "c1": 3, "c2": 3, "c3": 1, "c4": 1, "c5": 1, "c6": 3}


@pytest.mark.ray
def test_warmup_in_a_ray_sweep_stops_like_the_simulator(ray_session, tmp_path) -> None:
    """`scheduler.warmup_trials` in a real sweep: Ray's CostAwareHyperBand ends the same trials
    at the same epochs as the pure policy in the simulator; the first w − 1 trials stop at the
    first rung however good (`rung_pruned`), and the rung judges the rest against them."""
    curves = {f"c{i}": [1.0 - i / 10 - 0.01 * e for e in range(1, 10)] for i in range(7)}  # each better
    path = _write_table(tmp_path, curves)
    frame, ran = _replay_in_ray(
        path,
        tmp_path / "run",
        scheduler={"grace_epochs": 3, "eta": 3, "brackets": 1, "warmup_trials": 3},
        search_space={"config_id": {"type": "choice", "values": list(curves)}},
    )
    table = load_curves(str(path))
    policy = AsyncHyperband(max_epochs=9, grace_epochs=3, eta=3, brackets=1, warmup_trials=3)
    expected = simulate([table[c] for c in ran], policy, workers=1).stopped_at
    assert frame["epochs"].to_dict() == expected
    assert all(expected[c] == 3 for c in ran[:2])  # warming up: stopped at the rung
    assert all(frame.loc[c, "stop_reason"] == "rung_pruned" for c in ran[:2])
    assert any(e == 9 for e in expected.values())  # and after it, the rung promotes again


def _escalating_in_ray(
    tmp_path: Path, curves: dict[str, list[float]], max_epochs: int, eta: int
) -> tuple[AsyncHyperband, dict[str, int], list[str], dict]:
    """A real sweep over ``curves`` (grace 1, one bracket, escalation on, no warm-up, the
    sweep's default hedge), and the pure policy fed the same order in the simulator: asserts
    that Ray ended every trial at the simulator's epoch and saved the policy's open brackets;
    returns the simulator's policy, its stop epochs, the order Ray ran, the saved state."""
    path = _write_table(tmp_path, curves)
    run = tmp_path / "run"
    scheduler = {"grace_epochs": 1, "eta": eta, "brackets": 1, "escalate": True, "warmup_trials": None}
    frame, ran = _replay_in_ray(
        path,
        run,
        max_epochs=max_epochs,
        scheduler=scheduler,
        search_space={"config_id": {"type": "choice", "values": list(curves)}},
    )
    table = load_curves(str(path))
    policy = AsyncHyperband(
        max_epochs=max_epochs, grace_epochs=1, eta=eta, brackets=1, escalate=True, hedge=DEFAULTS.hedge
    )
    expected = simulate([table[c] for c in ran], policy, workers=1).stopped_at
    assert frame["epochs"].to_dict() == expected
    state = json.loads((run / "scheduler_state.json").read_text())["policy"]
    assert state["escalation"]["open"] == policy.open_brackets
    return policy, expected, ran, state


@pytest.mark.ray
def test_escalation_in_a_ray_sweep_opens_the_brackets_like_the_simulator(ray_session, tmp_path) -> None:
    """`scheduler.escalate` in a real sweep (3 epochs, grace 1, η 2): the first trial is the
    best; the next four, each worse than the last, stop at the first rung, and the sweep has
    then spent as much since its best as before, with η² trials since: every bracket opens.
    Ray's CostAwareHyperBand ends the same trials at the same epochs as the pure policy in the
    simulator, and a trial that a lone first rung would stop at epoch 1 runs on in the later
    bracket (first judged at epoch 2)."""
    curves = {"c0": [0.5 / e for e in range(1, 4)]}
    curves.update({f"c{i}": [1.0 + i / 100] * 3 for i in range(1, 8)})
    policy, expected, ran, state = _escalating_in_ray(tmp_path, curves, max_epochs=3, eta=2)
    # the sweep's default hedge adds Hyperband's bracket of full runs to those a stall opens
    assert policy.open_brackets == len(policy.rungs_by_bracket) == 2 + DEFAULTS.hedge
    assert state["geometry"]["escalate"] is True
    table = load_curves(str(tmp_path / "curves.csv"))
    assert any(expected[c] > 1 for c in ran[5:])  # after the stall: past the first rung
    plain = AsyncHyperband(max_epochs=3, grace_epochs=1, eta=2, brackets=1)
    stopped = simulate([table[c] for c in ran], plain, workers=1).stopped_at
    assert all(e == 1 for c, e in stopped.items() if c != ran[0])


@pytest.mark.ray
def test_a_misranked_first_rung_in_a_ray_sweep_opens_the_brackets_like_the_simulator(
    ray_session, tmp_path
) -> None:
    """The other sign that opens every bracket, in a real sweep (9 epochs, grace 1, η 3): eight
    trials, each a new best at epoch 1 (so the first rung keeps it), each worse than the one
    before from epoch 3 on. Once six have reached the second rung in reversed order, every
    bracket opens, with no stall (too few trials since the best). Ray's decisions are the pure
    policy's on the same order; the saved state says what opened them."""
    curves = {f"c{i}": [1.0 - i / 100, 0.8, *[0.5 + i / 1000] * 7] for i in range(8)}
    policy, expected, ran, state = _escalating_in_ray(tmp_path, curves, max_epochs=9, eta=3)
    assert state["escalation"].get("opened_by") == policy.opened_by
    if ran == list(curves):  # Tune started them in grid order: the worked case
        assert policy.opened_by == "misranked" and policy.open_brackets == len(policy.rungs_by_bracket)
        assert [expected[c] for c in ran[:6]] == [9, 3, 3, 3, 3, 3]  # kept at 1, pruned at 3
        # c6 goes to bracket 0 again (Hyperband's largest share), c7 to bracket 1: kept past epoch 3
        assert (expected["c6"], expected["c7"]) == (3, 9)
        assert policy.trials["c7"].bracket == 1


@pytest.mark.ray
def test_the_searcher_is_told_a_lookahead_pruned_trials_rung_estimate(ray_session, tmp_path) -> None:
    """With the look-ahead on, Optuna (real, in a real sweep) is told a pruned trial's estimated
    loss at its rung, not its epoch-1 loss; every other trial its last loss."""
    import pickle

    curves = {f"c{i}": [1.0 + i / 10 - 0.01 * e for e in range(1, 10)] for i in range(7)}
    path = _write_table(tmp_path, curves)
    run = tmp_path / "run"
    frame, _ = _replay_in_ray(
        path,
        run,
        num_samples=14,
        scheduler={"grace_epochs": 3, "eta": 3, "brackets": 1, "lookahead": 2},
        searcher={"type": "optuna", "n_startup_trials": 20},
        search_space={"config_id": {"type": "choice", "values": list(curves)}},
    )
    estimates = json.loads((run / "scheduler_state.json").read_text())["policy"]["estimates"]
    pruned = frame[frame["stop_reason"] == "lookahead_pruned"]
    assert len(pruned) and set(pruned["trial_id"]) == set(estimates)
    state = pickle.loads(sorted((run / "ray").glob("searcher-state-*.pkl"))[-1].read_bytes())
    told = {t: state["_ot_study"].trials[ot.number].value for t, ot in state["_ot_trials"].items()}
    for config_id, row in frame.iterrows():
        last = curves[config_id][row["epochs"] - 1]
        if row["trial_id"] in estimates:
            assert told[row["trial_id"]] == pytest.approx(estimates[row["trial_id"]]) != last
            assert told[row["trial_id"]] < last  # a rung loss, below this trial's epoch-1 loss
        else:
            assert told[row["trial_id"]] == pytest.approx(last)


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

    policy = AsyncHyperband(max_epochs=9, grace_epochs=1, eta=3, brackets=1, promotion="loss")
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


def test_replay_cli_escalates_when_told_as_a_sweep_does(tmp_path) -> None:
    """`costtune replay --escalate` opens every bracket on a stall, as a sweep with
    `scheduler.escalate` does: on curves where the first trial stays best, a later trial runs
    past the first rung in a later bracket. Off (``--no-escalate``), the one bracket stays and
    every other trial stops at epoch 1. On is the default, as a sweep's."""
    curves = {"c00": [0.5 / e for e in range(1, 10)]}
    curves.update({f"c{i:02d}": [1.0 + i / 100] * 9 for i in range(1, 14)})
    path = _write_table(tmp_path, curves)

    def run(*extra: str) -> dict:
        args = ["replay", str(path), "--grace-epochs", "1", "--eta", "3", "--stopping", "none", "--json"]
        result = CliRunner().invoke(main, [*args, *extra])
        assert result.exit_code == 0, result.output
        return json.loads(result.output)

    escalated, plain = run("--escalate"), run("--no-escalate")
    assert escalated["settings"]["escalate"] is True and plain["settings"]["escalate"] is False
    assert run() == plain  # off by default
    assert plain["runs"]["costtune"]["epochs"] == 9 + 13  # c00 to the end, the rest at epoch 1
    assert escalated["runs"]["costtune"]["epochs"] > plain["runs"]["costtune"]["epochs"]
    # what opened them, and when: η² = 9 trials after the best, with as many dollars
    assert escalated["escalation"] == {
        "opened_by": "stall",
        "after_trials": 10,
        "of_trials": 14,
        "full_runs_after_trials": None,
    }
    assert plain["escalation"] is None


def test_replay_cli_says_when_the_first_rungs_kept_trials_reversed_their_order(tmp_path) -> None:
    """Eight trials, each a new best at epoch 1 and worse than the one before from epoch 3 on
    (grace 1, η 3): the sixth to reach the second rung opens every bracket, before any stall,
    and the replay says so in one line."""
    curves = {f"c{i}": [1.0 - i / 100, 0.8, *[0.5 + i / 1000] * 7] for i in range(8)}
    path = _write_table(tmp_path, curves)
    args = ["replay", str(path), "--grace-epochs", "1", "--eta", "3", "--stopping", "none"]
    args += ["--warmup-trials", "0", "--searcher", "order", "--escalate"]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 0, result.output
    line = next(x for x in result.output.splitlines() if x.startswith("escalation:"))
    assert line == (
        "escalation: every bracket opened after 6 of 8 trials "
        "(the trials the first rung kept reversed their order at the second)"
    )


def test_replay_cli_replays_the_noise_aware_rule_as_a_sweep_runs_it(tmp_path) -> None:
    """`costtune replay --noise-aware` runs a sweep's `stopping.noise_aware`: the noisy slow
    improver that the plain rule stops on a flat-looking window runs on (more epochs), the
    same as the pure rule in the simulator; the default is a sweep's default."""
    curves = _fast_noisy_flat(40, pace=0.003)
    path = _write_table(tmp_path, curves)

    def run(*extra: str) -> dict:
        args = [
            "replay",
            str(path),
            "--scheduler",
            "fifo",
            "--price",
            "1",
            "--stopping",
            "relative",
            "--json",
        ]
        result = CliRunner().invoke(main, [*args, *extra])
        assert result.exit_code == 0, result.output
        return json.loads(result.output)

    aware, plain = run("--noise-aware"), run("--no-noise-aware")
    assert aware["settings"]["noise_aware"] is True and plain["settings"]["noise_aware"] is False
    assert run()["settings"]["noise_aware"] is DEFAULTS.noise_aware
    table = load_curves(str(path))
    for doc, noise_aware in ((aware, True), (plain, False)):
        rule = StoppingRule(min_relative_roi=0.3, spare_best=True, max_epochs=40, noise_aware=noise_aware)
        sim = simulate(
            list(table.values()), None, stopping=MarginalRoiStopping(rule), usd_per_device_hour=1.0
        )
        assert doc["runs"]["costtune"]["epochs"] == len(sim.epochs)
    assert aware["runs"]["costtune"]["epochs"] > plain["runs"]["costtune"]["epochs"] + 10


def test_replay_cli_stops_with_the_sweeps_default_rule(table_path) -> None:
    def run(*stopping: str) -> dict:
        args = ["replay", str(table_path), "--scheduler", "fifo", "--price", "1", "--json", *stopping]
        result = CliRunner().invoke(main, args)
        assert result.exit_code == 0, result.output
        return json.loads(result.output)

    default, none = run("--stopping", "relative"), run("--stopping", "none")
    assert default["settings"]["stopping"] == "relative" and default["settings"]["rho"] == 0.3
    assert run() == none  # off by default
    expected = run("--stopping", "expected")
    assert expected["settings"]["stopping"] == "expected"
    assert expected["runs"]["costtune"]["epochs"] < 54  # the flat t5 cannot beat the best: stopped
    assert default["runs"]["costtune"]["epochs"] < none["runs"]["costtune"]["epochs"] == 54  # flat t5 stops
    assert default["runs"]["costtune"]["best_val_loss"] == none["runs"]["costtune"]["best_val_loss"]


def test_replay_cli_hedges_curves_that_stay_flat_before_they_drop(tmp_path) -> None:
    """`costtune replay` with the hedge and `--no-hedge`: one good trial, eleven
    worse ones, then curves flat until epoch 7 that end best. Without the hedge the sweep stalls,
    opens its later brackets, and every flat start is still pruned; with it, a full run the first
    rung would have pruned becomes the best, and the sweep switches to full runs."""
    epochs = 12
    curves = {"c00": [1.0, 0.6, 0.5, 0.45] + [0.42] * (epochs - 4)}
    curves.update(
        {f"c{i:02d}": [1.0 + i / 100, 0.9 + i / 100] + [0.85 + i / 100] * (epochs - 2) for i in range(1, 12)}
    )
    curves.update(
        {f"c{i:02d}": [1.05 + i / 1000] * 7 + [0.5, 0.3, 0.2, 0.15, 0.1 + i / 1000] for i in range(12, 30)}
    )
    path = _write_table(tmp_path, curves)

    def run(*extra: str) -> dict:
        args = [
            "replay",
            str(path),
            "--grace-epochs",
            "2",
            "--eta",
            "3",
            "--price",
            "1",
            "--json",
            "--escalate",
        ]
        args += ["--stopping", "relative", "--warmup-trials", "3"]
        result = CliRunner().invoke(main, [*args, *extra])
        assert result.exit_code == 0, result.output
        return json.loads(result.output)

    hedged, plain = run("--hedge"), run("--no-hedge")
    assert hedged["settings"]["hedge"] is True and plain["settings"]["hedge"] is False
    assert (
        hedged["runs"]["costtune"]["best_val_loss"] < 0.2 < 0.5 < plain["runs"]["costtune"]["best_val_loss"]
    )
    # when it switched is said: in the JSON, and in one line (the GP's forgetting: tests/test_pool.py)
    switched = hedged["escalation"]["full_runs_after_trials"]
    assert isinstance(switched, int) and 12 < switched < 30
    assert plain["escalation"]["full_runs_after_trials"] is None
    text = CliRunner().invoke(
        main,
        [
            *["replay", str(path), "--grace-epochs", "2", "--eta", "3", "--price", "1", "--escalate"],
            *["--hedge", "--stopping", "relative", "--warmup-trials", "3"],
        ],
    )
    line = f"full runs: after {switched} trials a trial the first rung would have pruned was the best"
    assert text.exit_code == 0 and line in text.output and "modelled the full runs alone" not in text.output
    # --no-escalate: nothing opens, the hedge with it
    assert run("--no-escalate")["settings"]["hedge"] is False
    # every later bracket's trials judged (the default): the middle bracket's flat starts test the
    # rung as well as the full runs do, so the switch comes no later than with the full runs alone
    full = run("--hedge", "--hedge-judges", "full_runs")
    assert (
        hedged["settings"]["hedge_judges"] == "every_bracket"
        and full["settings"]["hedge_judges"] == "full_runs"
    )
    assert plain["settings"]["hedge_judges"] is None
    assert switched <= full["escalation"]["full_runs_after_trials"]
    assert full["runs"]["costtune"]["best_val_loss"] < 0.2


@pytest.mark.ray
def test_a_sweep_that_judged_flat_starts_says_so_in_its_report_and_replay(
    ray_session, tmp_path, capsys
) -> None:
    """Curves flat at their first loss until epoch 3 + i, the late droppers ending best: a real
    sweep (the replay trainable in Ray, the default stopping rule, rungs at 2 and 6) stops
    most of them flat, and the sweep's output, its report (text and JSON), its Python result
    and ``costtune replay`` of the same curves all say so in one line each."""
    from costtune.cli import _print_result
    from costtune.config import parse_config
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
            scheduler={"grace_epochs": 2, "eta": 3, "escalate": False},
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


@pytest.mark.ray
def test_rung_checks_in_a_ray_sweep_probe_and_open_the_brackets_like_the_simulator(
    ray_session, tmp_path
) -> None:
    """`scheduler.rung_checks` in a real sweep (6 epochs, grace 2, η 3, one trial at a time): a
    slow starter the first rung prunes while it still falls fast runs on as a probe, beats the
    promoted trial at epoch 4, and every bracket opens. Ray's CostAwareHyperBand ends the same
    trials at the same epochs as the pure policy in the simulator; without the checks the slow
    starter stops at its first rung."""
    curves = {"c0": [1.0, 0.5, 0.45, 0.44, 0.43, 0.42], "c1": [2.0, 1.0, 0.6, 0.40, 0.30, 0.20]}
    curves.update({f"c{i}": [1.2 + i / 100] * 6 for i in range(2, 7)})
    path = _write_table(tmp_path, curves)
    run = tmp_path / "run"
    geometry = {"grace_epochs": 2, "eta": 3, "brackets": 1, "escalate": True, "warmup_trials": None}
    frame, ran = _replay_in_ray(
        path,
        run,
        max_epochs=6,
        scheduler={**geometry, "rung_checks": 1},
        search_space={"config_id": {"type": "choice", "values": list(curves)}},
    )
    table = load_curves(str(path))
    policy = AsyncHyperband(max_epochs=6, grace_epochs=2, eta=3, brackets=1, escalate=True, rung_checks=1)
    expected = simulate([table[c] for c in ran], policy, workers=1).stopped_at
    assert frame["epochs"].to_dict() == expected
    assert ran[:2] == ["c0", "c1"] and expected["c1"] == 6
    assert policy.checks.failed and policy.open_brackets == len(policy.rungs_by_bracket) == 2
    state = json.loads((run / "scheduler_state.json").read_text())["policy"]
    assert state["checks"]["failed"] is True and state["checks"]["probes"] == policy.checks.probes
    plain = AsyncHyperband(max_epochs=6, grace_epochs=2, eta=3, brackets=1, escalate=True)
    assert simulate([table[c] for c in ran], plain, workers=1).stopped_at["c1"] == 2


@pytest.mark.ray
@pytest.mark.parametrize("judges", ["full_runs", "every_bracket"])
def test_the_hedge_in_a_ray_sweep_runs_flat_starts_in_full_and_switches_like_the_simulator(
    ray_session, tmp_path, judges
) -> None:
    """`scheduler.hedge` in a real sweep (8 epochs, grace 2, η 2, the relative stopper judging
    from epoch 2, one trial at a time): a good trial, eight worse ones the first rung prunes
    (the sweep stalls and every bracket opens), then curves flat until epoch 5 that end best. A
    flat trial of the bracket without rungs is not stopped by the stopper's pace, ends the
    sweep's best, and every later trial is a full run. Ray's scheduler and stopper end the same
    trials at the same epochs as the pure policy and rule in the simulator; without the hedge,
    the stopper ends every flat start at epoch 2. ``scheduler.hedge_judges: every_bracket``
    reaches Ray's policy too (its geometry is saved with it) and decides as the simulator's."""
    curves = {"c00": [1.0, 0.6, 0.5, 0.45, 0.42, 0.41, 0.40, 0.40]}
    curves.update({f"c{i:02d}": [1.0 + i / 100, 0.9 + i / 100] + [0.85 + i / 100] * 6 for i in range(1, 9)})
    curves.update({f"c{i:02d}": [1.0 + i / 1000] * 5 + [0.3, 0.2, 0.1 + i / 1000] for i in range(9, 16)})
    path = _write_table(tmp_path, curves)
    settings = {"min_relative_roi": 0.3, "window_epochs": 1, "min_epochs": 2, "noise_aware": True}
    geometry = {"grace_epochs": 2, "eta": 2, "brackets": 1, "escalate": True, "warmup_trials": None}
    frame, ran = _replay_in_ray(
        path,
        tmp_path / "run",
        max_epochs=8,
        scheduler={**geometry, "hedge": True, "hedge_judges": judges},
        stopping=settings,
        search_space={"config_id": {"type": "choice", "values": list(curves)}},
    )
    table = load_curves(str(path))
    rule = StoppingRule(spare_best=True, max_epochs=8, **settings)  # type: ignore[arg-type]

    def simulated(hedge: bool) -> tuple[dict[str, int], AsyncHyperband]:
        every = judges == "every_bracket"
        policy = AsyncHyperband(8, 2, 2, 1, escalate=True, hedge=hedge, judge_every_bracket=every)
        sim = simulate(
            [table[c] for c in ran], policy, stopping=MarginalRoiStopping(rule), usd_per_device_hour=1.0
        )
        return sim.stopped_at, policy

    expected, policy = simulated(True)
    assert frame["epochs"].to_dict() == expected
    full_flat = [c for c in ran if c >= "c09" and expected[c] == 8]
    assert full_flat and policy.switched  # a flat start ran in full and switched the sweep
    assert frame.loc[full_flat, "best_val_loss"].min() < 0.2
    state = json.loads((tmp_path / "run" / "scheduler_state.json").read_text())["policy"]
    assert state["escalation"]["switched"] is True and state["geometry"]["hedge"] is True
    assert state["geometry"].get("hedge_judges", "full_runs") == judges
    without, _ = simulated(False)
    assert all(without[c] == 2 for c in ran if c >= "c09")


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
    done = CliRunner().invoke(main, ["replay", str(run), "--json"])
    data = json.loads(done.output)
    assert data["target"] == pytest.approx(small_run.summary["best_metric"])  # val_loss: its own loss
    # the recorded trials, replayed with the run's own rungs, reach the run's best
    for name in ("recorded", "costtune"):
        assert data["runs"][name]["cost_to_target_usd"] is not None, data["runs"]
        assert data["runs"][name]["best_val_loss"] == pytest.approx(small_run.summary["best_metric"])
    # its epochs' metered seconds at its own price (the time held between epochs, billed in the
    # run as charges, is not an epoch's and is not replayed)
    cost = small_run.ledger.spec.cost_model
    metered = sum(
        cost.cost_usd(r.metric_history[-1][1], r.devices, r.device_kind)
        for r in small_run.ledger.trials.values()
    )
    assert data["runs"]["recorded"]["cost_usd"] == pytest.approx(metered, rel=1e-3)
