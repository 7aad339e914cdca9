"""Register counts against Triton 3.6's on the same source (numbers from
bench/experiments/tutorial_gaps/cpu_compare.py, recorded in docs/triton-tutorials.md, 2026-11-25).

The counts depend on how the PTX is assembled: a standalone ptxas compiles the kernel as a whole
program, as Triton does, nvJitLink relocatable (``ptxas -c``), which gave a SwiGLU row 123 registers
instead of 36 (backend/ptxas.py, KERNELC_ASSEMBLER). Without a standalone ptxas the bounds do not apply.
The relocatable mode's extra registers come from the ``.maxntid`` launch bound, which that mode takes as its
register target: with KERNELC_NVJITLINK_LAUNCH_BOUND=0 nvJitLink assembles without it (tests at the end)."""
import pytest

import kernelc
import kernelc.language as kl
from kernelc import options
from kernelc.compiler.backend import ptxas as P
from examples.kernels import memory_bound as K

needs_ptxas = pytest.mark.skipif(P.ptxas_binary() is None, reason="no standalone ptxas")


@pytest.fixture(autouse=True)
def _standalone_assembler(monkeypatch):
    # the default stays nvJitLink until a GPU A/B (docs/triton-tutorials.md, "Closing the gaps"); these bounds
    # are about the whole-program assembly, so ask for it
    monkeypatch.setenv("KERNELC_ASSEMBLER", "auto")
    # the bounds are about code generation's op order; an elementwise chain in consumer order takes more registers
    # and fewer blocks where that measured faster (geglu fwd 51 and 2, swiglu fwd 64 and 2: test_consumer_order.py)
    monkeypatch.setenv("KERNELC_CONSUMER_ORDER", "off")


@kernelc.jit
def persistent_row_softmax(out_ptr, in_ptr, in_stride, out_stride, n_rows, n_cols, BLOCK: kl.constexpr,
                           STAGES: kl.constexpr):
    # one program walks rows pid, pid + grid, ...; the row load is pipelined num_stages deep
    cols = kl.arange(0, BLOCK)
    mask = cols < n_cols
    for r in kl.range(kl.program_id(0), n_rows, kl.num_programs(0), num_stages=STAGES):
        x = kl.load(in_ptr + r * in_stride + cols, mask=mask, other=-float("inf"))
        z = x - kl.max(x, axis=0)
        e = kl.exp(z)
        kl.store(out_ptr + r * out_stride + cols, e / kl.sum(e, axis=0), mask=mask)


SOFTMAX_SIG = dict(out_ptr="*fp32", in_ptr="*fp32", in_stride="i32", out_stride="i32", n_rows="i32", n_cols="i32")
SWIGLU_SIG = dict(a_ptr="*bf16", b_ptr="*bf16", c_ptr="*bf16", stride="i32", n_cols="i32")
# Triton 3.6.0 (its ptxas 12.8), sm_90a, 2026-11-25: (kernel, constexprs, warps) -> registers
TRITON = {"softmax-1024": 32, "softmax-4096": 64, "swiglu-16384": 36}


@needs_ptxas
@pytest.mark.parametrize("block,warps", [(1024, 8), (4096, 8)])
def test_persistent_softmax_registers_at_most_tritons(block, warps):
    div = dict({k: 16 for k in SOFTMAX_SIG}, n_cols=1)
    ck = kernelc.compile(persistent_row_softmax, SOFTMAX_SIG, dict(BLOCK=block, STAGES=4), target="sm_90a",
                         num_warps=warps, divisibility=div)
    assert "prefetched" in ck.asm["tir"]          # the register prefetch of the row is in, and still fits
    assert ck.n_regs <= TRITON[f"softmax-{block}"], ck.n_regs


@needs_ptxas
def test_swiglu_row_registers_at_most_tritons():
    # the runtime's specialisation for the bench's rows (14336 columns: stride and n_cols divisible by 16)
    ck = kernelc.compile(K.swiglu_fwd_kernel, SWIGLU_SIG, dict(BLOCK_SIZE=16384), target="sm_90a", num_warps=16,
                         divisibility={k: 16 for k in SWIGLU_SIG})
    assert ck.n_regs <= TRITON["swiglu-16384"], ck.n_regs


