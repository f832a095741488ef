"""Reading a finished (or interrupted) run back from its directory alone — no Ray needed."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from costtune.core.config import SweepConfig, drop_removed, parse_config, read_yaml
from costtune.core.ledger import LEDGER_FILE, Ledger, LedgerSpec, check_intact
from costtune.errors import ConfigError


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


def load_run_config(directory: str | Path, for_resume: bool = False) -> SweepConfig:
    """The validated config a run directory was written with. Options this version no longer
    has are read past (:func:`costtune.core.config.drop_removed`), for the run's reports; a resume
    (``for_resume``) of a run that set one is refused in one line: it cannot decide as it did."""
    directory = Path(directory)
    # a sweep its time budget (or Ctrl-C) ended before any trial reported has tables and no log
    written = (directory / LEDGER_FILE).is_file() or (directory / "summary.json").is_file()
    if not written or not (directory / "config.yaml").is_file():
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
    if for_resume:
        _, changed = drop_removed(raw, saved=True)
        if changed:
            raise ConfigError(
                f"config.yaml: {changed[0]} is set, an option this version of costtune no longer has; "
                "finish the sweep with the version that started it"
            )
    try:
        return parse_config(raw, saved=True)
    except ConfigError as exc:  # which file: a run's config.yaml, not the one a user passed
        raise ConfigError(f"run: {directory}/config.yaml: {exc}") from None


def load_run(directory: str | Path) -> Run:
    """A run directory written by ``run_sweep``: its ``config.yaml`` and ``ledger.jsonl``."""
    config = load_run_config(directory)
    check_intact(directory)
    return Run(directory=Path(directory), config=config, ledger=Ledger(ledger_spec(config), directory))
