"""``IdleGpuStopper``: the idle-GPU watchdog as a Ray Tune stopper."""

from __future__ import annotations

import socket
import sys
from collections.abc import Callable
from typing import Any

from costtune.idle import GpuSampler, NvmlSampler, trial_utilization
from costtune.policy.decisions import StopReason
from costtune.policy.idle import IdleTracker
from costtune.policy.stopping import Governor
from costtune.schedulers.governed import shared_governor


class IdleGpuStopper:
    """A ``ray.tune.Stopper`` that ends a GPU trial whose GPUs stay idle for ``idle_minutes``.

    A trial is matched to its GPUs by its process (``result["pid"]``) or, where NVML does not
    list that process, by the GPUs it reports holding (``result["gpu_uuids"]``, which the
    built-in trainable fills): :func:`~costtune.idle.trial_utilization`. A trial that holds
    GPUs but runs nothing on any of them counts as 0% busy. A trial this machine's NVML
    cannot see (on another node of a cluster, or in another PID namespace without
    ``gpu_uuids``) is never judged idle: the sweep says so once. Checked on every reported
    result; stop_reason ``idle``.

    Args:
        sampler_factory: builds the sampler on first use (NVML handles do not pickle, and
            Tune pickles its stoppers).
        governor: the sweep's governor. Where given, an idle stop is written in its
            ``reasons``, which every piece of a resumed sweep reads through one object
            (:func:`~costtune.schedulers.governed.shared_governor`): Tune calls one unpickled
            copy of this stopper and the books ask another, so a set kept here would have the
            books write an idle stop down as ``completed`` after a resume.
    """

    def __init__(
        self,
        sampler_factory: Callable[[], GpuSampler] = NvmlSampler,
        util_below_pct: float = 1.0,
        idle_minutes: float = 120.0,
        governor: Governor | None = None,
    ) -> None:
        self.sampler_factory = sampler_factory
        self.tracker = IdleTracker(util_below_pct, idle_minutes * 60)
        self.stopped: set[str] = set()
        self.governor = shared_governor(governor)
        self._sampler: GpuSampler | None = None
        self._warned = False

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "_sampler": None}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update({"governor": None, **state})  # one pickled before the governor
        self.governor = shared_governor(self.governor)

    def __call__(self, trial_id: str, result: dict[str, Any]) -> bool:
        if self._sampler is None:
            self._sampler = self.sampler_factory()
        snapshot = self._sampler.sample()
        named = result.get("gpu_uuids") or ""
        uuids = [str(u) for u in named] if isinstance(named, list | tuple) else str(named).split(",")
        host = result.get("hostname")
        util: float | None = None
        if host is None or host == socket.gethostname():
            pid = result.get("pid")
            util = trial_utilization(snapshot, int(pid) if pid is not None else None, uuids)
        if util is None:
            if not self._warned:
                self._warned = True
                where = (
                    f"on {host}" if host not in (None, socket.gethostname()) else "in another PID namespace"
                )
                print(
                    f"costtune: the idle-GPU watchdog cannot see trial {trial_id}'s GPUs (it runs {where}); "
                    "such trials are not judged idle",
                    file=sys.stderr,
                )
            return False
        if self.tracker.is_idle(self.tracker.observe(trial_id, snapshot.time, util)):
            self.stopped.add(trial_id)
            if self.governor is not None:
                self.governor.reasons.setdefault(trial_id, StopReason.IDLE)
            return True
        return False

    def stop_all(self) -> bool:
        return False

    def stop_reason(self, trial_id: str) -> str | None:
        if self.governor is not None:
            reason = self.governor.reasons.get(trial_id)
            return StopReason.IDLE.value if reason is StopReason.IDLE else None
        return StopReason.IDLE.value if trial_id in self.stopped else None
