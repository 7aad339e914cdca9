"""``expand_cp_async_rings`` (passes/cp_async_rings.py, docs/schedule-ir.md): golden IR before -> after,
the verifier's checks of the ring ops, and their lowering one op at a time."""
import pytest

from kernelc.compiler.ir import verify
from kernelc.compiler.ir.verifier import VerificationError
from tests.compiler.filecheck import filecheck
from tests.compiler.test_schedule_passes import MM_DESC_DIV, MM_DESC_SIG, MM_PTR_SIG, _passes, mm_plain
from tests.compiler.test_warp_specialize import mm_loop
from tests.compiler.verifier_cases import rejects_bad_attrs, rejects_bad_operands

CX = dict(BM=64, BN=64, BK=32)


@pytest.fixture(autouse=True)
def _pointer_loads(monkeypatch):
    monkeypatch.setenv("KERNELC_AUTO_TMA", "0")  # keep the pointer loads (no rewrite to descriptors)


def test_a_cp_async_ring_becomes_explicit_ops():
    # K divisible by 16, as the runtime specialises it: A's rows start K elements apart, so A's 16-byte copies
    # need it (before 2026-11-28 axis_info took rm[:, None] as divisible along columns and vectorised regardless)
    ir, fn, _ = _passes(mm_plain, MM_PTR_SIG, CX, target="sm_80")
    filecheck(ir["schedule_wgmma"], """
        CHECK: = scf.for {{.*}} {pipeline={stages=3, lookahead=2}} : <64x64xfp32>
        CHECK: [[A:%\\d+]] = load {{.*}}pipeline={ring='cp.async', vec=8}}
        CHECK: [[B:%\\d+]] = load {{.*}}pipeline={ring='cp.async', vec=8}}
        CHECK-NEXT: = dot [[A]], [[B]],
    """)
    filecheck(ir["expand_cp_async_rings"], """
        CHECK: [[RA:%\\d+]] = ring_alloc {stages=3, operand='a'} : <64x32xfp16>
        CHECK-NEXT: [[RB:%\\d+]] = ring_alloc {stages=3, operand='b'} : <32x64xfp16>
        CHECK-NEXT: [[G0:%\\d+]] = cmpi {{%\\d+}}, %K {pred='slt'} : i1
        CHECK: [[PA0:%\\d+]] = addptr {{.*}} : <64x32x*fp16>
        CHECK-NEXT: [[PB0:%\\d+]] = addptr {{.*}} : <32x64x*fp16>
        CHECK-NEXT: [[S0:%\\d+]] = constant {value=0} : i32
        CHECK-NEXT: async_copy [[RA]], [[S0]], [[PA0]], [[G0]] {vec=8}
        CHECK-NEXT: async_copy [[RB]], [[S0]], [[PB0]], [[G0]] {vec=8}
        CHECK-NEXT: async_commit_group
        CHECK: [[G1:%\\d+]] = cmpi {{%\\d+}}, %K {pred='slt'} : i1
        CHECK: [[S1:%\\d+]] = constant {value=1} : i32
        CHECK-NEXT: async_copy [[RA]], [[S1]], {{%\\d+}}, [[G1]] {vec=8}
        CHECK-NEXT: async_copy [[RB]], [[S1]], {{%\\d+}}, [[G1]] {vec=8}
        CHECK-NEXT: async_commit_group
        CHECK-NEXT: [[R0:%\\d+]] = constant {value=0} : i32
        CHECK-NEXT: [[W0:%\\d+]] = constant {value=2} : i32
        CHECK-NEXT: = scf.for {{.*}}, [[R0]], [[W0]] {pipeline={stages=3, lookahead=2}} : <64x64xfp32>, i32, i32
        CHECK-NEXT: ^body({{%\\d+}}: i32, [[ACC:%\\d+]]: <64x64xfp32>, [[RD:%\\d+]]: i32, [[WR:%\\d+]]: i32):
        CHECK-NEXT: async_wait_group {pending=1}
        CHECK-NEXT: barrier
        CHECK: [[G:%\\d+]] = cmpi {{%\\d+}}, %K {pred='slt'} : i1
        CHECK: async_copy [[RA]], [[WR]], {{%\\d+}}, [[G]] {vec=8, source='{{.*}}test_schedule_passes.py:32:{{\\d+}}'}
        CHECK-NEXT: async_copy [[RB]], [[WR]], {{%\\d+}}, [[G]] {vec=8, source='{{.*}}test_schedule_passes.py:33:{{\\d+}}'}
        CHECK-NEXT: async_commit_group
        CHECK-NEXT: [[TA:%\\d+]] = ring_read [[RA]], [[RD]] : <64x32xfp16>
        CHECK-NEXT: [[TB:%\\d+]] = ring_read [[RB]], [[RD]] : <32x64xfp16>
        CHECK: [[RI:%\\d+]] = add [[RD]], {{%\\d+}} : i32
        CHECK: [[RW:%\\d+]] = cmpi [[RI]], {{%\\d+}} {pred='eq'} : i1
        CHECK: [[RN:%\\d+]] = select [[RW]], {{%\\d+}}, [[RI]] : i32
        CHECK: [[WI:%\\d+]] = add [[WR]], {{%\\d+}} : i32
        CHECK: [[WN:%\\d+]] = select {{%\\d+}}, {{%\\d+}}, [[WI]] : i32
        CHECK-NOT: = load
        CHECK: [[D:%\\d+]] = dot [[TA]], [[TB]], [[ACC]] {input_precision='tf32', engine='mma'}
        CHECK-NEXT: scf.yield [[D]], [[RN]], [[WN]]
        CHECK-NEXT: async_wait_all
    """)
    verify(fn)
    # both stage counters wrap at the ring's 3 stages
    wraps = [o for o in fn.walk() if o.name == "cmpi" and o.attrs["pred"] == "eq"]
    assert [w.operands[1].op.attrs["value"] for w in wraps] == [3, 3]