def test_assembler_choice(monkeypatch):
    ptx = ".version 9.0\n.target sm_90a\n"
    monkeypatch.setenv("KERNELC_ASSEMBLER", "nvjitlink")
    assert P.standalone_assembler(ptx) is None
    monkeypatch.setenv("KERNELC_ASSEMBLER", "auto")
    monkeypatch.setattr(P, "ptxas_binary", lambda: "/opt/ptxas")
    monkeypatch.setattr(P, "ptxas_max_ptx", lambda exe: 87)     # a CUDA 12.8 ptxas cannot read PTX 9.0
    assert P.standalone_assembler(ptx) is None
    assert P.standalone_assembler(ptx.replace("9.0", "8.7")) == "/opt/ptxas"
    monkeypatch.setattr(P, "ptxas_binary", lambda: None)
    assert P.standalone_assembler(ptx) is None
    monkeypatch.setenv("KERNELC_ASSEMBLER", "ptxas")
    with pytest.raises(options.OptionError, match="KERNELC_ASSEMBLER=ptxas"):
        P.standalone_assembler(ptx)
    assert options.compile_options().assembler == "ptxas"


@needs_ptxas
def test_ptxas_version_is_read():
    assert P.ptxas_max_ptx(P.ptxas_binary()) >= 80


def test_default_ptx_version_fits_an_older_standalone_ptxas(monkeypatch):
    from cubintools.target import Target, default_ptx_version
    monkeypatch.setattr(P, "ptxas_binary", lambda: "/opt/ptxas")
    monkeypatch.setattr(P, "ptxas_max_ptx", lambda exe: 87)    # Triton 3.6's ptxas (CUDA 12.8)
    monkeypatch.setenv("KERNELC_ASSEMBLER", "auto")
    default = Target("sm_90a")
    want = min(default.ptx_version, 87)
    assert P.fit_target_to_assembler(default).ptx_version == want
    explicit = Target("sm_90a", 86)
    assert P.fit_target_to_assembler(explicit) is explicit                       # chosen by the user: kept
    monkeypatch.setattr(P, "ptxas_max_ptx", lambda exe: 78)    # below sm_90a's minimum (8.0): kept, nvJitLink
    assert P.fit_target_to_assembler(default) is default
    monkeypatch.setenv("KERNELC_ASSEMBLER", "nvjitlink")
    assert P.fit_target_to_assembler(default) is default
    assert default.ptx_version == default_ptx_version("sm_90a")


# -- nvJitLink and the launch bound (backend/ptxas.py) ----------------------------------------------------------

SWIGLU_BWD_SIG = dict(dc_ptr="*bf16", a_ptr="*bf16", b_ptr="*bf16", da_ptr="*bf16", db_ptr="*bf16", stride="i32",
                      n_cols="i32")


def _swiglu_bwd(block, warps):
    return kernelc.compile(K.swiglu_bwd_kernel, SWIGLU_BWD_SIG, dict(BLOCK_SIZE=block), target="sm_90a",
                           num_warps=warps, divisibility={k: 16 for k in SWIGLU_BWD_SIG})


def test_launch_bounds_are_read_per_entry():
    ptx = (".visible .entry a(\n\t.param .u64 a_param_0\n)\n.maxntid 512\n{\n ret;\n}\n"
           ".visible .entry b()\n{\n ret;\n}\n"
           ".visible .entry c()\n.maxntid 128, 2, 1\n{\n ret;\n}\n")
    assert P.launch_bounds(ptx) == {"a": 512, "c": 256}
    assert P._MAXNTID_RE.sub(b"", ptx.encode()).count(b".maxntid") == 0


@pytest.mark.parametrize("regs,threads,fits", [
    (128, 512, True), (136, 512, False),    # 16 warps: 4 per sub-partition
    (168, 288, True), (176, 288, False),    # 9 warps: 3 on the fullest sub-partition (ptxas's own bound is 168)
    (64, 1024, True), (72, 1024, False),
    (255, 128, True), (256, 32, False),     # at most 255 per thread
])
def test_fits_block(regs, threads, fits):
    from cubintools.target import ARCH_LIMITS
    assert P.fits_block(regs, threads, ARCH_LIMITS[90]) is fits


