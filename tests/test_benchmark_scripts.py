"""The benchmark scripts run (CPU smoke sizes); their figures belong in benchmarks/RESULTS.md."""

from __future__ import annotations

import csv
import dataclasses
import importlib.util
import math
import subprocess
import sys
from pathlib import Path

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


def test_lcbench_table_pairs_runs_by_task_and_seed() -> None:
    sys.path.insert(0, str(REPO / "benchmarks"))
    from lcbench import parse_variant, summarise

    assert parse_variant("costtune-hb-tpe:g1e3b1pl") == (
        "costtune-hb-tpe",
        {"grace_epochs": 1, "eta": 3, "brackets": 1, "promotion": "loss"},
    )
    assert parse_variant("grid") == ("grid", {})
    assert parse_variant("costtune-hb-rel-tpe:r0.3sGi5d") == (
        "costtune-hb-rel-tpe",
        {"gp": True, "spare_best": True, "tell_predicted": True, "relative_roi": 0.3, "n_startup": 5},
    )
    assert parse_variant("costtune-hb-rel-tpe:r0.03sGCW10XQ") == (
        "costtune-hb-rel-tpe",
        {
            "gp": True,
            "spare_best": True,
            "value_transform": "clip",
            "expected": True,
            "sobol_start": True,
            "relative_roi": 0.03,
            "warmup_trials": 10,
        },
    )
    assert parse_variant("costtune-hb-rel-tpe:r0.3sGCW10i5JY")[1] == {
        "gp": True,
        "spare_best": True,
        "value_transform": "clip",
        "escalate": True,
        "guard_brackets": True,
        "relative_roi": 0.3,
        "n_startup": 5,
        "warmup_trials": 10,
    }
    # stop 36's two searcher prototypes: one fidelity told, random points interleaved
    assert parse_variant("costtune-hb-rel-tpe:r0.3sGCW10i5JVt5z3")[1] == {
        "gp": True,
        "spare_best": True,
        "value_transform": "clip",
        "escalate": True,
        "noise_aware": True,
        "relative_roi": 0.3,
        "n_startup": 5,
        "warmup_trials": 10,
        "tell_at": 5,
        "random_every": 3,
    }
    # stop 39: the reversed-first-rung sign, off (the default before) or at n trials
    assert parse_variant("costtune-hb-rel-tpe:r0.3sGCW10i5JVjS0")[1]["misrank_min"] is None
    assert parse_variant("costtune-hb-rel-tpe:r0.3sGCW10i5JVjS4")[1]["misrank_min"] == 4
    assert "misrank_min" not in parse_variant("costtune-hb-rel-tpe:r0.3sGCW10i5JVj")[1]
    # stop 40: the GP forgets the rungs' losses once the hedge switched, unless f0 (kf: keep floor still)
    assert parse_variant("costtune-hb-rel-tpe:r0.3sGCW10i5JVjf0")[1]["forget_misled"] == 0
    assert parse_variant("costtune-hb-rel-tpe:r0.3skfGCW10i5JVjf0")[1]["keep"] == "floor"
    assert "forget_misled" not in parse_variant("costtune-hb-rel-tpe:r0.3sGCW10i5JVj")[1]
    # stop 44: the GP on its longest runs (@n), gated by weak first-rung ranks (~θ), brackets
    # opened below a rank agreement (^θ: a regex anchor, read as a letter)
    spec = parse_variant("costtune-hb-rel-tpe:r0.3sGCW10i5JVj@6~0.3^0.5")[1]
    assert (spec["longest_min"], spec["weak_rank_tau"], spec["misrank_tau"]) == (6, 0.3, 0.5)
    assert spec["warmup_trials"] == 10 and spec["hedge"]
    # and the n longest that fit (+n, a regex quantifier, read as a letter)
    assert parse_variant("costtune-hb-rel-tpe:r0.3sGCW10i5JVj~0.3+8")[1]["weak_rank_fit"] == 8
    # stop 46: TPE proposes where the GP's leave-one-out ranking falls below θ (%θ)
    assert parse_variant("costtune-hb-rel-tpe:r0.3sGCW10i5JVj%0.4")[1]["model_check"] == 0.4
    with pytest.raises(ValueError, match="unknown variant"):
        parse_variant("costtune-hb-rel-tpe:r0.3sGCW10i5JVj^")
    inf = math.inf

    def row(method, task, seed, usd):
        return {
            "method": method,
            "task": task,
            "seed": seed,
            "usd_GRID": usd,
            "floor_GRID": 1.0,
            "usd_TOP1": inf,
            "floor_TOP1": 1.0,
            "budget": 10.0,
            "regret": 0.1,
        }

    rows = [row("costtune-hb-tpe", t, s, 1.0 + s) for t in ("a", "b") for s in range(3)]
    rows += [row("peer", t, s, (2.0 + s) if s else inf) for t in ("a", "b") for s in range(3)]
    table = summarise(rows)
    grid_part = table.split("Target TOP1")[0]
    ours = next(line for line in grid_part.splitlines() if line.startswith("| costtune-hb-tpe |"))
    peer = next(line for line in grid_part.splitlines() if line.startswith("| peer |"))
    assert "| 6/6 | 0.200 | 0.200 (2/2) | 2.0 |" in ours  # medians 2/10 on both tasks; ×floor median 2
    # the bootstrap intervals: each task's seeds cost 0.1, 0.2, 0.3 of the budget (1, 2, 3 floors)
    rel_low, rel_high = map(float, ours.split("|")[10].split("–"))
    floor_low, floor_high = map(float, ours.split("|")[11].split("–"))
    assert 0.1 <= rel_low < 0.2 < rel_high <= 0.3 and 1.0 <= floor_low < 2.0 < floor_high <= 3.0
    assert peer.split("|")[2].strip() == "4/6"
    # failures count as the whole budget (1.0): task medians of (1.0, 0.3, 0.4) → 0.4 on both tasks;
    # over the successes alone, (0.3, 0.4) → 0.35
    assert peer.split("|")[3].strip() == "0.400" and peer.split("|")[4].strip() == "0.350 (2/2)"
    assert "6/0 p=0.031" in peer  # cheaper in all six pairs (two of them: the peer failed)
    assert "2/0 p=0.5" in peer  # McNemar: two discordant pairs, both ours


