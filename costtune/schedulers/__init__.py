"""Ray Tune adapters of costtune's pure policies (import requires Ray)."""

from __future__ import annotations

from costtune.schedulers.callbacks import LedgerCallback
from costtune.schedulers.hyperband import CostAwareHyperBand

__all__ = ["CostAwareHyperBand", "LedgerCallback"]
