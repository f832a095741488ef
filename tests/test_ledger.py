from __future__ import annotations

import json
import math

import pandas as pd
import pytest

from costtune.core.cost import CostModel
from costtune.core.ledger import (
    LEDGER_FILE,
    MARK_FILE,
    Ledger,
    LedgerMark,
    LedgerSpec,
    LedgerWarning,
    check_intact,
    ledger_digest,
    repair_tail,
)
from costtune.errors import ConfigError
from costtune.results import load_run

SPEC = LedgerSpec(
    metric="val_loss", mode="min", cost_model=CostModel(), business_value_usd=100.0, max_epochs=4
)


def _run_two_trials(ledger: Ledger) -> None:
    # trial a: 2 GPUs, 1 h per epoch, stopped after 2 epochs; trial b: 1 GPU, ran 4 epochs
    for epoch, loss in [(1, 0.9), (2, 0.7)]:
        ledger.record_result(
            "a",
            epoch=epoch,
            seconds=3600.0 * epoch,
            metrics={"val_loss": loss},
            config={"lr": 0.1},
            device_kind="gpu",
            devices=2,
        )
    ledger.end("a", status="TERMINATED", stop_reason="rung_pruned")
    for epoch, loss in [(1, 0.8), (2, 0.5), (3, 0.4), (4, 0.45)]:
        ledger.record_result(
            "b",
            epoch=epoch,
            seconds=1800.0 * epoch,
            metrics={"val_loss": loss},
            config={"lr": 0.01},
            device_kind="gpu",
            devices=1,
        )
    ledger.end("b", status="TERMINATED", stop_reason="completed")


def test_ledger_rows_meter_cost_and_roi() -> None:
    ledger = Ledger(SPEC)
    _run_two_trials(ledger)
    frame = ledger.to_frame().set_index("trial_id")
    assert frame.loc["a", "gpu_hours"] == pytest.approx(4.0)
    assert frame.loc["a", "cost_usd"] == pytest.approx(10.0)
    assert frame.loc["b", "gpu_hours"] == pytest.approx(2.0)
    assert frame.loc["b", "best_val_loss"] == pytest.approx(0.4)
    assert frame.loc["b", "last_val_loss"] == pytest.approx(0.45)
    # ROI = what each trial added to the sweep's best, from the baseline (the median first
    # report: 0.9, 0.8 → 0.85): a took it to 0.7 (0.15 × $100 / $10); b to 0.5, then 0.4
    # (0.45 - 0.15 = 0.3 × $100 / $5)
    assert frame.loc["a", "roi"] == pytest.approx(1.5)
    assert frame.loc["b", "roi"] == pytest.approx(6.0)
    assert frame.loc["a", "stop_reason"] == "rung_pruned"
    assert frame.loc["b", "hp.lr"] == 0.01


def test_ledger_summary_counts_savings_against_full_training() -> None:
    ledger = Ledger(SPEC)
    _run_two_trials(ledger)
    s = ledger.summary()
    assert s["total_cost_usd"] == pytest.approx(15.0)
    assert s["best_trial_id"] == "b" and s["best_metric"] == pytest.approx(0.4)
    # a: $5 per epoch × 4 epochs; b ran all 4 epochs for $5
    assert s["cost_if_all_ran_full_usd"] == pytest.approx(25.0)
    assert s["saved_fraction"] == pytest.approx(0.4)
    assert s["stop_reasons"] == {"rung_pruned": 1, "completed": 1}
    assert s["best_trial_metrics"]["epoch"] == 3.0