def test_lcbench_oracle_rungs_rank_by_where_each_curve_ends() -> None:
    """The diagnostic O: the policy sees each curve's best loss over all its epochs, whatever
    loss the trial reported so far (a perfect curve model's upper bound)."""
    sys.path.insert(0, str(REPO / "benchmarks"))
    import numpy as np
    from lcbench import OracleRungs, parse_variant

    from costtune.core.curves import Curve
    from costtune.core.policy import AsyncHyperband, Decision

    assert parse_variant("costtune-hb-rel-tpe:r0.3sLOT") == (
        "costtune-hb-rel-tpe",
        {
            "relative_roi": 0.3,
            "constant_liar": True,
            "oracle_rungs": True,
            "oracle_tell": True,
            "spare_best": True,
        },
    )
    # "late" is worse than every "early" trial at epoch 5 but ends best
    curves = {
        f"early{i}": Curve(f"early{i}", {}, np.array([0.5] * 5 + [0.4 + 0.01 * i] * 47), np.ones(52), 1.0)
        for i in range(4)
    }
    curves["late"] = Curve("late", {}, np.linspace(0.9, 0.1, 52), np.ones(52), 1.0)
    plain, oracle = AsyncHyperband(52), OracleRungs(AsyncHyperband(52), curves)
    for policy in (plain, oracle):
        for trial_id, curve in curves.items():
            policy.on_add(trial_id)
            decision = policy.on_result(trial_id, 5, float(curve.val_loss[4]), 5.0)
        assert trial_id == "late"
        assert decision is (Decision.CONTINUE if policy is oracle else Decision.STOP)
    assert oracle.rungs[0][5]["late"].loss == 0.1  # reads through to the policy


def test_lcbench_oracle_stop_ends_only_trials_whose_rest_never_beats_the_best() -> None:
    """The diagnostic =e: past epoch e a trial stops once nothing left of its curve beats the
    lowest loss shown so far, so a trial that will end best is never stopped, however badly
    it starts; before epoch e nothing is stopped."""
    sys.path.insert(0, str(REPO / "benchmarks"))
    import numpy as np
    from lcbench import OracleStop, parse_variant

    from costtune.core.curves import Curve
    from costtune.core.policy import AsyncHyperband, Decision

    assert parse_variant("costtune-hb-rel-tpe:r0.3=1")[1] == {"relative_roi": 0.3, "oracle_stop_from": 1}
    # stop 55's decomposition: the searcher told the screens' losses at the rung (!), or earlier (&k)
    assert parse_variant("costtune-hb-rel-tpe:r0.3=1!&2")[1] == {
        "relative_roi": 0.3,
        "oracle_stop_from": 1,
        "tell_at_rung": True,
        "tell_screen_at": 2,
    }
    curves = {
        "best": Curve("best", {}, np.full(52, 0.3), np.ones(52), 1.0),
        "never": Curve("never", {}, np.linspace(0.5, 0.35, 52), np.ones(52), 1.0),
        "late": Curve("late", {}, np.linspace(0.9, 0.1, 52), np.ones(52), 1.0),
    }
    policy = OracleStop(AsyncHyperband(52), curves, after=1)
    said: dict[str, list[Decision]] = {}
    for epoch in (1, 2, 3):
        for trial_id, curve in curves.items():
            if epoch == 1:
                policy.on_add(trial_id)
            said.setdefault(trial_id, []).append(
                policy.on_result(trial_id, epoch, float(curve.val_loss[epoch - 1]), 1.0)
            )
    assert said["never"] == [Decision.CONTINUE, Decision.STOP, Decision.STOP]  # judged from epoch 2
    assert said["late"] == [Decision.CONTINUE] * 3  # worst at epoch 3, ends best
    assert said["best"] == [Decision.CONTINUE, Decision.STOP, Decision.STOP]  # flat: buys nothing more
    assert policy.stops == 4 and policy.trials["late"].bracket == 0  # reads through to the policy


def test_lcbench_ratio_stop_judges_by_the_largest_fall_the_sweeps_long_trials_showed() -> None:
    """The prototype #n: once n trials ended past the horizon, a trial stops at epoch k when its
    loss times the lowest (best ÷ loss at k) of those trials stays at or above the best loss
    shown; a trial that can still fall below it goes on, and before n such trials nothing stops."""
    sys.path.insert(0, str(REPO / "benchmarks"))
    from lcbench import RatioStop, parse_variant

    from costtune.core.policy import AsyncHyperband, Decision, StopReason

    assert parse_variant("costtune-hb-rel-tpe:r0.3#306")[1] == {"relative_roi": 0.3, "ratio_stop": 306}
    policy = RatioStop(AsyncHyperband(52, warmup_trials=None), evidence=2, horizon=3)

    def run(trial_id: str, losses: list[float], end: bool = True) -> list[Decision]:
        policy.on_add(trial_id)
        said = [policy.on_result(trial_id, k, x, 1.0) for k, x in enumerate(losses, 1)]
        if end:
            policy.on_end(trial_id, StopReason.STOPPED)
        return said

    # two long trials: best ÷ loss at epoch 1 is 0.5 and 0.25 (the largest fall)
    assert run("a", [1.0, 0.6, 0.5]) == [Decision.CONTINUE] * 3
    assert run("short", [0.9, 0.8]) == [Decision.CONTINUE] * 2  # too short to count as evidence
    assert run("b", [0.8, 0.4, 0.2]) == [Decision.CONTINUE] * 3  # one long trial: nothing judged
    assert policy.stops == 0
    # the best shown is 0.2: at epoch 1, 0.7 × 0.25 = 0.175 can still beat it, 0.9 × 0.25 cannot
    assert run("hopeful", [0.7], end=False) == [Decision.CONTINUE]
    assert run("hopeless", [0.9], end=False) == [Decision.STOP]
    assert policy.stops == 1


def test_first_reacher_names_what_ended_the_configurations_that_could_have_reached() -> None:
    """benchmarks/first_reacher.py on a simulated run: a slow starter that would have reached
    the target is pruned at the first rung by fast starters that end above it (with the epoch it
    needed); a run where it comes first, and so goes on, says it reached it."""
    sys.path.insert(0, str(REPO / "benchmarks"))
    import numpy as np
    from first_reacher import fates_line, reachers

    from costtune.core.curves import Curve
    from costtune.core.policy import AsyncHyperband
    from costtune.core.simulate import simulate

    fast = [
        Curve(f"fast{i}", {}, np.r_[np.linspace(0.6, 0.5, 5), np.full(15, 0.45 + 0.01 * i)], np.ones(20), 1.0)
        for i in range(5)
    ]
    slow = Curve("slow", {}, np.linspace(1.0, 0.2, 20), np.ones(20), 1.0)  # 0.35 first at epoch 17
    proposed = {c.config_id: c for c in [*fast, slow]}
    policy = AsyncHyperband(20, grace_epochs=5, eta=5)
    sim = simulate([*fast, slow], policy, max_epochs=20)
    assert min(e.val_loss for e in sim.epochs) > 0.35  # the run never reached the target
    could = reachers(sim, policy, proposed, target=0.35)
    assert could == [
        {"order": 5, "start_usd": could[0]["start_usd"], "ran": 5, "needed": 17, "fate": "rung_pruned"}
    ]
    assert fates_line(could) == "rung_pruned at 5: 1"
    assert fates_line([]) == "none started"

    first = AsyncHyperband(20, grace_epochs=5, eta=5)
    sim = simulate([slow, *fast], first, max_epochs=20)  # first at its rung: nothing to lose to
    assert [c["fate"] for c in reachers(sim, first, proposed, target=0.35)] == ["reached it"]


