from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from costtune.cli import main
from costtune.core.config import SearcherConfig, StoppingConfig, load_config, parse_config
from costtune.errors import ConfigError

REPO = Path(__file__).resolve().parent.parent
MINIMAL = {
    "name": "t",
    "max_epochs": 10,
    "num_samples": 4,
    "search_space": {"lr": {"type": "loguniform", "low": 1e-4, "high": 1e-1}},
}


def test_embedded_default_config_is_valid() -> None:
    config = load_config(REPO / "experiments" / "digits.yaml")
    assert config.scheduler.type == "cost_aware_hyperband"
    assert config.scheduler.grace_epochs == 5 and config.scheduler.eta == 5
    assert config.searcher.type == "optuna"
    assert "lr" in config.search_space  # loaded from search_spaces/mlp.yaml


def test_defaults_are_the_documented_ones() -> None:
    config = parse_config(MINIMAL)
    scheduler = config.scheduler
    assert (scheduler.grace_epochs, scheduler.eta, scheduler.brackets) == (5, 5, 1)
    # the rungs alone (benchmarks/RESULTS.md, "Choosing the default on several families"), and
    # every stopping rule off
    assert config.stopping == StoppingConfig()
    assert (config.stopping.patience_epochs, config.stopping.min_marginal_roi) == (None, None)
    assert config.cost.accelerator == "A100" and config.cost.cost_model().prices["A100"] == 2.50
    assert config.searcher.type == "optuna" and config.searcher.n_startup_trials is None  # TPE: 10


def test_the_scheduler_stopping_and_searcher_options_are_twelve_together() -> None:
    """#64: the user-facing options of the scheduler, stopping and searcher sections are at
    most 12 together, each documented (docs/config.md)."""
    from costtune.core.config import SchedulerConfig, config_reference

    fields = [
        f"{section}.{name}"
        for section, model in (
            ("scheduler", SchedulerConfig),
            ("stopping", StoppingConfig),
            ("searcher", SearcherConfig),
        )
        for name in model.model_fields
    ]
    assert len(fields) <= 12, fields
    reference = config_reference()
    for field in fields:
        row = next(line for line in reference.splitlines() if line.startswith(f"| `{field}` |"))
        assert row.rstrip(" |").split("|")[-1].strip(), f"{field} has no description"


@pytest.mark.parametrize(
    ("section", "name", "value"),
    [
        ("searcher", "over_epochs", True),
        ("scheduler", "escalate", True),
        ("scheduler", "warmup_trials", "auto"),
        ("stopping", "min_relative_roi", 0.3),
        ("stopping", "outlook", {"optimism": 1.0}),
    ],
)
def test_a_removed_option_is_refused_in_a_new_config_and_read_in_a_saved_run(section, name, value) -> None:
    """A removed option at the value it held by default reads anywhere (a saved run's
    config.yaml holds every field); set otherwise, a new config is refused in one line naming
    it, and a saved run's config (``saved``: read for its reports) is read without it."""
    from costtune.core.config import REMOVED_FIELDS

    at_default = {**MINIMAL, section: {name: REMOVED_FIELDS[section][name]}}
    assert parse_config(at_default) == parse_config(MINIMAL)
    changed = {**MINIMAL, section: {name: value}}
    with pytest.raises(ConfigError, match=rf"^{section}\.{name}: removed; ") as info:
        parse_config(changed)
    assert "\n" not in str(info.value)
    assert parse_config(changed, saved=True) == parse_config(MINIMAL)


