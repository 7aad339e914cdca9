"""Tensor maps built where ``make_tensor_descriptor`` is -- inside loops and branches, from addresses and
leading dimensions loaded from memory (a grouped GEMM, the structure of Triton's tutorial 08 TMA kernel):
the pass's decision in the IR, the build and acquire inside the loop down to PTX and SASS, the run-time
alignment check, the cases that keep the generic lowering, and the interpreter against torch."""
import re

import pytest
import torch

import kernelc
from tests.compiler import grouped_tma_kernels as G

SIG = {"pool": "*fp16", "table": "*i64", "dims": "*i32", "lds": "*i32", "n_problems": "i32"}


def _grouped(addresses, BM=128, **kw):
    cx = dict(NUM_PROGRAMS=132, BM=BM, BN=128, BK=64, ADDRESSES=addresses)
    opts = dict(target="sm_90a", num_warps=8, num_stages=3)
    opts.update(kw)
    return kernelc.compile(G.grouped_gemm_made_descs, signature=SIG, constexprs=cx, **opts)


def _sass_ops(ck):
    return [re.sub(r"^\s*/\*[0-9a-f]+\*/\s*(@!?U?P\w+\s+)?", "", l).split(" ")[0]
            for l in ck.asm["sass"].splitlines() if re.match(r"\s*/\*[0-9a-f]{4,}\*/", l)]


@pytest.fixture(scope="module")
def grouped():
    return _grouped(True)


def test_the_pass_writes_where_each_map_is_built(grouped):
    tir = grouped.asm["tir"]
    makes = re.findall(r"make_tensor_descriptor .*", tir)
    # the three maps are built in the `if` inside the problem loop, from loaded addresses and strides
    assert len(makes) == 3
    # A's and B's maps trap on a misaligned address or ldx; C's is only read by the TMA store under a
    # run-time test of the same alignment, so it is built without a trap
    for i, mk in enumerate(makes):
        check = "'guarded'" if i == 2 else "True"
        assert f"tensor_map={{slot={i}, build='here', check_alignment={check}}}" in mk
    assert tir.index("scf.for") < tir.index("scf.if") < tir.index("make_tensor_descriptor")
    assert [m["built"] for m in grouped.reports["tensor_maps"]] == ["here"] * 3
    assert grouped.global_scratch_bytes == 3 * 128


def test_a_store_whose_inner_extent_is_loaded_picks_tma_at_run_time(grouped):
    # C's N is loaded: TMA may store only rows that end on a 16-byte chunk (N % 8 == 0 for fp16), so an
    # `scf.if` on that picks the TMA store or the masked store
    tir = grouped.asm["tir"]
    m = re.search(r"(\w+) = constant {value=8} : i32.*\n.*(%\w+) = srem %\w+, %\1 : i32.*\n"
                  r".*(%\w+) = cmpi \2, %\w+ {pred='eq'}.*\n((?:.*\n)*?).*scf\.if (%\w+) .*\n.*\^then\(\):\n"
                  r".*descriptor_store .*extent_checked=True, tma=True.*\n.*scf\.yield.*\n.*\^else\(\):\n", tir)
    assert m, tir
    # the same test covers C's loaded ldc (a multiple of 8 elements) and address (of 16 bytes)
    cond = m.group(4)
    assert len(re.findall(r"= srem %\w+, %\w+ : i64", cond)) == 2  # the address (cast to i64) and ldc
    assert len(re.findall(r"= and ", cond)) == 2 and f"{m.group(5)} = and " in cond, cond
    else_branch = tir[m.end():].split("scf.yield")[0]
    assert re.search(r"\bstore %\S+, %\S+, %\S+", else_branch) and "descriptor_store" not in else_branch
    assert "UTMASTG.2D" in _sass_ops(grouped)


