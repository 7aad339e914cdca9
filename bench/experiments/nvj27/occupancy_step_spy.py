"""nvj27: every nvJitLink run the occupancy step makes for the memory-bound set (KERNELC_OCCUPANCY_STEP=1, the fill
and the launch bound off, as tests/compiler/test_register_budget.py sets them): the ceiling and the registers and
spill bytes that came back. argv[1] (optional): a libnvJitLink.so to preload (the GPU hosts' 13.0.88)."""
import ctypes
import os
import sys
import tempfile
from pathlib import Path

if len(sys.argv) > 1:   # cuda.bindings takes a library already loaded
    ctypes.CDLL(sys.argv[1], mode=os.RTLD_GLOBAL)
sys.path.insert(0, str(Path(__file__).resolve().parents[3]))
os.environ.update(KERNELC_CACHE_DIR=tempfile.mkdtemp(prefix="nvj27-"), KERNELC_ASSEMBLER="nvjitlink",
                  KERNELC_NVJITLINK_LAUNCH_BOUND="0", KERNELC_FILL_OCCUPANCY_STEP="0", KERNELC_OCCUPANCY_STEP="1")
import kernelc  # noqa: E402
from kernelc.compiler.backend import ptxas as PT  # noqa: E402

log = []
_orig = PT._nvjitlink_cubin


def _spy(data, target, opt, extra, name):
    r = _orig(data, target, opt, extra, name)
    log.append(([e for e in extra if "maxrreg" in e], {k: (v.registers, v.spills) for k, v in r.resources.items()}))
    return r


PT._nvjitlink_cubin = _spy
from examples.kernels import memory_bound as K  # noqa: E402
from tests.compiler.test_register_budget import MEMORY_BOUND_TRITON  # noqa: E402

for kernel, (sig, block, warps, triton) in sorted(MEMORY_BOUND_TRITON.items()):
    log.clear()
    div = {k: 16 for k, t in sig.items() if t != "fp32"}
    ck = kernelc.compile(getattr(K, kernel), sig, dict(BLOCK_SIZE=block), target="sm_90a", num_warps=warps,
                         divisibility=div)
    print(kernel, "final", ck.n_regs, ck.n_spills, log)
