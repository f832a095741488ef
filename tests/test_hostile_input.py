"""Hostile input: every bad config ends in one clear line and exit code 2, never a traceback."""

from __future__ import annotations

import json
import math

import pytest
import yaml
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from costtune.cli import main
from costtune.core.config import SweepConfig, load_config, parse_config
from costtune.errors import ConfigError

VALID = {
    "name": "fuzz",
    "max_epochs": 10,
    "num_samples": 4,
    "search_space": {"lr": {"type": "loguniform", "low": 1e-4, "high": 1e-1}},
    "cost": {"epoch_seconds": 1.0},
}
scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(10**30), max_value=10**30),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=20),
)
values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
    max_leaves=8,
)
KEYS = [
    "name",
    "max_epochs",
    "num_samples",
    "search_space",
    "scheduler",
    "searcher",
    "cost",
    "budget",
    "resources",
    "mode",
    "metric",
    "seed",
    "trainable",
    "approval",
    "stopping",
    "idle",
    "tracking",
    "bogus",
]
SUBKEYS = {
    "scheduler": ["type", "eta", "grace_epochs", "brackets", "promotion", "perturbation_interval"],
    "budget": ["max_cost_usd", "max_cost_usd_per_trial", "max_hours_per_trial"],
    "cost": ["accelerator", "prices", "epoch_seconds", "business_value_usd"],
    "searcher": ["type", "n_startup_trials"],
}


@st.composite
def hostile_configs(draw: st.DrawFn) -> dict:
    config = {k: (dict(v) if isinstance(v, dict) else v) for k, v in VALID.items()}
    for key in draw(st.lists(st.sampled_from(KEYS), max_size=4)):
        if key in SUBKEYS and draw(st.booleans()):
            config[key] = {draw(st.sampled_from(SUBKEYS[key])): draw(values)}
        else:
            config[key] = draw(values)
    return config


def _one_line(message: str) -> bool:
    return "\n" not in message and 0 < len(message) < 400


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(hostile_configs())
def test_any_config_is_accepted_or_refused_in_one_line(config) -> None:
    try:
        parsed = parse_config(config)
    except ConfigError as exc:
        assert _one_line(str(exc)), str(exc)
        return
    assert isinstance(parsed, SweepConfig)
    assert parsed.max_epochs >= 1 and parsed.num_samples >= 1
    assert parsed.scheduler.eta >= 2
    for value in (parsed.budget.max_cost_usd_per_trial, parsed.budget.max_hours_per_trial):
        assert math.isfinite(value) and value > 0


@settings(max_examples=60, deadline=None)
@given(st.text(max_size=200))
def test_any_yaml_document_is_accepted_or_refused_in_one_line(tmp_path_factory, text) -> None:
    path = tmp_path_factory.mktemp("fuzz") / "c.yaml"
    path.write_text(text)
    try:
        load_config(path)
    except ConfigError as exc:
        assert _one_line(str(exc)), str(exc)


@settings(max_examples=60, deadline=None)
@given(hostile_configs())
def test_cli_never_shows_a_traceback(tmp_path_factory, config) -> None:
    path = tmp_path_factory.mktemp("fuzz") / "c.yaml"
    try:
        path.write_text(yaml.safe_dump(config))
    except yaml.YAMLError:
        return
    result = CliRunner().invoke(main, ["gate", str(path)])
    assert result.exit_code in (0, 1, 2), result.output
    assert isinstance(result.exception, SystemExit) or result.exception is None, repr(result.exception)
    assert "Traceback" not in result.output


def test_yaml_is_read_with_a_safe_loader(tmp_path) -> None:
    path = tmp_path / "evil.yaml"
    path.write_text("name: !!python/object/apply:os.system ['touch /tmp/costtune-pwned']\n")
    try:
        load_config(path)
    except ConfigError as exc:
        assert "not valid YAML" in str(exc)
    else:
        raise AssertionError("a python/object tag was accepted")


SECRET = "ghp_s3cr3tT0kenValue"


