from __future__ import annotations

import functools
import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from costtune.cli import main
from costtune.core.policy.decisions import StopReason
from costtune.core.policy.idle import IdleTracker
from costtune.idle import (
    GpuProcess,
    GpuSample,
    GpuSnapshot,
    IdleWatcher,
    NvmlSampler,
    NvmlUnavailable,
    TraceSampler,
    process_utilization,
    snapshot_to_dict,
    trial_utilization,
)
from costtune.ray.idle import IdleGpuStopper

HOUR = 3600.0


def _snap(t: float, util: float, pids: tuple[int, ...] = (), index: int = 0) -> GpuSnapshot:
    return GpuSnapshot(t, (GpuSample(index, util, processes=tuple(GpuProcess(p) for p in pids)),))


def test_idle_tracker_needs_unbroken_idleness() -> None:
    tracker = IdleTracker(util_below_pct=1.0, idle_seconds=2 * HOUR)
    readings = [(0, 0.0), (HOUR, 0.5), (1.5 * HOUR, 40.0), (2 * HOUR, 0.0), (3 * HOUR, 0.0), (4 * HOUR, 0.9)]
    idle_for = [tracker.observe("gpu0", t, u) for t, u in readings]
    assert idle_for == [0, HOUR, 0, 0, HOUR, 2 * HOUR]
    assert [tracker.is_idle(x) for x in idle_for] == [False] * 5 + [True]


def test_process_utilization_takes_the_busiest_gpu_a_process_holds() -> None:
    snap = GpuSnapshot(
        0.0,
        (
            GpuSample(0, 0.0, processes=(GpuProcess(10), GpuProcess(11))),
            GpuSample(1, 55.0, processes=(GpuProcess(11),)),
        ),
    )
    assert process_utilization(snap) == {10: (0.0, (0,)), 11: (55.0, (0, 1))}


@pytest.fixture
def sleeper():
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    yield proc
    proc.kill()
    proc.wait()


def _state(pid: int) -> str:
    return Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0]


def _trace(pid: int, utils: list[float], step: float = HOUR) -> TraceSampler:
    return TraceSampler(_snap(i * step, u, (pid,)) for i, u in enumerate(utils))


def test_watcher_pauses_an_idle_process_with_sigstop(sleeper) -> None:
    events: list[dict] = []
    watcher = IdleWatcher(
        _trace(sleeper.pid, [0, 0, 0, 0]), IdleTracker(1.0, 2 * HOUR), action="pause", log=events.append
    )
    assert watcher.step() == [] and watcher.step() == []
    assert _state(sleeper.pid) != "T"
    (event,) = watcher.step()  # two hours idle now
    assert event["pid"] == sleeper.pid and event["action"] == "pause" and event["idle_minutes"] == 120
    deadline = time.monotonic() + 5
    while _state(sleeper.pid) != "T" and time.monotonic() < deadline:
        time.sleep(0.01)
    assert _state(sleeper.pid) == "T"
    assert watcher.step() == []  # acts once per process
    assert events == [event]


def test_watcher_stops_with_sigterm_and_dry_run_sends_nothing(sleeper) -> None:
    dry = IdleWatcher(
        _trace(sleeper.pid, [0, 0, 0]),
        IdleTracker(1.0, 2 * HOUR),
        action="stop",
        dry_run=True,
        log=lambda e: None,
    )
    dry.run(0, 3)
    assert sleeper.poll() is None and dry.acted == {sleeper.pid}
    real = IdleWatcher(
        _trace(sleeper.pid, [0, 0, 0]), IdleTracker(1.0, 2 * HOUR), action="stop", log=lambda e: None
    )
    real.run(0, 3)
    assert sleeper.wait(timeout=5) == -15


def test_watcher_leaves_a_busy_process_alone(sleeper) -> None:
    watcher = IdleWatcher(
        _trace(sleeper.pid, [0, 30, 0, 0, 50, 0]),
        IdleTracker(1.0, 2 * HOUR),
        action="stop",
        log=lambda e: None,
    )
    watcher.run(0, 6)
    assert sleeper.poll() is None and not watcher.acted


