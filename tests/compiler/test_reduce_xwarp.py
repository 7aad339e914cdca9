"""``mark_reduce_xwarp`` (passes/reduce_xwarp.py): how a block reduction crosses warps and in which order its
butterflies run, as attributes (golden IR), and codegen's broadcast form in the PTX (Triton's: lane 0 stores,
warp 0 combines, thread 0 stores, a second barrier, everyone reads slot 0)."""
import re

import kernelc
import kernelc.language as kl
from kernelc.compiler import compiler as C
from kernelc.compiler.compiler import _base_function
from kernelc.compiler.frontend import generate_ir
from kernelc.compiler.ir.printer import print_function
from kernelc.compiler.pass_manager import PassContext, run_passes
from tests.compiler.filecheck import filecheck


@kernelc.jit
def row_stats_kernel(x_ptr, h_ptr, i_ptr, out_ptr, tile_ptr, BLOCK: kl.constexpr):
    r = kl.arange(0, BLOCK)
    x = kl.load(x_ptr + r)
    h = kl.load(h_ptr + r)
    i = kl.load(i_ptr + r)
    kl.store(out_ptr, kl.max(x, 0) + kl.sum(x, 0) + kl.sum(h, 0).to(kl.float32) + kl.sum(i, 0).to(kl.float32)
             + kl.argmax(x, 0).to(kl.float32))
    x2 = kl.load(x_ptr + r[:, None] * 16 + kl.arange(0, 16)[None, :])
    kl.store(tile_ptr + r, kl.sum(x2, 1))   # one value per row: not a block's single result


SIG = dict(x_ptr="*fp32", h_ptr="*fp16", i_ptr="*i32", out_ptr="*fp32", tile_ptr="*fp32")


def _ir_around(monkeypatch, xwarp, bfly):
    monkeypatch.setenv("KERNELC_REDUCE_XWARP", xwarp)
    monkeypatch.setenv("KERNELC_REDUCE_BFLY", bfly)
    names = [p.name for p in C.TILE_PASSES]
    i = names.index("mark_reduce_xwarp")
    fn, _ = generate_ir(_base_function(row_stats_kernel), SIG, dict(BLOCK=256), {}, ())
    run_passes(fn, C.TILE_PASSES[:i], PassContext("sm_90a", (9, 0), 4))
    before = print_function(fn, show_loc=False)
    run_passes(fn, C.TILE_PASSES[i:i + 1], PassContext("sm_90a", (9, 0), 4))
    return before, print_function(fn, show_loc=False)


def test_block_reductions_of_32_bit_values_take_the_broadcast_form_golden(monkeypatch):
    before, after = _ir_around(monkeypatch, "broadcast", "down")
    assert "xwarp" not in before and "bfly" not in before
    filecheck(after, """
        CHECK: reduce {{%\\d+}} {axis=0, kind='max', xwarp='broadcast', bfly='down'} : fp32
        CHECK: reduce {{%\\d+}} {axis=0, kind='add', xwarp='broadcast', bfly='down'} : fp32
        CHECK: reduce {{%\\d+}} {axis=0, kind='add', bfly='down'} : fp16
        CHECK: reduce {{%\\d+}} {axis=0, kind='add', xwarp='broadcast', bfly='down'} : i32
        CHECK: reduce {{%\\d+}}, {{%\\d+}} {axis=0, kind='argmax', bfly='down'} : fp32, i32
        CHECK: reduce {{%\\d+}} {axis=1, kind='add', bfly='down'} : <256xfp32>
    """)
    assert re.sub(r", (xwarp|bfly)='\w+'", "", after) == before


@kernelc.jit
def one_sum_kernel(x_ptr, y_ptr, BLOCK: kl.constexpr):
    # log_softmax's backward row: one reduction to a single value
    r = kl.arange(0, BLOCK)
    dy = kl.load(x_ptr + r)
    kl.store(y_ptr + r, dy - kl.exp(dy) * kl.sum(dy, 0))