def _secret_world(tmp_path):
    """A secret file outside the config's folder, a config folder, and a link out of it."""
    (tmp_path / "home").mkdir()
    secret = tmp_path / "home" / ".env"
    secret.write_text(f"GITHUB_TOKEN={SECRET}\n")
    (tmp_path / "home" / "keys.yaml").write_text(f"token: {SECRET}\nlr: {SECRET}\n")
    configs = tmp_path / "repo" / "configs"
    configs.mkdir(parents=True)
    (configs / "linked.yaml").symlink_to(tmp_path / "home" / "keys.yaml")
    return configs


def _config(configs, search_space: str):
    path = configs / "sweep.yaml"
    path.write_text(yaml.safe_dump({**VALID, "search_space": search_space}))
    return path


def test_search_space_files_stay_where_configs_live_and_are_never_echoed(tmp_path) -> None:
    configs = _secret_world(tmp_path)
    for hostile in (
        "../../home/.env",
        str(tmp_path / "home" / ".env"),
        "../../home/keys.yaml",
        "linked.yaml",
    ):
        for command in (["gate"], ["estimate"], ["sweep", "--no-progress"]):
            result = CliRunner().invoke(main, [*command, str(_config(configs, hostile))])
            assert result.exit_code == 2, (hostile, command, result.output)
            assert SECRET not in result.output
            assert "search_space:" in result.output and "outside the config's folder" in result.output
            assert result.output.count("\n") == 1 and "Traceback" not in result.output


def test_an_allowed_folder_is_read_but_its_values_are_still_not_quoted(tmp_path) -> None:
    configs = _secret_world(tmp_path)
    path = _config(configs, "../../home/keys.yaml")
    result = CliRunner().invoke(main, ["gate", str(path), "--allow-path", str(tmp_path / "home")])
    assert result.exit_code == 2 and SECRET not in result.output
    assert result.output.startswith("costtune: error: search_space.") and "value not shown" in result.output
    env = _config(configs, "../../home/.env")
    result = CliRunner().invoke(main, ["gate", str(env), "--allow-path", str(tmp_path / "home")])
    assert result.exit_code == 2 and SECRET not in result.output
    assert "must be a YAML mapping of parameters" in result.output


def test_a_search_space_beside_the_config_or_in_the_library_still_loads(tmp_path) -> None:
    configs = tmp_path / "c"
    configs.mkdir()
    (configs / "space.yaml").write_text("lr: {type: loguniform, low: 1.0e-4, high: 1.0e-1}\n")
    assert set(load_config(_config(configs, "space.yaml")).search_space) == {"lr"}
    assert load_config(_config(configs, "mlp.yaml")).search_space  # search_spaces/mlp.yaml


def test_a_trainable_that_is_not_a_function_is_refused_before_anything_starts(tmp_path) -> None:
    for reference, what in [
        ("os:system", "builtin_function_or_method"),
        ("collections:OrderedDict", "a class"),
    ]:
        config = {**VALID, "name": "bad", "trainable": {"name": reference}, "metric": "loss"}
        path = tmp_path / "bad.yaml"
        path.write_text(yaml.safe_dump(config))
        out = tmp_path / "run"
        result = CliRunner().invoke(main, ["sweep", str(path), "--output", str(out), "--no-progress"])
        assert result.exit_code == 2, result.output
        assert result.output.strip().splitlines() == [result.output.strip()]  # one line
        assert f"trainable.name: {reference} is" in result.output and what in result.output
        assert not out.exists()


# ---------------------------------------------------------------- bounded reading, every command
BASE = "name: x\nmax_epochs: 5\nnum_samples: 2\nsearch_space: {lr: {type: uniform, low: 0, high: 1}}\n"


