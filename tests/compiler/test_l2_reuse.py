"""passes/l2_reuse.py (KERNELC_L2_REUSE): loads whose address recurs pid % n programs later get an L2 evict_last
policy; the others are left as written (CPU)."""
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
def rope_like(q_ptr, cos_ptr, w_ptr, out_ptr, seq_len, BLOCK: kl.constexpr):
    pid = kl.program_id(0)
    pos = pid % seq_len
    d = kl.arange(0, BLOCK)
    c = kl.load(cos_ptr + pos * BLOCK + d)      # recurs seq_len programs later: marked
    x = kl.load(q_ptr + pid * BLOCK + d)        # this program's own row: not marked
    w = kl.load(w_ptr + d)                      # every program's: not marked (it stays in L2 anyway)
    kl.store(out_ptr + pid * BLOCK + d, x * c + w)


SIG = dict(q_ptr="*fp32", cos_ptr="*fp32", w_ptr="*fp32", out_ptr="*fp32", seq_len="i32")


def _ir(monkeypatch, mode):
    monkeypatch.setenv("KERNELC_L2_REUSE", mode)
    names = [p.name for p in C.TILE_PASSES]
    i = names.index("mark_l2_reuse")
    fn, _ = generate_ir(_base_function(rope_like), SIG, dict(BLOCK=128), {}, ())
    run_passes(fn, C.TILE_PASSES[:i], PassContext("sm_90a", (9, 0), 4))
    before = print_function(fn, show_loc=False)
    run_passes(fn, C.TILE_PASSES[i:i + 1], PassContext("sm_90a", (9, 0), 4))
    return before, print_function(fn, show_loc=False)


def test_the_load_at_a_remainder_of_the_program_id_is_kept_in_l2_golden(monkeypatch):
    before, after = _ir(monkeypatch, "evict_last")
    assert "l2=" not in before
    filecheck(after, """
        CHECK: [[PID:%\\d+]] = program_id {axis=0} : i32
        CHECK: srem [[PID]], %seq_len : i32
        CHECK: = load {{%\\d+}} {l2='evict_last'{{.*}}} : <128xfp32>
        CHECK: = load {{%\\d+}} {{.*}}: <128xfp32>
        CHECK: = load {{%\\d+}} {{.*}}: <128xfp32>
        CHECK-NOT: l2=
    """)
    assert after.count("l2='evict_last'") == 1
    assert re.sub(r"l2='evict_last'(, )?", "", after).replace(" {}", "") == before
    assert _ir(monkeypatch, "off")[1] == before


def test_codegen_lowers_the_policy_on_the_marked_load_only(monkeypatch):
    ptx = {}
    for mode in ("off", "evict_last"):
        monkeypatch.setenv("KERNELC_L2_REUSE", mode)
        ck = kernelc.compile(rope_like, SIG, dict(BLOCK=128), target="sm_90a", num_warps=4,
                             divisibility={"q_ptr": 16, "cos_ptr": 16, "w_ptr": 16, "out_ptr": 16})
        ptx[mode] = ck.asm["ptx"]
    assert "cache_hint" not in ptx["off"] and "createpolicy" not in ptx["off"]
    # the policy createpolicy.fractional.L2::evict_last 1.0 makes, as a constant (mem27: ptxas rebuilt
    # createpolicy with five dependent uniform ops ahead of the first hinted load)
    assert "createpolicy" not in ptx["evict_last"]
    pols = re.findall(r"mov\.b64\s+(%rd\d+), 1508705875169116160;", ptx["evict_last"])
    assert len(pols) == 1   # one policy register for the kernel
    hinted = re.findall(r"ld\.global\.L2::cache_hint\.\S+ [^;]*, (%rd\d+);", ptx["evict_last"])
    assert hinted and set(hinted) == set(pols)
    loads = lambda p: len(re.findall(r"\bld\.global\.", p))
    assert loads(ptx["off"]) == loads(ptx["evict_last"])


def test_the_policy_constant_is_what_createpolicy_makes():
    # ptxas folds createpolicy.fractional.L2::evict_last 1.0 to a constant descriptor on sm_80 (on sm_90 it builds
    # the same value at run time): the 64-bit value codegen passes instead, 0x14F0000000000000
    from cubintools import instructions
    from kernelc.compiler.backend.ptxas import ptx_to_cubin
    from kernelc.compiler.codegen.memory import L2_POLICY
    ptx = """.version 8.0
.target sm_80
.address_size 64
.visible .entry k(.param .u64 a, .param .u64 b) {
  .reg .b64 %rd<4>; .reg .b32 %r<2>;
  ld.param.u64 %rd1, [a]; ld.param.u64 %rd2, [b];
  createpolicy.fractional.L2::evict_last.b64 %rd3, 1.0;
  ld.global.L2::cache_hint.b32 %r1, [%rd1], %rd3;
  st.global.b32 [%rd2], %r1;
  ret;
}
"""
    sass = [f"{i.opcode} {i.operands}" for i in instructions(ptx_to_cubin(ptx, "sm_80").cubin)]
    hi = [int(x.split(",")[1].strip(" ;"), 16) for x in sass if x.startswith("UMOV UR5,")]
    assert hi == [L2_POLICY["evict_last"] >> 32], sass
    assert L2_POLICY["evict_last"] & 0xFFFFFFFF == 0 and L2_POLICY["evict_last"] == 1508705875169116160