def test_multi_marks_broadcast_only_with_two_or_more_block_reductions(monkeypatch):
    """KERNELC_REDUCE_XWARP=multi (the default): row_stats_kernel (a max and three sums to one value) as under
    broadcast; a kernel with one such reduction keeps allreduce (no mark)."""
    before, after = _ir_around(monkeypatch, "multi", "up")
    assert after.count("xwarp='broadcast'") == 3 and re.sub(r", xwarp='\w+'", "", after) == before
    monkeypatch.setenv("KERNELC_REDUCE_XWARP", "multi")
    names = [p.name for p in C.TILE_PASSES]
    i = names.index("mark_reduce_xwarp")
    fn, _ = generate_ir(_base_function(one_sum_kernel), dict(x_ptr="*fp32", y_ptr="*fp32"), dict(BLOCK=256), {}, ())
    run_passes(fn, C.TILE_PASSES[:i + 1], PassContext("sm_90a", (9, 0), 4))
    text = print_function(fn, show_loc=False)
    assert "reduce" in text and "xwarp" not in text
    monkeypatch.setenv("KERNELC_REDUCE_XWARP", "broadcast")
    fn, _ = generate_ir(_base_function(one_sum_kernel), dict(x_ptr="*fp32", y_ptr="*fp32"), dict(BLOCK=256), {}, ())
    run_passes(fn, C.TILE_PASSES[:i + 1], PassContext("sm_90a", (9, 0), 4))
    assert "xwarp='broadcast'" in print_function(fn, show_loc=False)


def test_the_default_knobs_leave_the_ir(monkeypatch):
    before, after = _ir_around(monkeypatch, "allreduce", "up")
    assert before == after and "xwarp" not in after and "bfly" not in after


@kernelc.jit
def row_sum_kernel(x_ptr, out_ptr, BLOCK: kl.constexpr):
    r = kl.arange(0, BLOCK)
    kl.store(out_ptr, kl.sum(kl.load(x_ptr + r), 0))


def _ptx(monkeypatch, xwarp, bfly="up"):
    monkeypatch.setenv("KERNELC_REDUCE_XWARP", xwarp)
    monkeypatch.setenv("KERNELC_REDUCE_BFLY", bfly)
    ck = kernelc.compile(row_sum_kernel, dict(x_ptr="*fp32", out_ptr="*fp32"), dict(BLOCK=2048), target="sm_90a",
                         num_warps=8, divisibility={"x_ptr": 16, "out_ptr": 16})
    return ck.asm["ptx"]


def _lines(ptx, pat):
    """The instructions matching ``pat``, whitespace collapsed."""
    return [re.sub(r"\s+", " ", ln.strip()) for ln in ptx.splitlines()
            if re.search(pat, ln) and not ln.strip().startswith(".")]


def test_broadcast_stores_from_lane_0_and_reads_one_slot_after_a_second_barrier(monkeypatch):
    ptx = _ptx(monkeypatch, "broadcast", "down")
    body = _lines(ptx, r"shared|bar\.sync|shfl")
    # lane 0's store, a barrier, the first 8 threads' load, 3 shuffles (8 warps) farthest first, thread 0's store,
    # a barrier, everyone's load of slot 0
    assert [re.sub(r"%\w+", "R", ln) for ln in body[5:]] == [
        "@R st.shared.b32 [R], R;", "bar.sync 0;", "@R ld.shared.b32 R, [R];",
        "shfl.sync.bfly.b32 R, R, 4, 31, -1;", "shfl.sync.bfly.b32 R, R, 2, 31, -1;",
        "shfl.sync.bfly.b32 R, R, 1, 31, -1;", "@R st.shared.b32 [R], R;", "bar.sync 0;",
        "ld.shared.b32 R, [global_smem];"]
    assert [int(re.search(r", (\d+), 31", ln).group(1)) for ln in body[:5]] == [16, 8, 4, 2, 1]


def test_allreduce_is_one_barrier_and_every_warp_combining(monkeypatch):
    ptx = _ptx(monkeypatch, "allreduce")
    assert len(_lines(ptx, r"bar\.sync")) == 1 and not _lines(ptx, r"@%p\d+ (st|ld)\.shared")
    assert [int(re.search(r", (\d+), 31", ln).group(1)) for ln in _lines(ptx, "shfl")] == [1, 2, 4, 8, 16, 1, 2, 4]