def test_pointer_increments_are_carried_ahead_and_the_wgmma_reads_after_the_barrier(monkeypatch):
    """mm_loop's pointers advance each iteration: the loop carries them ``lookahead`` iterations ahead for
    the copies; on sm_90a the dot runs on wgmma, which reads the stage after the copies' wait and the barrier
    (no proxy fence: Triton 3.6 and CUTLASS's sm90 cp.async mainloops have none).
    With KERNELC_WGMMA_ASYNC=0 (the dot waited for in its iteration) the copies come before the dot."""
    monkeypatch.setenv("KERNELC_WGMMA_ASYNC", "0")
    sig = dict(MM_PTR_SIG)
    ir, fn, _ = _passes(mm_pointer_loop, sig, CX)
    filecheck(ir["expand_cp_async_rings"], """
        CHECK: ring_alloc {stages=3, operand='a'}
        CHECK: ring_alloc {stages=3, operand='b'}
        CHECK: async_commit_group
        CHECK: [[PA1:%\\d+]] = addptr {{.*}} : <64x32x*fp16>
        CHECK: async_commit_group
        CHECK: = scf.for {{.*}} {pipeline={stages=3, lookahead=2}} : <64x64xfp32>, <64x32x*fp16>, <32x64x*fp16>, <64x32x*fp16>, <32x64x*fp16>, i32, i32
        CHECK-NEXT: ^body({{%\\d+}}: i32, {{%\\d+}}: <64x64xfp32>, [[PA:%\\d+]]: <64x32x*fp16>, [[PB:%\\d+]]: <32x64x*fp16>, [[QA:%\\d+]]: <64x32x*fp16>, [[QB:%\\d+]]: <32x64x*fp16>, {{%\\d+}}: i32, {{%\\d+}}: i32):
        CHECK-NEXT: async_wait_group {pending=1}
        CHECK-NEXT: barrier
        CHECK: async_copy {{%\\d+}}, {{%\\d+}}, [[QA]], {{%\\d+}} {vec=8, source=
        CHECK-NEXT: async_copy {{%\\d+}}, {{%\\d+}}, [[QB]], {{%\\d+}} {vec=8, source=
        CHECK: scf.yield
        CHECK-NEXT: async_wait_all
    """)
    loop = next(o for o in fn.walk() if o.name == "scf.for")
    yld = loop.regions[0].ops[-1]
    assert len(yld.operands) == len(loop.results) == 7