def test_maps_are_built_and_acquired_inside_the_loop_and_loads_use_tma(grouped):
    ptx = grouped.asm["ptx"]
    first_dims_load = ptx.index("ld.global")  # the problem's sizes: the first thing in the loop
    for code in ("tensormap.replace.tile.global_address", "tensormap.cp_fenceproxy.global.shared::cta",
                 "fence.proxy.tensormap::generic.acquire.gpu"):
        assert ptx.index(code) > first_dims_load, code
    assert ptx.count("tensormap.cp_fenceproxy") == 3 and ptx.count("fence.proxy.tensormap::generic.acquire") == 3
    # the previous problem's TMA stores are done before their map is overwritten
    assert ptx.count("cp.async.bulk.wait_group 0;") == 3
    # the tile loads: the ring of the K loop, through the rebuilt maps
    assert re.search(r"cp\.async\.bulk\.tensor\.2d\.shared::cluster\.global", ptx)
    ops = _sass_ops(grouped)
    assert "UTMALDG.2D" in ops and any(o.startswith("HGMMA.64x128x16") for o in ops)
    assert "UTMACCTL.IV" in ops  # the acquire fences
    assert "LDG.E.U16" not in ops  # no scalar fallback loads of the tiles
    assert grouped.n_spills == 0 and grouped.local_bytes == 0


def test_loaded_bases_and_strides_are_checked_at_run_time(grouped):
    # the matrices' addresses and leading dimensions come from memory: a misaligned one traps (A and B;
    # C's map clears the low bits instead, its store being guarded by the same test)
    ptx = grouped.asm["ptx"]
    assert ptx.count("trap;") == 2
    assert len(re.findall(r"and\.b64\s+%rd\d+, %rd\d+, -16;", ptx)) == 2  # C's address and ldc
    assert "BPT.TRAP" in _sass_ops(grouped)


def test_offsets_into_an_argument_read_from_memory_build_the_same_way():
    ck = _grouped(False, BM=64, num_warps=4, num_stages=2)
    assert [m["built"] for m in ck.reports["tensor_maps"]] == ["here"] * 3
    ops = _sass_ops(ck)
    assert "UTMALDG.2D" in ops and "UTMASTG.2D" in ops


@pytest.mark.parametrize("ws", [False, True])
def test_a_loop_asking_for_a_producer_warp_keeps_the_generic_lowering(ws):
    # a producer warp only sees maps built before the split; a kernel that rebuilds maps gets none
    sig = {"table": "*i64", "y_ptr": "*fp32", "n": "i32", "K": "i32"}
    ck = kernelc.compile(G.batched_gram_made_descs, signature=sig, constexprs=dict(BM=64, BK=64, WS=ws),
                         target="sm_90a", num_warps=4, num_stages=3, divisibility={"K": 16})
    assert [m["built"] for m in ck.reports.get("tensor_maps", [])] == ([] if ws else ["here"])
    assert ck.extra_warps == 0


def test_a_descriptor_made_in_the_loop_its_dot_reads_keeps_the_generic_lowering():
    sig = {"x_ptr": "*fp16", "w_ptr": "*fp16", "y_ptr": "*fp32", "M": "i32", "K": "i32"}
    ck = kernelc.compile(G.made_desc_per_k_step, signature=sig, constexprs=dict(BM=64, BK=64), target="sm_90a",
                         divisibility={"M": 16, "K": 16})
    made = [l for l in ck.asm["tir"].splitlines() if "make_tensor_descriptor %" in l and "kk" not in l]
    assert not any("build='here'" in l for l in made)
    assert all(m["built"] == "entry" for m in ck.reports.get("tensor_maps", []))  # only w's (automatic TMA)


def _pool_problems(shapes):
    """Matrices A [M, K], B [N, K], C [M, N] per problem, all views of one fp16 pool, 16-byte aligned."""
    pool = torch.zeros(sum(m * k + n * k + m * n + 24 for m, n, k in shapes), dtype=torch.float16)
    at = 0
    mats = []
    for m, n, k in shapes:
        for r, c in ((m, k), (n, k), (m, n)):
            mats.append(pool[at:at + r * c].view(r, c))
            at += (r * c + 7) // 8 * 8
    return pool, mats[0::3], mats[1::3], mats[2::3]


def test_interpreter_runs_the_grouped_gemm():
    torch.manual_seed(0)
    pool, As, Bs, Cs = _pool_problems([(40, 24, 32), (33, 8, 16)])
    for x in As + Bs:
        x.copy_(torch.randn(x.shape))
    table, dims, lds = G.problem_tables(As, Bs, Cs, pool)
    G.grouped_gemm_made_descs[(3,)](pool, table, dims, lds, len(As), NUM_PROGRAMS=3, BM=16, BN=16, BK=16,
                                    ADDRESSES=False)
    for a, b, c in zip(As, Bs, Cs):
        torch.testing.assert_close(c.float(), a.float() @ b.float().T, atol=2e-2, rtol=1e-2)