def test_lcbench_predicted_rungs_rank_by_the_curve_models_final_loss() -> None:
    """The prototype P: the policy sees each trial's predicted last-epoch loss from its curve so
    far (nothing of the future), so a trial still falling fast outranks a flat one a little
    ahead of it now. Variants K / U / N reach the GP's fast ask."""
    sys.path.insert(0, str(REPO / "benchmarks"))
    from lcbench import PredictedRungs, parse_variant

    from costtune.core.policy import AsyncHyperband, Decision

    assert parse_variant("costtune-hb-rel-tpe:r0.3sGCW10KU32N224P") == (
        "costtune-hb-rel-tpe",
        {
            "gp": True,
            "spare_best": True,
            "value_transform": "clip",
            "fast_ask": True,
            "predicted_rungs": True,
            "relative_roi": 0.3,
            "fast_search": {"n_random": 32, "n_local": 224},
            "warmup_trials": 10,
        },
    )
    assert parse_variant("costtune-hb-rel-tpe:r0.3sGCW10KB")[1]["believer"] is False
    flat = [0.50, 0.49, 0.48, 0.48, 0.48]  # ahead at epoch 5, barely moving
    steep = [0.90, 0.80, 0.70, 0.60, 0.50 + 1e-3]  # just behind, falling 0.1 an epoch
    results = {}
    for name, policy in (("plain", AsyncHyperband(52)), ("predicted", PredictedRungs(AsyncHyperband(52)))):
        for trial_id, curve in (
            ("flat0", flat),
            ("flat1", flat),
            ("flat2", flat),
            ("flat3", flat),
            ("steep", steep),
        ):
            policy.on_add(trial_id)
            for epoch, loss in enumerate(curve, start=1):
                decision = policy.on_result(trial_id, epoch, loss, float(epoch))
        results[name] = decision
    assert results == {"plain": Decision.STOP, "predicted": Decision.CONTINUE}


def test_lcbench_noise_veto_keeps_a_noisy_slow_improver_and_stops_a_noisy_flat_trial_later() -> None:
    """lcbench.py's ``F`` prototype (stop 34's noise_aware): the relative rule's stop is vetoed while the trial's noise
    could hide a worthwhile gain over its last window and over the last half of its epochs: a
    slow improver under noise runs on, a noisy flat trial is stopped once its dollars outweigh
    its noise, a smooth flat one where the plain rule stops it."""
    sys.path.insert(0, str(REPO / "benchmarks"))
    import numpy as np
    from lcbench import NoiseVeto

    from costtune.core.curves import Curve
    from costtune.core.policy import MarginalRoiStopping, StoppingRule
    from costtune.core.simulate import simulate

    rng = np.random.default_rng(1)
    curves = {
        "fast": [0.2 + e**-1.5 for e in range(1, 121)],
        "slow": [0.6 - 0.001 * e + 0.03 * float(z) for e, z in enumerate(rng.standard_normal(120), 1)],
        "flat": [0.6 + 0.03 * float(z) for z in rng.standard_normal(120)],
        "smooth": [0.6] * 120,
    }
    table = [Curve(k, {}, np.array(v), np.full(120, 600.0), 1.0) for k, v in curves.items()]
    rule = StoppingRule(min_relative_roi=0.3, spare_best=True, max_epochs=120, window_epochs=5, min_epochs=5)
    plain = simulate(table, None, stopping=MarginalRoiStopping(rule), usd_per_device_hour=1.0).stopped_at
    vetoed = simulate(table, None, stopping=NoiseVeto(MarginalRoiStopping(rule)), usd_per_device_hour=1.0)
    assert plain["slow"] < 10 and plain["flat"] < 10  # the plain rule reads noise as flat
    assert vetoed.stopped_at["slow"] == 120  # ran on to the end
    assert 20 < vetoed.stopped_at["flat"] < 120  # stopped, later
    assert vetoed.stopped_at["smooth"] == plain["smooth"] and vetoed.stopped_at["fast"] == plain["fast"]
    # the product's stopping.noise_aware is the measurable form: the same stops on noisy power laws
    for seed in range(3):
        r = np.random.default_rng(seed)
        noisy = [
            Curve(
                f"n{i}",
                {},
                (r.uniform(0.2, 0.6) + r.uniform(0.2, 2.0) * np.arange(1, 81) ** -r.uniform(0.2, 1.5))
                * np.exp(r.uniform(0.0, 0.2) * r.standard_normal(80)),
                np.full(80, r.uniform(100.0, 900.0)),
                1.0,
            )
            for i in range(12)
        ]
        rule = StoppingRule(min_relative_roi=0.3, spare_best=True, max_epochs=80)
        aware = dataclasses.replace(rule, noise_aware=True)
        built = simulate(noisy, None, stopping=MarginalRoiStopping(aware), usd_per_device_hour=1.0)
        proto = simulate(
            noisy,
            None,
            stopping=NoiseVeto(MarginalRoiStopping(rule), measurable=True),
            usd_per_device_hour=1.0,
        )
        assert built.stopped_at == proto.stopped_at
        plain = simulate(noisy, None, stopping=MarginalRoiStopping(rule), usd_per_device_hour=1.0)
        assert built.stopped_at != plain.stopped_at


def test_lcbench_smoothed_rungs_rank_by_the_lowest_loss_of_the_last_k_epochs() -> None:
    """The prototype M<k>: the rung sees a trial's lowest loss over its last k epochs, so one
    unlucky validation pass at the rung's epoch does not prune a trial that is ahead; k = 1 is
    the plain rung."""
    sys.path.insert(0, str(REPO / "benchmarks"))
    from lcbench import SmoothedRungs, parse_variant

    from costtune.core.policy import AsyncHyperband, Decision

    assert parse_variant("costtune-hb-rel-tpe:r0.3sGCW10i5M3")[1]["smooth_rungs"] == 3
    steady = [0.60, 0.55, 0.52, 0.50, 0.49]
    unlucky = [0.60, 0.50, 0.45, 0.44, 0.53]  # ahead, with a bad pass at epoch 5
    decisions = {}
    for k in (1, 3):
        policy = SmoothedRungs(AsyncHyperband(52), k)
        for trial_id, curve in (("a", steady), ("b", steady), ("c", steady), ("d", steady), ("u", unlucky)):
            policy.on_add(trial_id)
            for epoch, loss in enumerate(curve, start=1):
                decision = policy.on_result(trial_id, epoch, loss, float(epoch))
        decisions[k] = decision
        assert policy.smoothed("u") == (0.53 if k == 1 else 0.44)  # what the searcher is told
    assert decisions == {1: Decision.STOP, 3: Decision.CONTINUE}


