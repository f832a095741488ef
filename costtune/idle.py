"""Idle-GPU watchdog: reclaim GPUs that sit below 1% utilisation for hours.

Everything reads GPUs through one small interface, :class:`GpuSampler`: NVML in production
(:class:`NvmlSampler`, from the ``[gpu]`` extra), a recorded trace in tests and replays
(:class:`TraceSampler`). The decisions (:class:`IdleTracker`) are pure: timestamps and
utilisations in, "idle for N seconds" out.

Two users: the Ray Tune stopper :class:`IdleGpuStopper` (ends a GPU trial whose GPUs stay
idle for ``idle_minutes``; stop_reason ``idle``) and ``costtune watch-idle`` (per-process,
for dev containers and notebooks: report, pause with SIGSTOP, or stop with SIGTERM).
"""

from __future__ import annotations

import json
import os
import signal
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Protocol

from costtune.core.policy.idle import IdleTracker
from costtune.errors import ConfigError, CosttuneError


class NvmlUnavailable(CosttuneError):
    """No NVIDIA driver (or no nvidia-ml-py) on this machine."""


@dataclass(frozen=True, slots=True)
class GpuProcess:
    pid: int
    used_memory_mb: float = 0.0
    #: the process's own share of the GPU's time running kernels since the previous reading
    #: (NVML's per-process SM utilisation); None where NVML cannot say, and then the GPU's
    #: utilisation stands for it
    sm_pct: float | None = None


@dataclass(frozen=True, slots=True)
class GpuSample:
    index: int
    utilization_pct: float
    memory_used_mb: float = 0.0
    memory_total_mb: float = 0.0
    power_w: float | None = None
    processes: tuple[GpuProcess, ...] = ()
    uuid: str = ""  # NVML's "GPU-…" (or "MIG-…"): names a GPU the same way on every process


@dataclass(frozen=True, slots=True)
class GpuSnapshot:
    """Every GPU of a machine at one moment (unix seconds)."""

    time: float
    gpus: tuple[GpuSample, ...]


class GpuSampler(Protocol):
    def sample(self) -> GpuSnapshot: ...


class NvmlSampler:
    """Reads utilisation, memory, power and compute processes per GPU through NVML."""

    def __init__(self) -> None:
        try:
            import pynvml
        except ImportError:
            raise NvmlUnavailable(
                "NVML: nvidia-ml-py is not installed (pip install 'costtune[gpu]')"
            ) from None
        try:
            pynvml.nvmlInit()
        except pynvml.NVMLError as exc:
            raise NvmlUnavailable(f"NVML: no NVIDIA driver on this machine ({exc})") from None
        self._nvml = pynvml
        self._seen: dict[int, int] = {}  # per GPU: the newest per-process sample read (µs)

    def _process_sm(self, handle: Any, index: int) -> dict[int, float] | None:
        """pid → its SM utilisation since the previous reading; None where NVML cannot say."""
        nv = self._nvml
        try:
            samples = nv.nvmlDeviceGetProcessUtilization(handle, self._seen.get(index, 0))
        except nv.NVMLError as exc:
            if exc.value in (nv.NVML_SUCCESS, nv.NVML_ERROR_NOT_FOUND):
                return {}  # no process ran a kernel since the previous reading
            return None  # not supported here
        sm: dict[int, float] = {}
        for sample in samples:
            sm[sample.pid] = max(sm.get(sample.pid, 0.0), min(float(sample.smUtil), 100.0))
            self._seen[index] = max(self._seen.get(index, 0), int(sample.timeStamp))
        return sm

    def sample(self) -> GpuSnapshot:
        nv = self._nvml
        gpus = []
        for index in range(nv.nvmlDeviceGetCount()):
            handle = nv.nvmlDeviceGetHandleByIndex(index)
            memory = nv.nvmlDeviceGetMemoryInfo(handle)
            try:
                power: float | None = nv.nvmlDeviceGetPowerUsage(handle) / 1000.0
            except nv.NVMLError:
                power = None
            sm = self._process_sm(handle, index)
            processes = tuple(
                GpuProcess(p.pid, (p.usedGpuMemory or 0) / 2**20, None if sm is None else sm.get(p.pid, 0.0))
                for p in nv.nvmlDeviceGetComputeRunningProcesses(handle)
            )
            uuid = nv.nvmlDeviceGetUUID(handle)
            gpus.append(
                GpuSample(
                    index=index,
                    utilization_pct=float(nv.nvmlDeviceGetUtilizationRates(handle).gpu),
                    memory_used_mb=memory.used / 2**20,
                    memory_total_mb=memory.total / 2**20,
                    power_w=power,
                    processes=processes,
                    uuid=uuid.decode() if isinstance(uuid, bytes) else str(uuid),
                )
            )
        return GpuSnapshot(time.time(), tuple(gpus))

    def close(self) -> None:
        self._nvml.nvmlShutdown()