def test_the_saving_extrapolates_further_epochs_not_the_start_up() -> None:
    """A trial's first epoch carries its worker's start-up: the epochs it did not run are
    charged at what one more epoch cost it, and a trial with one report at the lower of its
    own rate and the sweep's median rate, so a stopped trial's start-up is not multiplied by
    max_epochs."""
    spec = LedgerSpec(metric="loss", mode="min", cost_model=CostModel(prices={"cpu": 3600.0}), max_epochs=10)
    ledger = Ledger(spec)  # $1 per second

    def run(trial_id: str, start_up: float, per_epoch: float, epochs: int) -> None:
        for epoch in range(1, epochs + 1):
            ledger.record_result(
                trial_id, epoch=epoch, seconds=start_up + per_epoch * epoch, metrics={"loss": 1 / epoch}
            )

    run("full", 30.0, 1.0, 10)  # ran max_epochs: charged what it ran, 40
    run("pruned", 30.0, 2.0, 3)  # 36 spent, 7 epochs more at 2: 50
    run("first", 30.0, 1.0, 1)  # 31 spent, 9 more at min(31, median of 1 and 2): 31 + 13.5
    run("cheap", 0.0, 0.5, 1)  # 0.5 spent, 9 more at min(0.5, 1.5): 5
    full = ledger.costs_if_ran_full_usd()
    assert full == pytest.approx({"full": 40.0, "pruned": 50.0, "first": 44.5, "cheap": 5.0})
    s = ledger.summary()
    assert s["cost_if_all_ran_full_usd"] == pytest.approx(139.5)
    assert s["saved_fraction"] == pytest.approx(1 - (40 + 36 + 31 + 0.5) / 139.5)
    # the report's counterfactual curve ends at the same dollars
    from costtune.core.analysis import best_so_far_had_all_run_full

    assert best_so_far_had_all_run_full(ledger)[-1].usd == pytest.approx(139.5)


def test_ledger_baseline_metric_is_the_roi_reference() -> None:
    spec = LedgerSpec(metric="acc", mode="max", cost_model=CostModel(), baseline_metric=0.5)
    ledger = Ledger(spec)
    ledger.record_result("t", epoch=1, seconds=3600, metrics={"acc": 0.9}, device_kind="gpu", devices=1)
    assert ledger.trial_roi(ledger.trials["t"]) == pytest.approx(0.4 / 2.5)


def test_ledger_resume_continues_the_log(tmp_path) -> None:
    first = Ledger(SPEC, tmp_path)
    first.record_result(
        "a",
        epoch=1,
        seconds=3600,
        metrics={"val_loss": 0.9},
        config={"lr": 0.1},
        device_kind="gpu",
        devices=2,
    )
    # the driver dies; a new ledger on the same directory continues, it does not start over
    resumed = Ledger(SPEC, tmp_path)
    assert resumed.trials["a"].epochs == 1
    resumed.record_result("a", epoch=2, seconds=7200, metrics={"val_loss": 0.7}, device_kind="gpu", devices=2)
    again = Ledger(SPEC, tmp_path)
    row = again.to_frame().iloc[0]
    assert row["epochs"] == 2
    assert row["cost_usd"] == pytest.approx(10.0)  # charged once, from cumulative metered time
    assert row["hp.lr"] == 0.1
    assert len((tmp_path / LEDGER_FILE).read_text().splitlines()) == 2


def test_ledger_skips_a_torn_last_line(tmp_path) -> None:
    ledger = Ledger(SPEC, tmp_path)
    ledger.record_result("a", epoch=1, seconds=10, metrics={"val_loss": 0.9})
    with (tmp_path / LEDGER_FILE).open("a") as fh:
        fh.write('{"event": "result", "trial_id": "a", "ep')  # killed mid-write
    assert Ledger(SPEC, tmp_path).trials["a"].epochs == 1


def test_a_torn_last_line_is_cut_and_kept_aside_before_anything_appends(tmp_path) -> None:
    """Without the repair, the next line glues onto the fragment and is lost with it."""
    ledger = Ledger(SPEC, tmp_path)
    ledger.record_result("a", epoch=1, seconds=10, metrics={"val_loss": 0.9}, config={"lr": 0.1})
    torn = '{"event": "result", "trial_id": "a", "ep'
    with (tmp_path / LEDGER_FILE).open("a") as fh:
        fh.write(torn)  # killed mid-write
    glued = Ledger(SPEC, tmp_path)
    glued.record_result("b", epoch=1, seconds=10, metrics={"val_loss": 0.8}, config={"lr": 0.2})
    assert "b" not in Ledger(SPEC, tmp_path).trials  # what happened before: b's first epoch lost
    assert Ledger(SPEC, tmp_path).unreadable_lines == 1

    (tmp_path / LEDGER_FILE).write_text(
        (tmp_path / LEDGER_FILE).read_text().splitlines(keepends=True)[0] + torn
    )
    with pytest.warns(LedgerWarning, match="cut a torn last line"):
        assert repair_tail(tmp_path) == len(torn)
    assert (tmp_path / f"{LEDGER_FILE}.corrupt").read_text() == torn + "\n"
    Ledger(SPEC, tmp_path).record_result(
        "b", epoch=1, seconds=10, metrics={"val_loss": 0.8}, config={"lr": 0.2}
    )
    after = Ledger(SPEC, tmp_path)
    assert after.unreadable_lines == 0 and after.trials["b"].epochs == 1 and after.trials["a"].epochs == 1
    assert repair_tail(tmp_path) == 0  # a whole log is left alone