def test_watch_idle_cli_replays_a_trace_and_stops_the_holder(sleeper, tmp_path) -> None:
    trace = tmp_path / "trace.jsonl"
    trace.write_text(
        "".join(json.dumps(snapshot_to_dict(_snap(i * HOUR, 0.0, (sleeper.pid,)))) + "\n" for i in range(4))
    )
    result = CliRunner().invoke(
        main, ["watch-idle", "--trace", str(trace), "--action", "stop", "--idle-minutes", "60"]
    )
    assert result.exit_code == 0, result.output
    (line,) = result.output.strip().splitlines()
    assert json.loads(line)["pid"] == sleeper.pid
    assert sleeper.wait(timeout=5) == -15


def test_watch_idle_without_a_driver_exits_2_with_one_line() -> None:
    try:
        NvmlSampler().close()
        pytest.skip("this machine has an NVIDIA driver")
    except NvmlUnavailable:
        pass
    result = CliRunner().invoke(main, ["watch-idle"])
    assert result.exit_code == 2
    assert result.output.count("\n") == 1 and result.output.startswith("costtune: error: NVML:")


def test_bad_trace_file_exits_2(tmp_path) -> None:
    trace = tmp_path / "t.jsonl"
    trace.write_text('{"time": 0}\n')
    result = CliRunner().invoke(main, ["watch-idle", "--trace", str(trace)])
    assert result.exit_code == 2 and "is not a GPU trace" in result.output


def test_idle_stopper_counts_a_trial_with_no_process_on_any_gpu_as_idle() -> None:
    busy = os.getpid()  # a process of this machine on the GPU
    stopper = IdleGpuStopper(lambda: _trace(busy, [90, 90, 90, 90]), util_below_pct=1.0, idle_minutes=60)
    # the trial's pid 123 runs on no GPU: 0 % busy although the GPU itself is busy for another
    assert [stopper("t1", {"pid": 123}) for _ in range(2)] == [False, True]  # readings an hour apart
    assert stopper.stop_reason("t1") == "idle"
    assert not stopper("t2", {"pid": busy})


def _gpus(t: float, *gpus: tuple[str, float, tuple[int, ...]]) -> GpuSnapshot:
    return GpuSnapshot(
        t,
        tuple(
            GpuSample(i, util, processes=tuple(GpuProcess(p) for p in pids), uuid=uuid)
            for i, (uuid, util, pids) in enumerate(gpus)
        ),
    )


def test_trial_utilization_matches_by_process_then_by_the_gpus_the_trial_names() -> None:
    here = {10, 11}.__contains__  # the pids of this machine's PID namespace
    snap = _gpus(0.0, ("GPU-a", 70.0, (10,)), ("GPU-b", 0.0, ()), ("GPU-c", 35.0, (11,)))
    assert trial_utilization(snap, 10, (), here) == 70.0  # its process, exactly
    assert trial_utilization(snap, 99, ["GPU-c"], here) == 35.0  # not listed: the GPU it names
    assert trial_utilization(snap, 99, ["GPU-b", "GPU-c"], here) == 35.0  # the busiest it holds
    assert trial_utilization(snap, 99, ["GPU-b"], here) == 0.0
    assert trial_utilization(snap, 99, [""], here) == 0.0  # one namespace: it runs on no GPU
    # NVML lists another namespace's pids (a container): an unlisted pid says nothing ...
    container = _gpus(0.0, ("GPU-a", 70.0, (50001,)), ("GPU-b", 0.0, ()))
    assert trial_utilization(container, 10, (), here) is None
    assert trial_utilization(container, 10, ["GPU-z"], here) is None  # a GPU of another machine
    # ... but the GPUs it names do, busy or idle
    assert trial_utilization(container, 10, ["GPU-a"], here) == 70.0
    assert trial_utilization(container, 10, ["GPU-b"], here) == 0.0
    # no process on any GPU: nothing runs, whatever the namespace
    assert trial_utilization(_gpus(0.0, ("GPU-a", 0.0, ())), 10, (), lambda pid: False) == 0.0