def test_lds_marks_every_block_reduction_to_one_value_golden(monkeypatch):
    """KERNELC_REDUCE_XWARP=lds: every reduction to one value per block (any type, argmax's pair too), not the
    per-row one."""
    before, after = _ir_around(monkeypatch, "lds", "up")
    filecheck(after, """
        CHECK: reduce {{%\\d+}} {axis=0, kind='max', xwarp='lds'} : fp32
        CHECK: reduce {{%\\d+}} {axis=0, kind='add', xwarp='lds'} : fp32
        CHECK: reduce {{%\\d+}} {axis=0, kind='add', xwarp='lds'} : fp16
        CHECK: reduce {{%\\d+}} {axis=0, kind='add', xwarp='lds'} : i32
        CHECK: reduce {{%\\d+}}, {{%\\d+}} {axis=0, kind='argmax', xwarp='lds'} : fp32, i32
        CHECK: reduce {{%\\d+}} {axis=1, kind='add'} : <256xfp32>
    """)
    assert re.sub(r", xwarp='\w+'", "", after) == before


def test_lds_reads_every_partial_with_16_byte_loads_and_no_cross_warp_shuffle(monkeypatch):
    """8 warps: after the lanes' 5 shuffles, one barrier and two ld.shared.v4 of fixed addresses (every thread reads
    all 8 partials) -- no shuffle after the barrier."""
    ptx = _ptx(monkeypatch, "lds")
    body = _lines(ptx, r"shared|bar\.sync|shfl")
    shfl = [i for i, ln in enumerate(body) if "shfl" in ln]
    bar = [i for i, ln in enumerate(body) if "bar.sync" in ln]
    assert len(shfl) == 5 and len(bar) == 1 and max(shfl) < bar[0]
    loads = [ln for ln in body[bar[0]:] if ln.startswith("ld.shared")]
    assert len(loads) == 2 and all(ln.startswith("ld.shared.v4.") for ln in loads), loads
    assert [ln.split("[")[1] for ln in loads] == ["global_smem];", "global_smem+16];"]


@kernelc.jit
def dot_row_kernel(y_ptr, dy_ptr, dx_ptr, BLOCK: kl.constexpr):
    # softmax's backward row: every tile op feeds sum(y * dy) or reads it
    r = kl.arange(0, BLOCK)
    y = kl.load(y_ptr + r)
    dy = kl.load(dy_ptr + r)
    kl.store(dx_ptr + r, y * (dy - kl.sum(y * dy, 0)))


def _marks(monkeypatch, kern, sig, xwarp):
    monkeypatch.setenv("KERNELC_REDUCE_XWARP", xwarp)
    names = [p.name for p in C.TILE_PASSES]
    i = names.index("mark_reduce_xwarp")
    fn, _ = generate_ir(_base_function(kern), sig, dict(BLOCK=256), {}, ())
    run_passes(fn, C.TILE_PASSES[:i + 1], PassContext("sm_90a", (9, 0), 4))
    return [op.attrs.get("xwarp") for op in fn.walk() if op.name == "reduce"]


def test_multi_lds_takes_lds_only_where_no_work_could_hide_the_cross_warp_step(monkeypatch):
    """KERNELC_REDUCE_XWARP=multi_lds (the default): softmax's backward row (everything feeds the sum or reads it)
    gets lds; log_softmax's (exp(dy) depends on neither) keeps allreduce; multi leaves both allreduce."""
    sig = dict(y_ptr="*fp32", dy_ptr="*fp32", dx_ptr="*fp32")
    assert _marks(monkeypatch, dot_row_kernel, sig, "multi_lds") == ["lds"]
    assert _marks(monkeypatch, dot_row_kernel, sig, "multi") == [None]
    one = dict(x_ptr="*fp32", y_ptr="*fp32")
    assert _marks(monkeypatch, one_sum_kernel, one, "multi_lds") == [None]
    assert _marks(monkeypatch, one_sum_kernel, one, "lds") == ["lds"]
    monkeypatch.delenv("KERNELC_REDUCE_XWARP")
    from kernelc import options
    assert options.get("KERNELC_REDUCE_XWARP") == "multi_lds"


# -- KERNELC_REDUCE_SCRATCH: where the partials go (mark_reduce_scratch) ------------------------------------------

