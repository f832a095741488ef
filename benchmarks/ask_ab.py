"""The searchers' ask, this checkout against another, side by side in one process.

One command: `.venv/bin/python benchmarks/ask_ab.py --base ../older-checkout [--trials 1000]`.
`--base` is another checkout of costtune (a `git worktree add` of an earlier commit). Its
`costtune/tpe.py` and `costtune/gp.py` are loaded beside this checkout's. For each searcher,
two studies are given the same told trials: one with the base's sampler, one with this
checkout's. Their asks then alternate one by one, the first side switching each time, so that a
noisy machine slows both alike. Each line prints:

- the two median asks;
- the median of the per-ask ratios (this ÷ base), and how often this side was the faster;
- how many proposals were the same to 1e-9 (a change meant to be faster only must say all).

The searchers are those of `benchmarks/overhead.py --searchers`: `quick-tpe` (a sweep's
`searcher: {type: optuna}`), `gp` (the default searcher, its own ask), and `gp-noise` (the
default told losses that no hyperparameter explains, so that its model check hands each ask
to TPE), each with 0 and 7 trials running.
"""

from __future__ import annotations

import argparse
import importlib.util
import math
import random
import statistics
import sys
import time
from pathlib import Path
from types import ModuleType
from typing import Any

import optuna

REPO = Path(__file__).resolve().parent.parent
KINDS = ("quick-tpe", "gp", "gp-noise")


def _load(name: str, path: Path, tpe: ModuleType | None = None) -> ModuleType:
    """``path`` as module ``name``; with ``tpe``, its ``from costtune.tpe import`` reads that."""
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ValueError(f"cannot load {path}")
    module = importlib.util.module_from_spec(spec)
    saved = sys.modules.get("costtune.tpe")
    if tpe is not None:
        sys.modules["costtune.tpe"] = tpe
    try:
        spec.loader.exec_module(module)
    finally:
        if saved is not None:
            sys.modules["costtune.tpe"] = saved
    return module


def sides(base: Path) -> dict[str, tuple[ModuleType, ModuleType]]:
    """(tpe, gp) modules for the base checkout and this one; the base's GP falls back to the
    base's TPE."""
    for name in ("tpe.py", "gp.py"):
        if not (base / "costtune" / name).is_file():
            raise ValueError(f"{base} has no costtune/{name}")
    import costtune.gp as gp
    import costtune.tpe as tpe

    base_tpe = _load("costtune_base_tpe", base / "costtune" / "tpe.py")
    return {
        "base": (base_tpe, _load("costtune_base_gp", base / "costtune" / "gp.py", base_tpe)),
        "this": (tpe, gp),
    }


#: LCBench's 7 parameters, as ``overhead.py --searchers`` asks them
SPACE = {
    "batch_size": optuna.distributions.IntDistribution(16, 512, log=True),
    "learning_rate": optuna.distributions.FloatDistribution(1e-4, 1e-1, log=True),
    "momentum": optuna.distributions.FloatDistribution(0.1, 0.99),
    "weight_decay": optuna.distributions.FloatDistribution(1e-5, 1e-1, log=True),
    "num_layers": optuna.distributions.IntDistribution(1, 5),
    "max_units": optuna.distributions.IntDistribution(64, 1024, log=True),
    "max_dropout": optuna.distributions.FloatDistribution(0.0, 1.0),
}


def smooth_loss(p: dict[str, Any]) -> float:
    """A loss of LCBench's parameters that a model can learn (``overhead.py --searchers``)."""
    return (
        (math.log10(p["learning_rate"]) + 2) ** 2
        + 0.1 * abs(p["num_layers"] - 3)
        + p["max_dropout"] ** 2
        + 0.01 * math.log(p["batch_size"])
    )


def random_configuration(rng: random.Random) -> dict[str, Any]:
    """A uniform draw of :data:`SPACE` (log-uniform where a parameter is log), as told."""
    out = {}
    for name, d in SPACE.items():
        if isinstance(d, optuna.distributions.IntDistribution):
            value: float = rng.randint(d.low, d.high)
        elif d.log:
            value = math.exp(rng.uniform(math.log(d.low), math.log(d.high)))
        else:
            value = rng.uniform(d.low, d.high)
        out[name] = d.to_external_repr(d.to_internal_repr(value))
    return out


