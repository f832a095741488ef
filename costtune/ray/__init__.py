"""Ray Tune adapters of the pure policies in :mod:`costtune.core` (import requires Ray).

They translate Ray's events into the core's calls and its decisions back; every private Ray
name they need is in :mod:`costtune.ray.private`."""

from __future__ import annotations

from costtune.ray.callbacks import LedgerCallback
from costtune.ray.governed import CostAwareFIFO
from costtune.ray.hyperband import CostAwareHyperBand
from costtune.ray.stoppers import CostStopper

__all__ = ["CostAwareFIFO", "CostAwareHyperBand", "CostStopper", "LedgerCallback"]