def test_with_a_wgmma_in_flight_the_copies_follow_the_dot(monkeypatch):
    """KERNELC_WGMMA_ASYNC=1: one wgmma group stays in flight and the ring keeps its full lookahead
    (``refill='after_dots'``): the head waits for stage i, the dot is issued, then a barrier and the copies
    of iteration i+2 into stage i-1, which the dot's ``wait_group 1`` has retired (Triton's order)."""
    monkeypatch.setenv("KERNELC_WGMMA_ASYNC", "1")
    ir, fn, _ = _passes(mm_pointer_loop, dict(MM_PTR_SIG), CX)
    filecheck(ir["schedule_pipelines"], """
        CHECK: = scf.for {{.*}} {pipeline={stages=3, lookahead=2, refill='after_dots'}}
        CHECK: = dot {{.*}}wgmma='async'
    """)
    filecheck(ir["expand_cp_async_rings"], """
        CHECK: [[RA:%\\d+]] = ring_alloc {stages=3, operand='a'}
        CHECK-NEXT: [[RB:%\\d+]] = ring_alloc {stages=3, operand='b'}
        CHECK: async_copy [[RA]], {{%\\d+}}, {{%\\d+}}, {{%\\d+}} {vec=8}
        CHECK: async_commit_group
        CHECK: async_commit_group
        CHECK: = scf.for {{.*}} {pipeline={stages=3, lookahead=2, refill='after_dots'}}
        CHECK-NEXT: ^body([[IV:%\\d+]]: i32, [[ACC:%\\d+]]: <64x64xfp32>, {{%\\d+}}: <64x32x*fp16>, {{%\\d+}}: <32x64x*fp16>, [[QA:%\\d+]]: <64x32x*fp16>, [[QB:%\\d+]]: <32x64x*fp16>, [[RD:%\\d+]]: i32, [[WR:%\\d+]]: i32):
        CHECK-NEXT: async_wait_group {pending=1}
        CHECK-NEXT: barrier
        CHECK-NEXT: [[TA:%\\d+]] = ring_read [[RA]], [[RD]] : <64x32xfp16>
        CHECK-NEXT: [[TB:%\\d+]] = ring_read [[RB]], [[RD]] : <32x64xfp16>
        CHECK-NOT: async_copy
        CHECK: [[D:%\\d+]] = dot [[TA]], [[TB]], [[ACC]] {input_precision='tf32', engine='wgmma', wgmma='async', wgmma_desc='stepped'}
        CHECK-NEXT: barrier
        CHECK: [[G:%\\d+]] = cmpi {{%\\d+}}, %K {pred='slt'} : i1
        CHECK: async_copy [[RA]], [[WR]], [[QA]], [[G]] {vec=8, source=
        CHECK-NEXT: async_copy [[RB]], [[WR]], [[QB]], [[G]] {vec=8, source=
        CHECK-NEXT: async_commit_group
        CHECK-NOT: async_copy
        CHECK: scf.yield [[D]],
        CHECK-NEXT: async_wait_all
    """)
    verify(fn)
    # the write stage starts at 2: iteration 0's copies refill the stage of iteration -1 (= 2 mod 3)
    loop = next(o for o in fn.walk() if o.name == "scf.for")
    assert loop.operands[-1].op.attrs["value"] == 2 and loop.operands[-2].op.attrs["value"] == 0
    # without the tag, a wgmma in flight with the full lookahead would race with the head's copies
    del loop.attrs["pipeline"]["refill"]
    with pytest.raises(VerificationError, match="refill='after_dots'"):
        verify(fn)
    loop.attrs["pipeline"]["refill"] = "before_dots"
    with pytest.raises(VerificationError, match="pipeline refill must be one of"):
        verify(fn)