def _anchor_bomb(levels: int) -> str:
    """The billion-laughs shape: each level ten aliases of the one before, in a checked field."""
    lines = ['    a0: &a0 ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    lines += [f"    a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 10) + "]" for i in range(1, levels)]
    return BASE + "budget:\n  max_cost_usd:\n" + "\n".join(lines) + "\n"


HOSTILE_DOCUMENTS = {
    "5,000 levels of lists": (BASE + "cost: " + "[" * 5000 + "]" * 5000 + "\n", "nested deeper than 64"),
    "5,000 levels of mappings": (
        BASE + "cost:" + "".join(f" {{k{i}:" for i in range(5000)) + " 1" + "}" * 5000 + "\n",
        "nested deeper than 64",
    ),
    "a 5,000-digit integer": (
        BASE.replace("max_epochs: 5", "max_epochs: " + "9" * 5000),
        "a number of 5,000",
    ),
    "an anchor bomb of 5 levels": (_anchor_bomb(5), "expands to more than 100,000 values"),
    "an anchor bomb of 9 levels": (_anchor_bomb(9), "expands to more than 100,000 values"),
    "an anchor bomb of 10 levels": (_anchor_bomb(10), "expands to more than 100,000 values"),
    "2 MB of comments": (BASE + "#" * 2_000_000 + "\n", "at most 1,048,576 are read"),
}


def _refused_in_one_line(result, says: str) -> None:
    assert result.exit_code == 2, result.output
    assert isinstance(result.exception, SystemExit), repr(result.exception)
    assert result.output.count("\n") == 1 and "Traceback" not in result.output, result.output
    assert says in result.output, result.output


def _bounded(run) -> None:
    """Under 5 s and 500 MB of Python allocations (the checks run before anything is built)."""
    import time
    import tracemalloc

    tracemalloc.start()
    started = time.perf_counter()
    try:
        run()
    finally:
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
    assert time.perf_counter() - started < 5.0 and peak < 500 * 2**20, peak


@pytest.mark.parametrize("case", list(HOSTILE_DOCUMENTS))
def test_hostile_yaml_is_refused_in_one_line_in_bounded_time_and_memory(tmp_path, case) -> None:
    text, says = HOSTILE_DOCUMENTS[case]
    path = tmp_path / "c.yaml"
    path.write_text(text)
    for command in (["sweep", "--no-progress", "--output", str(tmp_path / "run")], ["estimate"], ["gate"]):
        _bounded(
            lambda command=command: _refused_in_one_line(
                CliRunner().invoke(main, [*command, str(path)]), says
            )
        )
    assert not (tmp_path / "run").exists()


def test_a_refused_value_is_never_rendered_whole() -> None:
    from costtune.core.config import short_repr

    huge = [[list(range(1000))] * 1000] * 10
    assert len(short_repr(huge)) <= 60 and len(short_repr("x" * 10**6)) <= 60
    with pytest.raises(ConfigError) as refused:
        parse_config({**VALID, "num_samples": huge})
    assert len(str(refused.value)) < 200


@pytest.mark.parametrize("allow", [False, True])
@pytest.mark.parametrize(
    "table",
    [
        "aws_access_key_id: AKIAFAKESECRET\n",
        "T4: {on_demand: AKIAFAKESECRET}\n",
        "accelerator,on_demand\nT4,AKIAFAKESECRET\n",
    ],
)
def test_a_price_file_is_never_echoed(tmp_path, table, allow) -> None:
    folder = tmp_path / "prices"
    folder.mkdir()
    name = "p.csv" if table.startswith("accelerator") else "p.yaml"
    (folder / name).write_text(table)
    where = str(folder / name) if allow else name
    if not allow:
        (tmp_path / name).write_text(table)
    path = tmp_path / "c.yaml"
    path.write_text(BASE + f"cost: {{price_file: {where if not allow else '../' + 'prices/' + name}}}\n")
    extra = ["--allow-path", str(folder)] if allow else []
    for command in (["estimate"], ["gate"]):
        result = CliRunner().invoke(main, [*command, str(path), *extra])
        _refused_in_one_line(result, "cost.price")
        assert "AKIAFAKESECRET" not in result.output


@pytest.mark.parametrize(
    ("field", "value", "says"),
    [
        ("max_epochs", True, "max_epochs: must be a number, got true"),
        ("num_samples", False, "num_samples: must be a number, got false"),
        ("seed", True, "seed: must be a number"),
        ("cost", {"prices": {"FOO9000": 1.0}}, "cost.prices.FOO9000: no trial can be billed as 'FOO9000'"),
    ],
)
def test_values_that_would_be_read_as_something_else_are_refused(tmp_path, field, value, says) -> None:
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump({**VALID, field: value}))
    _refused_in_one_line(CliRunner().invoke(main, ["estimate", str(path)]), says)


