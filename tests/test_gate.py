from __future__ import annotations

import json

import pytest
import yaml
from click.testing import CliRunner
from hypothesis import given
from hypothesis import strategies as st

from costtune.cli import main
from costtune.core.config import parse_config
from costtune.core.estimate import estimate, expected_epochs_hyperband, expected_promotions
from costtune.core.gate import check
from costtune.errors import ConfigError
from tests.conftest import REPO, SMALL

APPROVAL = {
    "justification": "64 configurations replicate last quarter's baseline grid",
    "estimated_resources": "64 × 8×A100, 52 epochs",
    "stop_conditions": "rung pruning at 5 and 25 epochs",
    "approver": "ml-platform@example.org",
}
REFERENCE = {  # the reference story: 8×A100 jobs of 400 ten-minute epochs
    "name": "reference",
    "max_epochs": 400,
    "num_samples": 64,
    "search_space": {"lr": {"type": "loguniform", "low": 1e-4, "high": 1e-1}},
    "resources": {"cpus": 8, "gpus": 8},
    "cost": {"accelerator": "A100", "epoch_seconds": 600},
}
GRID = {
    **REFERENCE,
    "num_samples": 1,
    "max_epochs": 10,
    "searcher": {"type": "grid"},
    "scheduler": {"type": "fifo"},
    "search_space": {
        "lr": {"type": "choice", "values": [1e-4, 1e-3, 1e-2, 1e-1]},
        "weight_decay": {"type": "choice", "values": [1e-5, 1e-4]},
    },
}


def test_expected_promotions_of_a_random_order_rung() -> None:
    assert expected_promotions(1, 5) == 1
    assert expected_promotions(5, 5) == pytest.approx(1 + 1 / 2 + 1 / 3 + 1 / 4 + 1 / 5)
    # Optuna's max(1, ⌊k/η⌋): one until the rung holds 2η, then two
    assert expected_promotions(7, 3) == pytest.approx(1 + 1 / 2 + 1 / 3 + 1 / 4 + 1 / 5 + 2 / 6 + 2 / 7)


def test_the_estimate_follows_the_rungs() -> None:
    """The default rungs (grace 5, η 5, one bracket, keep floor) expect fewer epochs than a
    second bracket would, and the assumptions name the rungs."""
    one = estimate(parse_config(REFERENCE))
    every = estimate(parse_config({**REFERENCE, "scheduler": {"brackets": None}}))
    assert one.expected_epochs < every.expected_epochs and one.worst_epochs == every.worst_epochs
    assert any("CostAwareHyperBand: rungs at [5, 25, 125] epochs, eta=5" in a for a in one.assumptions)


@given(st.floats(0.01, 500), st.integers(2, 8))
def test_expected_promotions_lie_between_one_and_all(n, eta) -> None:
    promoted = expected_promotions(n, eta)
    assert min(n, 1.0) - 1e-9 <= promoted <= n + 1e-9  # at least one goes on, never more than came
    assert promoted <= expected_promotions(n + 1, eta) + 1e-9  # more arrivals, no fewer promoted


def test_expected_epochs_of_one_bracket_worked_by_hand() -> None:
    # 5 trials, rungs at 1 and 3, max 9, η = 3: max(1, ⌊k/3⌋) is 1 for the first five arrivals
    p1 = 1 + 1 / 2 + 1 / 3 + 1 / 4 + 1 / 5
    p2 = 1 + 1 / 2 + (p1 - 2) * 1 / 3
    assert expected_epochs_hyperband(5, 9, 1, 3, 1) == pytest.approx(5 * 1 + p1 * 2 + p2 * 6)


def test_estimate_of_the_reference_story_in_gpu_dollars() -> None:
    config = parse_config({**REFERENCE, "scheduler": {"type": "fifo"}})
    est = estimate(config)
    assert est.device == "A100" and est.devices_per_trial == 8
    assert est.worst_trial_hours == pytest.approx(400 * 600 / 3600)
    assert est.worst_trial_cost_usd == pytest.approx(400 * 600 / 3600 * 8 * 2.50)
    assert est.worst_cost_usd == pytest.approx(64 * est.worst_trial_cost_usd)
    assert est.expected_cost_usd == est.worst_cost_usd  # no stopping


def test_hyperband_expected_cost_is_below_worst() -> None:
    est = estimate(parse_config(REFERENCE))
    assert est.expected_epochs < est.worst_epochs / 3
    assert est.worst_epochs == 64 * 400


def test_estimate_needs_an_epoch_time() -> None:
    config = parse_config({**REFERENCE, "cost": {"accelerator": "A100"}})
    with pytest.raises(ConfigError, match="^cost.epoch_seconds:"):
        estimate(config)


def test_gate_passes_within_limits() -> None:
    config = parse_config({**REFERENCE, "max_epochs": 20})  # 3.3 h and $66.67 per trial
    assert check(config, estimate(config)).passed