SHARED_LCBENCH = REPO.parent / "shared" / "benchmarks" / "yahpo_lcbench"


@pytest.mark.skipif(
    not SHARED_LCBENCH.is_dir(), reason="the shared LCBench surrogate is not beside this checkout"
)
def test_lcbench_until_target_gives_the_same_cost_to_target() -> None:
    """--until-target stops asking once every target is reached: the figures a table reads
    (dollars and hours to each target) are those of the full run; spent and regret are nan."""
    pytest.importorskip("onnxruntime")
    sys.path.insert(0, str(REPO / "benchmarks"))
    import lcbench

    lcbench.bench(str(SHARED_LCBENCH))
    task = lcbench.prepare("146212")
    for method in ("costtune-hb-rel-tpe:r0.3s", "optuna-tpe-sha-5-5"):
        full = lcbench.measure(task, 1, method)
        lcbench.UNTIL_TARGET = True
        try:
            short = lcbench.measure(task, 1, method)
        finally:
            lcbench.UNTIL_TARGET = False
        assert math.isfinite(full["usd_GRID"]) and math.isfinite(full["usd_TOP1"]), method
        for key in ("usd_GRID", "usd_TOP1", "hours_GRID", "hours_TOP1"):
            assert short[key] == full[key], (method, key)
        assert math.isnan(short["regret"]) and math.isnan(short["spent"]), method
        assert math.isfinite(full["regret"]) and full["spent"] >= task.budget * 0.99, method


