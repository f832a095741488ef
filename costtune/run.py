"""Reading a finished (or interrupted) run back from its directory alone — no Ray needed."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from costtune.config import SweepConfig, parse_config, read_yaml
from costtune.errors import ConfigError
from costtune.ledger import LEDGER_FILE, Ledger, LedgerSpec, check_intact


@dataclass(frozen=True)
class Run:
    directory: Path
    config: SweepConfig
    ledger: Ledger

    @property
    def name(self) -> str:
        return self.directory.name


def ledger_spec(config: SweepConfig) -> LedgerSpec:
    return LedgerSpec(
        metric=config.metric,
        mode=config.mode,
        cost_model=config.cost.cost_model(),
        business_value_usd=config.cost.business_value_usd,
        baseline_metric=config.cost.baseline_metric,
        max_epochs=config.max_epochs,
        # the first rung: where every trial has had the same chance to show what it is
        baseline_epoch=min(config.scheduler.grace_epochs, config.max_epochs),
    )


def load_run_config(directory: str | Path) -> SweepConfig:
    """The validated config a run directory was written with."""
    directory = Path(directory)
    if not (directory / LEDGER_FILE).is_file() or not (directory / "config.yaml").is_file():
        raise ConfigError(
            f"run: {directory} is not a costtune run directory (no {LEDGER_FILE} / config.yaml)"
        )
    try:
        text = (directory / "config.yaml").read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"run: cannot read {directory}/config.yaml: {exc}") from None
    raw = read_yaml(text, f"run: {directory}/config.yaml")
    if not isinstance(raw, dict):
        raise ConfigError(f"run: {directory}/config.yaml is not a YAML mapping of keys")
    return parse_config(raw)


def load_run(directory: str | Path) -> Run:
    """A run directory written by ``run_sweep``: its ``config.yaml`` and ``ledger.jsonl``."""
    config = load_run_config(directory)
    check_intact(directory)
    return Run(directory=Path(directory), config=config, ledger=Ledger(ledger_spec(config), directory))
