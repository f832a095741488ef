"""Real costtune sweeps on a GPU: metered GPU-hours against NVML, and the idle watchdog.

One command (on a machine with an NVIDIA GPU and NVML)::

    .venv/bin/python benchmarks/gpu_sweep.py --out gpu_sweep [--trials 8] [--idle-minutes 1]

1. ``metering``: an N-trial ``costtune sweep`` of the built-in AMP trainable (bf16, the CNN on
   digits) with ``resources: {gpus: 1}``, while a thread reads NVML every 0.25 s (kept as
   ``metering_trace.jsonl``, in ``costtune watch-idle --trace`` format). Prints the sweep's wall
   clock, the seconds some process held a CUDA context on the GPU and the seconds the GPU ran
   a kernel (both from NVML), the metered GPU-hours summed over the trials, and how the
   trials matched to the GPU: by process id (does NVML list the pid Ray reports?) and by the
   ``gpu_uuids`` the trainable reports.
2. ``idle``: two trials of ``gpu_trainables:hold_gpu`` through ``costtune sweep`` with ``idle:
   {enabled: true, idle_minutes: M}``, one after the other on the GPU: one holds a CUDA
   context and sleeps, one keeps the GPU busy; each reports every 2 s for M minutes + 20 s
   (both scaled down below a minute).
   The idle one must end ``idle`` after about M minutes, the busy one ``completed``.
3. ``shared``: the same two trials at once on the one GPU (``gpus: 0.5`` each), where the GPU
   is busy for both while one works: told apart by NVML's per-process SM utilisation.

Writes ``gpu_sweep.json`` (every figure) under ``--out``. ``--gpus 0`` runs the same plumbing
on CPU without NVML (a smoke test: no figures mean anything there).
"""

from __future__ import annotations

import argparse
import json
import sys
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from ray import tune

from costtune.core.config import parse_config
from costtune.idle import GpuSnapshot, NvmlSampler, NvmlUnavailable, snapshot_to_dict
from costtune.sweep import run_sweep

HERE = Path(__file__).resolve().parent


class Results(tune.Callback):
    """Keeps, per trial, the process fields of every result (pid, host, gpu_uuids)."""

    def __init__(self) -> None:
        self.seen: list[dict[str, Any]] = []

    def on_trial_result(self, iteration: int, trials: list[Any], trial: Any, result: dict[str, Any]) -> None:
        self.seen.append(
            {
                "trial_id": trial.trial_id,
                "time": time.time(),
                "pid": result.get("pid"),
                "hostname": result.get("hostname"),
                "gpu_uuids": result.get("gpu_uuids", ""),
            }
        )


class Recorder:
    """Reads NVML every ``interval`` seconds in a thread while a sweep runs."""

    def __init__(self, interval: float = 0.25) -> None:
        self.interval = interval
        self.snapshots: list[GpuSnapshot] = []
        self._done = threading.Event()
        try:
            self._sampler: NvmlSampler | None = NvmlSampler()
        except NvmlUnavailable as exc:
            print(f"no NVML: {exc}")
            self._sampler = None
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while self._sampler is not None and not self._done.is_set():
            self.snapshots.append(self._sampler.sample())
            self._done.wait(self.interval)

    def __enter__(self) -> Recorder:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._done.set()
        self._thread.join()
        if self._sampler is not None:
            self._sampler.close()

    def save(self, path: Path) -> None:
        path.write_text("".join(json.dumps(snapshot_to_dict(s)) + "\n" for s in self.snapshots))

    def seconds(self, held: bool) -> float:
        """Seconds GPU 0 had a compute process (held) or ran a kernel (not held: utilisation > 0)."""
        total = 0.0
        for a, b in zip(self.snapshots, self.snapshots[1:], strict=False):
            gpu = a.gpus[0]
            if gpu.processes if held else gpu.utilization_pct > 0:
                total += b.time - a.time
        return total


def match(seen: list[dict[str, Any]], snapshots: list[GpuSnapshot]) -> dict[str, Any]:
    """For each result: is its pid among NVML's processes at the nearest reading, its uuid a GPU's?"""
    if not snapshots:
        return {}
    times = [s.time for s in snapshots]
    by_pid = by_uuid = 0
    for r in seen:
        i = min(range(len(times)), key=lambda k: abs(times[k] - r["time"]))
        snap = snapshots[i]
        pids = {p.pid for g in snap.gpus for p in g.processes}
        uuids = {g.uuid for g in snap.gpus}
        by_pid += int(r["pid"] in pids)
        by_uuid += int(bool(set(str(r["gpu_uuids"]).split(",")) & uuids))
    return {
        "results": len(seen),
        "pid_listed_by_nvml": by_pid,
        "gpu_uuid_matched": by_uuid,
        "nvml_pids": sorted({p.pid for s in snapshots for g in s.gpus for p in g.processes}),
        "ray_pids": sorted({r["pid"] for r in seen}),
        "gpu_uuids": sorted({g.uuid for s in snapshots for g in s.gpus}),
    }