@pytest.mark.parametrize(
    ("patch", "message"),
    [
        ({"scheduler": {"eta": 1}}, "scheduler.eta: input should be greater than or equal to 2, got 1"),
        ({"scheduler": {"etta": 3}}, "scheduler.etta: unknown key"),
        (
            {"searcher": {"type": "grid"}},
            "search_space.lr: grid search needs type 'choice' (a list of values), got loguniform",
        ),
        ({"searcher": {"type": "bohb"}}, "searcher.type: input should be"),
        (
            {"searcher": {"type": "gp", "model_check": 0.2}},
            "searcher.model_check: removed; the gp searcher is Optuna's GPSampler with its own defaults",
        ),
        ({"max_epochs": -3}, "max_epochs: input should be greater than or equal to 1, got -3"),
        ({"num_samples": "many"}, "num_samples: input should be a valid integer"),
        (
            {"search_space": {"lr": {"type": "loguniform", "low": 0, "high": 1}}},
            "search_space.lr: loguniform needs low > 0",
        ),
        (
            {"search_space": {"w": {"type": "choice", "values": []}}},
            "search_space.w: choice needs a non-empty",
        ),
        ({"mode": "maximize"}, "mode: input should be 'min' or 'max'"),
        (
            {"trainable": {"name": "amp", "args": {"model": "resnet999"}}},
            "trainable.args.model: must be one of mlp, cnn, transformer, got 'resnet999'",
        ),
        (
            {"trainable": {"args": {"modle": "mlp"}}},
            "trainable.args.modle: the amp trainable does not read 'modle'",
        ),
        (
            {"search_space": {"learning_rate": {"type": "uniform", "low": 0.1, "high": 0.2}}},
            "search_space.learning_rate: the amp trainable does not read 'learning_rate'",
        ),
        (
            {"search_space": {"precision": {"type": "choice", "values": ["fp32", "fp8"]}}},
            "search_space.precision: must be one of fp32, bf16, fp16, got 'fp8'",
        ),
        (
            {"stopping": {"min_marginal_roi": -0.1}},
            "stopping.min_marginal_roi: input should be greater than or equal to 0",
        ),
        ({"stopping": {"patience": 3}}, "stopping.patience: unknown key"),
        ({"cost": {"accelerator": "TPUv9"}}, "cost.accelerator: no price for 'TPUv9'"),
        ({"cost": {"business_value_usd": float("nan")}}, "cost.business_value_usd:"),
        ({"scheduler": {"grace_epochs": 20}}, "scheduler.grace_epochs: must be <= max_epochs (10), got 20"),
        (
            {"trainable": {"name": "os.system"}},
            "trainable.name: must be 'amp', 'replay' or a 'module:function'",
        ),
    ],
)
def test_config_errors_are_one_line_naming_the_field(patch, message) -> None:
    with pytest.raises(ConfigError) as info:
        parse_config({**MINIMAL, **patch})
    text = str(info.value)
    assert text.startswith(message), text
    assert "\n" not in text


@pytest.mark.parametrize(
    ("patch", "grace"),
    [
        ({"max_epochs": 3}, 3),  # fewer epochs than the default first rung: judged first at the last
        ({"max_epochs": 3, "scheduler": {"eta": 3}}, 3),
        ({"max_epochs": 5}, 5),
        ({"max_epochs": 40}, 5),
        ({"max_epochs": 3, "scheduler": {"grace_epochs": 2}}, 2),  # a set value is kept
    ],
)
def test_the_default_first_rung_fits_a_short_sweep(patch, grace) -> None:
    assert parse_config({**MINIMAL, **patch}).scheduler.grace_epochs == grace


def test_a_first_rung_set_past_max_epochs_is_still_refused() -> None:
    with pytest.raises(ConfigError, match=r"^scheduler.grace_epochs: must be <= max_epochs \(3\), got 4$"):
        parse_config({**MINIMAL, "max_epochs": 3, "scheduler": {"grace_epochs": 4}})


def test_missing_required_key() -> None:
    raw = {k: v for k, v in MINIMAL.items() if k != "max_epochs"}
    with pytest.raises(ConfigError, match="^max_epochs: required key is missing$"):
        parse_config(raw)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("name: [unclosed", "is not valid YAML at line 1"),
        ("- just\n- a list\n", "must be a YAML mapping"),
        ("name: x\nsearch_space: nowhere.yaml\n", "search_space: no search-space file 'nowhere.yaml'"),
        (
            "name: x\nstopping:\n  patience_epochs: 3\nmax_epochs: 3\nstopping:\n  min_marginal_roi: 1\n",
            r"^config: key 'stopping' given twice \(lines 2 and 5\); keep one$",
        ),
        (
            "name: x\nstopping: {patience_epochs: 3, patience_epochs: 4}\n",
            "key 'patience_epochs' given twice",
        ),
    ],
)
def test_bad_files(tmp_path, text, message) -> None:
    path = tmp_path / "c.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError, match=message):
        load_config(path)


def test_cli_bad_config_exits_2_with_one_line_and_starts_nothing(tmp_path) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump({**MINIMAL, "scheduler": {"eta": 1}}))
    out = tmp_path / "run"
    result = CliRunner().invoke(main, ["sweep", str(path), "--output", str(out)])
    assert result.exit_code == 2
    assert (
        result.output.strip()
        == "costtune: error: scheduler.eta: input should be greater than or equal to 2, got 1"
    )
    assert not out.exists()


def test_cli_missing_file_exits_2(tmp_path) -> None:
    result = CliRunner().invoke(main, ["sweep", str(tmp_path / "nope.yaml")])
    assert result.exit_code == 2
    assert "config: no such file" in result.output


def test_cli_help_describes_the_command() -> None:
    result = CliRunner().invoke(main, ["sweep", "--help"])
    assert result.exit_code == 0
    assert "--output" in result.output and "trials.csv" in result.output


def test_the_amp_schema_matches_what_the_trainable_reads() -> None:
    from costtune.core.config import AMP_CHOICES
    from costtune.trainables.amp import PRECISIONS
    from costtune.trainables.data import DATASETS
    from costtune.trainables.models import MODELS

    assert AMP_CHOICES["model"] == MODELS and AMP_CHOICES["dataset"] == DATASETS
    assert set(AMP_CHOICES["precision"]) == set(PRECISIONS)


