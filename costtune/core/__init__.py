"""costtune's pure core: prices and metering (``cost``), the books (``ledger``), the
decisions (``policy``), configs, estimates, recorded curves and their replay. Nothing here
imports Ray, torch or Optuna; ``costtune.ray`` translates Ray Tune's events into it."""