def _scratch_ir(monkeypatch, mode):
    monkeypatch.setenv("KERNELC_REDUCE_SCRATCH", mode)
    names = [p.name for p in C.TILE_PASSES]
    i = names.index("mark_reduce_scratch")
    fn, _ = generate_ir(_base_function(row_stats_kernel), SIG, dict(BLOCK=256), {}, ())
    run_passes(fn, C.TILE_PASSES[:i], PassContext("sm_90a", (9, 0), 4))
    before = print_function(fn, show_loc=False)
    run_passes(fn, C.TILE_PASSES[i:i + 1], PassContext("sm_90a", (9, 0), 4))
    return before, print_function(fn, show_loc=False)


def test_apart_gives_each_block_reduction_its_own_scratch_golden(monkeypatch):
    before, after = _scratch_ir(monkeypatch, "apart")
    assert "scratch_at" not in before
    # 4 warps: 16 bytes a 32-bit operand, 16 for fp16 (8 bytes, aligned up), argmax 16 + 16; the row sum (one value
    # per row, not per block) gets none
    filecheck(after, """
        CHECK: reduce {{%\\d+}} {axis=0, kind='max'{{.*}}scratch_at=0} : fp32
        CHECK: reduce {{%\\d+}} {axis=0, kind='add'{{.*}}scratch_at=16} : fp32
        CHECK: reduce {{%\\d+}} {axis=0, kind='add'{{.*}}scratch_at=32} : fp16
        CHECK: reduce {{%\\d+}} {axis=0, kind='add'{{.*}}scratch_at=48} : i32
        CHECK: reduce {{%\\d+}}, {{%\\d+}} {axis=0, kind='argmax'{{.*}}scratch_at=64} : fp32, i32
        CHECK-NOT: scratch_at
    """)
    assert re.sub(r", scratch_at=\d+", "", after) == before
    assert _scratch_ir(monkeypatch, "shared")[1] == before


@kernelc.jit
def softmax_row_kernel(x_ptr, y_ptr, BLOCK: kl.constexpr):
    r = kl.arange(0, BLOCK)
    x = kl.load(x_ptr + r)
    z = x - kl.max(x, 0)
    num = kl.exp(z)
    kl.store(y_ptr + r, num / kl.sum(num, 0))


def test_apart_drops_the_barrier_between_softmax_max_and_sum(monkeypatch):
    counts = {}
    for mode in ("shared", "apart"):
        monkeypatch.setenv("KERNELC_REDUCE_SCRATCH", mode)
        ck = kernelc.compile(softmax_row_kernel, dict(x_ptr="*fp32", y_ptr="*fp32"), dict(BLOCK=4096),
                             target="sm_90a", num_warps=16)
        counts[mode] = len(_lines(ck.asm["ptx"], r"bar\.sync"))
    # multi's broadcast form: two barriers a reduction, and (shared) one between the max's read and the sum's stores
    assert counts == {"shared": 5, "apart": 4}


@kernelc.jit
def online_lse_kernel(x_ptr, out_ptr, n, BLOCK: kl.constexpr):
    # cross_entropy's first pass: a max and a sum of every block of the row, in a loop; then one more sum outside
    m = -float("inf")
    d = 0.0
    for off in range(0, n, BLOCK):
        x = kl.load(x_ptr + off + kl.arange(0, BLOCK))
        m_new = kl.maximum(m, kl.max(x, 0))
        d = d * kl.exp(m - m_new) + kl.sum(kl.exp(x - m_new), 0)
        m = m_new
    kl.store(out_ptr, m + kl.log(d) + kl.sum(kl.load(x_ptr + kl.arange(0, BLOCK)), 0))


def test_loops_gives_own_scratch_only_to_the_reductions_inside_a_loop(monkeypatch):
    monkeypatch.setenv("KERNELC_REDUCE_SCRATCH", "loops")
    names = [p.name for p in C.TILE_PASSES]
    i = names.index("mark_reduce_scratch")
    fn, _ = generate_ir(_base_function(online_lse_kernel), dict(x_ptr="*fp32", out_ptr="*fp32", n="i32"),
                        dict(BLOCK=1024), {}, ())
    run_passes(fn, C.TILE_PASSES[:i + 1], PassContext("sm_90a", (9, 0), 4))
    marks = [op.attrs.get("scratch_at") for op in fn.walk() if op.name == "reduce"]
    assert marks == [0, 16, None]