def test_the_refill_after_the_dot_in_ptx(monkeypatch):
    """The lowering of that loop on sm_90a: in the loop, the wgmma commit and ``wait_group 1`` come before
    the barrier and the cp.async copies; ``cp.async.wait_group 1`` (two groups ahead) at its head."""
    import kernelc
    monkeypatch.setenv("KERNELC_WGMMA_ASYNC", "1")
    # K divisible by 16, as the runtime specialises it: A's copies are 16 bytes only when rows start aligned
    ck = kernelc.compile(mm_pointer_loop, dict(MM_PTR_SIG), CX, target="sm_90a", num_warps=4, num_stages=3,
                         divisibility={"K": 16})
    ptx = ck.asm["ptx"]
    assert ptx.count("cp.async.commit_group;") == 3 and "cp.async.wait_group 1;" in ptx
    at = ptx.index("cp.async.wait_group 1;")
    assert "cp.async.cg" not in ptx[at:ptx.index("wgmma.mma_async", at)]  # no copy before the dot
    # no proxy fence between the copies' completion wait and the wgmma (as Triton and CUTLASS)
    assert "fence.proxy.async" not in ptx[at:ptx.index("wgmma.mma_async", at)]
    for s in ("bar.sync", "wgmma.mma_async", "wgmma.commit_group",
              "wgmma.wait_group.sync.aligned 1", "bar.sync", "cp.async.cg.shared.global", "cp.async.commit_group"):
        at = ptx.index(s, at)  # each after the one before


def test_tma_rings_and_unpipelined_loops_are_left_alone():
    ir, _, _ = _passes(mm_loop, MM_DESC_SIG, dict(BM=128, BN=128, BK=64, WS=False), div=MM_DESC_DIV)
    assert ir["expand_cp_async_rings"] == ir["schedule_wgmma"]
    ir, _, _ = _passes(mm_plain, MM_PTR_SIG, CX, target="sm_80", num_stages=1)
    assert ir["expand_cp_async_rings"] == ir["schedule_wgmma"] and "ring_alloc" not in ir["expand_cp_async_rings"]


def test_the_verifier_checks_the_ring_ops():
    _, fn, _ = _passes(mm_plain, MM_PTR_SIG, CX, target="sm_80")
    ops = list(fn.walk())
    ring = next(o for o in ops if o.name == "ring_alloc")
    copy = next(o for o in ops if o.name == "async_copy")
    read = next(o for o in ops if o.name == "ring_read")
    wait = next(o for o in ops if o.name == "async_wait_group")
    guard = copy.operands[-1]
    rejects_bad_attrs(fn, [
        (ring, "stages", 1, "stages must be an int >= 2"),
        (ring, "operand", "c", "operand must be 'a' or 'b'"),
        (copy, "vec", 6, "vec must be a power of two"),
        (copy, "masked", True, "operands are ring, stage, ptr"),
        (wait, "pending", -1, "pending must be an int >= 0"),
    ])
    rejects_bad_operands(fn, [
        (read, 0, copy.operands[2], "operand 0 must be a ring_alloc"),
        (read, 1, guard, "the stage must be an i32 scalar"),
        (copy, 3, read.operands[1], "the guard must be an i1 scalar"),
        (copy, 2, read.results[0], "operand 2 must be a pointer tile"),
    ])
    # a pipelined loop whose ring is neither a tagged load nor a ring_read
    body = next(o for o in ops if o.name == "scf.for").regions[0]
    for o in [o for o in body.ops if o.name == "ring_read"]:
        body.ops.remove(o)
    with pytest.raises(VerificationError, match="a pipelined loop needs at least one load its ring copies"):
        verify(fn)