class TraceSampler:
    """Replays a recorded trace, one snapshot per call (the last one repeats).

    A trace is JSON lines: ``{"time": 0, "gpus": [{"index": 0, "utilization_pct": 0.0,
    "processes": [{"pid": 123}]}]}``.
    """

    def __init__(self, snapshots: Iterable[GpuSnapshot]) -> None:
        self.snapshots = list(snapshots)
        if not self.snapshots:
            raise ConfigError("trace: no snapshots")
        self._next = 0

    @classmethod
    def from_file(cls, path: str | Path) -> TraceSampler:
        try:
            lines = Path(path).read_text(encoding="utf-8").splitlines()
        except OSError as exc:
            raise ConfigError(f"trace: cannot read {path}: {exc.strerror}") from None
        try:
            return cls(snapshot_from_dict(json.loads(line)) for line in lines if line.strip())
        except (ValueError, KeyError, TypeError) as exc:
            raise ConfigError(f"trace: {path} is not a GPU trace ({exc})") from None

    def sample(self) -> GpuSnapshot:
        snap = self.snapshots[min(self._next, len(self.snapshots) - 1)]
        self._next += 1
        return snap


def snapshot_from_dict(data: dict[str, Any]) -> GpuSnapshot:
    gpus = tuple(
        GpuSample(
            index=int(g["index"]),
            utilization_pct=float(g["utilization_pct"]),
            memory_used_mb=float(g.get("memory_used_mb", 0.0)),
            memory_total_mb=float(g.get("memory_total_mb", 0.0)),
            power_w=g.get("power_w"),
            processes=tuple(
                GpuProcess(
                    int(p["pid"]),
                    float(p.get("used_memory_mb", 0.0)),
                    None if p.get("sm_pct") is None else float(p["sm_pct"]),
                )
                for p in g.get("processes", [])
            ),
            uuid=str(g.get("uuid", "")),
        )
        for g in data["gpus"]
    )
    return GpuSnapshot(float(data["time"]), gpus)


def snapshot_to_dict(snapshot: GpuSnapshot) -> dict[str, Any]:
    return asdict(snapshot)


# ------------------------------------------------------------------------ decisions
def process_utilization(snapshot: GpuSnapshot) -> dict[int, tuple[float, tuple[int, ...]]]:
    """Per pid: how busy it keeps the busiest of the GPUs it holds, and which GPUs those are.

    Its own SM utilisation where NVML gives one (a GPU shared by several trials, Ray's
    fractional ``gpus``, is busy for all of them while one works), else the GPU's.
    """
    out: dict[int, tuple[float, tuple[int, ...]]] = {}
    for gpu in snapshot.gpus:
        for proc in gpu.processes:
            own = gpu.utilization_pct if proc.sm_pct is None else proc.sm_pct
            util, indices = out.get(proc.pid, (0.0, ()))
            out[proc.pid] = (max(util, own), (*indices, gpu.index))
    return out


def visible_gpu_uuids() -> tuple[str, ...]:
    """The NVML names ("GPU-…") of the GPUs this process sees through CUDA; () without CUDA.

    Ray gives a trial its GPUs through ``CUDA_VISIBLE_DEVICES``; a trial that reports these
    (the built-in trainable does, as the ``gpu_uuids`` result field) can be matched to its GPUs
    where its process id cannot be: inside a container, NVML lists the host's process ids.
    Reads torch's device properties; call it once CUDA is in use.
    """
    try:
        import torch
    except ImportError:
        return ()
    if not torch.cuda.is_available():
        return ()
    uuids = []
    for i in range(torch.cuda.device_count()):
        name = str(getattr(torch.cuda.get_device_properties(i), "uuid", "") or "")
        if name:
            uuids.append(name if name.startswith(("GPU-", "MIG-")) else f"GPU-{name}")
    return tuple(uuids)