def test_nvjitlink_without_the_launch_bound_takes_whole_program_registers(monkeypatch):
    # relocatable ptxas (nvJitLink) takes the .maxntid ceiling as its register target; without the bound it
    # allocates as a whole-program ptxas does, at most Triton's count (80, the table in the module docstring)
    monkeypatch.setenv("KERNELC_ASSEMBLER", "nvjitlink")
    monkeypatch.setenv("KERNELC_NVJITLINK_LAUNCH_BOUND", "0")
    free = _swiglu_bwd(16384, 16)
    assert free.n_regs <= 80 and free.n_spills == 0, free.n_regs
    assert ".maxntid 512" in free.asm["ptx"] and "kernelc:" not in free.artifacts.ptxas_log
    monkeypatch.setenv("KERNELC_NVJITLINK_LAUNCH_BOUND", "1")
    bound = _swiglu_bwd(16384, 16)
    assert bound.n_regs > free.n_regs, (bound.n_regs, free.n_regs)


def test_nvjitlink_puts_the_bound_back_when_the_registers_do_not_fit(monkeypatch):
    monkeypatch.setenv("KERNELC_ASSEMBLER", "nvjitlink")
    monkeypatch.setenv("KERNELC_NVJITLINK_LAUNCH_BOUND", "0")
    ck = _swiglu_bwd(32768, 16)     # 64 elements per thread of three tensors: more than 128 registers unbounded
    assert ck.n_regs <= 128
    assert "kernelc: without .maxntid swiglu_bwd_kernel takes" in ck.artifacts.ptxas_log


# Triton 3.6.0's registers for the memory-bound set at the bench's sizes (sm_90a, its ptxas 12.8, 2026-11-27,
# bench/experiments/tutorial_gaps/results/memory_bound_sass.json). The transpose is left out: 42 against 32.
_BF = "*bf16"
MEMORY_BOUND_TRITON = {
    "swiglu_fwd_kernel": (SWIGLU_SIG, 16384, 16, 36),
    "swiglu_bwd_kernel": (SWIGLU_BWD_SIG, 16384, 16, 80),
    "geglu_fwd_kernel": (SWIGLU_SIG, 16384, 16, 36),
    "geglu_bwd_kernel": (SWIGLU_BWD_SIG, 16384, 16, 77),
    "softmax_bwd_kernel": (dict(dx_ptr="*fp16", dy_ptr="*fp16", y_ptr="*fp16", stride="i32", n_cols="i32"),
                           8192, 16, 50),
    "log_softmax_bwd_kernel": (dict(dx_ptr="*fp16", dy_ptr="*fp16", y_ptr="*fp16", stride="i32", n_cols="i32"),
                               8192, 16, 40),
    "cross_entropy_kernel": (dict(logits_ptr=_BF, grad_ptr=_BF, target_ptr="*i64", loss_ptr="*fp32", stride="i32",
                                  n_cols="i32", inv_n_rows="fp32"), 32768, 32, 57),
}


@pytest.mark.parametrize("kernel", sorted(MEMORY_BOUND_TRITON))
def test_memory_bound_registers_at_most_tritons_with_nvjitlink(kernel, monkeypatch):
    monkeypatch.setenv("KERNELC_ASSEMBLER", "nvjitlink")   # no standalone ptxas needed
    monkeypatch.setenv("KERNELC_NVJITLINK_LAUNCH_BOUND", "0")
    monkeypatch.setenv("KERNELC_FILL_OCCUPANCY_STEP", "0")   # the registers ptxas needs (the fill adds free ones)
    # the cross-warp step in a form that holds one partial a thread: the default's lds form for softmax bwd holds
    # all 16 warps' partials at once (54 registers, the same 2 blocks an SM as Triton's 50: the test below)
    monkeypatch.setenv("KERNELC_REDUCE_XWARP", "multi")
    sig, block, warps, triton = MEMORY_BOUND_TRITON[kernel]
    div = {k: 16 for k, t in sig.items() if t != "fp32"}
    ck = kernelc.compile(getattr(K, kernel), sig, dict(BLOCK_SIZE=block), target="sm_90a", num_warps=warps,
                         divisibility=div)
    assert ck.n_regs <= triton and ck.n_spills == 0, (ck.n_regs, triton)