def compare(
    kind: str, modules: dict[str, tuple[ModuleType, ModuleType]], trials: int, asks: int, running: int
) -> dict[str, Any]:
    """Both sides' asks on the same study, alternated; see the module's docstring."""
    from costtune.config import MODEL_CHECK_DEFAULT

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    studies, pending, noise = {}, {}, {}
    for side, (tpe, gp) in modules.items():
        if kind == "quick-tpe":
            sampler = tpe.QuickTPESampler(seed=0)
        else:
            sampler = gp.CpuGPSampler(
                fast_from=gp.FAST_ASK_FROM, model_check=MODEL_CHECK_DEFAULT, seed=0, n_startup_trials=10
            )
        study = optuna.create_study(sampler=sampler)
        rng, noise[side] = random.Random(0), random.Random(1)
        told = []
        for _ in range(trials):
            params = random_configuration(rng)
            value = noise[side].gauss(0.0, 1.0) if kind == "gp-noise" else smooth_loss(params)
            told.append(optuna.trial.create_trial(params=params, distributions=SPACE, value=value))
        study.add_trials(told)
        studies[side], pending[side] = study, [study.ask(SPACE) for _ in range(running)]
    took: dict[str, list[float]] = {side: [] for side in modules}
    same = 0
    for i in range(asks):
        proposed = {}
        for side in ("base", "this") if i % 2 else ("this", "base"):
            study = studies[side]
            started = time.perf_counter()
            trial = study.ask(SPACE)
            took[side].append(time.perf_counter() - started)
            proposed[side] = trial.params
            pending[side].append(trial)
            told_trial = pending[side].pop(0)
            value = noise[side].gauss(0.0, 1.0) if kind == "gp-noise" else smooth_loss(told_trial.params)
            study.tell(told_trial, value)
        same += all(math.isclose(proposed["base"][k], proposed["this"][k], rel_tol=1e-9) for k in SPACE)
    ratios = [b / a for a, b in zip(took["base"], took["this"], strict=True)]
    return {
        "base": statistics.median(took["base"]),
        "this": statistics.median(took["this"]),
        "ratio": statistics.median(ratios),
        "faster": sum(r < 1 for r in ratios),
        "same": same,
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--base",
        type=Path,
        required=True,
        help="another checkout of costtune (its costtune/tpe.py and gp.py)",
    )
    parser.add_argument("--trials", type=int, default=1000, help="trials told before the asks (default 1000)")
    parser.add_argument("--asks", type=int, default=200, help="asks a side, per line (default 200)")
    parser.add_argument("--kinds", default=",".join(KINDS), help=f"comma-separated, of {', '.join(KINDS)}")
    parser.add_argument(
        "--running", default="0,7", help="trials left running at each ask, comma-separated (default 0,7)"
    )
    args = parser.parse_args(argv)
    kinds = [k for k in args.kinds.split(",") if k]
    if not kinds or any(k not in KINDS for k in kinds):
        parser.error(f"--kinds: each must be one of {', '.join(KINDS)}, got {args.kinds!r}")
    try:
        running = [int(r) for r in args.running.split(",")]
    except ValueError:
        parser.error(f"--running: comma-separated whole numbers, got {args.running!r}")
    if args.trials < 20 or args.asks < 1 or any(r < 0 for r in running):
        parser.error("--trials: at least 20; --asks: at least 1; --running: none below 0")
    try:
        modules = sides(args.base.resolve())
    except (ValueError, OSError, ImportError, SyntaxError) as e:
        parser.error(f"--base: {e}")
    print(f"the ask at {args.trials:,} told trials, {args.asks} asks a side, alternated; base: {args.base}")
    print(f"{'searcher':>10}{'running':>9}{'base ms':>9}{'this ms':>9}{'ratio':>8}{'faster':>9}{'same':>9}")
    for kind in kinds:
        for r in running:
            row = compare(kind, modules, args.trials, args.asks, r)
            print(
                f"{kind:>10}{r:>9}{row['base'] * 1e3:>9.2f}{row['this'] * 1e3:>9.2f}{row['ratio']:>8.3f}"
                f"{row['faster']:>5}/{args.asks:<3}{row['same']:>5}/{args.asks:<3}"
            )


if __name__ == "__main__":
    main()