def test_codegen_lowers_each_ring_op(monkeypatch):
    """The PTX of the explicit ring: two prologue groups, the wait for stage i, the copies of i+2 (16-byte
    cp.async.cg, one source size per guard), and the drain after the loop: under ``KERNELC_REUSE_SYNC=needed``
    ``cp.async.wait_group 0`` (every copy is committed by then); the default ``all`` writes ``cp.async.wait_all``."""
    import kernelc
    monkeypatch.setenv("KERNELC_REUSE_SYNC", "needed")
    ck = kernelc.compile(mm_plain, MM_PTR_SIG, CX, target="sm_80", num_warps=4, num_stages=3,
                         divisibility={"a_ptr": 16, "b_ptr": 16, "c_ptr": 16, "K": 16})
    ptx = ck.asm["ptx"]
    assert ptx.count("cp.async.commit_group;") == 3  # two prologue groups + one per iteration
    assert "cp.async.wait_group 1;" in ptx and ptx.count("cp.async.wait_group 0;") == 1
    assert "cp.async.wait_all;" not in ptx
    assert "cp.async.cg.shared.global" in ptx and "ldmatrix" in ptx
    kinds = [a for a in ck.reports["memory_accesses"] if a["kind"] == "load (cp.async pipelined)"]
    assert sorted(a["line"] for a in kinds) == [32, 33] and all(a["vector_bytes"] == 16 for a in kinds)
    monkeypatch.delenv("KERNELC_REUSE_SYNC")
    ptx = kernelc.compile(mm_plain, MM_PTR_SIG, CX, target="sm_80", num_warps=4, num_stages=3,
                          divisibility={"a_ptr": 16, "b_ptr": 16, "c_ptr": 16, "K": 16}).asm["ptx"]
    assert ptx.count("cp.async.wait_all;") == 1 and "cp.async.wait_group 0;" not in ptx



def test_the_refill_after_the_dot_in_sass(monkeypatch):
    """What ptxas makes of it (128x128x64, 4 warps, 3 stages): in the loop the eight HGMMAs, then
    ``WARPGROUP.DEPBAR.LE gsb0, 0x1`` (one group left in flight), the barrier, and only then the 16
    LDGSTS of the refill: Triton's loop shape for tutorial 08's grouped GEMM. Without the knob the loop
    ends in ``WARPGROUP.DEPBAR.LE gsb0, 0x0`` with the copies before the MMAs."""
    import re
    import kernelc

    def loop_ops():
        ck = kernelc.compile(mm_pointer_loop, dict(MM_PTR_SIG), dict(BM=128, BN=128, BK=64), target="sm_90a",
                             num_warps=4, num_stages=3, divisibility={"K": 16})
        ops = [re.sub(r"^\s*/\*[0-9a-f]+\*/\s*(@!?U?P\w+\s+)?", "", ln).rstrip(" ;")
               for ln in ck.asm["sass"].splitlines() if re.match(r"\s*/\*[0-9a-f]{4,}\*/", ln)]
        first = next(i for i, o in enumerate(ops) if o.startswith("HGMMA"))
        start = max(i for i in range(first) if ops[i].startswith("DEPBAR.LE SB0"))  # the head's cp.async wait
        end = next(i for i in range(first, len(ops)) if ops[i].startswith("BRA"))
        keep = ("HGMMA", "WARPGROUP.DEPBAR", "BAR.SYNC", "LDGSTS", "LDGDEPBAR", "DEPBAR.LE SB0")
        out = []
        for o in ops[start:end]:
            k = next((p for p in keep if o.startswith(p)), None)
            if k == "WARPGROUP.DEPBAR":
                k = o.split()[-1]  # the count left in flight
            if k and (not out or out[-1][0] != k):
                out.append([k, 1])
            elif k:
                out[-1][1] += 1
        return [tuple(x) for x in out]

    monkeypatch.setenv("KERNELC_WGMMA_ASYNC", "1")
    assert loop_ops() == [("DEPBAR.LE SB0", 1), ("BAR.SYNC", 1), ("HGMMA", 8), ("0x1", 1), ("BAR.SYNC", 1),
                          ("LDGSTS", 16), ("LDGDEPBAR", 1)]
    monkeypatch.setenv("KERNELC_WGMMA_ASYNC", "0")
    assert loop_ops() == [("DEPBAR.LE SB0", 1), ("BAR.SYNC", 1), ("LDGSTS", 16), ("LDGDEPBAR", 1), ("HGMMA", 8),
                          ("0x0", 1)]