@pytest.mark.parametrize("kernel", sorted(MEMORY_BOUND_TRITON))
def test_memory_bound_blocks_per_sm_at_least_tritons_by_default(kernel, monkeypatch):
    # the defaults (nvJitLink, no launch bound, the occupancy-step fill): as many blocks per SM as Triton's
    # registers allow, whatever registers the fill adds below the step
    from cubintools.target import ARCH_LIMITS
    monkeypatch.setenv("KERNELC_ASSEMBLER", "nvjitlink")
    for knob in ("KERNELC_NVJITLINK_LAUNCH_BOUND", "KERNELC_FILL_OCCUPANCY_STEP", "KERNELC_OCCUPANCY_STEP"):
        monkeypatch.delenv(knob, raising=False)
    sig, block, warps, triton = MEMORY_BOUND_TRITON[kernel]
    div = {k: 16 for k, t in sig.items() if t != "fp32"}
    ck = kernelc.compile(getattr(K, kernel), sig, dict(BLOCK_SIZE=block), target="sm_90a", num_warps=warps,
                         divisibility=div)
    threads, L = 32 * warps, ARCH_LIMITS[90]
    assert ck.n_spills == 0
    assert P.blocks_per_sm(ck.n_regs, threads, ck.shared, L) >= P.blocks_per_sm(triton, threads, 0, L), ck.n_regs


# -- KERNELC_OCCUPANCY_STEP: one more block per SM when the registers are just above a step ---------------------

@pytest.mark.parametrize("regs,threads,shared,blocks", [
    (70, 512, 0, 1), (64, 512, 0, 2),            # 16 warps: 64 registers is the edge of two blocks
    (168, 256, 0, 1), (128, 256, 0, 2),
    (32, 128, 0, 16),                            # the 2048-thread limit, not the registers
    (40, 128, 100 * 1024, 2),                    # shared memory decides
    (255, 1024, 0, 0)])                          # does not fit at all
def test_blocks_per_sm(regs, threads, shared, blocks):
    from cubintools.target import ARCH_LIMITS
    assert P.blocks_per_sm(regs, threads, shared, ARCH_LIMITS[90]) == blocks


def test_occupancy_step_target_only_just_above_a_step():
    from cubintools.target import ARCH_LIMITS
    L = ARCH_LIMITS[90]
    assert P.occupancy_step_target(70, 512, 0, L) == 64          # 1 -> 2 blocks for 9% fewer registers
    assert P.occupancy_step_target(104, 512, 0, L) is None       # the next step (64) is 38% below
    assert P.occupancy_step_target(168, 256, 0, L) is None       # a matmul's accumulators are not squeezed
    assert P.occupancy_step_target(40, 128, 100 * 1024, L) is None  # shared memory, not registers, decides
    assert P.occupancy_step_target(32, 128, 0, L) is None        # already at the thread limit


def test_occupancy_step_reassembles_geglu_bwd_without_spills(monkeypatch):
    """geglu bwd (16384 bf16, 16 warps) took the step when it needed 70 registers (2026-11-27); it now needs 77 with
    nvJitLink 13.5 (no step within 15%) and 76 with the GPU hosts' 13.0.88, whose step to 64 spills (120 bytes,
    2026-11-30): then the free build stays, and only then."""
    monkeypatch.setenv("KERNELC_ASSEMBLER", "nvjitlink")
    monkeypatch.setenv("KERNELC_NVJITLINK_LAUNCH_BOUND", "0")
    monkeypatch.setenv("KERNELC_FILL_OCCUPANCY_STEP", "0")   # the unbounded count, not the step's
    sig = {k: "*bf16" for k in ("dc_ptr", "a_ptr", "b_ptr", "da_ptr", "db_ptr")} | dict(stride="i32", n_cols="i32")

    def build():
        return kernelc.compile(K.geglu_bwd_kernel, sig, dict(BLOCK_SIZE=16384), target="sm_90a", num_warps=16,
                               divisibility={k: 16 for k in sig})
    free = build()
    monkeypatch.setenv("KERNELC_OCCUPANCY_STEP", "1")
    stepped = build()
    want = P.occupancy_step_target(free.n_regs, 512, 0, __import__("cubintools.target").target.ARCH_LIMITS[90])
    assert stepped.n_spills == 0
    if want is None:   # this ptxas allocates too far above a step (or at one): nothing to do, nothing done
        assert stepped.n_regs == free.n_regs
    elif "runs 2 blocks an SM" in stepped.artifacts.ptxas_log:
        assert stepped.n_regs <= want, (free.n_regs, stepped.n_regs)
    else:   # kept the free build: only where the build at the step's ceiling spills
        assert stepped.n_regs == free.n_regs and stepped.asm["cubin"] == free.asm["cubin"]
        at_step = P.ptx_to_cubin(P._MAXNTID_RE.sub(b"", free.asm["ptx"].encode()).decode(), "sm_90a",
                                 extra=(f"-maxrregcount={want}",)).resources["geglu_bwd_kernel"]
        assert at_step.spills > 0 or at_step.stack_frame > 0, (free.n_regs, want)
