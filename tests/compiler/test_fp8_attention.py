"""Issue 27, the fp8 forward on CPU (docs/attention.md, "fp8 in FlashAttention-3's order"): what made fp8
attention slower than fp16, fixed in the compiler, checked in the IR, the LLVM IR and sm_90a SASS.

- ``mark_positive_nan_casts`` (golden IR): an fp8 cast of an ``exp2`` result skips the NaN-sign fix-up;
- fp8 A operands from registers: the quad shuffle ``codegen/dot.py: _a8_from_registers`` emits, run for the
  32 lanes of a warp, puts every byte where the PTX ISA's wgmma A layout wants it;
- a loop-carried fp8 tile crosses the back edge as i32 words (``codegen/control.py``);
- the key loop of ``attention_fa3`` in fp8: no shared-memory round trip for P, no NaN tests, as short as fp16's.
"""
import re
import types

import pytest

import kernelc
import kernelc.language as kl
from kernelc.compiler import compiler as C
from kernelc.compiler.codegen.dot import _a8_from_registers
from kernelc.compiler.codegen.emitter import Emitter
from kernelc.compiler.compiler import _base_function
from kernelc.compiler.frontend import generate_ir
from kernelc.compiler.ir.printer import print_function
from kernelc.compiler.pass_manager import PassContext, run_passes
from examples.kernels import attention_fa3
from tests.compiler.filecheck import filecheck


@kernelc.jit
def cast_kernel(x_ptr, a_ptr, b_ptr, BLOCK: kl.constexpr):
    i = kl.arange(0, BLOCK)
    x = kl.load(x_ptr + i)
    kl.store(a_ptr + i, kl.math.exp2(x).to(a_ptr.dtype.element_ty))  # exp2's NaN is positive: no fix-up
    kl.store(b_ptr + i, x.to(b_ptr.dtype.element_ty))  # any NaN: the sign is copied over


SIG = dict(x_ptr="*fp32", a_ptr="*fp8e4nv", b_ptr="*fp8e4nv")


def _ir_around(name):
    names = [p.name for p in C.TILE_PASSES]
    fn, _ = generate_ir(_base_function(cast_kernel), SIG, dict(BLOCK=128), {}, ())
    run_passes(fn, C.TILE_PASSES[:names.index(name)], PassContext("sm_90a", (9, 0), 4))
    before = print_function(fn, show_loc=False)
    run_passes(fn, C.TILE_PASSES[names.index(name):names.index(name) + 1], PassContext("sm_90a", (9, 0), 4))
    return before, print_function(fn, show_loc=False)


def test_fp8_casts_of_exp2_results_are_marked_golden():
    before, after = _ir_around("mark_positive_nan_casts")
    filecheck(before, """
        CHECK: [[E:%\\d+]] = exp2 {{%\\d+}} {ftz=True}
        CHECK-NEXT: cast [[E]] {rounding='rtne'} : <128xfp8e4nv>
        CHECK: cast {{%\\d+}} {rounding='rtne'} : <128xfp8e4nv>
    """)
    assert "nan_positive" not in before
    filecheck(after, """
        CHECK: [[X:%\\d+]] = load
        CHECK: [[E:%\\d+]] = exp2 [[X]] {ftz=True}
        CHECK-NEXT: cast [[E]] {rounding='rtne', nan_positive=True} : <128xfp8e4nv>
        CHECK: cast [[X]] {rounding='rtne'} : <128xfp8e4nv>
    """)
    assert after.count("nan_positive") == 1


@pytest.mark.parametrize("block", [128, 256])  # one value a thread (cast_one), two (a pair per cvt)
@pytest.mark.parametrize("fp8", ["fp8e4nv", "fp8e5"])
def test_the_marked_cast_has_no_nan_sign_fixup(block, fp8):
    # the unmarked cast ors each value's sign into its code (one byte permute of the two floats' top bytes,
    # codegen/fp8.py: torch_fixup_pair), the marked one not; e5m2 keeps its overflow-to-Inf fix-up in both
    ck = kernelc.compile(cast_kernel, dict(SIG, a_ptr="*" + fp8, b_ptr="*" + fp8), dict(BLOCK=block),
                         target="sm_90a", num_warps=4)
    llir = ck.asm["llir"]
    assert llir.count("i32 115)") == 1  # the sign permute (bytes 3 and 7)
    assert llir.count("sub.f32") == (4 if fp8 == "fp8e5" else 0)
    assert not re.search(r"fcmp|select i1", llir)
    assert ck.asm["ptx"].count("cvt.rn.satfinite.%s.f32" % ("e4m3x2" if fp8 == "fp8e4nv" else "e5m2x2")) == 2


