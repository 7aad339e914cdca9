"""Tutorial 06's forward under Triton 3.6 and kernelc in one process (``fwd06_side_by_side.py``), with one more
kind of kernelc variant knob: ``FP8X_L2_PROMOTION=256`` (or 128, 64, 0) encodes the host descriptors of that
variant with that L2 promotion (a variant without it gets KERNELC_TMA_L2_PROMOTION's default, 128 B since 2026-11-28
as Triton's; issue #20, docs/triton-tutorials.md "06's fp8 d64: the L2 promotion"). The tensor-map caches are
emptied when a variant starts and ends.

    python3 bench/experiments/fp8x/fwd06_l2_promotion.py TUTORIAL_06.py --out OUT.jsonl \\
        --variants triton kernelc kernelc:FP8X_L2_PROMOTION=256 --case 64:0:fp8:64x64x3x4:8192 --rounds 3

Arguments and output as ``fwd06_side_by_side.py`` (``--summarize`` too). Nothing here is a test.
"""
from __future__ import annotations

import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "tutorial_gaps"))
sys.path.insert(0, os.path.dirname(os.path.dirname(HERE)))

import fwd06_side_by_side as sbs  # noqa: E402
from l2_promotion_ab import set_promotion  # noqa: E402

_enter, _exit = sbs.Variant.__enter__, sbs.Variant.__exit__


def _default_promotion():
    from kernelc.runtime import tensor_map
    os.environ.pop("KERNELC_TMA_L2_PROMOTION", None)
    tensor_map.clear_cache()


def _enter_with_promotion(self):
    r = _enter(self)
    if "FP8X_L2_PROMOTION" in self.env:
        set_promotion(int(self.env["FP8X_L2_PROMOTION"]))
    else:
        _default_promotion()  # KERNELC_TMA_L2_PROMOTION's default
    return r


def _exit_with_promotion(self, *exc):
    _default_promotion()
    return _exit(self, *exc)


sbs.Variant.__enter__, sbs.Variant.__exit__ = _enter_with_promotion, _exit_with_promotion

if __name__ == "__main__":
    sys.exit(sbs.main())