@pytest.mark.skipif(
    not SHARED_LCBENCH.is_dir(), reason="the shared LCBench surrogate is not beside this checkout"
)
def test_lcbench_ranks_tells_how_far_early_epochs_rank_the_final_losses() -> None:
    """--ranks: Spearman's correlation of the epoch-5 and epoch-25 losses with the final one, a
    row per task and the median; later epochs rank better, and curves that cross and are noisy
    (--stretch 8 --spread --noise 0.2) rank worse than the recorded ones."""
    pytest.importorskip("onnxruntime")

    def ranks(*extra: str) -> list[float]:
        script, data = str(REPO / "benchmarks" / "lcbench.py"), str(SHARED_LCBENCH)
        out = subprocess.run(
            [sys.executable, script, "--data-dir", data, "--tasks", "3945,7593", "--ranks", *extra],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        rows = [line.split("|")[1:-1] for line in out.splitlines() if line.startswith("| ")]
        assert [r[0].strip() for r in rows[1:]] == ["3945", "7593", "median (range)"], out
        return [float(x) for r in rows[1:3] for x in (r[1], r[2])]

    plain, crossing = ranks(), ranks("--stretch", "8", "--spread", "--noise", "0.2")
    assert all(at25 > at5 for at5, at25 in zip(plain[::2], plain[1::2], strict=True)), plain
    assert all(c < p for c, p in zip(crossing, plain, strict=True)), (plain, crossing)


def test_lcbench_stretch_keeps_the_final_loss_the_best_loss_and_the_cost() -> None:
    """--stretch K: 51 K + 1 epochs, the recorded losses at epochs 1, K + 1, 2K + 1, ...,
    interpolated between them, and the same total seconds (so budget, targets, floor hold)."""
    sys.path.insert(0, str(REPO / "benchmarks"))
    import numpy as np
    from lcbench import stretch, stretched_epochs

    from costtune.core.curves import Curve

    losses = 1.0 / np.arange(1, 53) + np.r_[np.zeros(30), np.linspace(0, 0.05, 22)]  # best mid-run
    curve = Curve("c", {}, losses, np.linspace(3.0, 1.0, 52), 1.0)
    assert stretch(curve, 1) is curve and stretched_epochs(1) == 52
    long = stretch(curve, 4)
    assert long.epochs == stretched_epochs(4) == 205
    assert long.val_loss[::4].tolist() == pytest.approx(losses.tolist())  # every recorded epoch
    assert long.val_loss[2] == pytest.approx((losses[0] + losses[1]) / 2)  # halfway between
    assert long.val_loss.min() == pytest.approx(losses.min()) and long.val_loss[-1] == losses[-1]
    assert long.seconds_until(long.epochs) == pytest.approx(curve.seconds_until(52))


def test_lcbench_spread_gives_each_configuration_its_own_pace_and_a_plateau() -> None:
    """--stretch K --spread: configuration c learns K^U times slower (U fixed per task and
    configuration), reaches its recorded final loss at epoch 51 k_c + 1 and stays there; every
    epoch costs what it costs without --spread, whatever the pace: the paces differ, not the price."""
    sys.path.insert(0, str(REPO / "benchmarks"))
    import numpy as np
    from lcbench import stretch, stretched_epochs

    from costtune.core.curves import Curve

    losses = 1.0 / np.arange(1, 53) + 0.2
    curves = [Curve(f"c{i}", {"learning_rate": 10.0**-i}, losses, np.full(52, 2.0), 1.0) for i in range(1, 9)]
    spread = [stretch(c, 4, "3945", spread=True) for c in curves]
    plateaus = []
    for long in spread:
        assert long.epochs == stretched_epochs(4)
        assert long.val_loss[0] == losses[0] and long.val_loss[-1] == pytest.approx(losses[-1])
        assert long.epoch_seconds.tolist() == [2.0] + [0.5] * 204  # the price of an epoch: K-independent
        reached = int(np.argmax(np.isclose(long.val_loss, losses[-1]))) + 1
        assert (long.val_loss[reached - 1 :] == long.val_loss[-1]).all()  # flat from then on
        assert 52 <= reached <= stretched_epochs(4)
        plateaus.append(reached)
    assert len(set(plateaus)) >= 4  # the paces differ between configurations
    again = stretch(
        Curve("t1-b", {"learning_rate": 0.1}, losses, np.full(52, 2.0), 1.0), 4, "3945", spread=True
    )
    assert again.val_loss.tolist() == spread[0].val_loss.tolist()  # the same configuration, the same pace
    assert stretch(curves[0], 4, "7593", spread=True).val_loss.tolist() != spread[0].val_loss.tolist()
    # the surrogate's seconds vary by epoch: a full run still costs what it did, at any pace
    varying = np.linspace(3.0, 1.0, 52)
    for i in range(1, 9):
        curve = Curve(f"v{i}", {"learning_rate": 10.0**-i}, losses, varying, 1.0)
        for how in (True, "lr"):
            long = stretch(curve, 4, "3945", spread=how)
            assert long.epoch_seconds.tolist() == stretch(curve, 4).epoch_seconds.tolist()
            assert long.seconds_until(long.epochs) == pytest.approx(varying.sum())


def test_lcbench_spread_by_learning_rate_slows_the_small_learning_rates() -> None:
    """--spread lr: the pace is K^U with U 0 at the largest learning rate of the protocol's range
    (0.1, the recorded pace), 1 at the smallest (1e-4, K times slower), log-linear between."""
    sys.path.insert(0, str(REPO / "benchmarks"))
    import numpy as np
    from lcbench import stretch, stretched_epochs

    from costtune.core.curves import Curve

    losses = 1.0 / np.arange(1, 53) + 0.2

    def plateau(lr: float) -> int:
        long = stretch(Curve("c", {"learning_rate": lr}, losses, np.full(52, 2.0), 1.0), 8, "t", spread="lr")
        return int(np.argmax(np.isclose(long.val_loss, losses[-1]))) + 1

    assert plateau(0.1) == 52 and plateau(1.0) == 52  # the recorded pace (clipped to the range)
    assert plateau(1e-4) == stretched_epochs(8)  # eight times slower
    assert plateau(1e-4 * 10**1.5) == pytest.approx(51 * 8**0.5 + 1, abs=1)  # halfway: K^0.5
    assert plateau(0.01) < plateau(0.001) < plateau(1e-4)


def test_lcbench_spread_trap_slows_the_large_learning_rates() -> None:
    """--spread trap: lr's pace the other way round, the largest learning rate K times slower."""
    sys.path.insert(0, str(REPO / "benchmarks"))
    import numpy as np
    from lcbench import stretch, stretched_epochs

    from costtune.core.curves import Curve

    losses = 1.0 / np.arange(1, 53) + 0.2

    def plateau(lr: float, how: str) -> int:
        long = stretch(Curve("c", {"learning_rate": lr}, losses, np.full(52, 2.0), 1.0), 8, "t", spread=how)
        return int(np.argmax(np.isclose(long.val_loss, losses[-1]))) + 1

    assert plateau(1e-4, "trap") == 52 and plateau(0.1, "trap") == stretched_epochs(8)
    for lr in (3e-4, 1e-3, 1e-2):  # paces K^U and K^(1 - U) multiply to K
        assert (plateau(lr, "trap") - 1) * (plateau(lr, "lr") - 1) == pytest.approx(51 * 51 * 8, rel=0.05)
    assert plateau(1e-3, "trap") < plateau(1e-2, "trap") < plateau(0.1, "trap")


def test_lcbench_oracle_floor_is_the_cheapest_full_run_reaching_the_target() -> None:
    """The cheapest full run whose final loss reaches the target; when none does (a target set
    by a lucky noisy epoch), the cheapest whose curve reaches it at any epoch."""
    sys.path.insert(0, str(REPO / "benchmarks"))
    import numpy as np
    from lcbench import USD_PER_HOUR, oracle_floor

    from costtune.core.curves import Curve

    dip = np.r_[np.full(20, 0.5), 0.29, np.full(31, 0.4)]  # one lucky epoch, a final of 0.4
    cheap_dip = Curve("a", {}, dip, np.full(52, 36.0), 1.0)
    dear_final = Curve("b", {}, np.linspace(0.5, 0.3, 52), np.full(52, 72.0), 1.0)
    hour = 3600 / USD_PER_HOUR  # seconds that cost one dollar
    assert oracle_floor([cheap_dip, dear_final], 0.3) == pytest.approx(52 * 72.0 / hour)
    assert oracle_floor([cheap_dip, dear_final], 0.29) == pytest.approx(52 * 36.0 / hour)


def test_reachers_prices_the_reachers_full_runs_and_a_blind_searchs_screening_against_the_floor() -> None:
    """benchmarks/reachers.py: of four configurations two reach the target (one only at an
    early epoch); their full runs over the floor, the median configuration's, and a blind
    search's expected first-rung screening (pool ÷ reachers draws) plus the median reacher."""
    sys.path.insert(0, str(REPO / "benchmarks"))
    import numpy as np
    from reachers import reacher_stats

    from costtune.core.curves import Curve

    hour = 3600.0  # at $1 an hour, a second costs 1/3600 dollar
    flat = np.full(10, 0.5)
    dip = np.r_[0.5, 0.25, np.full(8, 0.4)]
    curves = [
        Curve("cheap", {}, np.linspace(0.5, 0.2, 10), np.full(10, 36.0), 1.0),  # $0.1, reaches at the end
        Curve("dear", {}, dip, np.full(10, 108.0), 1.0),  # $0.3, reaches at epoch 2 only
        Curve("a", {}, flat, np.full(10, 72.0), 1.0),  # $0.2
        Curve("b", {}, flat, np.full(10, 144.0), 1.0),  # $0.4
    ]
    r = reacher_stats(curves, 0.3, 0.1, first_rung=2, usd_per_hour=1.0)
    assert r.count == 2 and r.floor == 0.1
    assert r.median == pytest.approx(2.0) and r.q10 == pytest.approx(1.2)  # (0.1 + 0.3) / 2; 0.1 + 0.1 × 0.2
    assert r.typical == pytest.approx(2.5)  # the median of 0.1, 0.2, 0.3, 0.4
    rung = 2 * (36 + 108 + 72 + 144) / 4 / hour  # two epochs at the pool's mean price
    assert r.screen == pytest.approx((2 * rung + 0.2) / 0.1)
    none = reacher_stats(curves, 0.1, 0.1, first_rung=2, usd_per_hour=1.0)
    assert none.count == 0 and np.isnan(none.median) and np.isnan(none.screen)
    with pytest.raises(ValueError, match="floor: must be positive"):
        reacher_stats(curves, 0.3, 0.0, first_rung=2, usd_per_hour=1.0)


def test_lcbench_noise_is_a_property_of_the_task_and_configuration() -> None:
    """--noise σ: each epoch's loss times exp(σ z); the same (task, configuration) gets the same
    noisy curve whatever its id (every method sees one recorded curve), another task or
    configuration other noise; the seconds never change, and σ = 0 is the curve itself."""
    sys.path.insert(0, str(REPO / "benchmarks"))
    import numpy as np
    from lcbench import noisy

    from costtune.core.curves import Curve

    losses = 1.0 / np.arange(1, 53) + 0.2
    config = {"learning_rate": 1e-3, "batch_size": 64}
    curve = Curve("a", config, losses, np.ones(52), 1.0)
    assert noisy(curve, 0.0, "3945") is curve
    one = noisy(curve, 0.05, "3945")
    again = noisy(Curve("t7-b", dict(config), losses.copy(), np.ones(52), 1.0), 0.05, "3945")
    assert one.val_loss.tolist() == again.val_loss.tolist()
    assert one.epoch_seconds.tolist() == curve.epoch_seconds.tolist()
    log_ratio = np.log(one.val_loss / losses)
    assert 0.03 < log_ratio.std() < 0.07 and abs(log_ratio.mean()) < 0.03  # σ 0.05 over 52 epochs
    assert (np.diff(one.val_loss) > 0).sum() >= 10  # no longer monotone: the noise shows
    other_task = noisy(curve, 0.05, "7593").val_loss
    other_config = noisy(Curve("a", {**config, "batch_size": 65}, losses, np.ones(52), 1.0), 0.05, "3945")
    assert not np.allclose(other_task, one.val_loss) and not np.allclose(other_config.val_loss, one.val_loss)


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


def test_lcbench_unused_hyperparameters_reach_every_searcher_space() -> None:
    """--unused N: N hyperparameters unused_0… (uniform in [0, 1]) join the space costtune's
    Optuna loop samples and the peers' spaces; set back to 0, the protocol's 7 again."""
    optuna = pytest.importorskip("optuna")
    sys.path.insert(0, str(REPO / "benchmarks"))
    import lcbench
    import peers

    try:
        lcbench.set_unused(3)
        assert list(lcbench.SPACE) == [*lcbench.RECORDED, "unused_0", "unused_1", "unused_2"]
        assert peers.UNUSED == 3
        study = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=0))
        config = lcbench.suggest(study.ask())
        assert set(config) == set(lcbench.SPACE)
        assert all(0.0 <= config[f"unused_{i}"] <= 1.0 for i in range(3))
        lcbench.set_unused(1)  # again, with fewer: no stale name stays behind
        assert list(lcbench.SPACE) == [*lcbench.RECORDED, "unused_0"]
        if importlib.util.find_spec("ConfigSpace") is not None:
            assert sorted(peers._configspace(0).keys()) == sorted(lcbench.SPACE)
    finally:
        lcbench.set_unused(0)
    assert tuple(lcbench.SPACE) == lcbench.RECORDED and peers.UNUSED == 0