def _pid_here(pid: int) -> bool:
    return Path(f"/proc/{pid}").exists()


def trial_utilization(
    snapshot: GpuSnapshot,
    pid: int | None,
    uuids: Iterable[str] = (),
    pid_here: Callable[[int], bool] = _pid_here,
) -> float | None:
    """How busy one trial's GPUs are in ``snapshot``, or None where the snapshot cannot tell.

    1. Its process runs on GPUs: the busiest of those (exact, per process).
    2. Else the GPUs it says it holds (``uuids``, its ``gpu_uuids`` result field) are on this
       machine: the busiest of those (Ray gives each GPU to one trial).
    3. Else, where every process NVML lists is one of this machine's (``pid_here``: one PID
       namespace): 0 %, as it holds GPUs and runs nothing on any of them.
    4. Else None: NVML lists another PID namespace's ids (a container), so not finding the
       trial's process there says nothing about it.
    """
    per_pid = process_utilization(snapshot)
    if pid is not None and pid in per_pid:
        return per_pid[pid][0]
    wanted = {u for u in uuids if u}
    held = [g.utilization_pct for g in snapshot.gpus if g.uuid and g.uuid in wanted]
    if held:
        return max(held)
    if all(pid_here(p) for p in per_pid):
        return 0.0
    return None


# ---------------------------------------------------------------------- watch-idle
ACTIONS = ("report", "pause", "stop")


@dataclass
class IdleWatcher:
    """Watches per-process GPU use and acts once on every process idle for too long.

    Args:
        sampler: where readings come from.
        tracker: the idle rule.
        action: ``report`` (log only), ``pause`` (SIGSTOP) or ``stop`` (SIGTERM).
        dry_run: log what would be done, send nothing.
        log: receives one dict per action (the CLI prints them as JSON lines).
        send_signal: ``os.kill`` (replaceable where signals cannot be sent).
    """

    sampler: GpuSampler
    tracker: IdleTracker
    action: str = "report"
    dry_run: bool = False
    log: Callable[[dict[str, Any]], None] = print
    send_signal: Callable[[int, int], None] = os.kill
    acted: set[int] = field(default_factory=set)

    def __post_init__(self) -> None:
        if self.action not in ACTIONS:
            raise ConfigError(f"--action: must be one of {', '.join(ACTIONS)}, got {self.action!r}")

    def step(self) -> list[dict[str, Any]]:
        snapshot = self.sampler.sample()
        per_pid = process_utilization(snapshot)
        for pid in set(self.tracker.since) - set(per_pid):
            self.tracker.forget(pid)  # the process left its GPUs
        events = []
        for pid, (util, gpus) in sorted(per_pid.items()):
            idle_for = self.tracker.observe(pid, snapshot.time, util)
            if not self.tracker.is_idle(idle_for) or pid in self.acted:
                continue
            event = {
                "time": snapshot.time,
                "pid": pid,
                "gpus": list(gpus),
                "utilization_pct": util,
                "idle_minutes": round(idle_for / 60, 1),
                "action": self.action,
                "dry_run": self.dry_run,
            }
            if self.action != "report" and not self.dry_run:
                sig = signal.SIGSTOP if self.action == "pause" else signal.SIGTERM
                try:
                    self.send_signal(pid, sig)
                except ProcessLookupError:
                    event["error"] = "process already gone"
                except PermissionError:
                    event["error"] = "not permitted to signal this process"
            self.acted.add(pid)
            self.log(event)
            events.append(event)
        return events

    def run(
        self, interval_s: float, iterations: int | None = None, sleep: Callable[[float], None] = time.sleep
    ) -> None:
        for i in _count(iterations):
            self.step()
            if iterations is None or i + 1 < iterations:
                sleep(interval_s)


def _count(limit: int | None) -> Iterator[int]:
    i = 0
    while limit is None or i < limit:
        yield i
        i += 1