def test_idle_stopper_judges_a_container_trial_by_its_gpus_and_never_a_trial_it_cannot_see(
    capsys,
) -> None:
    """Inside a container NVML lists the host's pids: a busy trial must not look idle."""
    foreign = 4_000_000  # above Linux's pid_max: no process of this machine has it
    readings = TraceSampler(
        _gpus(i * HOUR, ("GPU-busy", 95.0, (foreign,)), ("GPU-idle", 0.0, ())) for i in range(20)
    )
    stopper = IdleGpuStopper(lambda: readings, util_below_pct=1.0, idle_minutes=60)
    host = socket.gethostname()
    busy = {"pid": 123, "hostname": host, "gpu_uuids": "GPU-busy"}
    idle = {"pid": 124, "hostname": host, "gpu_uuids": ["GPU-idle"]}  # a list reads as well
    unnamed = {"pid": 125, "hostname": host}  # a user's trainable that reports no gpu_uuids
    remote = {"pid": 126, "hostname": host + "-other-node", "gpu_uuids": "GPU-elsewhere"}
    for _ in range(3):
        assert not stopper("busy", busy)
        assert not stopper("unnamed", unnamed)
        assert not stopper("remote", remote)
    assert [stopper("idle", idle) for _ in range(2)] == [False, True]
    assert stopper.stop_reason("idle") == "idle" and stopper.stop_reason("busy") is None
    warned = capsys.readouterr().err.strip().splitlines()
    assert (
        len(warned) == 1 and "cannot read trial unnamed's GPUs (it runs in another PID namespace" in warned[0]
    )


def test_a_trace_keeps_each_gpu_uuid(tmp_path) -> None:
    snap = _gpus(5.0, ("GPU-a", 12.0, (7,)), ("MIG-b", 0.0, ()))
    path = tmp_path / "t.jsonl"
    path.write_text(json.dumps(snapshot_to_dict(snap)) + "\n")
    assert TraceSampler.from_file(path).sample() == snap


def test_an_idle_stop_by_the_copy_tune_calls_is_seen_by_the_copy_the_books_ask() -> None:
    """After a resume Tune calls one unpickled copy of the stopper and the ledger asks another:
    the reason lives in the sweep's one governor, so both say ``idle``."""
    import pickle

    from costtune.core.policy.stopping import Governor
    from costtune.ray.governed import forget_governors, shared_governor

    forget_governors()
    governor = shared_governor(Governor(usd_per_second=1.0))
    books = IdleGpuStopper(
        functools.partial(_trace, os.getpid(), [0, 0, 0, 0]),
        util_below_pct=1.0,
        idle_minutes=60,
        governor=governor,
    )
    called = pickle.loads(pickle.dumps(books))  # as Tune restores its stoppers
    assert called is not books and called.governor is books.governor
    assert [called("t1", {"pid": os.getpid()}) for _ in range(2)] == [False, True]
    assert books.stop_reason("t1") == "idle" and called.stop_reason("t1") == "idle"
    assert books.stop_reason("t2") is None
    # a cap recorded first stays the reason; the watchdog does not overwrite it
    governor.reasons["t3"] = StopReason.TRIAL_COST_CAP
    assert [called("t3", {"pid": os.getpid()}) for _ in range(2)] == [False, True]
    assert governor.reasons["t3"] is StopReason.TRIAL_COST_CAP and books.stop_reason("t3") is None
    forget_governors()


@pytest.mark.ray
def test_sweep_ends_gpu_trials_whose_gpus_stay_idle(ray_session, tmp_path) -> None:
    from costtune.core.config import parse_config
    from costtune.sweep import run_sweep

    config = parse_config(
        {
            "name": "idle",
            "trainable": {"name": "tests.user_trainables:quadratic"},
            "metric": "loss",
            "max_epochs": 10,
            "num_samples": 2,
            "search_space": {"x": {"type": "uniform", "low": 0.0, "high": 1.0}},
            "searcher": {"type": "random"},
            "scheduler": {"type": "fifo"},
            "resources": {"cpus": 1, "gpus": 1},
            "idle": {"idle_minutes": 120},
        }
    )
    # a recorded trace in which nothing ever runs on the GPU, 30 minutes between readings
    trace = TraceSampler(_snap(i * 1800.0, 0.0) for i in range(100))
    result = run_sweep(config, tmp_path / "run", gpu_sampler_factory=lambda: trace)
    frame = result.trials
    assert set(frame["stop_reason"]) == {"idle"}
    assert (frame["epochs"] == 5).all()  # idle at readings 0, 30, 60, 90, 120 minutes
    assert (frame["gpu_hours"] > 0).all() and (frame["device"] == "A100").all()


H200_TRACE = Path(__file__).parent / "data" / "h200_idle_trace.jsonl"


