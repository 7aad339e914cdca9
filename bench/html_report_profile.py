"""A real PC-sampled profile and its HTML reports, for the README screenshot (GPU machine).

    bash scripts/gpu_check.sh html_report_profile      # writes into $OUT (default /tmp/kernelc-out)
    python bench/html_report_profile.py [OUT_DIR]      # the same, with the environment already set up

Runs ``examples/train.py`` under ``kprof -m pcsampling`` (kernelc kernels with instruction
samples), then writes ``train_pcs.hatchet``, ``train_pcs.html`` (kprof-viewer --html) and
``train_pcs_analyze.html`` (kprof-analyze --html, which recompiles from the kernel cache here).
No browser is needed here; the screenshot is taken on the CPU machine by
tests/viewer/test_html_browser.py (KPROF_SCREENSHOT_PROFILE, see docs/html-report.md).
"""

from __future__ import annotations

import os
import subprocess
import sys

ROOT_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def main(argv: list[str]) -> int:
    out = os.path.abspath(argv[0] if argv else os.environ.get("OUT", "/tmp/kernelc-out"))
    os.makedirs(out, exist_ok=True)
    py = sys.executable
    steps = [
        [py, "-m", "kprof", "-m", "pcsampling", "-n", "train_pcs", "-o", out, "examples/train.py", "--steps", "8"],
        [py, "-m", "profiler.viewer.cli", "--html", os.path.join(out, "train_pcs.html"),
         os.path.join(out, "train_pcs.hatchet")],
        [py, "-m", "analyzer.cli", os.path.join(out, "train_pcs.hatchet"), "--no-check",
         "--html", os.path.join(out, "train_pcs_analyze.html")],
    ]
    for cmd in steps:
        print("$", " ".join(cmd), flush=True)
        status = subprocess.call(cmd, cwd=ROOT_DIR)
        if status != 0:
            print(f"html_report_profile: exit status {status}", file=sys.stderr)
            return status
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