@pytest.mark.skipif(
    not SHARED_LCBENCH.is_dir(), reason="the shared LCBench surrogate is not beside this checkout"
)
def test_lcbench_unused_hyperparameters_change_no_curve() -> None:
    """The surrogate never sees an unused hyperparameter: a configuration's curve is the same
    whatever values they take."""
    pytest.importorskip("onnxruntime")
    sys.path.insert(0, str(REPO / "benchmarks"))
    import lcbench

    lcbench.bench(str(SHARED_LCBENCH))
    config = {"batch_size": 64, "learning_rate": 3e-3, "momentum": 0.9, "weight_decay": 1e-4}
    config |= {"num_layers": 2, "max_units": 256, "max_dropout": 0.1}
    plain = lcbench.curves_of("146212", [config])[0]
    for values in (0.0, 0.7):
        wide = lcbench.curves_of("146212", [config | {"unused_0": values, "unused_1": 1 - values}])[0]
        assert wide.val_loss.tolist() == plain.val_loss.tolist()
        assert wide.epoch_seconds.tolist() == plain.epoch_seconds.tolist()


def test_lcbench_refuses_a_bad_unused_or_stretch_in_one_line_and_writes_nothing(tmp_path: Path) -> None:
    """--unused -1, --stretch 0, --noise -0.1, any of them with a Ray method, or a method with a variant letter
    nothing reads (a typo, or a retired prototype's): one line naming the option, exit 2, and an
    earlier run's OUT.partial left as it was."""
    out = tmp_path / "runs.csv"
    partial = tmp_path / "runs.csv.partial"
    partial.write_text("an earlier run\n")
    for argv in (
        ["--unused", "-1"],
        ["--stretch", "0"],
        ["--unused", "2", "--methods", "ray-asha"],
        ["--noise", "-0.1"],
        ["--noise", "0.05", "--methods", "ray-asha"],
        ["--spread"],
        ["--spread", "pace", "--stretch", "4"],
        ["--methods", "grid,costtune-hb-rel-tpe:r0.3sGCW10i5H"],
    ):
        done = subprocess.run(
            [sys.executable, str(REPO / "benchmarks" / "lcbench.py"), *argv, "--out", str(out)],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 2, (argv, done.stderr)
        lines = done.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith(f"lcbench.py: error: {argv[0]}:"), argv
        assert partial.read_text() == "an earlier run\n" and not out.exists()


def test_lcbench_from_reads_a_pandas_saved_csv_and_refuses_a_bad_one_in_one_line(tmp_path: Path) -> None:
    """--from: a CSV saved again by pandas (missing values as empty cells) is read as the
    script's own (empty = NaN); a missing file, a missing column or a seed that is not an
    integer is one line naming the file, exit 2."""
    sys.path.insert(0, str(REPO / "benchmarks"))
    from lcbench import SUMMARISED, read_rows

    header = ",".join(SUMMARISED)
    good = tmp_path / "runs.csv"
    good.write_text(f"{header}\ncosttune-hb-tpe,3945,0,10.0,,1.0,0.5,,1.0\n")
    (row,) = read_rows(str(good))
    assert row["seed"] == 0 and math.isnan(float(row["regret"])) and math.isnan(float(row["usd_TOP1"]))
    no_budget = tmp_path / "no_budget.csv"
    no_budget.write_text(header.replace("budget,", "") + "\n")
    bad_seed = tmp_path / "bad_seed.csv"
    bad_seed.write_text(f"{header}\ncosttune-hb-tpe,3945,x,10.0,0.1,1.0,0.5,1.0,1.0\n")
    for path, says in (
        (tmp_path / "nope.csv", "No such file"),
        (no_budget, "no column budget"),
        (bad_seed, "a seed is not an integer"),
    ):
        done = subprocess.run(
            [sys.executable, str(REPO / "benchmarks" / "lcbench.py"), "--from", str(path)],
            capture_output=True,
            text=True,
            timeout=120,
        )
        lines = done.stderr.strip().splitlines()
        assert done.returncode == 2 and len(lines) == 1, (path, done.stderr)
        assert lines[0].startswith(f"lcbench.py: error: --from: {path}: ") and says in lines[0]


def test_lcbench_from_reads_only_the_tasks_and_methods_asked_for(tmp_path: Path) -> None:
    """--from with --tasks / --methods re-prints only those rows (a table of all of them
    without); a filter that leaves nothing is one line, exit 2."""
    sys.path.insert(0, str(REPO / "benchmarks"))
    from lcbench import SUMMARISED

    path = tmp_path / "runs.csv"
    lines = [",".join(SUMMARISED)]
    for method in ("m-a", "m-b"):
        for task, usd in (("3945", 1.0), ("7593", 9.0)):
            lines += [f"{method},{task},{seed},10.0,nan,{usd},0.5,{usd},0.5" for seed in range(3)]
    path.write_text("\n".join(lines) + "\n")

    def table(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            [sys.executable, str(REPO / "benchmarks" / "lcbench.py"), "--from", str(path), *args],
            capture_output=True,
            text=True,
            timeout=120,
        )

    def row(output: str, method: str) -> str:
        return next(line for line in output.splitlines() if line.startswith(f"| {method} |"))

    both = table("--reference", "m-a")
    one = table("--reference", "m-a", "--tasks", "7593", "--methods", "m-a")
    assert both.returncode == one.returncode == 0, both.stderr + one.stderr
    assert "| 6/6 |" in row(both.stdout, "m-a") and "| 0.300 |" in row(both.stdout, "m-a")
    assert "| 3/3 |" in row(one.stdout, "m-a") and "| 0.900 |" in row(one.stdout, "m-a")
    assert "| m-b |" not in one.stdout
    none = table("--tasks", "126026")
    assert none.returncode == 2 and none.stderr.strip().splitlines() == [
        "lcbench.py: error: --from: no row left for these --tasks and --methods"
    ]


def test_rung_free_share_sends_every_kth_trial_past_the_rungs() -> None:
    """lcbench's ``H<k>`` prototype: every k-th trial is in a bracket without rungs, so the
    policy never prunes it, however bad; the others meet bracket 0's rungs as before."""
    sys.path.insert(0, str(REPO / "benchmarks"))
    from lcbench import MAX_EPOCHS, RungFreeShare

    from costtune.core.policy import Decision

    policy = RungFreeShare(MAX_EPOCHS, 3, grace_epochs=5, eta=5, brackets=1)
    brackets = [policy.on_add(f"t{i}") for i in range(9)]
    assert brackets == [0, 0, 1, 0, 0, 1, 0, 0, 1]
    for i in range(9):  # each trial worse than the last at epoch 5
        decision = policy.on_result(f"t{i}", 5, float(i), 1.0)
        assert decision is (Decision.CONTINUE if i in (0, 2, 5, 8) else Decision.STOP), i
    assert policy.on_result("t8", MAX_EPOCHS, 9.0, 2.0) is Decision.STOP  # done at max_epochs
    assert policy.trials["t8"].stop_reason.value == "completed"


def test_dollar_grace_judges_an_expensive_trial_at_the_dollars_of_a_typical_first_rung() -> None:
    """lcbench's ``D`` prototype: a trial whose epochs cost 2.5× the median first epoch meets the
    first rung (5 epochs) at epoch 2, once it has spent 5 median epochs' dollars; a typical
    trial at epoch 5, as before."""
    sys.path.insert(0, str(REPO / "benchmarks"))
    from lcbench import DollarGrace

    policy = DollarGrace(52, grace_epochs=5, eta=5, brackets=1)
    for i, price in enumerate([1.0, 1.0, 1.0]):  # three typical trials, $1 an epoch
        for epoch in range(1, 6):
            policy.on_result(f"t{i}", epoch, 1.0 - 0.1 * epoch + 0.01 * i, price * epoch)
    assert all(f"t{i}" in policy.rungs[0][5] for i in range(3))
    policy.on_result("dear", 1, 2.0, 2.5)
    assert "dear" not in policy.rungs[0][5]  # $2.50 of the $5 a typical first rung costs
    policy.on_result("dear", 2, 1.5, 5.0)
    assert policy.rungs[0][5]["dear"].loss == 1.5  # judged now, on its epoch-2 loss
    assert policy.trials["dear"].stop_reason.value == "rung_pruned"  # behind the typical ones


def test_bracket_guard_keeps_the_stopper_off_a_later_brackets_trial_until_its_first_rung() -> None:
    """lcbench's ``Y`` prototype: the stopper still sees every epoch of every trial (its books
    move), but a stop it says for a trial of bracket 1 before that bracket's first rung is not
    passed on; bracket 0's trials are judged as before."""
    sys.path.insert(0, str(REPO / "benchmarks"))
    from lcbench import BracketGuard

    from costtune.core.policy import AsyncHyperband, MarginalRoiStopping, StoppingRule

    policy = AsyncHyperband(max_epochs=52, grace_epochs=5, eta=5, brackets=2)
    a, b = policy.on_add("a"), policy.on_add("b")
    early, late = ("a", "b") if a == 0 else ("b", "a")
    assert {a, b} == {0, 1}
    rule = StoppingRule(patience_epochs=2, min_epochs=1)
    guard, plain = BracketGuard(MarginalRoiStopping(rule), policy), MarginalRoiStopping(rule)
    said = {t: [] for t in (early, late)}
    for epoch in range(1, 30):
        for t in (early, late):
            usd = float(epoch)
            said[t].append((guard.on_result(t, 1.0, usd, usd), plain.on_result(t, 1.0, usd, usd)))
    # a flat curve: patience says stop from epoch 3 for both; the guard holds bracket 1 to 25
    assert said[early][2][0] is not None and said[early][2][0] == said[early][2][1]  # bracket 0: as before
    assert all(g is None for g, p in said[late][:24]) and all(p is not None for g, p in said[late][2:24])
    assert said[late][24][0] is not None
    assert guard._spent == plain._spent  # the books moved alike


def test_slow_starters_help_names_every_setting_and_a_bad_one_is_refused() -> None:
    """`slow_starters.py --help` lists its settings (one named with a % once broke it); an
    unknown setting is one line and exit 2, before anything runs."""
    script = [sys.executable, "benchmarks/slow_starters.py"]
    shown = subprocess.run([*script, "--help"], cwd=REPO, capture_output=True, text=True, timeout=60)
    assert shown.returncode == 0, shown.stderr[-2000:]
    assert "stall 2%" in shown.stdout and "default + noise-aware" in " ".join(shown.stdout.split())
    bad = subprocess.run(
        [*script, "--settings", "nope"], cwd=REPO, capture_output=True, text=True, timeout=60
    )
    assert bad.returncode == 2 and "nope" in bad.stderr
    negative = subprocess.run(
        [*script, "--first-table", "-1"], cwd=REPO, capture_output=True, text=True, timeout=60
    )
    assert negative.returncode == 2 and "--first-table" in negative.stderr


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


def test_lcbench_seeds_each_tasks_searchers_apart_and_pairs_the_methods(monkeypatch) -> None:
    """LCBench's tasks share where their good configurations lie, so run ``seed`` of every task
    must not draw the same start-up points (before stop 48 it did: the 8 test tasks ranked seeds
    0-19 by their first five proposals alike, mean pairwise Spearman 0.47). Each (task, seed)
    gets a seed of its own; every method gets the same one there, so the table stays paired, and
    the row keeps the run's seed."""
    sys.path.insert(0, str(REPO / "benchmarks"))
    import lcbench

    got: list[tuple[str, int, str]] = []
    monkeypatch.setattr(
        lcbench, "run_method", lambda task, seed, method: got.append((task.name, seed, method)) or []
    )
    tasks = [
        lcbench.Task(name, 10.0, [], {"GRID": 0.5, "TOP1": 0.4}, {"GRID": 1.0, "TOP1": 2.0}, 0.3)
        for name in lcbench.TEST_TASKS[:3]
    ]
    rows = [
        lcbench.measure(task, seed, method)
        for task in tasks
        for seed in (0, 1)
        for method in ("costtune-hb-tpe", "optuna-tpe-sha-5-5")
    ]
    assert [(r["task"], r["seed"]) for r in rows[::2]] == [(t.name, s) for t in tasks for s in (0, 1)]
    by_run: dict[tuple[str, int], set[int]] = {}
    for (name, seed, _), row in zip(got, rows, strict=True):
        by_run.setdefault((name, row["seed"]), set()).add(seed)
        assert seed == lcbench.task_seed(name, row["seed"]) and 0 <= seed < 2**31
    assert all(len(seeds) == 1 for seeds in by_run.values())  # both methods of a run get its one seed
    assert len({seed for seeds in by_run.values() for seed in seeds}) == 6  # no two runs share one
    # what the seed buys: another task's run 0 starts from other random configurations
    first = [lcbench.random_configs(5, 1000 + lcbench.task_seed(t.name, 0)) for t in tasks]
    assert len({repr(configs) for configs in first}) == 3


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
    policy = guard.policy(AsyncHyperband(60, 5, 5, 1, "loss", "floor", None, None, False))
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


def test_slow_starters_refuses_bad_counts() -> None:
    done = subprocess.run(
        [sys.executable, str(REPO / "benchmarks" / "slow_starters.py"), "--seeds", "0"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2 and "--seeds: must be at least 1, got 0" in done.stderr
    for argv, says in (
        (["--jobs", "0"], "--jobs: must be at least 1, got 0"),
        (["--kinds", "slow,fast"], "--kinds: unknown 'fast'"),
        (["--settings", "default,stoper only"], "--settings: unknown 'stoper only'"),
    ):
        done = subprocess.run(
            [sys.executable, str(REPO / "benchmarks" / "slow_starters.py"), *argv],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 2 and done.stderr.strip().splitlines()[-1].endswith(says), done.stderr


def test_the_products_rung_checks_decide_as_the_rung_probe_prototype_written_apart() -> None:
    """``AsyncHyperband(rung_checks=c)`` (lcbench.py's ``h<c>``) makes the stops of lcbench.py's
    ``RungProbe(failures=c, paces=1)`` (``h<c>y1``, the form measured first), c = 5, on the slow
    starters (where the rung fails a check), their plateaus and LCBench-like power laws that
    keep their ranks (where it passes them), with the default's stopper and escalation."""
    sys.path.insert(0, str(REPO / "benchmarks"))
    import numpy as np
    import slow_starters
    from lcbench import RungProbe

    from costtune.core.curves import Curve
    from costtune.core.policy import AsyncHyperband, MarginalRoiStopping, StoppingRule
    from costtune.core.simulate import simulate
    from costtune.search.pool import OrderedPool

    rng = np.random.default_rng(3)
    keeping = [
        Curve(f"k{i}", {"x": float(i)}, f + 1.5 * np.arange(1, 61) ** -(0.8 + a), np.full(60, 20.0 + i), 1.0)
        for i, (f, a) in enumerate(zip(rng.uniform(0.2, 0.6, 120), rng.uniform(0, 1, 120), strict=True))
    ]
    # (curves, orders): the rung fails a check in slow 0's order 0 and plateau 1's order 2
    tables = [
        (slow_starters.table("slow", 0), (0, 1)),
        (slow_starters.table("plateau", 1), (1, 2)),
        (keeping, (0, 1)),
    ]
    checked = failed = 0
    for curves, orders in tables:
        for seed in orders:
            runs = []
            for make in (
                lambda: AsyncHyperband(60, 5, 5, 1, warmup_trials=10, escalate=True, rung_checks=5),
                lambda: RungProbe(60, failures=5, paces=1.0, grace_epochs=5, warmup_trials=10, escalate=True),
            ):
                policy = make()
                rule = StoppingRule(min_relative_roi=0.3, spare_best=True, max_epochs=60, noise_aware=True)
                pool = OrderedPool(curves, seed=seed)
                sim = simulate(
                    [],
                    policy,
                    stopping=MarginalRoiStopping(rule),
                    max_epochs=60,
                    next_curve=pool.ask,
                    on_trial_end=pool.tell,
                )
                runs.append((sim.stopped_at, policy))
            (product_stops, product), (prototype_stops, prototype) = runs
            assert product_stops == prototype_stops
            assert product.checks.probes == len(prototype.probes)
            assert product.checks.failed == prototype.contradicted
            assert product.open_brackets == prototype.open_brackets
            checked += product.checks.probes
            failed += product.checks.failed
    assert checked > 100 and failed == 2  # both outcomes were exercised


def test_slow_starters_writes_every_run_to_csv(tmp_path) -> None:
    """``--out``: one row per run, the cost share and best loss the table's medians come from."""
    import csv

    out = tmp_path / "runs.csv"
    argv = ["--kinds", "crossing", "--tables", "1", "--seeds", "2", "--settings", "optuna tpe + sha"]
    done = subprocess.run(
        [sys.executable, str(REPO / "benchmarks" / "slow_starters.py"), *argv, "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    rows = list(csv.DictReader(out.open()))
    assert [(r["kind"], r["table"], r["seed"], r["setting"]) for r in rows] == [
        ("crossing", "0", "0", "optuna tpe + sha"),
        ("crossing", "0", "1", "optuna tpe + sha"),
    ]
    line = next(x for x in done.stdout.splitlines() if x.startswith("| crossing | optuna tpe + sha"))
    shares = sorted(min(float(r["cost_share"]), 1.0) for r in rows)
    assert f"| {sum(shares) / 2:.3f} |" in line  # the median of two


def test_lcbench_per_task_prints_each_tasks_floor_multiple_and_stars_the_tasks_that_set_the_median() -> None:
    sys.path.insert(0, str(REPO / "benchmarks"))
    from lcbench import per_task

    rows = []
    # ×floor by task (floor $1): 2, 4, 6 and 30 (a failure: the budget, $30)
    for task, usds in (
        ("3945", (2.0, 2.0, 9.0)),
        ("7593", (4.0,)),
        ("34539", (6.0,)),
        ("126025", (math.inf,)),
    ):
        for seed, usd in enumerate(usds):
            rows.append(
                {
                    "method": "m",
                    "task": task,
                    "seed": seed,
                    "budget": 30.0,
                    "usd_GRID": usd,
                    "floor_GRID": 1.0,
                }
                | {"usd_TOP1": usd, "floor_TOP1": 2.0}
            )
    printed = per_task(rows).splitlines()
    grid = printed[printed.index(next(line for line in printed if "target GRID" in line)) + 3]
    assert grid == "| m | 2.0 | 4.0* | 6.0* | 30.0 | 5.0 |"
    top1 = printed[printed.index(next(line for line in printed if "target TOP1" in line)) + 3]
    assert top1 == "| m | 1.0 | 2.0* | 3.0* | 15.0 | 2.5 |"


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
