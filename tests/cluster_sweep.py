"""Run by tests/test_cluster.py in its own process: a sweep on a 3-node Ray cluster on this
machine (ray.cluster_utils.Cluster), one worker node removed mid-sweep."""

from __future__ import annotations

import json
import os
import sys
import tempfile
import threading
import time
from pathlib import Path

os.environ.setdefault("RAY_AUTH_MODE", "disabled")

import ray
from ray.cluster_utils import Cluster

from costtune.core.config import parse_config
from costtune.sweep import run_sweep


def main(out: Path, remove: bool) -> None:
    trace = out / "trace"
    trace.mkdir(parents=True)
    Path("/tmp/ray").mkdir(exist_ok=True)  # Ray records the cluster's address there
    temp = tempfile.mkdtemp(prefix="ctc-", dir="/tmp")  # short: Unix socket paths are capped at 107 bytes
    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 0, "temp_dir": temp})
    workers = [cluster.add_node(num_cpus=2, resources={"accelerator_type:A100": 1}) for _ in range(2)]
    config = parse_config(
        {
            "name": "cluster",
            "trainable": {
                "name": "tests.user_trainables:checkpointed_steps",
                "args": {"trace_dir": str(trace), "epoch_s": 0.3},
            },
            "metric": "loss",
            "max_epochs": 12,
            "num_samples": 1,  # grid: each value once
            "search_space": {"x": {"type": "choice", "values": [0.1, 0.2, 0.3, 0.4]}},
            "searcher": {"type": "grid"},
            "scheduler": {"type": "fifo"},
            "resources": {"cpus": 1, "accelerator_type": "A100"},
            "failures": {"max_retries": 3},
            "approval": {
                "justification": "cluster test",
                "estimated_resources": "4 CPU trials",
                "stop_conditions": "12 epochs",
                "approver": "tests",
            },
        }
    )
    if remove:

        def kill_worker() -> None:
            deadline = time.monotonic() + 300  # a loaded machine starts the trials late
            while time.monotonic() < deadline:
                files = list(trace.glob("*.log"))
                if any(len(f.read_text().splitlines()) >= 6 for f in files):
                    cluster.remove_node(workers[1])
                    (out / "removed").write_text(workers[1].node_id)
                    return
                time.sleep(0.1)

        threading.Thread(target=kill_worker, daemon=True).start()
    # run_sweep connects to the running cluster itself, as `costtune sweep --address` does
    result = run_sweep(config, out / "run", ray_address=cluster.address)
    (out / "summary.json").write_text(json.dumps(result.summary, default=str))
    ray.shutdown()
    cluster.shutdown()


if __name__ == "__main__":
    main(Path(sys.argv[1]), sys.argv[2] == "remove")