def test_a_real_h200_trace_stops_the_idle_trial_after_its_minute_and_never_the_busy_one() -> None:
    """NVML read on an H200 while benchmarks/gpu_sweep.py ran its idle check (every 4th reading
    kept): one Ray worker (pid 1768) held the GPU idle for a minute, then kept it 96-98% busy.
    The sweep stopped the idle trial after 62 s; replayed, the stopper decides the same, by the
    trial's pid and, as inside a container where NVML lists other pids, by its GPU's uuid."""
    uuid = "GPU-a7ddf20e-59af-80fa-a249-47ae82143360"
    snapshots = TraceSampler.from_file(H200_TRACE).snapshots
    for fields in ({"pid": 1768}, {"pid": 4_000_000, "gpu_uuids": uuid}):
        stopper = IdleGpuStopper(lambda: TraceSampler(snapshots), util_below_pct=1.0, idle_minutes=1)
        stopped_at, trial = None, "idle"
        for snap in snapshots:
            if stopper(trial, {**fields, "hostname": socket.gethostname()}):
                assert trial == "idle", f"the busy trial was stopped at {snap.time} s"
                stopped_at, trial = snap.time, "busy"  # the same worker then runs the busy trial
        assert stopped_at is not None and 60 <= stopped_at <= 75, stopped_at
        assert stopper.stop_reason("idle") == "idle" and stopper.stop_reason("busy") is None
    result = CliRunner().invoke(
        main,
        [
            "watch-idle",
            "--trace",
            str(H200_TRACE),
            "--idle-minutes",
            "1",
            "--interval",
            "0",
            "--iterations",
            "150",
        ],
    )
    events = [json.loads(line) for line in result.output.splitlines()]
    assert result.exit_code == 0 and [(e["pid"], e["idle_minutes"]) for e in events] == [(1768, 1.0)]


def test_a_shared_gpu_is_judged_per_process_where_nvml_says_each_ones_share() -> None:
    """Ray's fractional GPUs: two trials on one GPU that is 95% busy for the one that works."""
    here = os.getpid()
    working, sleeping = GpuProcess(here, sm_pct=93.0), GpuProcess(here + 1, sm_pct=0.0)
    snap = GpuSnapshot(0.0, (GpuSample(0, 95.0, processes=(working, sleeping), uuid="GPU-a"),))
    assert process_utilization(snap) == {here: (93.0, (0,)), here + 1: (0.0, (0,))}
    # where NVML gives no share per process, the GPU's utilisation stands for each
    unknown = GpuSnapshot(0.0, (GpuSample(0, 95.0, processes=(GpuProcess(here), GpuProcess(here + 1))),))
    assert process_utilization(unknown) == {here: (95.0, (0,)), here + 1: (95.0, (0,))}
    readings = TraceSampler(
        GpuSnapshot(i * HOUR, (GpuSample(0, 95.0, processes=(working, sleeping), uuid="GPU-a"),))
        for i in range(9)
    )
    stopper = IdleGpuStopper(lambda: readings, util_below_pct=1.0, idle_minutes=60)
    rounds = [(stopper("busy", {"pid": here}), stopper("idle", {"pid": here + 1})) for _ in range(2)]
    assert rounds == [(False, False), (False, True)]  # the sleeper's readings are 2 h apart
    assert stopper.stop_reason("idle") == "idle" and stopper.stop_reason("busy") is None


class _FakeNvml:
    """NVML's per-process call as pynvml answers it (the rest of NVML is not needed here)."""

    def __init__(self, answers: list) -> None:
        import pynvml

        self.NVMLError, self.NVML_SUCCESS = pynvml.NVMLError, pynvml.NVML_SUCCESS
        self.NVML_ERROR_NOT_FOUND = pynvml.NVML_ERROR_NOT_FOUND
        self.answers, self.asked = answers, []

    def nvmlDeviceGetProcessUtilization(self, handle, since):
        self.asked.append(since)
        answer = self.answers.pop(0)
        if isinstance(answer, int):
            raise self.NVMLError(answer)
        return answer


def test_nvml_per_process_shares_since_the_previous_reading() -> None:
    pynvml = pytest.importorskip("pynvml")
    from types import SimpleNamespace as Sample

    fake = _FakeNvml(
        [
            [
                Sample(pid=7, smUtil=40, timeStamp=100),
                Sample(pid=7, smUtil=90, timeStamp=200),
                Sample(pid=8, smUtil=0, timeStamp=150),
            ],
            pynvml.NVML_ERROR_NOT_FOUND,  # nothing ran since: every process 0
            pynvml.NVML_SUCCESS,  # pynvml's wrapper raises this too when there is no sample
            pynvml.NVML_ERROR_NOT_SUPPORTED,  # this GPU cannot say: fall back to its utilisation
        ]
    )
    sampler = NvmlSampler.__new__(NvmlSampler)
    sampler._nvml, sampler._seen = fake, {}
    assert sampler._process_sm("handle", 0) == {7: 90.0, 8: 0.0}
    assert sampler._process_sm("handle", 0) == {} and sampler._process_sm("handle", 0) == {}
    assert sampler._process_sm("handle", 0) is None
    assert fake.asked == [0, 200, 200, 200]  # each call asks from the newest sample read