def test_report_says_how_many_ledger_lines_it_could_not_read(tmp_path) -> None:
    from click.testing import CliRunner

    from costtune.cli import main

    ledger = Ledger(SPEC, tmp_path)
    ledger.record_result("a", epoch=1, seconds=10, metrics={"val_loss": 0.9}, config={"lr": 0.1})
    with (tmp_path / LEDGER_FILE).open("a") as fh:
        fh.write("garbage\n[1, 2]\n")
    ledger.record_result("a", epoch=2, seconds=20, metrics={"val_loss": 0.8}, config={"lr": 0.1})
    (tmp_path / "config.yaml").write_text(
        "name: t\nmax_epochs: 8\nnum_samples: 1\nsearch_space: {lr: {type: uniform, low: 0.0, high: 1.0}}\n"
    )
    result = CliRunner().invoke(main, ["report", str(tmp_path), "--format", "json"])
    assert result.exit_code == 0, result.output
    assert "costtune: warning: 2 unreadable line(s)" in result.stderr
    assert Ledger(SPEC, tmp_path).trials["a"].epochs == 2


def test_ledger_nan_metric_is_kept_as_missing(tmp_path) -> None:
    ledger = Ledger(SPEC, tmp_path)
    ledger.record_result("a", epoch=1, seconds=10, metrics={"val_loss": math.nan})
    ledger.record_result("a", epoch=2, seconds=20, metrics={"val_loss": 0.5})
    event = json.loads((tmp_path / LEDGER_FILE).read_text().splitlines()[0])
    assert event["metrics"]["val_loss"] is None
    assert Ledger(SPEC, tmp_path).best_metric(Ledger(SPEC, tmp_path).trials["a"]) == 0.5


def test_write_tables_round_trips_csv_and_parquet(tmp_path) -> None:
    ledger = Ledger(SPEC, tmp_path)
    _run_two_trials(ledger)
    summary = ledger.write_tables(tmp_path, wall_seconds=1.5)
    csv = pd.read_csv(tmp_path / "trials.csv")
    parquet = pd.read_parquet(tmp_path / "trials.parquet")
    for frame in (csv, parquet):
        assert list(frame["trial_id"]) == ["a", "b"]
        assert frame["cost_usd"].sum() == pytest.approx(15.0)
        for column in (
            "status",
            "stop_reason",
            "epochs",
            "gpu_hours",
            "cost_usd",
            "best_val_loss",
            "last_val_loss",
            "roi",
            "hp.lr",
        ):
            assert column in frame.columns
    on_disk = json.loads((tmp_path / "summary.json").read_text())
    assert on_disk["wall_seconds"] == 1.5 == summary["wall_seconds"]
    assert on_disk["saved_fraction"] == pytest.approx(0.4)
    assert not list(tmp_path.glob(".*.tmp"))


def test_a_rerun_from_a_checkpoint_charges_the_lost_work_once_and_the_rerun_again() -> None:
    ledger = Ledger(SPEC)
    # epochs 1-3 at 100 s each; the node dies; the trial restarts from its epoch-1 checkpoint
    for epoch, seconds in [(1, 100), (2, 200), (3, 300), (2, 200), (3, 300), (4, 400)]:
        ledger.record_result("a", epoch=epoch, seconds=seconds, metrics={"val_loss": 1 / epoch})
    record = ledger.trials["a"]
    assert record.seconds == 600  # 4 epochs run plus the 2 lost and re-run
    assert record.epochs == 4


def test_per_epoch_increments_beat_a_jumping_cumulative_field() -> None:
    ledger = Ledger(SPEC)
    # a PBT clone restored a donor's checkpoint: its cumulative time jumps from 20 to 500
    for epoch, total, step in [(1, 10, 10), (2, 20, 10), (7, 500, 10)]:
        ledger.record_result("a", epoch=epoch, seconds=total, metrics={}, increment_seconds=step)
    assert ledger.trials["a"].seconds == 30


