"""Issue 27 / tutorial 06's forward on CPU (docs/triton-tutorials.md, "06 forward kernel: branches"): what the
copy engine's driver thread costs in SASS.

- ``elect_one`` lowers to warp 0's ``elect.sync`` lane: ptxas then issues each TMA copy, barrier init and
  store under a uniform predicate. With ``tid == 0`` it wrapped every copy in an ELECT loop (``ELECT``,
  two ``PLOP3``, a backward ``BRA.U.ANY``) and every barrier init in a divergent ``BSSY`` region;
- a TMA store's commit and read-wait run in every thread (no branch around them).

Since session 23 a GEMM's copies are issued by thread 0 again by default (``KERNELC_TMA_ELECT=auto``,
passes/elect_form.py: matmul_tma and matmul_persistent measured faster that way on an H200); the uniform-predicate
checks below pin the elect form.
"""
import re

import pytest

import kernelc
from examples.kernels import attention_tma, matmul_tma

_LINE = re.compile(r"^\s*/\*[0-9a-f]{4,}\*/\s+(@!?U?P[T0-9]+\s+)?([A-Z][\w.]*)(.*)$")


def _sass(ck):
    """[(predicate or '', opcode, operands)] of the kernel."""
    out = []
    for line in ck.asm["sass"].splitlines():
        m = _LINE.match(line)
        if m:
            out.append(((m.group(1) or "").strip(), m.group(2), m.group(3)))
    return out


def _mm(monkeypatch):
    monkeypatch.setenv("KERNELC_WARP_SPECIALIZE", "0")  # thread-0 refill of the ring (not a producer warp)
    sig = {"a_desc": "tensordesc<fp16[128, 64]>", "b_desc": "tensordesc<fp16[64, 128]>",
           "c_desc": "tensordesc<fp16[128, 128]>", "M": "i32", "N": "i32", "K": "i32"}
    cx = dict(BLOCK_SIZE_M=128, BLOCK_SIZE_N=128, BLOCK_SIZE_K=64, GROUP_SIZE_M=8)
    return kernelc.compile(matmul_tma.matmul_tma_kernel, sig, cx, target="sm_90a", num_warps=4, num_stages=3,
                           divisibility={"a_desc": 16, "b_desc": 16, "c_desc": 16})


def _attn(monkeypatch, D, causal, num_warps=4, ws="0"):
    monkeypatch.setenv("KERNELC_WARP_SPECIALIZE", ws)
    sig = {"sm_scale": "fp32", **{f"desc_{t}": f"tensordesc<fp16[128, {D}]>" for t in "qo"},
           **{f"desc_{t}": f"tensordesc<fp16[64, {D}]>" for t in "kv"}, "N_CTX": "i32"}
    return kernelc.compile(attention_tma.attn_fwd_tma_kernel, sig,
                           dict(BLOCK_M=128, BLOCK_N=64, HEAD_DIM=D, CAUSAL=causal), target="sm_90a",
                           num_warps=num_warps, num_stages=2,
                           divisibility={k: 16 for k in sig if k.startswith("desc")})


CASES = {
    "matmul_tma": _mm,
    "attention d64": lambda mp: _attn(mp, 64, False),
    "attention d128 causal": lambda mp: _attn(mp, 128, True),
}


@pytest.mark.parametrize("case", list(CASES))
def test_copies_barriers_and_stores_issue_under_a_uniform_predicate(case, monkeypatch):
    monkeypatch.setenv("KERNELC_TMA_ELECT", "elect")   # attention's default; the GEMM's is tid (auto)
    ck = CASES[case](monkeypatch)
    assert "elect.sync" in ck.asm["ptx"]
    ins = _sass(ck)
    tma = [(p, op) for p, op, _ in ins if op.startswith(("UTMALDG", "UTMASTG"))]
    assert tma and any(op.startswith("UTMASTG") for _, op in tma), tma
    # a thread predicate (P0..) on a copy means ptxas had to loop over the threads that hold it
    assert all(p == "" or p.lstrip("@!").startswith("UP") for p, _ in tma), tma
    ops = [op for _, op, _ in ins]
    assert "BRA.U.ANY" not in ops  # no ELECT loop around a copy
    assert "BSSY" not in ops  # no divergent region (barrier inits, the store's commit)
    inits = [p for p, op, _ in ins if op == "SYNCS.EXCH.64"]
    assert inits and all(p == "" or p.lstrip("@!").startswith("UP") for p in inits), inits


def test_a_tma_store_commits_and_waits_in_every_thread(monkeypatch):
    ptx = _mm(monkeypatch).asm["ptx"]
    # the elected thread's copy, then commit and wait without its predicate (other threads' groups are empty)
    assert re.search(r"@%p\d+ cp\.async\.bulk\.tensor\.2d\.global\.shared::cta\.bulk_group", ptx)
    assert re.search(r"^\s*cp\.async\.bulk\.commit_group;", ptx, re.M)
    assert re.search(r"^\s*cp\.async\.bulk\.wait_group\.read 0;", ptx, re.M)
    assert not re.search(r"@%p\d+ cp\.async\.bulk\.(commit_group|wait_group)", ptx)


def test_the_warp_specialised_producer_warp_issues_under_a_uniform_predicate(monkeypatch):
    # the producer region runs in the whole warp after the consumers and its copies are predicated on that
    # warp's elected lane (``elect_one {warp=8}``): one thread running it alone needed an ELECT loop per copy
    ck = _attn(monkeypatch, 128, False, num_warps=8, ws="1")
    assert ck.launch_warps == 9 and ck.n_spills == 0
    assert "elect_one {warp=8}" in str(ck.asm["tir"])
    ins = _sass(ck)
    tma = [p for p, op, _ in ins if op.startswith("UTMALDG")]
    assert tma and all(p == "" or p.lstrip("@!").startswith("UP") for p in tma), tma
    assert "BRA.U.ANY" not in [op for _, op, _ in ins]


def test_the_default_keeps_elect_sync_for_attention_and_thread_0_for_the_gemm(monkeypatch):
    monkeypatch.delenv("KERNELC_TMA_ELECT", raising=False)
    assert "elect.sync" in CASES["attention d64"](monkeypatch).asm["ptx"]
    assert "elect.sync" not in _mm(monkeypatch).asm["ptx"]
