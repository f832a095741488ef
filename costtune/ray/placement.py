"""Where a trial runs, as the price table names it: what every meter bills it for.

A trial that asked for a GPU type (``resources.accelerator_type``) is billed as that type.
Otherwise, in a pool of mixed nodes, it is billed as the type of the node its actor was
placed on: Ray labels each GPU node with an ``accelerator_type:<T>`` resource (detected, or
set with ``ray start --resources``). A trial whose node carries no label is billed as the
sweep's ``cost.accelerator`` (kind ``"gpu"``).

The node is looked up once per actor (a restarted trial may land elsewhere) through the GCS
actor table (:func:`costtune.ray.private.gcs_actor`, a private Ray API). When the lookup is
unavailable the trial is billed as the sweep's accelerator, never as nothing.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from costtune.core.cost import CostModel, canonical_device, devices_from_resources
from costtune.ray.private import actor_id, gcs_actor

if TYPE_CHECKING:
    from ray.tune.experiment import Trial

    from costtune.core.ledger import Ledger

_LABEL = "accelerator_type:"

#: what each trial was last found to hold, for meters that see a trial id and not the
#: trial (Ray's stoppers): filled by every :func:`trial_devices` call
_PLACED: dict[str, tuple[str, float]] = {}


def trial_devices(trial: Trial) -> tuple[str, float]:
    """``(kind, count)`` that ``trial`` is billed for: ``"cpu"``, a GPU type, or ``"gpu"``."""
    kind, devices = devices_from_resources(trial.placement_group_factory.required_resources)
    if kind == "gpu":
        actor = actor_id(trial)
        if actor is not None:
            kind = node_accelerator(actor) or kind
    _PLACED[trial.trial_id] = (kind, devices)
    return kind, devices


def placed(trial_id: str) -> tuple[str, float] | None:
    """What :func:`trial_devices` last found ``trial_id`` to hold (``None``: not seen)."""
    return _PLACED.get(trial_id)


def actor_of(trial: Trial) -> str | None:
    """The hex id of the trial's actor, or ``None`` (not placed)."""
    return actor_id(trial)


def actor_lifetime(actor: str) -> tuple[float | None, float | None]:
    """When the GCS says an actor started and ended (Unix seconds; ``None`` where it has not,
    or the lookup is unavailable): the stretch its resources were taken for."""
    try:
        record = gcs_actor(actor)
    except Exception:  # a private API: without it the stretch is what the callbacks saw
        return None, None
    start, end = record.get("StartTime"), record.get("EndTime")
    return (float(start) / 1000 if start else None, float(end) / 1000 if end else None)


@functools.lru_cache(maxsize=4096)
def node_accelerator(actor: str) -> str | None:
    """The accelerator label of the node an actor runs on, or ``None`` (no label, no lookup)."""
    try:
        import ray

        node_id = gcs_actor(actor).get("Address", {}).get("NodeID")
        if not node_id:
            return None
        for node in ray.nodes():
            if node.get("NodeID") == node_id:
                for key in node.get("Resources", {}):
                    if key.startswith(_LABEL):
                        return canonical_device(key[len(_LABEL) :])
                return None
    except Exception:  # a private API: its absence must not stop billing
        return None
    return None


def billed_usd(
    trial: Trial,
    result: Mapping[str, Any],
    *,
    seconds_field: str,
    cost_model: CostModel,
    ledger: Ledger | None,
) -> float:
    """What ``trial`` has cost with ``result`` counted: the sweep's ledger meters it
    (:meth:`Ledger.usd_after`: lost work, restarts and hung time as the books have them);
    a scheduler used without a ledger (in a plain ``Tuner``) prices the result's cumulative
    ``seconds_field``."""
    kind, devices = trial_devices(trial)
    seconds = float(result.get(seconds_field, 0.0))
    if ledger is None:
        return cost_model.cost_usd(seconds, devices, kind)
    increment = result.get("time_this_iter_s") if seconds_field == "time_total_s" else None
    return ledger.usd_after(
        trial.trial_id,
        epoch=int(result.get("training_iteration", 0)),
        seconds=seconds,
        increment=increment,
        kind=kind,
        devices=devices,
    )
