"""Run by tests/test_cluster.py in its own process: a sweep on a pool of two GPU types (one
node labelled A100, one T4, as Ray labels real GPU nodes; the GPUs are declared, not used).

Each trial holds one GPU and the pool has one of each type, so the two trials run at once,
one on each node. Prices: A100 $1 per second, T4 $0.01 per second; the per-trial cap of
$1.50 stops the trial on the A100 after about 1.5 s and lets the one on the T4 finish.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from pathlib import Path

os.environ.setdefault("RAY_AUTH_MODE", "disabled")

import ray
from ray.cluster_utils import Cluster

from costtune.core.config import parse_config
from costtune.sweep import run_sweep


def main(out: Path) -> None:
    Path("/tmp/ray").mkdir(exist_ok=True)  # Ray records the cluster's address there
    temp = tempfile.mkdtemp(prefix="ctm-", dir="/tmp")  # short: Unix socket paths are capped at 107 bytes
    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 0, "temp_dir": temp})
    for label in ("A100", "T4"):
        cluster.add_node(num_cpus=1, num_gpus=1, resources={f"accelerator_type:{label}": 1})
    config = parse_config(
        {
            "name": "mixed",
            "trainable": {"name": "tests.user_trainables:steady", "args": {"epoch_s": 0.25}},
            "metric": "loss",
            "max_epochs": 12,
            "num_samples": 1,
            "search_space": {"x": {"type": "choice", "values": [0.1, 0.2]}},
            "searcher": {"type": "grid"},
            "scheduler": {"type": "fifo"},
            "resources": {"cpus": 1, "gpus": 1},
            "idle": {"enabled": False},
            "cost": {"accelerator": "A100", "prices": {"A100": 3600.0, "T4": 36.0}},
            "budget": {"max_cost_usd_per_trial": 1.5},
            "approval": {
                "justification": "mixed-pool billing test",
                "estimated_resources": "2 one-GPU trials",
                "stop_conditions": "12 epochs or $1.50 per trial",
                "approver": "tests",
            },
        }
    )
    result = run_sweep(config, out / "run", ray_address=cluster.address)
    (out / "summary.json").write_text(json.dumps(result.summary, default=str))
    ray.shutdown()
    cluster.shutdown()


if __name__ == "__main__":
    main(Path(sys.argv[1]))
