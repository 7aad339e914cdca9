"""A persistent GEMM whose tile loop asks for warp specialisation (tutorial 09's ``_ws`` kernel, Hopper):
``warp_specialize`` specialises the K loop inside it, and ``split_ws_consumers`` (passes/ws_consumers.py)
lays a 128-row dot over two consumer warpgroups at ``num_warps=4``, as Triton does. Golden IR before ->
after, the rule's cases, and the SASS on CPU (threads, registers, spills, each loop's instructions)."""
import re

import pytest

import kernelc
import kernelc.language as kl
from kernelc.compiler.ir import verify
from tests.compiler.filecheck import filecheck
from tests.compiler.test_schedule_passes import MM_DESC_DIV, MM_DESC_SIG, TD_DIV, TD_SIG, _passes, two_dots
from tests.compiler.test_warp_specialize import mm_loop


@kernelc.jit
def _tile_of(t, per_group, tiles_m, GROUP_M: kl.constexpr):
    """Grouped tile order: GROUP_M rows of tiles at a time, column by column inside a group."""
    first_m = (t // per_group) * GROUP_M
    rows = kl.minimum(tiles_m - first_m, GROUP_M)
    return first_m + (t % rows), (t % per_group) // rows


@kernelc.jit
def ws_tiles(a_ptr, b_ptr, c_ptr, M, N, K, BM: kl.constexpr, BN: kl.constexpr, BK: kl.constexpr,
             GROUP_M: kl.constexpr, PROGRAMS: kl.constexpr, WS: kl.constexpr):
    """C = A @ B.T, A (M, K), B (N, K), C (M, N) row-major, descriptors made in the kernel; a persistent tile
    loop with ``warp_specialize=WS`` around a K loop; the epilogue's tile number is a counter of its own, as in
    tutorial 09's ``matmul_kernel_descriptor_persistent``."""
    pid = kl.program_id(0)
    tiles_m = kl.cdiv(M, BM)
    tiles_n = kl.cdiv(N, BN)
    steps = kl.cdiv(K, BK)
    a_d = kl.make_tensor_descriptor(a_ptr, shape=[M, K], strides=[K, 1], block_shape=[BM, BK])
    b_d = kl.make_tensor_descriptor(b_ptr, shape=[N, K], strides=[K, 1], block_shape=[BN, BK])
    c_d = kl.make_tensor_descriptor(c_ptr, shape=[M, N], strides=[N, 1], block_shape=[BM, BN])
    per_group = GROUP_M * tiles_n
    stored = pid - PROGRAMS
    for t in kl.range(pid, tiles_m * tiles_n, PROGRAMS, warp_specialize=WS):
        pm, pn = _tile_of(t, per_group, tiles_m, GROUP_M)
        acc = kl.zeros((BM, BN), dtype=kl.float32)
        for k in range(steps):
            acc = kl.dot(a_d.load([pm * BM, k * BK]), b_d.load([pn * BN, k * BK]).T, acc)
        stored += PROGRAMS
        qm, qn = _tile_of(stored, per_group, tiles_m, GROUP_M)
        c_d.store([qm * BM, qn * BN], acc.to(c_ptr.dtype.element_ty))


K_LOOP_LINE = next(i + 1 for i, l in enumerate(open(__file__).read().splitlines()) if "for k in range(steps):" in l)
SIG = {"a_ptr": "*fp16", "b_ptr": "*fp16", "c_ptr": "*fp16", "M": "i32", "N": "i32", "K": "i32"}
DIV = {k: 16 for k in SIG}


def _cx(bm=128, bn=256, ws=True, programs=132):
    return dict(BM=bm, BN=bn, BK=64, GROUP_M=8, PROGRAMS=programs, WS=ws)


def _compile(num_warps=4, stages=3, **cx):
    return kernelc.compile(ws_tiles, SIG, _cx(**cx), target="sm_90a", num_warps=num_warps, num_stages=stages,
                           divisibility=DIV)


def test_the_split_is_a_function_attribute_and_the_k_loop_is_specialised():
    ir, fn, ctx = _passes(ws_tiles, SIG, _cx(), div=DIV)
    assert "consumer_warps" not in ir["hoist_descriptors"]
    # before: the kernel as the program wrote it (a frontend pass: the descriptors' loads are not lowered yet,
    # TMA or masked); after: two consumer warpgroups for every later pass
    filecheck(ir["hoist_descriptors"], """
        CHECK: kernel ws_tiles(
        CHECK-NOT: attributes
        CHECK: scf.for {{.*}} {warp_specialize=True} : i32
        CHECK: = scf.for {{.*}} : <128x256xfp32>
        CHECK: [[A:%\\d+]] = descriptor_load {{.*}} : <128x64xfp16>
        CHECK: [[B:%\\d+]] = descriptor_load {{.*}} : <256x64xfp16>
        CHECK: [[BT:%\\d+]] = trans [[B]] {perm=[1, 0]} : <64x256xfp16>
        CHECK: = dot [[A]], [[BT]], {{%\\d+}} {input_precision='tf32'} : <128x256xfp32>
    """)
    after = ir["split_ws_consumers"]
    assert ") attributes {consumer_warps=8} {  // constexprs" in after.splitlines()[0]
    assert after.split("\n", 1)[1] == ir["hoist_descriptors"].split("\n", 1)[1]  # nothing else changes
    assert ctx.num_warps == 8 and fn.attrs["consumer_warps"] == 8
    # the tile loop keeps the request, its K loop carries the decision
    filecheck(ir["warp_specialize"], """
        CHECK: scf.for {{.*}} {warp_specialize=True} : i32
        CHECK-NEXT: ^body(
        CHECK: = scf.for {{.*}} {pipeline={stages=3, lookahead=2}, ws={producer_warps=1, setmaxnreg=False, release='lagged', pingpong=False}} : <128x256xfp32>
    """)
    # the producer (warp 8) runs the tile loop's skeleton around the K loop's copies; eight consumer warps
    # arrive on each empty barrier; the tile's coordinates are computed once per tile, outside the K loop
    filecheck(ir["expand_warp_specialize"], """
        CHECK: mbarrier_init {{%\\d+}}, {{%\\d+}} {count=8}
        CHECK: ws_producer {producer_warps=1, stages=3, source='{{.*}}test_ws_consumers.py:LINE:{{\\d+}}'}
        CHECK-NEXT: ^body():
        CHECK-NEXT: = elect_one {warp=8} : i1
        CHECK: scf.for [[PID:%\\d+]], {{%\\d+}}, {{%\\d+}}
        CHECK-NEXT: ^body([[T:%\\d+]]: i32):
        CHECK: = sdiv [[T]], {{%\\d+}} : i32
        CHECK: = srem [[T]], {{%\\d+}} : i32
        CHECK: cursor_load
        CHECK: = scf.for
        CHECK-NOT: sdiv
        CHECK-NOT: srem
        CHECK: tma_copy_to_ring
        CHECK: tma_copy_to_ring
        CHECK: scf.yield
        CHECK-NEXT: cursor_store
    """.replace("LINE", str(K_LOOP_LINE)))
    verify(fn)


def test_the_verifier_checks_consumer_warps():
    from kernelc.compiler.ir.verifier import VerificationError
    _, fn, _ = _passes(ws_tiles, SIG, _cx(), div=DIV, upto="simplify")
    for bad in (6, "8", 0, True):
        fn.attrs["consumer_warps"] = bad
        with pytest.raises(VerificationError, match="consumer_warps must be whole warpgroups"):
            verify(fn)
    fn.attrs["consumer_warps"] = 8
    verify(fn)


@pytest.mark.parametrize("num_warps,bm,bn,split,expect", [
    (4, 128, 256, True, 8),    # tutorial 09's _ws at Triton's pick: two warpgroups of 64 rows
    (4, 128, 128, True, 8),
    (4, 256, 128, True, 8),    # at most two consumer warpgroups (128 rows each)
    (4, 64, 256, True, None),  # one warpgroup of 64 rows already
    (8, 128, 256, True, None),  # 8 warps are two warpgroups already
    (4, 128, 256, False, None),  # KERNELC_WS_SPLIT_M=0
])
def test_which_kernels_get_two_consumer_warpgroups(num_warps, bm, bn, split, expect, monkeypatch):
    monkeypatch.setenv("KERNELC_WS_SPLIT_M", "1" if split else "0")
    ir, fn, ctx = _passes(ws_tiles, SIG, _cx(bm=bm, bn=bn), num_warps=num_warps, div=DIV, upto="simplify")
    assert fn.attrs.get("consumer_warps") == expect
    assert ctx.num_warps == (expect or num_warps)


def test_loops_that_keep_num_warps():
    """Not asked (or refused) on the loop, two dots (attention's shape), or no wgmma (sm_80): no split."""
    for cx, sig, div, kernel, target in ((_cx(ws=None), SIG, DIV, ws_tiles, "sm_90a"),
                                         (_cx(ws=False), SIG, DIV, ws_tiles, "sm_90a"),
                                         (_cx(), SIG, DIV, ws_tiles, "sm_80")):
        _, fn, ctx = _passes(kernel, sig, cx, target=target, div=div, upto="simplify")
        assert "consumer_warps" not in fn.attrs and ctx.num_warps == 4, (cx, target)
    _, fn, ctx = _passes(two_dots, TD_SIG, dict(BM=128, BN=64, D=64), div=TD_DIV, upto="simplify")
    assert "consumer_warps" not in fn.attrs


def test_a_loop_that_asks_for_itself_is_split_too():
    """``warp_specialize=True`` on the K loop (no tile loop): the same rule."""
    _, fn, ctx = _passes(mm_loop, MM_DESC_SIG, dict(BM=128, BN=128, BK=64, WS=True), div=MM_DESC_DIV,
                         upto="simplify")
    assert fn.attrs["consumer_warps"] == 8


def _sass_loops(ck):
    """[(opcodes)] of each backward-branch loop of the SASS, innermost first (by length)."""
    lines = [l for l in ck.asm["sass"].splitlines() if re.match(r"\s*/\*[0-9a-f]{4,}\*/", l)]
    pcs, ops, labels = [], [], {}
    for raw in ck.asm["sass"].splitlines():
        m = re.match(r"\s*\.L_x_(\d+):", raw)
        if m:
            labels[m.group(1)] = len(ops)
            continue
        m = re.match(r"\s*/\*([0-9a-f]{4,})\*/\s*(?:@!?U?P\w+\s+)?(\S+)(.*)", raw)
        if m:
            ops.append((m.group(2), m.group(3)))
    loops = []
    for i, (op, rest) in enumerate(ops):
        m = re.search(r"`\(\.L_x_(\d+)\)", rest)
        if op.startswith("BRA") and m and labels.get(m.group(1), i + 1) <= i:
            loops.append([o for o, _ in ops[labels[m.group(1)]:i + 1]])
    assert lines
    return sorted(loops, key=len)


@pytest.mark.parametrize("num_warps", [4, 8])
def test_the_sass_has_two_consumer_warpgroups_and_a_producer_warp(num_warps):
    """Tutorial 09's ``_ws`` config (128x256x64, 3 stages): 8 consumer warps + 1 producer warp at 4 warps as at
    8, within the 168 registers ptxas gives 288 threads, nothing spilled; the consumers' K loop issues the 4
    HGMMA.64x256x16 of its warpgroup's 64 rows and no copy, the producer's loop the 2 copies and no MMA."""
    ck = _compile(num_warps=num_warps)
    assert ck.launch_warps == 9 and ck.extra_warps == 9 - num_warps
    assert ".maxntid 288" in ck.asm["ptx"]
    assert ck.n_regs <= 168 and ck.n_spills == 0 and ck.local_bytes == 0
    loops = _sass_loops(ck)
    mma = [l for l in loops if any(o.startswith("HGMMA") for o in l)]
    copies = [l for l in loops if any(o.startswith("UTMALDG") for o in l)]
    k_loop, producer = mma[0], copies[0]
    assert [o for o in k_loop if o.startswith("HGMMA")] == ["HGMMA.64x256x16.F32"] * 4
    assert not any(o.startswith(("UTMALDG", "STL", "LDL", "BAR")) for o in k_loop), k_loop
    assert sum(o.startswith("UTMALDG") for o in producer) == 2 and not any(o.startswith("HGMMA") for o in producer)
    assert any(n.endswith(f"the warp-specialised dot runs on 2 consumer warpgroups (8 warps; num_warps=4)")
               for n in ck.compile_log) == (num_warps == 4)
    assert ck.reports["warp_specialization"]["line"] == K_LOOP_LINE


def test_without_the_split_one_warpgroup_spills(monkeypatch):
    """Why the split: KERNELC_WS_SPLIT_M=0 keeps the 128x256 fp32 accumulator in one warpgroup (256 registers a
    thread for it alone)."""
    monkeypatch.setenv("KERNELC_WS_SPLIT_M", "0")
    ck = _compile()
    assert ck.launch_warps == 5 and ck.n_spills > 0


def test_descriptors_without_tma_keep_the_two_warpgroups(monkeypatch):
    """M, N, K not known multiples of 16: the made descriptors' strides are not known 16-byte aligned, so their
    loads take the masked path and no producer fills a ring (the compile log says why). The dot still runs on
    two warpgroups: the kernel is the one the program gets at ``num_warps=8`` without warp specialisation (the
    same cubin; the masked path's registers spill 84 B there too). Without the split (as in GPU call R1, where
    the split came after the descriptors' lowering and looked for TMA loads) it ran on 4 warps and spilled 4400 B."""
    div = {"a_ptr": 16, "b_ptr": 16, "c_ptr": 16, "M": 1, "N": 1, "K": 1}

    def build(num_warps, ws):
        return kernelc.compile(ws_tiles, SIG, _cx(programs=7, ws=ws), target="sm_90a", num_warps=num_warps,
                               num_stages=3, divisibility=div)
    ck = build(4, True)
    assert ck.launch_warps == 8 and ck.extra_warps == 4 and "ws_producer" not in ck.asm["tir"]
    assert any("loop not warp-specialised: no tensor-descriptor (TMA) loads feed its dots" in n for n in ck.compile_log)
    assert any("2 consumer warpgroups" in n for n in ck.compile_log)
    plain8 = build(8, None)
    assert ck.asm["cubin"] == plain8.asm["cubin"] and ck.n_spills == plain8.n_spills
    monkeypatch.setenv("KERNELC_WS_SPLIT_M", "0")
    one_group = build(4, True)
    assert one_group.launch_warps == 4 and one_group.n_spills > 20 * max(ck.n_spills, 1)


def test_the_kernel_matches_torch_in_the_interpreter(monkeypatch):
    torch = pytest.importorskip("torch")
    monkeypatch.setenv("KERNELC_INTERPRET", "1")
    torch.manual_seed(0)
    M, N, K = 200, 150, 96
    a = torch.randn(M, K, dtype=torch.float16)
    b = torch.randn(N, K, dtype=torch.float16)
    c = torch.full((M, N), float("nan"), dtype=torch.float16)
    ws_tiles[(3,)](a, b, c, M, N, K, BM=64, BN=64, BK=32, GROUP_M=2, PROGRAMS=3, WS=True)
    torch.testing.assert_close(c.float(), a.float() @ b.float().T, atol=0.05, rtol=1e-2)
