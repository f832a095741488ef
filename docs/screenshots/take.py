"""The README's screenshots: a run's report, and its comparison with another run, at 1400 and
at 400 CSS px (a phone), drawn by headless Chromium.

    .venv/bin/python docs/screenshots/take.py RUN OTHER_RUN

writes ``report-1400.png``, ``report-400.png``, ``compare-1400.png`` and ``compare-400.png``
beside this file (the comparison is ``costtune compare OTHER_RUN RUN``). Chromium lays out no
window narrower than 500 px, so the 400 px pages are drawn in a frame 400 px wide, scaled 1.25×
to fill that window: the images are 500 px wide and show the 400 px layout.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
NARROWEST_WINDOW = 500
#: how much of each page is shot (CSS px of the 1400 px page; the narrow page is longer)
HEIGHTS = {"report": 2600, "compare": 2400}


def shoot(page: Path, out: Path, width: int, height: int) -> None:
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        sys.exit("Chromium is missing: apt-get install chromium")
    target = page.as_uri()
    window = width
    if width < NARROWEST_WINDOW:
        scale = NARROWEST_WINDOW / width
        frame = page.with_name(f"{page.stem}-{width}.html")
        frame.write_text(
            "<!doctype html><html><body style='margin:0;overflow:hidden'>"
            f"<iframe src='{page.name}' scrolling='no' style='border:0;width:{width}px;height:9000px;"
            f"display:block;transform:scale({scale});transform-origin:0 0'></iframe></body></html>"
        )
        target, window = frame.as_uri(), NARROWEST_WINDOW
    with tempfile.TemporaryDirectory() as profile:
        subprocess.run(
            [
                chromium,
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--hide-scrollbars",
                "--virtual-time-budget=15000",
                f"--user-data-dir={profile}",
                f"--window-size={window},{height}",
                f"--screenshot={out}",
                target,
            ],
            capture_output=True,
            check=True,
            timeout=180,
        )
    print(f"{out.relative_to(Path.cwd()) if out.is_relative_to(Path.cwd()) else out}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("run", type=Path, help="the run whose report is shown")
    parser.add_argument("other", type=Path, help="the run it is compared with (shown first)")
    args = parser.parse_args()
    costtune = Path(sys.executable).with_name("costtune")
    with tempfile.TemporaryDirectory() as tmp:
        pages = {"report": Path(tmp) / "report.html", "compare": Path(tmp) / "compare.html"}
        subprocess.run(
            [costtune, "report", args.run, "--html", pages["report"]], check=True, capture_output=True
        )
        subprocess.run(
            [costtune, "compare", args.other, args.run, "--html", pages["compare"]],
            check=True,
            capture_output=True,
        )
        for name, page in pages.items():
            shoot(page, HERE / f"{name}-1400.png", 1400, HEIGHTS[name])
            # the phone's page is longer: its charts stack and its text wraps
            shoot(page, HERE / f"{name}-400.png", 400, int(HEIGHTS[name] * 1.5))


if __name__ == "__main__":
    main()
