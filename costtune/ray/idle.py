"""``IdleGpuStopper``: the idle-GPU watchdog as a Ray Tune stopper."""

from __future__ import annotations

import socket
import sys
from collections.abc import Callable
from typing import Any

from costtune.core.policy.decisions import StopReason
from costtune.core.policy.idle import IdleTracker
from costtune.core.policy.stopping import Governor
from costtune.idle import (
    GpuSampler,
    GpuSnapshot,
    NvmlSampler,
    snapshot_from_dict,
    snapshot_to_dict,
    trial_utilization,
)
from costtune.ray.governed import shared_governor


class NodeGpuProbe:
    """Reads one node's GPUs where a trial runs, as a Ray actor pinned to that node.

    The driver's NVML sees only the driver's node; a trial on another node of a cluster is
    read here, by a zero-CPU actor that the stopper starts on that node the first time one of
    its trials reports.
    """

    def __init__(self, sampler_factory: Callable[[], GpuSampler]) -> None:
        self.sampler = sampler_factory()

    def sample(self) -> dict[str, Any]:
        return snapshot_to_dict(self.sampler.sample())


def _probe_on(node_ip: str, sampler_factory: Callable[[], GpuSampler]) -> Any:
    """A :class:`NodeGpuProbe` on the live node at ``node_ip`` (None where there is none)."""
    import ray
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    node_id = next(
        (n["NodeID"] for n in ray.nodes() if n.get("Alive") and n.get("NodeManagerAddress") == node_ip), None
    )
    if node_id is None:
        return None
    return (
        ray.remote(NodeGpuProbe)
        .options(num_cpus=0, scheduling_strategy=NodeAffinitySchedulingStrategy(node_id, soft=False))
        .remote(sampler_factory)
    )


class IdleGpuStopper:
    """A ``ray.tune.Stopper`` that ends a GPU trial whose GPUs stay idle for ``idle_minutes``.

    A trial is read on its own node: through the driver's sampler where it runs on the
    driver's host, else through a :class:`NodeGpuProbe` on its node (``result["node_ip"]``).
    It is matched to its GPUs by its process (``result["pid"]``) or, where NVML does not list
    that process, by the GPUs it reports holding (``result["gpu_uuids"]``, which the built-in
    trainable fills): :func:`~costtune.idle.trial_utilization`. A trial that holds GPUs but
    runs nothing on any of them counts as 0% busy. A trial whose GPUs cannot be read (in
    another PID namespace without ``gpu_uuids``, on a node without NVML) is never judged idle:
    the sweep says so once. Checked on every reported result; stop_reason ``idle``.

    Args:
        sampler_factory: builds the sampler on first use (NVML handles do not pickle, and
            Tune pickles its stoppers).
        governor: the sweep's governor. Where given, an idle stop is written in its
            ``reasons``, which every piece of a resumed sweep reads through one object
            (:func:`~costtune.ray.governed.shared_governor`): Tune calls one unpickled
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
        self._probes: dict[str, Any] = {}  # node ip → its NodeGpuProbe (None: none there)
        self._pending: dict[str, Any] = {}  # node ip → its probe's next reading (an ObjectRef)
        self._latest: dict[str, GpuSnapshot] = {}  # node ip → its probe's last reading
        self._warned = False

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "_sampler": None, "_probes": {}, "_pending": {}, "_latest": {}}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self.governor = shared_governor(self.governor)

    def __call__(self, trial_id: str, result: dict[str, Any]) -> bool:
        snapshot, why = self._read(result.get("hostname"), result.get("node_ip"))
        util: float | None = None
        if snapshot is not None:
            named = result.get("gpu_uuids") or ""
            uuids = [str(u) for u in named] if isinstance(named, list | tuple) else str(named).split(",")
            pid = result.get("pid")
            util = trial_utilization(snapshot, int(pid) if pid is not None else None, uuids)
            why = "it runs in another PID namespace and reports no gpu_uuids"
        if snapshot is None and not why:
            return False  # another node's first reading is on its way
        if snapshot is None or util is None:
            if not self._warned:
                self._warned = True
                print(
                    f"costtune: the idle-GPU watchdog cannot read trial {trial_id}'s GPUs ({why}); "
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

    def _read(self, host: str | None, node_ip: str | None) -> tuple[GpuSnapshot | None, str]:
        """The GPUs of the trial's host: a snapshot; or None and why not ("" = not read yet).

        Another node is read without waiting: its probe's last reading is used while the next
        one is asked for, so a slow node never holds up Tune's loop.
        """
        if host is None or host == socket.gethostname():
            if self._sampler is None:
                self._sampler = self.sampler_factory()
            return self._sampler.sample(), ""
        if not node_ip:
            return None, f"it runs on {host}, and its results give no node_ip"
        import ray

        if node_ip not in self._probes:
            self._probes[node_ip] = _probe_on(node_ip, self.sampler_factory)
        probe = self._probes[node_ip]
        if probe is None:
            return None, f"it runs on {host}, and no live Ray node is at {node_ip}"
        pending = self._pending.get(node_ip)
        if pending is None:
            self._pending[node_ip] = probe.sample.remote()
        elif ray.wait([pending], timeout=0)[0]:
            try:
                self._latest[node_ip] = snapshot_from_dict(ray.get(pending))
            except Exception as exc:  # no NVML there, the node gone: leave its trials alone
                self._probes[node_ip] = None
                lines = str(exc).strip().splitlines()
                return None, f"it runs on {host}: {lines[-1][:200] if lines else type(exc).__name__}"
            self._pending[node_ip] = probe.sample.remote()
        return self._latest.get(node_ip), ""

    def stop_all(self) -> bool:
        return False

    def stop_reason(self, trial_id: str) -> str | None:
        if self.governor is not None:
            reason = self.governor.reasons.get(trial_id)
            return StopReason.IDLE.value if reason is StopReason.IDLE else None
        return StopReason.IDLE.value if trial_id in self.stopped else None