def test_a_price_for_a_type_ray_labels_or_the_sweep_names_is_accepted(tmp_path) -> None:
    from costtune.core.config import check_price_names

    check_price_names({"cost": {"prices": {"B200": 6.0, "T4": 0.3, "A100-40G": 2.0}}})
    check_price_names({"cost": {"accelerator": "MyGPU", "prices": {"MyGPU": 1.0}}})
    check_price_names({"resources": {"accelerator_type": "MyGPU"}, "cost": {"prices": {"MyGPU": 1.0}}})
    with pytest.raises(ConfigError, match="^cost.prices.MyGPU: no trial can be billed"):
        check_price_names({"cost": {"prices": {"MyGPU": 1.0}}})
    # a shared price file may price every type an organisation uses: not checked this way
    (tmp_path / "p.yaml").write_text("MI300: 3.0\nFOO9000: 1.0\n")
    path = tmp_path / "c.yaml"
    path.write_text(BASE + "cost: {price_file: p.yaml}\n")
    assert load_config(path).cost.prices["FOO9000"] == 1.0


def test_a_curves_table_with_a_word_for_a_number_is_refused_without_quoting_it(tmp_path) -> None:
    path = tmp_path / "c.csv"
    path.write_text("config_id,epoch,val_loss,epoch_seconds,devices\na,1,0.5,1,1\na,2,HUNTER2,1,1\n")
    result = CliRunner().invoke(main, ["replay", str(path)])
    _refused_in_one_line(result, "curves: 'val_loss' must be a number in every row; data row 2")
    assert "HUNTER2" not in result.output


def test_a_run_directory_whose_config_was_damaged_is_refused_naming_that_file(tmp_path) -> None:
    """report and replay of a run whose config.yaml lost a key or holds a bad value: one line
    naming the run's config.yaml and the field, exit 2, the log untouched. (A resume checks Tune's state first; tests/test_resume.py edits a real run's.)"""
    run = tmp_path / "run"
    run.mkdir()
    line = {"event": "result", "trial_id": "t", "epoch": 1, "seconds": 1.0, "metrics": {"loss": 0.5}}
    log = json.dumps({**line, "device_kind": "cpu", "devices": 1.0, "increment": None}) + "\n"
    (run / "ledger.jsonl").write_text(log)
    for text, says in [
        (yaml.safe_dump({**VALID, "name": None}), "name: "),
        (yaml.safe_dump({k: v for k, v in VALID.items() if k != "max_epochs"}), "max_epochs: required key"),
        (yaml.safe_dump({**VALID, "num_samples": -3}), "num_samples: "),
    ]:
        (run / "config.yaml").write_text(text)
        for argv in (["report", str(run)], ["replay", str(run)]):
            result = CliRunner().invoke(main, argv)
            _refused_in_one_line(result, f"run: {run}/config.yaml: {says}")
    assert (run / "ledger.jsonl").read_text() == log


def test_python_api_arguments_are_checked_before_anything_is_created(tmp_path) -> None:
    import costtune

    def train(config):  # pragma: no cover - never runs
        pass

    for callbacks, says in (
        (5, "callbacks: must be a list"),
        ([object()], r"callbacks\[0\]: must be a ray.tune.Callback"),
    ):
        with pytest.raises(ConfigError, match=f"^{says}"):
            costtune.run_sweep(
                train, search_space={"x": {"type": "uniform", "low": 0, "high": 1}}, max_epochs=2, num_samples=1,
                callbacks=callbacks, output=tmp_path / "run",
            )  # fmt: skip
        assert not (tmp_path / "run").exists()
    with pytest.raises(
        ConfigError, match="^load_run: directory must be a run directory's path, got NoneType"
    ):
        costtune.load_run(None)