def _with_cost(tmp_path: Path, cost: dict, resources: dict | None = None) -> Path:
    path = tmp_path / "sweep.yaml"
    raw = {**MINIMAL, "cost": cost, **({"resources": resources} if resources else {})}
    path.write_text(yaml.safe_dump(raw))
    return path


@pytest.mark.parametrize(
    ("name", "text"),
    [
        ("prices.csv", "accelerator,on_demand,spot\nT4,0.40,0.12\nMI300,3.0,\n"),
        ("prices.yaml", "T4: {on_demand: 0.40, spot: 0.12}\nMI300: {on_demand: 3.0}\n"),
    ],
)
def test_a_price_file_is_read_once_into_the_configs_prices(tmp_path, name, text) -> None:
    (tmp_path / name).write_text(text)
    path = _with_cost(tmp_path, {"price_file": name, "capacity": "spot", "prices": {"cpu": 0.01}})
    config = load_config(path)
    model = config.cost.cost_model()
    assert model.usd_per_device_hour("T4") == pytest.approx(0.12)
    assert model.usd_per_device_hour("MI300") == pytest.approx(3.0)  # no spot market: on-demand
    assert model.usd_per_device_hour("cpu") == pytest.approx(0.01)  # the config's own prices win
    # what a run saves carries the prices themselves: its books do not move when the file does
    saved = config.model_dump(mode="json")["cost"]
    assert "price_file" not in saved and saved["prices"]["T4"] == {"on_demand": 0.40, "spot": 0.12}
    (tmp_path / name).write_text("T4: 99.0\n")
    assert parse_config({**MINIMAL, "cost": saved}).cost.cost_model().usd_per_device_hour("T4") == 0.12


@pytest.mark.parametrize(
    ("files", "cost", "message"),
    [
        ({}, {"price_file": "nope.csv"}, "cost.price_file: no such file"),
        (
            {"p.csv": "type,price\nT4,1\n"},
            {"price_file": "p.csv"},
            "cost.price_file: .* needs the CSV header",
        ),
        (
            {"p.csv": "accelerator,on_demand\nT4,cheap\n"},
            {"price_file": "p.csv"},
            "line 2: prices must be numbers",
        ),
        ({"p.yaml": "- T4\n"}, {"price_file": "p.yaml"}, "must map device types to prices"),
        ({"p.yaml": "T4: -1\n"}, {"price_file": "p.yaml"}, "cost.prices.T4: must be a finite price"),
        ({}, {"price_file": "../../etc/passwd"}, "cost.price_file: .* outside the config's folder"),
    ],
)
def test_bad_price_files_are_one_line_errors(tmp_path, files, cost, message) -> None:
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    with pytest.raises(ConfigError, match=message) as caught:
        load_config(_with_cost(tmp_path, cost))
    assert "\n" not in str(caught.value)


def test_trials_pinned_to_a_gpu_type_are_billed_as_that_type() -> None:
    config = parse_config({**MINIMAL, "resources": {"gpus": 1, "accelerator_type": "T4"}})
    assert config.cost.accelerator == "T4"
    assert config.cost.cost_model().usd_per_device_hour("gpu") == pytest.approx(0.35)
    with pytest.raises(ConfigError, match="^cost.accelerator: 'H100', but resources.accelerator_type"):
        parse_config({**MINIMAL, "cost": {"accelerator": "H100"}, "resources": {"accelerator_type": "T4"}})


def test_cli_estimate_prices_spot_capacity(tmp_path) -> None:
    path = _with_cost(
        tmp_path, {"accelerator": "H100", "capacity": "spot", "epoch_seconds": 36.0}, {"gpus": 1}
    )
    spot = CliRunner().invoke(main, ["estimate", str(path), "--json"])
    path = _with_cost(tmp_path, {"accelerator": "H100", "epoch_seconds": 36.0}, {"gpus": 1})
    on_demand = CliRunner().invoke(main, ["estimate", str(path), "--json"])
    assert spot.exit_code == 0 and on_demand.exit_code == 0, spot.output + on_demand.output
    import json

    a, b = json.loads(spot.output), json.loads(on_demand.output)
    assert a["usd_per_device_hour"] == pytest.approx(2.0) and b["usd_per_device_hour"] == pytest.approx(4.0)
    assert a["worst_cost_usd"] == pytest.approx(b["worst_cost_usd"] / 2)
    assert any("(spot)" in line for line in a["assumptions"])


def test_the_config_reference_is_generated_from_the_models() -> None:
    """docs/config.md is config_reference()'s text: a field added, removed or given another
    default without regenerating it (`make docs`) fails here."""
    from costtune.core.config import config_reference

    text = (REPO / "docs" / "config.md").read_text()
    assert text.endswith(config_reference()), "docs/config.md is stale: run `make docs`"
    for field in ("scheduler.eta", "searcher.type", "budget.max_wall_seconds", "stopping.min_marginal_roi"):
        assert f"| `{field}` |" in text
