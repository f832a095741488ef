"""The benchmark scripts run (CPU smoke sizes); their figures belong in benchmarks/RESULTS.md."""

from __future__ import annotations

import csv
import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

REPO = Path(__file__).resolve().parent.parent


@pytest.mark.ray
def test_gpu_sweep_benchmark_smoke_on_cpu(tmp_path) -> None:
    """The script that measured the watchdog on the H200, at CPU smoke size: the shared part's
    two trials through a real sweep, and its per-trial rows (no NVML here, so no figures)."""
    import json

    args = ["--gpus", "0", "--parts", "shared", "--idle-minutes", "0.02", "--out", str(tmp_path)]
    run = subprocess.run(
        [sys.executable, "benchmarks/gpu_sweep.py", *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, run.stderr[-2000:]
    shared = json.loads((tmp_path / "gpu_sweep.json").read_text())["shared"]
    assert shared["shared"] is True and set(shared["trials"]) == {"idle", "busy"}
    assert all(t["stop_reason"] == "completed" and t["epochs"] >= 5 for t in shared["trials"].values())


def test_gpu_amp_benchmark_smoke_on_cpu(tmp_path) -> None:
    out = tmp_path / "amp.csv"
    run = subprocess.run(
        [sys.executable, "benchmarks/gpu_amp.py", "--steps", "1", "--out", str(out)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, run.stderr[-2000:]
    rows = list(csv.DictReader(out.open()))
    variants = {(r["model"], r["precision"], r["variant"]) for r in rows}
    for model in ("transformer", "cnn"):
        for precision in ("fp32", "bf16", "fp16"):
            assert (model, precision, "plain") in variants
            assert (model, precision, "checkpointing") in variants
    by = {(r["model"], r["precision"], r["variant"]): r for r in rows}
    for model in ("transformer", "cnn"):
        plain = float(by[(model, "fp32", "plain")]["activation_mb"])
        ckpt = float(by[(model, "fp32", "checkpointing")]["activation_mb"])
        assert ckpt < plain  # checkpointing saves activations
        assert float(by[(model, "fp32", "plain")]["samples_per_s"]) > 0
    accumulated = [r for r in rows if "accumulated" in r["variant"]]
    assert len(accumulated) == 2 and all("losses agree within" in r["note"] for r in accumulated)
    assert "samples/s" in run.stdout


def test_paired_statistics_agree_with_scipy() -> None:
    from scipy import stats

    sys.path.insert(0, str(REPO / "benchmarks"))
    from paired import binomial_two_sided, geo_mean, mcnemar, sign_test

    for k, n in [(0, 0), (9, 10), (1, 10), (5, 10), (3, 17), (40, 50)]:
        expected = 1.0 if n == 0 else stats.binomtest(k, n).pvalue
        assert math.isclose(binomial_two_sided(k, n), expected, rel_tol=1e-9)
    inf = math.inf
    wins, losses, p = sign_test([1, 2, 3, inf, inf, 1], [2, 2, 4, inf, 1, 3])
    assert (wins, losses) == (3, 1) and math.isclose(p, stats.binomtest(3, 4).pvalue)
    b, c, p = mcnemar([True] * 8 + [False, True], [False] * 8 + [True, True])
    assert (b, c) == (8, 1) and math.isclose(p, stats.binomtest(8, 9).pvalue)
    assert math.isclose(geo_mean([1, 4, 16]), 4.0) and math.isnan(geo_mean([]))


def test_bootstrap_interval_covers_the_true_median_of_task_medians() -> None:
    import statistics

    import numpy as np

    sys.path.insert(0, str(REPO / "benchmarks"))
    from paired import bootstrap_interval

    # four "tasks" of 15 "seeds" each, log-normal costs around known task medians: the table's
    # figure is the median over tasks of each task's median, so the truth is the median of those
    true_medians = [2.0, 5.0, 8.0, 20.0]
    truth = statistics.median(true_medians)
    rng = np.random.default_rng(7)
    covered, widths = 0, []
    for _ in range(100):
        groups = [list(m * np.exp(rng.normal(0.0, 0.5, 15))) for m in true_medians]
        low, high = bootstrap_interval(groups, statistics.median, draws=400)
        assert low <= statistics.median(statistics.median(g) for g in groups) <= high
        covered += low <= truth <= high
        widths.append(high - low)
    assert covered >= 80  # a 95% interval; 100 tries
    tight = [list(m * np.exp(rng.normal(0.0, 0.05, 15))) for m in true_medians]
    low, high = bootstrap_interval(tight, statistics.median, draws=400)
    assert high - low < min(widths)  # less spread between seeds, a narrower interval
    assert bootstrap_interval(tight, statistics.median, draws=400) == (low, high)  # seeded
    assert bootstrap_interval([[3.0, 3.0], [5.0]], statistics.median) == (4.0, 4.0)
    with pytest.raises(ValueError, match="at least one value in every group"):
        bootstrap_interval([[1.0], []], statistics.median)


SHARED_LCBENCH = REPO.parent / "shared" / "benchmarks" / "yahpo_lcbench"


def test_optuna_hyperband_peer_gives_the_same_run_for_the_same_seed() -> None:
    """HyperbandPruner brackets trials by a hash of the study's name: the peer names its study,
    so that one seed is one run (Optuna's docs: specify study_name to be reproducible)."""
    pytest.importorskip("optuna")
    sys.path.insert(0, str(REPO / "benchmarks"))
    import numpy as np
    import optuna
    from peers import run_peer

    from costtune.core.curves import Curve

    def evaluate(config: dict) -> Curve:
        x = config["x"]
        losses = (x - 0.3) ** 2 + 1.0 / np.arange(1, 53) * (1 + x)
        return Curve(f"x{x}", {"x": x}, losses, np.full(52, 10.0), 1.0)

    def run(seed: int) -> list:
        pruner = optuna.pruners.HyperbandPruner(min_resource=5, max_resource=52, reduction_factor=5)
        return run_peer(
            "optuna-tpe-hb-5-52-5",
            evaluate,
            seed,
            budget=3.0,
            usd_per_hour=2.5,
            optuna_pruner=pruner,
            suggest=lambda trial: {"x": trial.suggest_float("x", 0.0, 1.0)},
        )

    assert run(3) == run(3)


def _slow_starters(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    """``benchmarks/slow_starters.py ARGV`` run in this process (its main, as the script runs
    it): the exit status, stdout and stderr."""
    sys.path.insert(0, str(REPO / "benchmarks"))
    import slow_starters

    capsys.readouterr()
    try:
        slow_starters.main(list(argv))
        code = 0
    except SystemExit as exit_:
        code = int(exit_.code or 0)
    out, err = capsys.readouterr()
    return code, out, err


def test_slow_starters_help_names_every_setting_and_a_bad_one_is_refused(capsys) -> None:
    """`slow_starters.py --help` lists its settings (one named with a % once broke it); an
    unknown setting is one line and exit 2, before anything runs."""
    code, shown, err = _slow_starters(capsys, "--help")
    assert code == 0, err
    assert "stall 2%" in " ".join(shown.split()) and "default + noise-aware" in " ".join(shown.split())
    code, _, err = _slow_starters(capsys, "--settings", "nope")
    assert code == 2 and "nope" in err
    code, _, err = _slow_starters(capsys, "--first-table", "-1")
    assert code == 2 and "--first-table" in err


def test_slow_starters_pairs_runs_with_the_first_setting() -> None:
    """The table's paired column counts, run by run, who paid less than the first setting, with
    the sign test's p and the geometric mean of the paired ratios; a failure (inf) counts as the
    whole recorded cost, 1.0, so two failures tie."""
    sys.path.insert(0, str(REPO / "benchmarks"))
    from slow_starters import paired_counts

    # ratios 0.5, 1.5, 1, 1: geometric mean 0.75 ** (1/4) = 0.93
    assert paired_counts([0.1, 0.2, 1.0, 0.5], [0.05, 0.3, 1.0, 0.5]) == "1 / 1 (p=1, ×0.93)"
    assert paired_counts([0.1, 0.2], [0.2, 0.3]) == "0 / 2 (p=0.5, ×1.73)"
    with pytest.raises(ValueError):
        paired_counts([0.1], [0.1, 0.2])


def test_slow_starters_seeds_each_tables_searchers_apart(monkeypatch) -> None:
    """Every table of a kind has its best configurations in the same place, so a run seed's
    random start-up proposals must not be the same draws in every table: each (table, seed)
    replay gets a searcher seed of its own. With the run's seed alone (before stop 47), the first
    five proposals held a configuration that reaches the target in 11 of the 30 crossing runs of
    tables 0-9 x seeds 0-2, against ~4 by chance; with the table's own seed in 4."""
    import optuna

    sys.path.insert(0, str(REPO / "benchmarks"))
    import slow_starters

    from costtune.search.pool import SamplerPool

    seeds = []
    monkeypatch.setattr(
        slow_starters,
        "replay",
        lambda curves, setting, seed, target=None: seeds.append(seed) or slow_starters.PeerRun(),
    )
    for t in (0, 1):
        for seed in (0, 1):
            slow_starters.one_run("crossing", t, seed, "default", True)
    assert (
        seeds == [slow_starters.searcher_seed(t, s) for t in (0, 1) for s in (0, 1)] and len(set(seeds)) == 4
    )

    optuna.logging.set_verbosity(optuna.logging.WARNING)

    def reachers_among_first_five(searcher_seed) -> tuple[int, float]:
        """Runs (tables 0-9 x seeds 0-2) whose first five proposals hold a configuration that
        reaches the target (9-12 of a table's 300 do), and how many chance would give."""
        hits, chance = 0, 0.0
        for t in range(10):
            curves = slow_starters.table("crossing", t)
            target = sorted(float(c.val_loss[-1]) for c in curves)[5]
            reach = {c.config_id for c in curves if float(c.val_loss.min()) <= target}
            for seed in range(3):
                pool = SamplerPool(curves, sampler=optuna.samplers.TPESampler(seed=searcher_seed(t, seed)))
                hits += any(pool.ask().config_id in reach for _ in range(5))
                chance += 1 - (1 - len(reach) / len(curves)) ** 5
        return hits, chance

    shared, chance = reachers_among_first_five(lambda t, seed: seed)  # the same draws in every table
    assert shared >= 2 * chance  # 11 of 30, chance ~4
    own, _ = reachers_among_first_five(slow_starters.searcher_seed)
    assert own <= 1.5 * chance  # 4 of 30


def test_slow_starters_until_target_costs_the_same_to_reach_it_in_fewer_trials() -> None:
    """``--until-target`` starts no configuration once one has reached the target: the cost to
    reach it is the full replay's to the cent, for costtune's default and for the Optuna peer,
    and the replay stops well before it has tried every configuration."""
    sys.path.insert(0, str(REPO / "benchmarks"))
    from slow_starters import replay, table

    curves = table("crossing", 0)
    target = sorted(float(c.val_loss[-1]) for c in curves)[5]
    for setting in ("default", "optuna tpe + sha"):
        full, short = replay(curves, setting, 0), replay(curves, setting, 0, target)
        assert short.cost_to_target(target) is not None
        assert short.cost_to_target(target) == full.cost_to_target(target), setting
        ran = (
            (len({e.config_id for e in run.epochs}) for run in (full, short))
            if setting == "default"
            else (len(run.trials) for run in (full, short))
        )
        n_full, n_short = ran
        assert n_short < n_full / 2, (setting, n_short, n_full)


def test_slow_starters_tables_are_seeded_and_their_early_ranks_point_the_wrong_way() -> None:
    """benchmarks/slow_starters.py's synthetic curves: the same seed, the same table; the
    configurations that end best are behind at epoch 5 (a first rung's ranks mislead), and on
    ``plateau`` they have not moved from the initial loss by then."""
    sys.path.insert(0, str(REPO / "benchmarks"))
    import numpy as np
    from scipy.stats import spearmanr
    from slow_starters import table

    for kind in ("slow", "plateau"):
        curves = table(kind, 0)
        assert len(curves) == 300 and {c.epochs for c in curves} == {60}
        assert [c.val_loss.tolist() for c in table(kind, 0)[:3]] == [c.val_loss.tolist() for c in curves[:3]]
        assert table(kind, 1)[0].val_loss.tolist() != curves[0].val_loss.tolist()
        early = [c.val_loss[4] for c in curves]
        best = sorted(curves, key=lambda c: c.val_loss[-1])[:6]  # the replays' target: the 6th
        # none of them is in the fifth a first rung at epoch 5 with eta 5 keeps
        assert all(c.val_loss[4] > np.percentile(early, 20) for c in best), kind
    plateau = table("plateau", 0)
    finals = [c.val_loss[-1] for c in plateau]
    assert spearmanr([c.val_loss[4] for c in plateau], finals).statistic < -0.5  # a good epoch 5 ends badly
    best = sorted(plateau, key=lambda c: c.val_loss[-1])[:6]
    assert all(c.val_loss[4] > 2.2 for c in best)  # still at the initial loss, 2.3


def test_slow_starters_crossing_curves_rank_by_pace_early_and_by_hyperparameters_late() -> None:
    """``crossing``: each configuration's pace is its own, so epoch 5 ranks the final losses
    weakly but not the wrong way, epoch 25 far better; the GP can learn the final loss from the
    hyperparameters (the best configurations sit near a learning rate of 3e-3)."""
    sys.path.insert(0, str(REPO / "benchmarks"))
    import numpy as np
    from scipy.stats import spearmanr
    from slow_starters import table

    curves = table("crossing", 0)
    assert len(curves) == 300 and {c.epochs for c in curves} == {60}
    assert table("crossing", 0)[7].val_loss.tolist() == curves[7].val_loss.tolist()
    finals = [c.val_loss[-1] for c in curves]
    at5 = spearmanr([c.val_loss[4] for c in curves], finals).statistic
    at25 = spearmanr([c.val_loss[24] for c in curves], finals).statistic
    assert 0 < at5 < 0.4 < at25
    best = sorted(curves, key=lambda c: c.val_loss[-1])[:6]
    assert all(abs(np.log10(c.hyperparameters["learning_rate"]) + 2.5) < 0.6 for c in best)


def test_slow_starters_optuna_peer_prunes_at_the_same_rungs_through_optunas_own_pruner() -> None:
    """``optuna tpe + sha``: Optuna's TPE and ``SuccessiveHalvingPruner(5, 5)`` over the table,
    one trial at a time. Its stops are the asynchronous rule at rungs 5 and 25, worked out here
    from the order the trials ran: a trial goes on past a rung when its loss there is within the
    best max(1, ⌊n/5⌋) of the n trials that reached it so far, itself included. Its dollars are
    the epochs it ran; the same seed gives the same run; the cost to a target is the spend when
    a loss first reached it."""
    sys.path.insert(0, str(REPO / "benchmarks"))
    from slow_starters import EPOCHS, USD_PER_HOUR, optuna_sha, table

    curves = table("crossing", 0)[:60]
    by_id = {c.config_id: c for c in curves}
    run = optuna_sha(curves, seed=0)
    assert sorted(i for i, _ in run.trials) == sorted(by_id)  # every configuration once
    seen: dict[int, list[float]] = {5: [], 25: []}
    expected = []
    for config_id, _ in run.trials:
        loss = by_id[config_id].val_loss
        epochs = EPOCHS
        for rung in (5, 25):
            seen[rung].append(float(loss[rung - 1]))
            keep = max(1, len(seen[rung]) // 5)
            if loss[rung - 1] > sorted(seen[rung])[keep - 1]:
                epochs = rung
                break
        expected.append(epochs)
    assert [e for _, e in run.trials] == expected
    assert {5, 25, EPOCHS} <= set(expected)  # each outcome exercised
    spent = sum(float(by_id[i].epoch_seconds[:e].sum()) for i, e in run.trials) / 3600 * USD_PER_HOUR
    assert abs(run.spent - spent) < 1e-9
    assert run.best_loss == min(float(by_id[i].val_loss[:e].min()) for i, e in run.trials)
    again = optuna_sha(curves, seed=0)
    assert again.trials == run.trials and again.spent == run.spent
    assert run.cost_to_target(run.best_loss) is not None and run.cost_to_target(run.best_loss - 1e-9) is None
    assert 0 < run.cost_to_target(float("inf")) < run.cost_to_target(run.best_loss) <= run.spent


def test_the_flat_start_guard_spares_unmoved_trials_only_once_most_judged_ones_were_flat() -> None:
    """slow_starters' ``default + flat guard`` prototype: with no flat stops behind it, a rung
    prunes a flat trial as the plain policy does; after 10 stops of which half were flat, an
    unmoved trial goes on, and once it moves it is held 10 epochs, then judged from the move."""
    sys.path.insert(0, str(REPO / "benchmarks"))
    from slow_starters import FlatStartGuard

    from costtune.core.policy import AsyncHyperband, Decision

    guard = FlatStartGuard()
    policy = guard.policy(AsyncHyperband(60, 5, 5, 1))
    assert policy.on_result("fast", 1, 2.0, 1.0) is Decision.CONTINUE
    for epoch in range(2, 6):
        policy.on_result("fast", epoch, 2.0 - 0.3 * epoch, epoch)  # moves, and makes the rung
    for i in range(10):  # ten flat trials, behind it at the rung: pruned, as without the guard
        decisions = [policy.on_result(f"flat{i}", e, 2.3, e) for e in range(1, 6)]
        assert decisions[-1] is Decision.STOP and guard.on is (i == 9)  # on at the tenth flat stop
    assert (guard.judged, guard.flat) == (10, 10)
    late = [policy.on_result("late", e, 2.3 if e < 20 else 0.2, e) for e in range(1, 40)]
    assert Decision.STOP not in late[:29]  # unmoved to 19, then held for 10 epochs
    assert guard.start["late"] == 20


def test_slow_starters_refuses_bad_counts(capsys) -> None:
    for argv, says in (
        (["--seeds", "0"], "--seeds: must be at least 1, got 0"),
        (["--jobs", "0"], "--jobs: must be at least 1, got 0"),
        (["--kinds", "slow,fast"], "--kinds: unknown 'fast'"),
        (["--settings", "default,stoper only"], "--settings: unknown 'stoper only'"),
    ):
        code, out, err = _slow_starters(capsys, *argv)
        assert code == 2 and err.strip().splitlines()[-1].endswith(says), err
        assert not out  # refused before its table began


def test_slow_starters_writes_every_run_to_csv(tmp_path, capsys) -> None:
    """``--out``: one row per run, the cost share and best loss the table's medians come from."""
    import csv

    out = tmp_path / "runs.csv"
    argv = ["--kinds", "crossing", "--tables", "1", "--seeds", "2", "--settings", "optuna tpe + sha"]
    code, stdout, err = _slow_starters(capsys, *argv, "--out", str(out))
    assert code == 0, err
    rows = list(csv.DictReader(out.open()))
    assert [(r["kind"], r["table"], r["seed"], r["setting"]) for r in rows] == [
        ("crossing", "0", "0", "optuna tpe + sha"),
        ("crossing", "0", "1", "optuna tpe + sha"),
    ]
    line = next(x for x in stdout.splitlines() if x.startswith("| crossing | optuna tpe + sha"))
    shares = sorted(min(float(r["cost_share"]), 1.0) for r in rows)
    assert f"| {sum(shares) / 2:.3f} |" in line  # the median of two


def test_record_curves_writes_a_pool_costtune_replay_reads(tmp_path) -> None:
    """benchmarks/record_curves.py trains real configurations of the built-in trainable and
    writes one row per epoch with its measured seconds: a table `costtune replay` reads."""
    sys.path.insert(0, str(REPO / "benchmarks"))
    import record_curves

    from costtune.core.curves import load_curves

    out = tmp_path / "pool.csv.gz"
    record_curves.record("cancer-mlp-adamw", configs=2, epochs=3, out=out)
    curves = load_curves(str(out))
    assert len(curves) == 2 and all(c.epochs == 3 for c in curves.values())
    assert all(
        (c.epoch_seconds > 0).all() and set(c.hyperparameters) >= {"lr", "width"} for c in curves.values()
    )
    assert not out.with_suffix(".gz.partial").exists()


def test_the_dehb_peer_runs_its_own_search_over_a_pool_from_scratch_and_reproducibly() -> None:
    """families.py's DEHB row: DEHB's ask/tell over a recorded pool, each evaluation from epoch 1,
    a promoted configuration on the curve it was first snapped to, until the budget is spent."""
    pytest.importorskip("dehb")
    sys.path.insert(0, str(REPO / "benchmarks"))
    import families

    from costtune.core.curves import curves_from_frame

    table = list(curves_from_frame(families.synthetic_pool("crossing", 1, configs=30, epochs=30)).values())
    by_id = {c.config_id: c for c in table}
    budget = sum(float(c.epoch_seconds.sum()) for c in table) / 3600 * families.PRICE
    sim = families.run_dehb(table, 4, budget)
    assert sim.total_usd >= budget and sim.total_usd - budget < 0.01 * budget
    runs: dict[str, list[int]] = {}
    for e in sim.epochs:
        config_id = e.config_id.split("#")[0]
        assert e.val_loss == by_id[config_id].val_loss[e.epoch - 1]
        runs.setdefault(e.config_id, []).append(e.epoch)
    assert all(epochs == list(range(1, len(epochs) + 1)) for epochs in runs.values())  # from scratch
    fidelities = {}
    for job, epochs in runs.items():
        fidelities.setdefault(job.split("#")[0], set()).add(max(epochs))
    assert any(len(f) > 1 for f in fidelities.values())  # promoted: the same curve, longer
    again = families.run_dehb(table, 4, budget)
    assert [(e.config_id, e.epoch) for e in again.epochs] == [(e.config_id, e.epoch) for e in sim.epochs]
    assert [(e.config_id, e.epoch) for e in families.run_dehb(table, 5, budget).epochs] != [
        (e.config_id, e.epoch) for e in sim.epochs
    ]


def test_the_clairvoyant_bound_is_below_every_scheduler_with_the_same_first_rung() -> None:
    """screening_floor.py's two bounds on a small crossing-curves pool, for several seeds: the
    clairvoyant pays the first 5 epochs of each configuration before the target's, and no
    recorded scheduler (the default, Optuna's SHA, Ray's ASHA) pays less in the same order;
    the default told each curve's final loss reaches the pool's best final loss, and with
    its own losses it is the default's replay."""
    sys.path.insert(0, str(REPO / "benchmarks"))
    import families
    import screening_floor

    from costtune.core.curves import curves_from_frame
    from costtune.replay import ReplaySettings, replay_pool
    from costtune.search.pool import OrderedPool

    table = list(curves_from_frame(families.synthetic_pool("crossing", 2, configs=40, epochs=30)).values())
    best = min(float(c.val_loss[-1]) for c in table)
    for seed in range(4):
        floor = screening_floor.floor_cost(table, seed, best)
        order = []
        pool = OrderedPool(table, seed=seed)
        while (curve := pool.ask()) is not None:
            order.append(curve)
        at = next(i for i, c in enumerate(order) if (c.val_loss <= best).any())
        hit = int(np.flatnonzero(order[at].val_loss <= best)[0])
        seconds = sum(float(c.epoch_seconds[:5].sum()) for c in order[:at]) + float(
            order[at].epoch_seconds[: hit + 1].sum()
        )
        assert floor == pytest.approx(seconds / 3600 * families.PRICE)
        for method in ("default", "optuna-sha", "ray-asha"):
            cost = families.run_method(method, table, "random", seed).cost_to_target(best)
            assert cost is None or floor <= cost + 1e-12
        default = replay_pool(table, ReplaySettings(searcher="random", seed=seed, price=families.PRICE))
        assert default.simulation.cost_to_target(best) == families.run_method(
            "default", table, "random", seed
        ).cost_to_target(best)
        assert screening_floor.perfect_ranks(table, seed).cost_to_target(best) is not None