# -- fp8 A fragments from the accumulator layout -------------------------------------------------------


def _run_lockstep(lines, env):
    """Evaluate straight-line LLVM IR (the ops the shuffle emits) for 32 lanes at once: env maps a name to
    its 32 values. shfl.sync.idx reads the source lane's value of the same instruction."""
    mask = {"i1": 1, "i8": 0xFF, "i16": 0xFFFF, "i32": 0xFFFFFFFF}

    def get(tok, lane):
        return env[tok][lane] if tok.startswith("%") else int(tok)

    for ln in lines:
        m = re.match(r"\s*(%\S+) = (.*)$", ln)
        assert m, ln
        dst, rhs = m.groups()
        if m2 := re.match(r"(and|or|xor|shl|lshr) (i\d+) (\S+), (\S+)$", rhs):
            op, ty, a, b = m2.groups()
            f = {"and": lambda x, y: x & y, "or": lambda x, y: x | y, "xor": lambda x, y: x ^ y,
                 "shl": lambda x, y: x << y, "lshr": lambda x, y: x >> y}[op]
            env[dst] = [f(get(a, i) & mask[ty], get(b, i) & mask[ty]) & mask[ty] for i in range(32)]
        elif m2 := re.match(r"icmp (ne|ugt|eq) i32 (\S+), (\S+)$", rhs):
            op, a, b = m2.groups()
            f = {"ne": lambda x, y: x != y, "ugt": lambda x, y: x > y, "eq": lambda x, y: x == y}[op]
            env[dst] = [int(f(get(a, i), get(b, i))) for i in range(32)]
        elif m2 := re.match(r"select i1 (\S+), i32 (\S+), i32 (\S+)$", rhs):
            c, a, b = m2.groups()
            env[dst] = [get(a, i) if get(c, i) else get(b, i) for i in range(32)]
        elif m2 := re.match(r"(?:zext|trunc) i\d+ (\S+) to (i\d+)$", rhs):
            env[dst] = [get(m2.group(1), i) & mask[m2.group(2)] for i in range(32)]
        elif m2 := re.match(r"bitcast (?:<2 x i16>|i32) (\S+) to (?:<2 x i16>|i32)$", rhs):  # as one 32-bit value
            env[dst] = list(env[m2.group(1)])
        elif m2 := re.match(r"insertelement <2 x i16> (\S+), i16 (\S+), i32 ([01])$", rhs):
            v, x, h = m2.groups()
            sh = 16 * int(h)
            env[dst] = [((0 if v == "undef" else get(v, i)) & ~(0xFFFF << sh) | (get(x, i) & 0xFFFF) << sh) & 0xFFFFFFFF
                        for i in range(32)]
        elif m2 := re.match(r"extractelement <2 x i16> (\S+), i32 ([01])$", rhs):
            env[dst] = [get(m2.group(1), i) >> (16 * int(m2.group(2))) & 0xFFFF for i in range(32)]
        elif m2 := re.match(r"call i32 @llvm\.nvvm\.shfl\.sync\.idx\.i32\(i32 -1, i32 (\S+), i32 (\S+), i32 31\)$", rhs):
            v, src = m2.groups()
            env[dst] = [get(v, get(src, i) & 31) for i in range(32)]
        elif m2 := re.match(r'call i32 asm "prmt\.b32 \$0, \$1, \$2, \$3;", "=r,r,r,r"\(i32 (\S+), i32 (\S+), '
                            r'i32 (\S+)\)$', rhs):
            a, b, s = m2.groups()
            out = []
            for i in range(32):
                pool = (get(a, i) | get(b, i) << 32).to_bytes(8, "little")
                sel = get(s, i)
                out.append(int.from_bytes(bytes(pool[(sel >> (4 * j)) & 7] for j in range(4)), "little"))
            env[dst] = out
        else:
            raise AssertionError(f"unexpected instruction: {ln}")