def test_a_real_shared_h200_trace_finds_the_idle_trial_beside_a_busy_one(tmp_path) -> None:
    """NVML read on an H200 while two trials shared it (``gpus: 0.5`` each; every 3rd reading
    kept): pid 1494 kept it 93-99% busy, pid 1493 held 584 MB and slept. The sweep stopped the
    sleeper after 65 s of a 1-minute window; by the GPU's utilisation alone it looked busy."""
    trace = Path(__file__).parent / "data" / "h200_shared_idle_trace.jsonl"
    args = ["--idle-minutes", "1", "--interval", "0", "--iterations", "128"]
    result = CliRunner().invoke(main, ["watch-idle", "--trace", str(trace), *args])
    events = [json.loads(line) for line in result.output.splitlines()]
    assert result.exit_code == 0 and [(e["pid"], e["idle_minutes"]) for e in events] == [(1493, 1.0)]
    assert 75 <= events[0]["time"] <= 85  # it first held the GPU at about 20 s
    # the same readings without NVML's per-process shares: the sleeper looks 93-99% busy
    lines = [json.loads(line) for line in trace.read_text().splitlines()]
    for line in lines:
        for gpu in line["gpus"]:
            for proc in gpu["processes"]:
                proc.pop("sm_pct")
    blind = tmp_path / "blind.jsonl"
    blind.write_text("".join(json.dumps(line) + "\n" for line in lines))
    result = CliRunner().invoke(main, ["watch-idle", "--trace", str(blind), *args])
    assert result.exit_code == 0 and result.output.strip() == ""


def _until(decide, done=None, seconds: float = 180.0) -> list[bool]:
    """Calls ``decide`` every 0.2 s until it says True (or ``done()`` does) or time is up."""
    answers: list[bool] = []
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and not (answers and (answers[-1] or (done and done()))):
        answers.append(decide())
        time.sleep(0.2)
    return answers


@pytest.mark.ray
def test_a_trial_on_another_node_is_read_there_by_a_probe(ray_session, tmp_path, capsys) -> None:
    """The driver's NVML sees only its own node: a trial elsewhere is read by a zero-CPU actor
    on its node (here the one local node, reached as another host would be, by its address),
    without Tune's loop waiting for it."""
    import ray

    here = os.getpid()  # the probe runs on this machine, where this pid is a process
    trace = tmp_path / "node.jsonl"
    trace.write_text(
        "".join(json.dumps(snapshot_to_dict(_snap(i * HOUR, 0.0, (here,)))) + "\n" for i in range(5))
    )
    factory = functools.partial(TraceSampler.from_file, trace)
    elsewhere = {"pid": here, "hostname": "gpu-node-7", "node_ip": ray.util.get_node_ip_address()}
    stopper = IdleGpuStopper(factory, util_below_pct=1.0, idle_minutes=60)
    start = time.monotonic()
    answers = _until(lambda: stopper("t1", elsewhere))
    assert answers[-1] and stopper.stop_reason("t1") == "idle"  # its readings 1 h apart, there
    assert len(answers) > 2 or time.monotonic() - start < 1  # no call waited for the probe to start
    # no live node at that address, or no NVML on that node: its trials are left alone, one line
    gone = IdleGpuStopper(factory, util_below_pct=1.0, idle_minutes=60)
    assert not any(gone("t2", {**elsewhere, "node_ip": "10.255.255.1"}) for _ in range(3))
    no_nvml = IdleGpuStopper(NvmlSampler, util_below_pct=1.0, idle_minutes=60)
    assert not any(_until(lambda: no_nvml("t3", elsewhere), done=lambda: no_nvml._warned, seconds=60))
    warned = capsys.readouterr().err.strip().splitlines()
    assert len(warned) == 2, warned
    assert "no live Ray node is at 10.255.255.1" in warned[0]
    assert "it runs on gpu-node-7: " in warned[1] and "NVML" in warned[1], warned[1]