def test_gate_fails_over_the_per_trial_limits_and_says_why() -> None:
    config = parse_config(REFERENCE)  # 66.7 h and $1,333 per trial
    result = check(config, estimate(config))
    assert not result.passed
    assert any("per-trial limit" in r and "$1,333.33" in r for r in result.over_limits)
    assert "add an approval: block" in result.message()
    assert any("66.7 h exceeds the 48 h per-trial limit" in r for r in result.over_limits)
    assert check(config, estimate(config), max_cost_usd_per_trial=2000, max_hours_per_trial=100).passed


def test_gate_passes_an_approved_sweep_over_the_limits() -> None:
    config = parse_config({**REFERENCE, "approval": APPROVAL})
    result = check(config, estimate(config))
    assert result.passed and result.over_limits
    assert any("approved by ml-platform@example.org" in n for n in result.notes)


def test_grid_search_needs_approval() -> None:
    grid = parse_config(GRID)
    assert estimate(grid).trials == 8
    assert not check(grid, estimate(grid)).passed
    assert check(parse_config({**GRID, "approval": APPROVAL}), estimate(grid)).passed


def test_grid_search_refuses_continuous_parameters() -> None:
    with pytest.raises(ConfigError, match="^search_space.lr: grid search needs type 'choice'"):
        parse_config({**GRID, "search_space": {"lr": {"type": "uniform", "low": 0, "high": 1}}})


def test_incomplete_approval_names_the_missing_field() -> None:
    with pytest.raises(ConfigError, match="^approval.approver: required key is missing$"):
        parse_config({**GRID, "approval": {k: v for k, v in APPROVAL.items() if k != "approver"}})


@pytest.mark.parametrize(
    ("config", "args", "code"),
    [
        ({**REFERENCE, "max_epochs": 20}, [], 0),
        (REFERENCE, [], 1),
        (REFERENCE, ["--max-cost-usd", "2000", "--max-hours", "100"], 0),
        (REFERENCE, ["--max-cost-usd", "2000"], 1),
        ({**REFERENCE, "max_epochs": 20}, ["--max-sweep-cost-usd", "100"], 1),
        (GRID, [], 1),
        ({**GRID, "approval": APPROVAL}, [], 0),
        ({**REFERENCE, "scheduler": {"eta": 1}}, [], 2),
        ({**REFERENCE, "cost": {}}, [], 2),
    ],
)
def test_gate_cli_exit_codes(tmp_path, config, args, code) -> None:
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump(config))
    result = CliRunner().invoke(main, ["gate", str(path), *args])
    assert result.exit_code == code, result.output
    if code < 2:
        assert ("gate: PASS" if code == 0 else "gate: FAIL") in result.output
        assert "assumptions:" in result.output


def test_gate_cli_json(tmp_path) -> None:
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump(REFERENCE))
    result = CliRunner().invoke(main, ["gate", str(path), "--json"])
    data = json.loads(result.output)
    assert result.exit_code == 1 and data["passed"] is False
    assert data["estimate"]["worst_trial_cost_usd"] == pytest.approx(1333.33, rel=1e-4)


def test_estimate_cli_prints_assumptions(tmp_path) -> None:
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump(REFERENCE))
    result = CliRunner().invoke(main, ["estimate", str(path)])
    assert result.exit_code == 0, result.output
    assert "8 × A100 per trial at $2.5 per device-hour" in result.output
    assert "worst single trial: 66.7 h, $1,333.33" in result.output


def test_sweep_refuses_an_unapproved_grid_and_starts_nothing(tmp_path) -> None:
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump(GRID))
    out = tmp_path / "run"
    result = CliRunner().invoke(main, ["sweep", str(path), "--output", str(out)])
    assert result.exit_code == 1
    assert "budget gate: grid search of 8 trials needs an approved plan" in result.output
    assert not out.exists()


@pytest.mark.parametrize("example", sorted((REPO / "experiments").glob("*.yaml")), ids=lambda p: p.name)
def test_every_shipped_example_passes_the_gate_the_readme_recommends_for_ci(example) -> None:
    done = CliRunner().invoke(main, ["gate", str(example)])
    assert done.exit_code == 0, done.output
    assert "gate: PASS" in done.output


def test_the_estimate_takes_epoch_times_from_a_finished_runs_ledger(small_run, tmp_path) -> None:
    from costtune.calibrate import calibration_of

    config = tmp_path / "same.yaml"
    config.write_text(yaml.safe_dump(SMALL))
    done = CliRunner().invoke(
        main, ["estimate", str(config), "--from-run", str(small_run.output_dir), "--json"]
    )
    assert done.exit_code == 0, done.output
    measured = calibration_of(small_run.ledger)
    data = json.loads(done.output)
    assert data["epoch_seconds"] == pytest.approx(measured.mean_seconds)
    assert f"epochs metered in {small_run.output_dir}" in " ".join(data["assumptions"])
    gate = CliRunner().invoke(main, ["gate", str(config), "--from-run", str(small_run.output_dir)])
    assert gate.exit_code == 0, gate.output
    missing = CliRunner().invoke(main, ["gate", str(config), "--from-run", str(tmp_path / "nothing")])
    assert missing.exit_code == 2 and missing.output.startswith("costtune: error: --from-run: ")
