"""Ray Tune adapters of costtune's pure policies (import requires Ray)."""

from __future__ import annotations

from costtune.schedulers.callbacks import LedgerCallback
from costtune.schedulers.governed import CostAwareFIFO
from costtune.schedulers.hyperband import CostAwareHyperBand
from costtune.schedulers.stoppers import CostStopper

__all__ = ["CostAwareFIFO", "CostAwareHyperBand", "CostStopper", "LedgerCallback"]
