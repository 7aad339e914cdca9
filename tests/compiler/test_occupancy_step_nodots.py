"""KERNELC_OCCUPANCY_STEP=nodots (the default, backend/ptxas.py): a kernel without dots (the tile IR's
registers='fill_step') whose unbounded registers are within 15% above an occupancy step is assembled at the step's
ceiling. The fp32 64x64 transpose (4 warps, 16 KB of shared memory a block): 42 registers unbounded (10 blocks per
SM), the fill policy's launch-bound build 56 (9 blocks); at 40 registers 12 blocks, measured 0.6% faster on an
H100, at Triton's speed (call H11b, docs/performance.md). Kernels with dots keep their builds.

Since the widened uniform masks (KERNELC_UNIFORM_MASKS=all, 2026-11-28) the transpose's own PTX takes 40 registers
unbounded, already at the step: the step's tests below use the PTX of the ring-only rule (``rings``), which still
lands at 42. At the step the default is the loads policy's pick, the launch bound's 56 / 9 (measured 0.65-1.7%
faster than 40 / 12 on an H200, 0.6% slower on an H100); KERNELC_FILL_KEEP_BLOCKS=onepass keeps 40 / 12 (last
test)."""
import re

import kernelc
from kernelc.compiler.backend import ptxas as P
from tests.compiler.test_coalesce import T_DIV, T_SIG
from tests.compiler.transpose_kernels import transpose_kernel


def _ptx(monkeypatch):
    monkeypatch.setenv("KERNELC_OCCUPANCY_STEP", "off")
    monkeypatch.setenv("KERNELC_UNIFORM_MASKS", "rings")   # the PTX that lands 2 registers above the step
    monkeypatch.setenv("KERNELC_FILL_KEEP_BLOCKS", "off")   # the step alone, not the one-pass rule
    ck = kernelc.compile(transpose_kernel, T_SIG, dict(BLOCK_M=64, BLOCK_N=64), target="sm_90a", num_warps=4,
                         divisibility=T_DIV)
    return ck


def _env(monkeypatch):
    monkeypatch.setenv("KERNELC_ASSEMBLER", "nvjitlink")
    for k in ("KERNELC_NVJITLINK_LAUNCH_BOUND", "KERNELC_FILL_POLICY", "KERNELC_FILL_STEP_DOWN",
              "KERNELC_FILL_OCCUPANCY_STEP", "KERNELC_CONSUMER_ORDER", "KERNELC_UNIFORM_MASKS",
              "KERNELC_FILL_KEEP_BLOCKS"):
        monkeypatch.delenv(k, raising=False)


def test_transpose_takes_one_more_block_by_default(monkeypatch):
    _env(monkeypatch)
    off = _ptx(monkeypatch)
    assert off.n_regs > 40 and "registers=fill_step" in off.asm["tir"].splitlines()[0].replace('"', "").replace("'", "")
    monkeypatch.delenv("KERNELC_OCCUPANCY_STEP")
    on = kernelc.compile(transpose_kernel, T_SIG, dict(BLOCK_M=64, BLOCK_N=64), target="sm_90a", num_warps=4,
                         divisibility=T_DIV)
    assert on.n_regs == 40 and on.n_spills == 0
    log = on.artifacts.ptxas_log
    assert re.search(r"kernelc: transpose_kernel at 40 registers \(unbounded: \d+\) runs 12 blocks an SM, not 10", log)
    assert P.blocks_per_sm(on.n_regs, 128, on.shared, P.parse_target("sm_90a").limits) == 12


def test_only_kernels_the_tile_ir_marks(monkeypatch):
    """The same PTX assembled as a kernel with dots would be (fill_step=False): no step under nodots; all: stepped."""
    _env(monkeypatch)
    ptx = _ptx(monkeypatch).asm["ptx"]
    monkeypatch.setenv("KERNELC_OCCUPANCY_STEP", "nodots")
    entry = "transpose_kernel"
    assert P.ptx_to_cubin(ptx, "sm_90a", fill_step=False).resources[entry].registers > 40
    assert P.ptx_to_cubin(ptx, "sm_90a", fill_step=True).resources[entry].registers == 40
    monkeypatch.setenv("KERNELC_OCCUPANCY_STEP", "1")   # the old opt-in spelling: every kernel
    assert P.ptx_to_cubin(ptx, "sm_90a", fill_step=False).resources[entry].registers == 40
    monkeypatch.setenv("KERNELC_OCCUPANCY_STEP", "off")
    assert P.ptx_to_cubin(ptx, "sm_90a", fill_step=True).resources[entry].registers > 40


def test_at_the_step_onepass_keeps_the_blocks_and_the_loads_policy_alone_takes_the_bound(monkeypatch):
    """The widened masks' PTX: 40 registers unbounded, 12 blocks, no step to take. By default
    (KERNELC_FILL_KEEP_BLOCKS=onepass) the transpose, a one-pass kernel, keeps the 12 blocks (0.6% faster on an
    H100, H11b; main's build before 2026-11-28). With the knob off the loads policy alone takes the launch bound's
    56 registers and 9 blocks (more loads in flight per SM; on an H200 0.65-1.7% faster, C2/C2b). Both without
    KERNELC_LOADS_FIRST (the default since session 20 marks the transpose loads_first: test_fill_occupancy_step.py)."""
    _env(monkeypatch)
    monkeypatch.setenv("KERNELC_LOADS_FIRST", "0")
    compile_ = lambda: kernelc.compile(transpose_kernel, T_SIG, dict(BLOCK_M=64, BLOCK_N=64), target="sm_90a",
                                       num_warps=4, divisibility=T_DIV)
    ck = compile_()
    assert "fill_keep_blocks=True" in ck.asm["tir"].splitlines()[0] and ck.n_regs == 40 and ck.n_spills == 0
    assert "launch bound" not in ck.artifacts.ptxas_log
    assert P.blocks_per_sm(ck.n_regs, 128, ck.shared, P.parse_target("sm_90a").limits) == 12
    monkeypatch.setenv("KERNELC_FILL_KEEP_BLOCKS", "off")
    loads = compile_()
    assert "fill_keep_blocks" not in loads.asm["tir"].splitlines()[0]
    assert loads.n_regs > 40 and re.search(r"transpose_kernel with its launch bound: \d+ registers, 9 blocks",
                                           loads.artifacts.ptxas_log)