import kernelc  # noqa: E402
import kernelc.language as kl  # noqa: E402


@kernelc.jit
def mm_pointer_loop(a_ptr, b_ptr, c_ptr, K, BM: kl.constexpr, BN: kl.constexpr, BK: kl.constexpr):
    rm = kl.arange(0, BM)
    rn = kl.arange(0, BN)
    rk = kl.arange(0, BK)
    pa = a_ptr + rm[:, None] * K + rk[None, :]
    pb = b_ptr + rk[:, None] * BN + rn[None, :]
    acc = kl.zeros((BM, BN), dtype=kl.float32)
    for k in kl.range(0, K, BK):
        acc = kl.dot(kl.load(pa), kl.load(pb), acc)
        pa += BK
        pb += BK * BN
    kl.store(c_ptr + rm[:, None] * BN + rn[None, :], acc)


@kernelc.jit
def qk_loop(q_ptr, k_ptr, o_ptr, N, BM: kl.constexpr, BN: kl.constexpr, D: kl.constexpr):
    rm = kl.arange(0, BM)
    rn = kl.arange(0, BN)
    rd = kl.arange(0, D)
    q = kl.load(q_ptr + rm[:, None] * D + rd[None, :])
    acc = kl.zeros((BM, BN), dtype=kl.float32)
    for n in kl.range(0, N, BN):
        k = kl.load(k_ptr + rd[:, None] * N + (n + rn)[None, :])
        acc += kl.dot(q, k)
    kl.store(o_ptr + rm[:, None] * BN + rn[None, :], acc)


def test_a_loop_invariant_dot_operand_is_staged_before_the_ring():
    """q is loaded once before the loop: ``stage_operand`` stores it to shared memory (then a barrier)
    ahead of the ring, and the dot reads the staged copy; only k goes through the ring."""
    sig = {"q_ptr": "*fp16", "k_ptr": "*fp16", "o_ptr": "*fp32", "N": "i32"}
    ir, fn, _ = _passes(qk_loop, sig, dict(BM=64, BN=64, D=32), target="sm_80", num_stages=2, div={"N": 16})
    filecheck(ir["expand_cp_async_rings"], """
        CHECK: [[Q:%\\d+]] = load {{.*}} : <64x32xfp16>
        CHECK: [[SQ:%\\d+]] = stage_operand [[Q]] {operand='a'} : <64x32xfp16>
        CHECK-NEXT: barrier
        CHECK-NEXT: [[RK:%\\d+]] = ring_alloc {stages=2, operand='b'} : <32x64xfp16>
        CHECK-NOT: ring_alloc
        CHECK: async_wait_group {pending=0}
        CHECK: [[K:%\\d+]] = ring_read [[RK]], {{%\\d+}} : <32x64xfp16>
        CHECK: = dot [[SQ]], [[K]],
    """)
    verify(fn)


@kernelc.jit
def mm_mixed(a_desc, b_ptr, c_ptr, K, BM: kl.constexpr, BN: kl.constexpr, BK: kl.constexpr):
    rn = kl.arange(0, BN)
    rk = kl.arange(0, BK)
    rm = kl.arange(0, BM)
    acc = kl.zeros((BM, BN), dtype=kl.float32)
    for k in kl.range(0, K, BK):
        a = a_desc.load([0, k])
        b = kl.load(b_ptr + (k + rk)[:, None] * BN + rn[None, :])
        acc = kl.dot(a, b, acc)
    kl.store(c_ptr + rm[:, None] * BN + rn[None, :], acc)


