"""A live terminal view of a running sweep: trials, spend so far, the best result."""

from __future__ import annotations

import math
import sys
import time
from typing import Any, TextIO

from ray.tune import Callback
from rich.console import Console
from rich.live import Live
from rich.table import Table

from costtune.core.ledger import Ledger
from costtune.report.text import usd


class LiveProgress(Callback):
    """Redraws a small table from the ledger as results arrive (rich ``Live``)."""

    def __init__(self, ledger: Ledger, num_samples: int, console: Console | None = None) -> None:
        self.ledger = ledger
        self.num_samples = num_samples
        self.console = console
        self._live: Live | None = None
        self._drawn_at = 0.0

    def __getstate__(self) -> dict[str, Any]:
        # Tune pickles its callbacks into the experiment state; a console and a live
        # display hold locks and a terminal, so they are rebuilt where they are used.
        return {**self.__dict__, "console": None, "_live": None}

    def __setstate__(self, state: dict[str, Any]) -> None:
        # unpickled by a resume: draw from the ledger the resumed sweep writes to, not from
        # the copy pickled when the sweep began (which would show 0 trials and $0 throughout)
        self.__dict__.update(state)
        self.ledger = self.ledger.shared()

    def _render(self) -> Table:
        ledger = self.ledger
        spec = ledger.spec
        table = Table(title="costtune sweep", show_header=True)
        for name in (
            "trial",
            "state",
            "epochs",
            "cost",
            f"last {spec.metric}",
            f"best {spec.metric}",
        ):
            table.add_column(name, justify="left" if name in ("trial", "state") else "right")
        records = list(ledger.trials.values())
        running = [r for r in records if r.status == "RUNNING"]
        for r in running[-8:]:
            last = r.history[-1][2] if r.history else math.nan
            table.add_row(
                r.trial_id,
                "running",
                str(r.epochs),
                usd(ledger.cost_usd(r)),
                f"{last:.4g}",
                f"{ledger.best_metric(r):.4g}",
            )
        s = ledger.summary()
        best = s.get("best_metric")
        table.caption = (
            f"{len(records)}/{self.num_samples} trials started, {len(records) - len(running)} ended · "
            f"spent {usd(s['total_cost_usd'])} · best {spec.metric} "
            + ("–" if best is None else f"{best:.4g}")
        )
        return table

    def on_trial_result(self, iteration: int, trials: list, trial: Any, result: dict, **info: Any) -> None:
        if self._live is None:
            self._live = Live(self._render(), console=self.console, refresh_per_second=4, transient=True)
            self._live.start()
        elif time.monotonic() - self._drawn_at > 0.25:
            self._live.update(self._render())
        else:
            return
        self._drawn_at = time.monotonic()

    def on_experiment_end(self, trials: list, **info: Any) -> None:
        if self._live is not None:
            self._live.stop()
            self._live = None


class LineProgress(Callback):
    """Progress for a log (CI, batch jobs, ``nohup``, a pipe): one line per trial end, and a
    sweep line at most every ``every_s`` seconds while results arrive; written as they happen."""

    def __init__(
        self, ledger: Ledger, num_samples: int, stream: TextIO | None = None, every_s: float = 30.0
    ) -> None:
        self.ledger = ledger
        self.num_samples = num_samples
        self.stream = stream
        self.every_s = every_s
        self._said_at = time.monotonic()

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "stream": None}  # a file handle does not survive a resume

    def __setstate__(self, state: dict[str, Any]) -> None:
        # unpickled by a resume: count from the ledger the resumed sweep writes to, not from
        # the copy pickled when the sweep began (which would say 0 trials ended, $0 spent)
        self.__dict__.update(state)
        self.ledger = self.ledger.shared()
        self._said_at = time.monotonic()  # the pickling process's clock means nothing here

    def _say(self, line: str) -> None:
        stream = self.stream or sys.stderr
        print(f"costtune: {line}", file=stream, flush=True)
        self._said_at = time.monotonic()

    def _sweep(self) -> str:
        s = self.ledger.summary()
        records = self.ledger.trials.values()
        ended = sum(1 for r in records if r.status != "RUNNING")
        best = s.get("best_metric")
        best_text = "–" if best is None else f"{best:.4g}"
        return (
            f"{ended}/{self.num_samples} trials ended, {len(records) - ended} running, "
            f"spent {usd(s['total_cost_usd'])}, best {self.ledger.spec.metric} {best_text}"
        )

    def on_trial_result(self, iteration: int, trials: list, trial: Any, result: dict, **info: Any) -> None:
        if time.monotonic() - self._said_at >= self.every_s:
            self._say(f"sweep: {self._sweep()}")

    def _ended(self, trial: Any) -> None:
        record = self.ledger.trials.get(trial.trial_id)
        if record is None:
            return
        self._say(
            f"trial {record.trial_id} {record.stop_reason or record.status.lower()} after "
            f"{record.epochs} epochs, {usd(self.ledger.cost_usd(record))} · {self._sweep()}"
        )

    def on_trial_complete(self, iteration: int, trials: list, trial: Any, **info: Any) -> None:
        self._ended(trial)

    def on_trial_error(self, iteration: int, trials: list, trial: Any, **info: Any) -> None:
        self._ended(trial)


def progress_callback(ledger: Ledger, num_samples: int) -> Callback:
    """A live table on a terminal, one line per event otherwise."""
    if Console(stderr=False).is_terminal:
        return LiveProgress(ledger, num_samples)
    return LineProgress(ledger, num_samples)
