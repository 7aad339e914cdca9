"""Run a Python script with kernelc's host TMA maps encoded at another L2 promotion (a GPU is needed to launch):

    python3 bench/experiments/fp8x/with_l2_promotion.py 128 SCRIPT.py [ARGS...]

e.g. under Nsight Compute around ``bench/experiments/tutorial_gaps/ncu_targets.py`` (issue #20). The promotion is
given in bytes (256 is kernelc's default, 128 Triton 3.6's, 0 none). Nothing here is a test.
"""
from __future__ import annotations

import os
import runpy
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(os.path.dirname(HERE)))
sys.path.insert(0, HERE)


def main() -> int:
    if len(sys.argv) < 3 or sys.argv[1] in ("-h", "--help"):
        print(__doc__.strip())
        return 0 if len(sys.argv) > 1 else 2
    from l2_promotion_ab import set_promotion
    set_promotion(int(sys.argv[1]))
    script = sys.argv[2]
    sys.argv = sys.argv[2:]
    sys.path.insert(0, os.path.dirname(os.path.abspath(script)))
    runpy.run_path(script, run_name="__main__")
    return 0


if __name__ == "__main__":
    sys.exit(main())