@pytest.mark.parametrize("a8_words", [False, True])  # words from block words by permutes / straight from bytes
@pytest.mark.parametrize("M,K,wm", [(64, 32, 4), (128, 64, 8), (128, 128, 4)])
def test_fp8_a_fragments_follow_the_isa_layout(M, K, wm, a8_words):
    """Lane l = 4g + q holds, per 16-row block i and 8-column block n of the fp32 accumulator, rows g / g+8 and
    columns 2q, 2q+1 (registers c = 0..3). PTX's wgmma A fragment for 8-bit types (k32 per step) wants in its
    register j (of 4) the bytes of row g + 8 (j % 2), columns 4q .. 4q+3 (+ 16 for j >= 2). Every byte of the
    test tile names its (row half, column): the shuffle must deliver exactly those."""
    e = Emitter("t", "t.py", 1)
    nbits_n = (K // 8 - 1).bit_length()
    reps = max(1, M // (16 * wm))
    regs = [f"%r{n}_{c}_{i}" for i in range(reps) for n in range(K // 8) for c in range(4)]
    regs = [None] * len(regs)
    env = {"%lane": list(range(32))}
    for i in range(reps):
        for n in range(K // 8):
            for c in range(4):
                name = f"%in{i}_{n}_{c}"
                regs[c | (n << 2) | (i << (2 + nbits_n))] = name
                # (row half, column within the 32-column step, step, repetition) of this register, per lane
                env[name] = [((c >> 1) | ((8 * n + 2 * (lane % 4) + (c & 1)) % 32) << 1) ^ (n // 4) << 6 ^ i << 7
                             for lane in range(32)]
    lw = types.SimpleNamespace(e=e, lane="%lane")
    frags = _a8_from_registers(lw, types.SimpleNamespace(regs=regs), M, K, wm, a8_words)
    _run_lockstep(e.body, env)
    assert sorted(frags) == [(i, kk) for i in range(reps) for kk in range(K // 32)]
    for (i, kk), words in frags.items():
        for j, w in enumerate(words):
            for lane in range(32):
                got = env[w][lane].to_bytes(4, "little")
                want = [(j % 2) | ((4 * (lane % 4) + b + 16 * (j // 2)) << 1) ^ kk << 6 ^ i << 7 for b in range(4)]
                assert list(got) == want, (i, kk, j, lane, list(got), want)


# -- the kernel -------------------------------------------------------------------------------------------


def _fa3_fp8(D=128, causal=False):
    sig = {"sm_scale": "fp32", "desc_q": f"tensordesc<fp8e4nv[128, {D}]>", "desc_k": f"tensordesc<fp8e4nv[128, {D}]>",
           "desc_v": f"tensordesc<fp8e4nv[{D}, 128]>", "desc_o": f"tensordesc<fp16[128, {D}]>", "N_CTX": "i32",
           "QScale": "*fp32", "KScale": "*fp32", "VScale": "*fp32"}
    return kernelc.compile(attention_fa3.attn_fwd_fa3_kernel, sig,
                           dict(BLOCK_M=128, BLOCK_N=128, HEAD_DIM=D, CAUSAL=causal, FP8=True), target="sm_90a",
                           num_warps=8, num_stages=2, divisibility={k: 16 for k in sig if k != "sm_scale"})


def _key_loop(sass):
    """Opcodes of the loop (a backward branch) that issues two dots: two WARPGROUP.ARRIVE and QGMMAs."""
    lines = sass.splitlines()
    labels = {m.group(1): i for i, ln in enumerate(lines) if (m := re.match(r"\s*(\.L_x_\d+):", ln))}
    for i, ln in enumerate(lines):
        m = re.search(r"\bBRA\b.*?(\.L_x_\d+)", ln)
        if m and labels.get(m.group(1), i) < i:
            body = [re.sub(r"^\s*/\*[0-9a-f]+\*/\s*(@!?U?P\w+\s+)?", "", b).split(" ")[0]
                    for b in lines[labels[m.group(1)]:i + 1] if re.match(r"\s*/\*[0-9a-f]{4,}\*/", b)]
            if body.count("WARPGROUP.ARRIVE") == 2 and any(o.startswith("QGMMA") for o in body):
                return body
    raise AssertionError("no key loop with two fp8 dots")


@pytest.mark.parametrize("D,causal", [(128, False), (64, True)])
def test_fa3_fp8_key_loop(D, causal, monkeypatch):
    """2026-11-27, 128x128 blocks, 8 consumer warps (per thread per key block): before, P went through shared
    memory (32 STS.U16, two BAR.SYNC) and every rounding to e4m3 tested for NaN (64 FSETP.NAN, 64 SHF, ~100
    LOP3): 839 instructions at D=128, against 522 for fp16. Now: 16 SHFL.IDX, 16 SEL, 48 PRMT (Triton 3.6's
    tutorial 06 in fp8: 16, 16, 16 + its packing in the F2FP), 542 instructions."""
    monkeypatch.setenv("KERNELC_EXP2_POLY", "0")  # every exponential on MUFU (tests/compiler/test_exp2_poly.py)
    ck = _fa3_fp8(D, causal)
    assert ck.n_spills == 0 and ck.launch_warps == 12
    ops = _key_loop(ck.asm["sass"])
    count = lambda p: sum(o.startswith(p) for o in ops)  # noqa: E731
    assert all(o.endswith("E4M3.E4M3") for o in ops if "GMMA" in o)
    assert count("QGMMA") == D // 32 + 128 // 32 // (2 if D == 64 else 1) * (2 if D == 64 else 1)
    assert count("STS") == 0 and count("LDS") == 0 and count("BAR.SYNC") == 0
    assert count("FSETP") == 0 and count("MUFU.EX2") == 66
    assert count("SHFL.IDX") == 16 and count("F2FP.SATFINITE.E4M3") == 32
    assert len(ops) <= 560, len(ops)


def test_loop_carried_fp8_tile_crosses_the_back_edge_in_words():
    llir = _fa3_fp8().asm["llir"]
    assert not re.search(r"= phi i8 ", llir)
    assert len(re.findall(r"= phi i32 ", llir)) >= 16  # P: 64 bytes a thread, 16 words


# -- fp8 carries in the A fragment's words (passes/narrow_carries.py: mark_fp8_carry_words) --------------------


@pytest.mark.parametrize("M,K,wm", [(64, 32, 4), (128, 64, 8), (128, 128, 8), (128, 128, 4)])
def test_carry_word_order_groups_the_shuffles_words(M, K, wm):
    """The order codegen/control.py packs a carried 8-bit tile in is a permutation of the thread's registers
    whose words are the (blocks 0, 2) / (blocks 1, 3) halves _a8_from_registers shuffles, and unpacking it
    gives every byte back in register order (the LLVM IR of the pack and unpack run in lockstep)."""
    from kernelc.compiler.codegen import control
    from kernelc.compiler.codegen.fp8_words import a8_fragment_order
    from kernelc.compiler.layouts import mma_v2
    L = mma_v2((M, K), (wm, 1))
    order = control._word_order(L)
    assert order == a8_fragment_order(M, K, wm) and sorted(order) == list(range(L.num_regs))
    nbits_n = (K // 8 - 1).bit_length()
    for w in range(len(order) // 4):  # word w: one row half, two 8-column blocks two apart, two columns each
        n = [(order[4 * w + b] >> 2) & ((1 << nbits_n) - 1) for b in range(4)]
        c = [order[4 * w + b] & 3 for b in range(4)]
        assert n[0] == n[1] and n[2] == n[3] == n[0] + 2 and n[0] % 4 in (0, 1)
        assert c in ([0, 1, 0, 1], [2, 3, 2, 3])
    for pairs in (False, True):  # i32 shifts (register order, knob off) / <2 x i16> halves (the mark's words)
        e = Emitter("t", "t.py", 1)
        regs = [f"%b{r}" for r in range(L.num_regs)]
        env = {f"%b{r}": [(r * 7 + lane) & 0xFF for lane in range(32)] for r in range(L.num_regs)}
        lw = types.SimpleNamespace(e=e)
        ty, words = control._packed(lw, "i8", regs, order, pairs)
        back = control._unpacked(lw, words, order, pairs)
        _run_lockstep(e.body, env)
        assert ty == "i32" and len(words) == L.num_regs // 4
        for w, name in enumerate(words):
            assert [list(env[name][lane].to_bytes(4, "little")) for lane in range(32)] == \
                [[env[regs[order[4 * w + b]]][lane] for b in range(4)] for lane in range(32)]
        assert all(env[b] == env[r] for b, r in zip(back, regs))


def test_fp8_carry_words_mark_golden(monkeypatch):
    """The loop carrying fp8 P gets carry_words='a8', the dots reading it as A (P V in the loop, the last P V
    after it) a_words='a8'; the knob off leaves neither."""
    names = [p.name for p in C.TILE_PASSES]
    sig = {"sm_scale": "fp32", "desc_q": "tensordesc<fp8e4nv[128, 64]>", "desc_k": "tensordesc<fp8e4nv[128, 64]>",
           "desc_v": "tensordesc<fp8e4nv[64, 128]>", "desc_o": "tensordesc<fp16[128, 64]>", "N_CTX": "i32",
           "QScale": "*fp32", "KScale": "*fp32", "VScale": "*fp32"}

    def ir(knob):
        monkeypatch.setenv("KERNELC_FP8_CARRY_WORDS", knob)
        fn, _ = generate_ir(_base_function(attention_fa3.attn_fwd_fa3_kernel), sig,
                            dict(BLOCK_M=128, BLOCK_N=128, HEAD_DIM=64, CAUSAL=False, FP8=True), {}, ())
        i = names.index("mark_fp8_carry_words")
        run_passes(fn, C.TILE_PASSES[:i], PassContext("sm_90a", (9, 0), 8))
        before = print_function(fn, show_loc=False)
        run_passes(fn, C.TILE_PASSES[i:i + 1], PassContext("sm_90a", (9, 0), 8))
        return before, print_function(fn, show_loc=False)
    before, after = ir("1")
    assert "carry_words" not in before and "a_words" not in before
    filecheck(after, """
        CHECK: scf.for {{.*}} {carry_words='a8'} : {{.*}}<128x128xfp8e4nv>
        CHECK-NEXT: ^body({{.*}}, [[P:%\\d+]]: <128x128xfp8e4nv>, {{%\\d+}}: i32)
        CHECK: dot [[P]], {{%\\d+}}, {{%\\d+}} {input_precision='tf32', a_words='a8'}
        CHECK: dot {{%\\d+}}, {{%\\d+}}, {{%\\d+}} {input_precision='tf32', a_words='a8'}
    """)
    assert after.count("a_words") == 2 and after.count("carry_words") == 1
    assert after.replace(" {carry_words='a8'}", "").replace(", a_words='a8'", "") == before
    before, after = ir("0")
    assert before == after


@pytest.mark.parametrize("D,causal", [(128, False), (64, True)])
def test_fa3_fp8_key_loop_without_the_first_permutes(D, causal, monkeypatch):
    """P carried in the A fragment's words, each built of two F2FP halves: 32 fewer PRMT a key block (16 against
    48: only the final permute of each shuffled register; the second F2FP of a word merges into it, as in
    Triton's fp8 loop); the knob off gives the key loop as before."""
    monkeypatch.setenv("KERNELC_EXP2_POLY", "0")
    monkeypatch.setenv("KERNELC_FP8_CARRY_WORDS", "0")
    off = _key_loop(_fa3_fp8(D, causal).asm["sass"])
    monkeypatch.setenv("KERNELC_FP8_CARRY_WORDS", "1")
    ck = _fa3_fp8(D, causal)
    on = _key_loop(ck.asm["sass"])
    count = lambda ops, p: sum(o.startswith(p) for o in ops)  # noqa: E731
    assert ck.n_spills == 0
    assert count(off, "PRMT") == 48 and count(on, "PRMT") == 16
    assert count(on, "F2FP.SATFINITE.E4M3") == 32 and sum("MERGE_C" in o for o in on) == 32
    assert len(on) <= len(off) - 30  # D=128: 543 -> 511; D=64 causal: 496 -> 465
    assert count(on, "SHFL.IDX") == 16 and count(on, "SEL") == 16 and count(on, "MUFU.EX2") == 66
