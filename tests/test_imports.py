from __future__ import annotations

import subprocess
import sys


def test_core_imports_without_ray_or_torch() -> None:
    code = (
        "import sys, costtune, costtune.cost, costtune.ledger, costtune.policy;"
        "bad = [m for m in ('ray', 'torch') if m in sys.modules];"
        "print(','.join(bad))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""


def test_lazy_facade_resolves_ray_names() -> None:
    import costtune

    assert costtune.CostAwareHyperBand.__name__ == "CostAwareHyperBand"
    assert callable(costtune.run_sweep)