def test_a_loop_with_both_rings_is_left_to_expand_tma_rings():
    """A from TMA, B from pointers: both rings share one pair of stage counters, which
    ``expand_tma_rings`` writes (tests/compiler/test_tma_rings.py); this pass leaves the loop alone."""
    sig = {"a_desc": "tensordesc<fp16[64, 32]>", "b_ptr": "*fp16", "c_ptr": "*fp32", "K": "i32"}
    div = {"a_desc": 16, "b_ptr": 16, "c_ptr": 16}
    ir, fn, _ = _passes(mm_mixed, sig, CX, div=div)
    assert ir["expand_cp_async_rings"] == ir["schedule_wgmma"]
    filecheck(ir["expand_cp_async_rings"], """
        CHECK: = scf.for {{.*}} {pipeline={stages=3, lookahead=2}}
        CHECK: = descriptor_load {{.*}}pipeline={ring='tma'}}
        CHECK: = load {{.*}}pipeline={ring='cp.async', vec=8}}
    """)
    ck = kernelc.compile(mm_mixed, sig, CX, target="sm_90a", num_warps=4, num_stages=3, divisibility=div)
    ptx = ck.asm["ptx"]
    assert "cp.async.wait_group 1;" in ptx and "mbarrier.try_wait" in ptx and "cp.async.bulk.tensor" in ptx


@pytest.mark.gpu
@pytest.mark.parametrize("stages", [2, 3, 4])
def test_gpu_both_rings_in_one_loop(stages):
    """On a Hopper GPU: the loop with a TMA ring (A) and a cp.async ring (B) against torch."""
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available() or torch.cuda.get_device_capability() != (9, 0):
        pytest.skip("needs an sm_90 GPU")
    from kernelc import TensorDescriptor
    from kernelc.runtime.launcher import get_state
    get_state(mm_mixed)["cache"].clear()  # KERNELC_AUTO_TMA is read at compile time
    K = 32 * 9  # more iterations than stages, and not a multiple of the ring
    a = torch.randn(64, K, device="cuda", dtype=torch.float16)
    b = torch.randn(K, 64, device="cuda", dtype=torch.float16)
    c = torch.empty(64, 64, device="cuda", dtype=torch.float32)
    ck = mm_mixed[(1,)](TensorDescriptor.from_tensor(a, [64, 32]), b, c, K, BM=64, BN=64, BK=32, num_warps=4,
                        num_stages=stages)
    torch.cuda.synchronize()
    # both rings, as expand_tma_rings writes them: TMA copies into the ring, cp.async in the PTX
    assert "tma_copy_to_ring" in ck.asm["tir"] and "cp.async.wait_group" in ck.asm["ptx"]
    torch.testing.assert_close(c, a.float() @ b.float(), atol=1e-2, rtol=1e-2)


@pytest.mark.gpu
@pytest.mark.parametrize("stages,warps", [(2, 4), (3, 4), (4, 4), (3, 8)])
def test_gpu_refill_after_dots(monkeypatch, stages, warps):
    """On a Hopper GPU: a cp.async ring with its wgmma left in flight and the copies after the dots
    (KERNELC_WGMMA_ASYNC=1) against torch; K spans more iterations than stages, not a multiple of them."""
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available() or torch.cuda.get_device_capability() != (9, 0):
        pytest.skip("needs an sm_90 GPU")
    from kernelc.runtime.launcher import get_state
    monkeypatch.setenv("KERNELC_WGMMA_ASYNC", "1")
    get_state(mm_pointer_loop)["cache"].clear()  # the knob is read at compile time
    BM, BN, BK = 128, 128, 64
    K = BK * (3 * stages + 1)
    a = torch.randn(BM, K, device="cuda", dtype=torch.float16)
    b = torch.randn(K, BN, device="cuda", dtype=torch.float16)
    c = torch.empty(BM, BN, device="cuda", dtype=torch.float32)
    ck = mm_pointer_loop[(1,)](a, b, c, K, BM=BM, BN=BN, BK=BK, num_warps=warps, num_stages=stages)
    torch.cuda.synchronize()
    assert "refill='after_dots'" in ck.asm["tir"]
    torch.testing.assert_close(c, a.float() @ b.float(), atol=5e-2, rtol=1e-2)
    get_state(mm_pointer_loop)["cache"].clear()