def test_a_trial_that_never_reported_gets_a_row_without_cost() -> None:
    ledger = Ledger(SPEC)
    ledger.end("z", status="TERMINATED", stop_reason="sweep_budget", config={"lr": 0.5})
    row = ledger.to_frame().iloc[0]
    assert (row["stop_reason"], row["cost_usd"], row["hp.lr"]) == ("sweep_budget", 0.0, 0.5)


def test_extra_seconds_charge_a_hung_trial_until_it_was_ended(tmp_path) -> None:
    ledger = Ledger(SPEC, tmp_path)
    ledger.record_result("a", epoch=1, seconds=3600, metrics={"val_loss": 0.5}, device_kind="gpu", devices=1)
    ledger.end("a", status="TERMINATED", stop_reason="trial_time_cap", extra_seconds=3600)
    assert Ledger(SPEC, tmp_path).cost_usd(Ledger(SPEC, tmp_path).trials["a"]) == pytest.approx(5.0)


def test_roi_never_ranks_a_bad_start_that_stayed_bad_first() -> None:
    """The report's findings: ROI over a trial's own first report ranked the worst trial
    (awful start, pruned cheaply at a poor loss) first; ROI over the sweep's baseline per
    trial dollar ranked a cheap first-rung trial a little under the median above the best one.
    Credited with what it added to the sweep's best, the best trial ranks first."""
    spec = LedgerSpec(metric="val_loss", mode="min", cost_model=CostModel(), baseline_epoch=5)
    ledger = Ledger(spec)

    def trial(trial_id: str, losses: list[float]) -> None:
        for epoch, loss in enumerate(losses, start=1):
            ledger.record_result(
                trial_id, epoch=epoch, seconds=60.0 * epoch, metrics={"val_loss": loss},
                device_kind="gpu", devices=1,
            )  # fmt: skip

    trial("bad", [9.0, 5.0, 3.0, 2.0, 1.68])  # pruned at the first rung (epoch 5)
    for i, start in enumerate([2.3, 2.2, 2.4]):
        trial(f"mid{i}", [start, 1.0, 0.6, 0.4, 0.3])
    trial("cheap", [2.3, 1.0, 0.6, 0.35, 0.29])  # a little under the median, pruned at 5 epochs
    trial("best", [2.3, 0.9, 0.5, 0.3, 0.2, *[0.2 - 0.01 * k for k in range(1, 16)]])  # 20 epochs
    assert ledger.sweep_baseline() == pytest.approx(0.3)  # median at epoch 5
    frame = ledger.to_frame().sort_values("roi", ascending=False)
    ranks = list(frame["trial_id"])
    assert ranks[0] == "best"
    by_id = frame.set_index("trial_id")["roi"]
    assert by_id["bad"] == 0 and by_id["mid0"] == 0 and by_id["cheap"] > 0
    # the credits add up to how far the sweep's best got past the baseline
    credits = ledger.contributions()
    assert sum(credits.values()) == pytest.approx(0.3 - 0.05)
    assert credits["cheap"] == pytest.approx(0.01) and credits["best"] == pytest.approx(0.24)
    fixed = Ledger(LedgerSpec(metric="val_loss", mode="min", cost_model=CostModel(), baseline_metric=3.0))
    assert fixed.sweep_baseline() == 3.0


def test_a_stretch_held_is_billed_whole_once() -> None:
    """What a trial held but its epochs did not time is charged once, never negatively, and
    not the part about to be charged as hung time."""
    ledger = Ledger(SPEC)
    ledger.record_result("t", epoch=1, seconds=10.0, metrics={"val_loss": 0.5}, device_kind="gpu", devices=1)
    ledger.record_result("t", epoch=2, seconds=20.0, metrics={"val_loss": 0.4}, device_kind="gpu", devices=1)
    # the stretch began with 10 s charged and held 13 s; 10 s were timed since: 3 s unmetered,
    # of which 1 s is hung time charged at the trial's end
    assert ledger.charge_held("t", held_s=13.0, charged_then=10.0, pending_s=1.0) == pytest.approx(2.0)
    assert ledger.trials["t"].seconds == pytest.approx(22.0)
    assert ledger.charge_held("t", held_s=5.0, charged_then=10.0) == 0.0  # less than timed: nothing
    assert ledger.charge_held("nobody", held_s=5.0, charged_then=0.0) == 0.0
    assert ledger.trials["t"].seconds == pytest.approx(22.0)