def metering(out: Path, trials: int, gpus: float) -> dict[str, Any]:
    config = parse_config(
        {
            "name": "gpu-metering",
            "trainable": {"name": "amp", "args": {"model": "cnn", "dataset": "digits", "precision": "bf16"}},
            "metric": "val_loss",
            "max_epochs": 20,
            "num_samples": trials,
            "max_concurrent_trials": 1,
            "search_space": {
                "lr": {"type": "loguniform", "low": 1e-4, "high": 3e-2},
                "width": {"type": "choice", "values": [32, 64, 128]},
            },
            "cost": {"accelerator": "H200"},
            "resources": {"cpus": 2, "gpus": gpus},
        }
    )
    results = Results()
    start = time.time()
    with Recorder() as rec:
        result = run_sweep(config, out / "metering", callbacks=[results])
    wall = time.time() - start
    rec.save(out / "metering_trace.jsonl")
    frame = result.trials
    return {
        "trials": len(frame),
        "epochs": int(frame["epochs"].sum()),
        "stop_reasons": frame["stop_reason"].value_counts().to_dict(),
        "sweep_wall_s": wall,
        "nvml_context_held_s": rec.seconds(held=True),
        "nvml_kernel_running_s": rec.seconds(held=False),
        "metered_gpu_hours": float(frame["gpu_hours"].sum()),
        "metered_gpu_s": float(frame["gpu_hours"].sum()) * 3600,
        "metered_usd": float(frame["cost_usd"].sum()),
        "metered_trial_s": float(frame["seconds"].sum()),
        "best_val_loss": float(frame["best_val_loss"].min()),
        "match": match(results.seen, rec.snapshots),
    }


def idle(out: Path, minutes: float, gpus: float, share: bool = False) -> dict[str, Any]:
    seconds = minutes * 60 + min(20.0, minutes * 20)  # the busy trial outlives the window
    report_s = min(2.0, minutes * 2)  # every 2 s at a window of a minute or more
    per_trial = gpus / 2 if share else gpus  # shared: both trials on the one GPU at once
    config = parse_config(
        {
            "name": "gpu-idle-shared" if share else "gpu-idle",
            "trainable": {
                "name": "gpu_trainables:hold_gpu",
                "args": {"report_s": report_s, "seconds": seconds},
            },
            "metric": "loss",
            "max_epochs": 1000,
            "num_samples": 1,
            "max_concurrent_trials": 2 if share else 1,
            "search_space": {"mode": {"type": "choice", "values": ["idle", "busy"]}},
            "searcher": {"type": "grid"},
            "scheduler": {"type": "fifo"},
            "stopping": {"min_relative_roi": None},
            "cost": {"accelerator": "H200"},
            "resources": {"cpus": 1, "gpus": per_trial},
            "idle": {"enabled": gpus > 0, "idle_minutes": minutes},
        }
    )
    results = Results()
    start = time.time()
    with Recorder() as rec:
        result = run_sweep(config, out / config.name, callbacks=[results], approved=True, config_dir=HERE)
    rec.save(out / f"{config.name}_trace.jsonl")
    frame = result.trials
    mode_col = next(c for c in frame.columns if c.endswith("mode"))
    modes = dict(zip(frame["trial_id"], frame[mode_col].astype(str), strict=True))
    pids: dict[str, set[int]] = {}
    for x in results.seen:
        pids.setdefault(modes.get(x["trial_id"], "?"), set()).add(int(x["pid"]))
    rows = {
        str(r[mode_col]): {
            "stop_reason": str(r["stop_reason"]),
            "epochs": int(r["epochs"]),
            "seconds": float(r["seconds"]),
            "gpu_hours": float(r["gpu_hours"]),
        }
        for _, r in frame.iterrows()
    }
    for _, r in frame.iterrows():  # when each trial reported first and last, from the sweep's start
        times = [x["time"] - start for x in results.seen if x["trial_id"] == r["trial_id"]]
        rows[str(r[mode_col])]["reported_s"] = [min(times, default=None), max(times, default=None)]
    util = [s.gpus[0].utilization_pct for s in rec.snapshots]
    sm = {
        mode: [
            p.sm_pct
            for s in rec.snapshots
            for p in s.gpus[0].processes
            if p.sm_pct is not None and p.pid in pids.get(mode, set())
        ]
        for mode in rows
    }
    return {
        "idle_minutes": minutes,
        "shared": share,
        "trials": rows,
        "nvml_util_max": max(util, default=None),
        "per_process_sm": {m: {"readings": len(v), "max": max(v, default=None)} for m, v in sm.items()},
        "match": match(results.seen, rec.snapshots),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("gpu_sweep"))
    parser.add_argument("--trials", type=int, default=8)
    parser.add_argument("--idle-minutes", type=float, default=1.0)
    parser.add_argument("--gpus", type=float, default=1.0, help="0: the CPU smoke test")
    parser.add_argument("--parts", default="metering,idle,shared", help="metering, idle, shared")
    args = parser.parse_args()
    if args.trials < 1:
        parser.error(f"--trials: must be at least 1, got {args.trials}")
    if not args.idle_minutes > 0:
        parser.error(f"--idle-minutes: must be above 0, got {args.idle_minutes}")
    if not args.gpus >= 0:
        parser.error(f"--gpus: must be 0 or more, got {args.gpus}")
    args.out.mkdir(parents=True, exist_ok=True)
    figures: dict[str, Any] = {}
    for part in args.parts.split(","):
        t = time.time()
        if part not in ("metering", "idle", "shared"):
            parser.error(f"--parts: unknown part {part!r} (metering, idle, shared)")
        if part == "metering":
            figures[part] = metering(args.out, args.trials, args.gpus)
        else:
            figures[part] = idle(args.out, args.idle_minutes, args.gpus, share=part == "shared")
        figures[part]["part_wall_s"] = time.time() - t
        print(part, json.dumps(figures[part], indent=1, default=str), flush=True)
        (args.out / "gpu_sweep.json").write_text(json.dumps(figures, indent=1, default=str))


if __name__ == "__main__":
    main()
