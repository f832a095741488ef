from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path


def test_the_core_imports_without_ray_torch_or_optuna() -> None:
    import costtune.core

    core = Path(costtune.core.__file__).parent
    modules = sorted(
        "costtune." + ".".join(p.relative_to(core.parent).with_suffix("").parts).replace(".__init__", "")
        for p in core.rglob("*.py")
    )
    assert "costtune.core.ledger" in modules and "costtune.core.policy.hyperband" in modules
    code = (
        "import sys, importlib, costtune;"
        f"[importlib.import_module(m) for m in {modules!r}];"
        "bad = [m for m in ('ray', 'torch', 'optuna') if m in sys.modules];"
        "print(','.join(bad))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""
    # nor later, on any path: no import of them anywhere in the core's source, lazy ones included
    lazy = re.compile(r"^\s*(?:from|import)\s+(ray|torch|optuna)\b", re.MULTILINE)
    found = [
        f"{p.name}: {m.group(0).strip()}" for p in core.rglob("*.py") for m in lazy.finditer(p.read_text())
    ]
    assert found == []


def test_lazy_facade_resolves_ray_names() -> None:
    import costtune

    assert costtune.CostAwareHyperBand.__name__ == "CostAwareHyperBand"
    assert callable(costtune.run_sweep)