def test_a_log_cut_short_edited_or_swapped_since_the_summary_is_refused_and_one_that_grew_is_not(
    tmp_path,
) -> None:
    """summary.json records the log it was written from; the log only grows, so a log that no
    longer begins with those bytes lost what the tables hold."""
    ledger = Ledger(SPEC, tmp_path)
    _run_two_trials(ledger)
    summary = ledger.write_tables(tmp_path)
    path = tmp_path / LEDGER_FILE
    recorded = path.read_bytes()
    assert summary["ledger"] == ledger_digest(path) and summary["ledger"]["bytes"] == len(recorded)
    check_intact(tmp_path)

    # a resumed sweep appends; a driver killed mid-line leaves a fragment: both still begin alike
    Ledger(SPEC, tmp_path).record_result("c", epoch=1, seconds=60.0, metrics={"val_loss": 0.3})
    with path.open("a") as fh:
        fh.write('{"event": "result", "trial_id": "c", "ep')
    check_intact(tmp_path)

    grown = path.read_bytes()
    for damaged, says in (
        (recorded[: len(recorded) // 2], "holds"),  # cut short
        (b"", "holds 0 bytes"),  # emptied
        (recorded.replace(b'"b"', b'"x"', 1) + grown[len(recorded) :], "differs"),  # edited
        (grown.replace(b"0.7", b"0.1", 1), "differs"),  # an epoch's value changed
    ):
        path.write_bytes(damaged)
        with pytest.raises(
            ConfigError, match=f"^ledger: .*{LEDGER_FILE} {says}.*cut short, edited or replaced"
        ):
            check_intact(tmp_path)
    # what a ledger computes from a log is the same either way: the check is what tells
    path.write_bytes(recorded[: len(recorded) // 2])
    assert len(Ledger(SPEC, tmp_path).trials) < summary["trials"]

    # a summary of an older costtune (no record): its trial count
    old = {k: v for k, v in summary.items() if k != "ledger"}
    (tmp_path / "summary.json").write_text(json.dumps(old))
    path.write_bytes(recorded)
    check_intact(tmp_path)
    path.write_bytes(b"".join(recorded.splitlines(keepends=True)[:2]))  # trial a's lines only
    with pytest.raises(ConfigError, match=r"names 1 trial\(s\) where the run's summary.json counted 2"):
        check_intact(tmp_path)
    # an unreadable summary with nothing else to check the log against: refused, not summed
    (tmp_path / "summary.json").write_text("{torn")
    with pytest.raises(ConfigError, match=r"cannot be checked: summary.json cannot be read"):
        check_intact(tmp_path)
    # no record at all (a run killed before its first save): read, with a warning that says so
    (tmp_path / "summary.json").unlink()
    with pytest.warns(LedgerWarning, match="could not be checked"):
        check_intact(tmp_path)


def test_a_run_killed_before_its_first_summary_is_checked_against_its_last_saved_mark(tmp_path) -> None:
    """Before: with no summary.json (a sweep killed before it first ended) nothing recorded what
    the log held, and a log cut short was read as it was. The mark kept with Ray's state is that
    record; it reads on from where it stopped, so it equals the digest of the whole lines."""
    path = tmp_path / LEDGER_FILE
    mark = LedgerMark()
    assert mark.update(path) == ledger_digest(path) == {"bytes": 0, "sha256": ledger_digest(path)["sha256"]}
    ledger = Ledger(SPEC, tmp_path)
    ledger.record_result("a", epoch=1, seconds=60.0, metrics={"val_loss": 0.9}, config={"lr": 0.1})
    assert mark.update(path) == ledger_digest(path)
    _run_two_trials(ledger)
    with path.open("a") as fh:
        fh.write('{"event": "result", "trial_id": "c", "ep')  # a line being written: not recorded yet
    record = mark.update(path)
    assert record == ledger_digest(path) and record["bytes"] < path.stat().st_size
    saved = tmp_path / ".ray_state" / MARK_FILE
    saved.parent.mkdir()
    saved.write_text(json.dumps(record))
    assert not (tmp_path / "summary.json").exists()
    check_intact(tmp_path)  # the log begins with what was recorded

    whole = path.read_bytes()
    path.write_bytes(whole[: record["bytes"] // 2])
    with pytest.raises(
        ConfigError, match=r"holds .* where the run's last saved state \(\.ray_state/ledger-mark"
    ):
        check_intact(tmp_path)
    # a log cut under a running mark: the mark keeps the record of what it read
    assert mark.update(path) == record
    path.write_bytes(whole.replace(b"0.9", b"0.1", 1))
    with pytest.raises(ConfigError, match="differs where the run's last saved state"):
        check_intact(tmp_path)
    # with a summary too, each record is checked: the mark is the newer and the longer
    path.write_bytes(whole[: whole.rfind(b"\n") + 1])
    summary = Ledger(SPEC, tmp_path).write_tables(tmp_path)
    assert summary["ledger"] == record
    check_intact(tmp_path)
    saved.write_text(json.dumps({**record, "bytes": record["bytes"] + 1}))
    with pytest.raises(ConfigError, match="last saved state"):
        check_intact(tmp_path)
    saved.write_text("{torn")  # an unreadable mark says nothing: the summary's record stands
    check_intact(tmp_path)


def test_report_compare_and_load_run_refuse_a_log_cut_short_and_leave_the_run_as_it_was(tmp_path) -> None:
    from click.testing import CliRunner

    from costtune.cli import main

    ledger = Ledger(SPEC, tmp_path)
    _run_two_trials(ledger)
    ledger.write_tables(tmp_path)
    (tmp_path / "config.yaml").write_text(
        "name: t\nmax_epochs: 4\nnum_samples: 2\nsearch_space: {lr: {type: uniform, low: 0.0, high: 1.0}}\n"
    )
    path = tmp_path / LEDGER_FILE
    path.write_bytes(path.read_bytes()[:100])
    before = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
    for args in (["report", str(tmp_path)], ["compare", str(tmp_path), str(tmp_path)]):
        done = CliRunner().invoke(main, args)
        assert done.exit_code == 2, done.output
        assert done.output.startswith("costtune: error: ledger: ") and done.output.count("\n") == 1
    with pytest.raises(ConfigError, match="cut short"):
        load_run(tmp_path)
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir()} == before


@pytest.mark.parametrize("damage", ["summary deleted, mark unreadable", "summary garbage, no mark"])
def test_an_edited_ledger_whose_records_were_destroyed_is_refused_not_summed(tmp_path, damage) -> None:
    from click.testing import CliRunner

    from costtune.cli import main

    ledger = Ledger(SPEC, tmp_path)
    _run_two_trials(ledger)
    summary = ledger.write_tables(tmp_path)
    (tmp_path / "config.yaml").write_text(
        "name: t\nmax_epochs: 4\nnum_samples: 2\nsearch_space: {lr: {type: uniform, low: 0.0, high: 1.0}}\n"
    )
    (tmp_path / ".ray_state").mkdir()
    (tmp_path / ".ray_state" / MARK_FILE).write_text(json.dumps(summary["ledger"]))
    path = tmp_path / LEDGER_FILE
    edited = path.read_bytes().replace(b'"seconds": 7200.0', b'"seconds": 10800.0')  # +49% of a's cost
    assert edited != path.read_bytes()
    path.write_bytes(edited)
    if damage.startswith("summary deleted"):
        (tmp_path / "summary.json").unlink()
        (tmp_path / ".ray_state" / MARK_FILE).write_bytes(b"\x00\xff garbage")
    else:
        (tmp_path / "summary.json").write_text("not json at all")
        (tmp_path / ".ray_state" / MARK_FILE).unlink()
    for args in (["report", str(tmp_path)], ["compare", str(tmp_path), str(tmp_path)]):
        done = CliRunner().invoke(main, args)
        assert done.exit_code == 2, done.output
        assert done.output.startswith("costtune: error: ledger: ") and done.output.count("\n") == 1
        assert "cannot be checked" in done.output
    with pytest.raises(ConfigError, match="cannot be checked"):
        load_run(tmp_path)
