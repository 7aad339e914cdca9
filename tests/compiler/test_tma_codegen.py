"""Hopper TMA for tensor descriptors, checked on CPU down to SASS: bulk tensor copies (UTMALDG/UTMASTG)
completing on mbarriers (SYNCS.*) feed wgmma (HGMMA) from a multi-stage ring, the CUtensorMap
parameter layout, the fallbacks (KERNELC_TMA=0, sm_80, unaligned strides), and the host-side
CUtensorMap parameters (box, swizzle, strides) without a driver."""
import re

import pytest

import kernelc
from kernelc.compiler.codegen import tma as T
from kernelc.compiler.codegen.tma import tma_box
from kernelc.runtime import tensor_map as TM

from examples.kernels import matmul_tma
from tests.compiler.tma_kernels import copy2d, copy3d, copy_rows, load_tile, matmul_bt, qk_sum


def _ops(ck):
    return [re.sub(r"^\s*/\*[0-9a-f]+\*/\s*(@!?U?P\w+\s+)?", "", l).split(" ")[0]
            for l in ck.asm["sass"].splitlines() if re.match(r"\s*/\*[0-9a-f]{4,}\*/", l)]


def _count(ops, prefix):
    return sum(o.startswith(prefix) for o in ops)


def _mm_sig(dt="fp16", bm=128, bn=128, bk=64):
    return {"a_desc": f"tensordesc<{dt}[{bm}, {bk}]>", "b_desc": f"tensordesc<{dt}[{bk}, {bn}]>",
            "c_desc": f"tensordesc<{dt}[{bm}, {bn}]>", "M": "i32", "N": "i32", "K": "i32"}


ALIGNED = {"a_desc": 16, "b_desc": 16, "c_desc": 16}


def _mm(target="sm_90a", num_warps=4, num_stages=3, dt="fp16", bm=128, bn=128, bk=64, divisibility=ALIGNED):
    cx = dict(BLOCK_SIZE_M=bm, BLOCK_SIZE_N=bn, BLOCK_SIZE_K=bk, GROUP_SIZE_M=8)
    return kernelc.compile(matmul_tma.matmul_tma_kernel, _mm_sig(dt, bm, bn, bk), cx, target=target,
                           num_warps=num_warps, num_stages=num_stages, divisibility=divisibility)


@pytest.mark.parametrize("num_warps,bn", [(4, 128), (8, 256)])
def test_descriptor_matmul_uses_tma_mbarriers_and_wgmma(num_warps, bn, monkeypatch):
    monkeypatch.setenv("KERNELC_WARP_SPECIALIZE", "0")  # the ring refilled by thread 0 (warp specialisation: test_warp_specialize.py)
    ck = _mm(num_warps=num_warps, bn=bn)
    ops = _ops(ck)
    mma = f"HGMMA.64x{bn}x16.F32"
    assert any(o.startswith(mma) for o in ops), sorted(set(ops))
    # copies: A is one 128-byte-wide box, B (N wide) bn*2/128 panels; prologue (2 stages) + the loop's refill
    per_stage = 1 + bn * 2 // 128
    assert _count(ops, "UTMALDG.2D") == 3 * per_stage
    assert _count(ops, "UTMASTG.2D") == bn * 2 // 128           # the epilogue's TMA store
    assert _count(ops, "SYNCS.EXCH.64") == 3 + 0                 # one mbarrier per stage, initialised once
    assert _count(ops, "SYNCS.ARRIVE.TRANS64") == 3              # arrive.expect_tx: 2 prologue stages + refill
    assert _count(ops, "SYNCS.PHASECHK.TRANS64.TRYWAIT") >= 1    # try_wait.parity
    assert "UTMACCTL.PF" in ops                                  # prefetch.tensormap
    assert not any(o.startswith("LDGSTS") for o in ops)          # no cp.async for the descriptor operands
    assert not any(o.startswith(("LDG", "STG")) for o in ops)    # and no register path to global memory
    # wgmma stays asynchronous: ptxas did not serialise it (one arrive per k-loop, not one per HGMMA)
    assert ops.count("WARPGROUP.ARRIVE") == 1
    assert ck.n_spills == 0
    assert [d["engine"] for d in ck.reports["dots"]] == ["wgmma"]
    kinds = {a["kind"] for a in ck.reports["memory_accesses"]}
    assert kinds == {"load (TMA pipelined)", "store (TMA)"}


def test_tensor_map_parameters_in_the_abi_and_ptx():
    ck = _mm()
    assert ck.arg_names == ["a_desc.base", "a_desc.shape0", "a_desc.shape1", "a_desc.stride0", "a_desc.tensormap",
                            "b_desc.base", "b_desc.shape0", "b_desc.shape1", "b_desc.stride0", "b_desc.tensormap",
                            "c_desc.base", "c_desc.shape0", "c_desc.shape1", "c_desc.stride0", "c_desc.tensormap",
                            "M", "N", "K"]
    ptx = ck.asm["ptx"]
    assert ptx.count(".param .align 64 .b8") == 3 and "cvta.param.u64" in ptx
    assert "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes" in ptx
    assert "mbarrier.try_wait.parity.shared::cta.b64" in ptx
    assert "cp.async.bulk.tensor.2d.global.shared::cta.bulk_group" in ptx
    assert ".extern .shared .align 1024 .b8 global_smem[]" in ptx
    maps = {m["arg"]: m for m in ck.reports["tensor_maps"]}
    assert maps["a_desc"]["box_shape"] == [128, 64] and maps["a_desc"]["swizzle"] == 128
    assert maps["b_desc"]["box_shape"] == [64, 64] and maps["b_desc"]["swizzle"] == 128   # 2 panels of 128 B
    # the host launch encodes the maps the code assumes (same geometry function on both sides)
    for m in ck.reports["tensor_maps"]:
        p = TM.tensor_map_params(m["dtype"], 0x10000, [4096, 4096], [4096, 1], m["block_shape"], m["padding"])
        assert list(reversed(p.box_dim)) == m["box_shape"] and p.swizzle == TM.SWIZZLE[m["swizzle"]]


@pytest.mark.parametrize("num_stages", [2, 4])
def test_stage_counts_and_bf16(num_stages, monkeypatch):
    monkeypatch.setenv("KERNELC_WARP_SPECIALIZE", "0")
    ck = _mm(dt="bf16", num_stages=num_stages)
    ops = _ops(ck)
    assert any(o.startswith("HGMMA.64x128x16.F32.BF16") for o in ops)
    assert _count(ops, "SYNCS.EXCH.64") == num_stages
    assert _count(ops, "UTMALDG.2D") == 3 * num_stages  # S-1 prologue stages + the refill, 3 boxes each
    assert ops.count("WARPGROUP.ARRIVE") == 1


def test_the_epilogue_store_reuses_the_ring():
    # 128x256x64, 4 stages: a 192 KB ring plus a separate 64 KB C tile would not fit in 227 KB
    ck = _mm(num_warps=8, bn=256, num_stages=4)
    assert ck.shared < 200 * 1024 and "UTMASTG.2D" in _ops(ck)


def test_kernelc_tma_0_and_other_targets_use_the_generic_lowering(monkeypatch):
    monkeypatch.setenv("KERNELC_TMA", "0")
    ops = _ops(_mm())
    assert not any(o.startswith(("UTMA", "SYNCS")) for o in ops)
    assert any(o.startswith("HGMMA") for o in ops) and "LDGSTS.E.BYPASS.128" in ops  # masked loads -> cp.async
    monkeypatch.delenv("KERNELC_TMA")
    for target in ("sm_80", "sm_90"):
        ck = _mm(target=target)
        ops = _ops(ck)
        assert not any(o.startswith(("UTMA", "SYNCS")) for o in ops), target
        assert any(o.startswith("HMMA.16816.F32") for o in ops), target
        assert "tensormap" not in " ".join(ck.arg_names)


def test_unaligned_strides_keep_the_generic_lowering():
    # nothing known about the strides: the runtime only says 16 when they are, so no TMA
    ck = _mm(divisibility={})
    ops = _ops(ck)
    assert not any(o.startswith("UTMA") for o in ops) and any(o.startswith("HGMMA") for o in ops)
    assert "a_desc.tensormap" in ck.arg_names  # the ABI keeps the (unused, zero-filled) field


def test_transposed_b_operand_is_read_k_major():
    sig = {"a_desc": "tensordesc<fp16[128, 64]>", "b_desc": "tensordesc<fp16[128, 64]>", "c_ptr": "*fp32",
           "M": "i32", "N": "i32", "K": "i32"}
    ck = kernelc.compile(matmul_bt, sig, dict(BM=128, BN=128, BK=64), target="sm_90a", num_warps=4, num_stages=3,
                         divisibility={"a_desc": 16, "b_desc": 16})
    sass = ck.asm["sass"]
    hg = [l for l in sass.splitlines() if "HGMMA" in l]
    assert hg and not any("tnsp" in l for l in hg), hg  # both operands K-major: no transpose bit
    assert "UTMALDG.2D" in _ops(ck)


@pytest.mark.parametrize("dt,shape", [("fp16", (64, 64)), ("fp32", (32, 64)), ("fp32", (64, 4)), ("uint8", (32, 256)),
                                      ("bf16", (512, 16))])
def test_descriptor_copy_reads_the_tile_back_into_registers(dt, shape):
    ty = f"tensordesc<{dt}[{shape[0]}, {shape[1]}]>"
    ck = kernelc.compile(copy2d, {"x_desc": ty, "y_desc": ty}, dict(BM=shape[0], BN=shape[1]), target="sm_90a",
                         num_warps=4, divisibility={"x_desc": 16, "y_desc": 16})
    ops = _ops(ck)
    box = tma_box(shape, {"fp16": 2, "bf16": 2, "fp32": 4, "uint8": 1}[dt])
    n_boxes = len(list(box.boxes()))
    assert _count(ops, "UTMALDG.2D") == n_boxes and _count(ops, "UTMASTG.2D") == n_boxes
    assert "SYNCS.PHASECHK.TRANS64.TRYWAIT" in ops and "FENCE.VIEW.ASYNC.S" in ops  # wait; fence.proxy.async
    assert not any(o.startswith(("LDG", "STG")) for o in ops)
    if shape[0] * shape[1] * box.ebytes >= 16 * 128:  # enough for a 16-byte vector per thread
        assert any(o.startswith(("LDS.128", "STS.128")) for o in ops), sorted(set(ops))


def test_3d_descriptor_copy():
    ty = "tensordesc<fp16[2, 8, 64]>"
    ck = kernelc.compile(copy3d, {"x_desc": ty, "y_desc": ty}, dict(B0=2, B1=8, B2=64), target="sm_90a",
                         divisibility={"x_desc": 16, "y_desc": 16})
    ops = _ops(ck)
    assert "UTMALDG.3D" in ops and "UTMASTG.3D" in ops


def test_descriptor_ops_inside_a_plain_loop_reinitialise_their_barrier():
    ty = "tensordesc<fp16[64, 64]>"
    ck = kernelc.compile(copy_rows, {"x_desc": ty, "y_desc": ty, "N": "i32"}, dict(BM=64, BN=64), target="sm_90a",
                         divisibility={"x_desc": 16, "y_desc": 16})
    ops = _ops(ck)
    assert "UTMALDG.2D" in ops and "UTMASTG.2D" in ops
    assert "SYNCS.EXCH.64" in ops and "SYNCS.CCTL.IV" in ops  # init and inval on every trip


def test_loop_invariant_operand_is_read_in_place_and_the_other_pipelined(monkeypatch):
    monkeypatch.setenv("KERNELC_WARP_SPECIALIZE", "0")
    ty_q, ty_k = "tensordesc<fp16[128, 64]>", "tensordesc<fp16[64, 64]>"
    ck = kernelc.compile(qk_sum, {"q_desc": ty_q, "k_desc": ty_k, "out_ptr": "*fp32", "N_CTX": "i32"},
                         dict(BM=128, BN=64, D=64), target="sm_90a", num_warps=4, num_stages=3,
                         divisibility={"q_desc": 16, "k_desc": 16})
    ops = _ops(ck)
    assert any(o.startswith("HGMMA.64x64x16.F32") for o in ops)
    assert _count(ops, "UTMALDG.2D") == 1 + 3       # Q once; K: 2 prologue stages + the refill
    assert ops.count("WARPGROUP.ARRIVE") == 1
    assert not any(o.startswith(("STS", "LDSM")) for o in ops)  # nothing staged through registers
    kinds = sorted(a["kind"] for a in ck.reports["memory_accesses"] if a.get("engine") == "tma")
    # Q is issued before K's ring prologue (KERNELC_TMA_EARLY_RINGS) and waited for after it
    assert kinds == ["load (TMA issued early)", "load (TMA pipelined)"]


def test_nan_padding_needs_a_float_map_type():
    ck = kernelc.compile(load_tile, {"x_desc": "tensordesc<fp32[32, 32], padding=nan>", "out_ptr": "*fp32",
                                     "R0": "i32", "C0": "i32"}, dict(BM=32, BN=32), target="sm_90a",
                         divisibility={"x_desc": 16, "C0": 16})
    assert "UTMALDG.2D" in _ops(ck) and ck.reports["tensor_maps"][0]["padding"] == "nan"
    ck = kernelc.compile(load_tile, {"x_desc": "tensordesc<int32[32, 32]>", "out_ptr": "*i32", "R0": "i32",
                                     "C0": "i32"}, dict(BM=32, BN=32), target="sm_90a",
                         divisibility={"x_desc": 16, "C0": 16})
    assert "UTMALDG.2D" in _ops(ck)


# -- geometry: the layout TMA writes is the SmemOperand layout the compiler reads ---------------------


class _Eval:
    """Stands in for the lowering's emitter: evaluates the i32 arithmetic SmemOperand.offset emits."""

    OPS = {"add": int.__add__, "mul": int.__mul__, "lshr": int.__rshift__, "shl": int.__lshift__,
           "and": int.__and__, "or": int.__or__, "xor": int.__xor__}

    def __init__(self):
        self.e = self

    def val(self, text):
        m = re.match(r"(\w+)(?: disjoint)? i32 (-?\d+), (-?\d+)$", text)
        return str(self.OPS[m.group(1)](int(m.group(2)), int(m.group(3))))


def _tma_address(box, r, c):
    """Where TMA puts element (row r, col c) of the tile: boxes land densely, then the swizzle XORs
    the 16-byte chunk (address bits 4..) with the 128-byte row bits 7.. (repeat of 1024/512/256 bytes)."""
    panel, cin = divmod(c, box.inner_box)
    a = panel * box.panel_bytes + r * box.row_bytes + cin * box.ebytes
    mask = {0: 0, 32: 1, 64: 3, 128: 7}[box.swizzle]
    return a ^ (((a >> 7) & mask) << 4)


@pytest.mark.parametrize("shape,eb", [((128, 64), 2), ((64, 128), 2), ((64, 32), 2), ((64, 16), 2), ((32, 8), 4),
                                      ((16, 128), 1), ((64, 256), 4), ((8, 64), 2), ((4, 64), 2), ((512, 64), 2)])
def test_tma_swizzle_matches_the_operand_layout(shape, eb):
    box = tma_box(shape, eb)
    sm = T.box_smem(box, 0)
    lw = _Eval()
    rows, cols = shape
    for r in range(rows):
        for c in range(0, cols, max(1, 16 // eb)):
            assert int(sm.offset(lw, str(r), str(c))) == _tma_address(box, r, c), (r, c)
    # every box starts on the swizzle repeat, so the pattern TMA applies is the one above
    for _, off in box.boxes():
        assert off % 1024 == 0 or box.swizzle == 0


def test_box_geometry():
    b = tma_box((128, 64), 2)
    assert (b.box_shape, b.swizzle, len(list(b.boxes()))) == ((128, 64), 128, 1)
    b = tma_box((64, 256), 2)  # 512-byte rows: 4 panels of 64 elements
    assert b.box_shape == (64, 64) and [off for _, off in b.boxes()] == [0, 8192, 16384, 24576]
    assert [d for d, _ in b.boxes()] == [(0, 0), (0, 64), (0, 128), (0, 192)]
    b = tma_box((512, 64), 2)  # dim 0 cut into boxes of 256 rows
    assert b.box_shape == (256, 64) and [d for d, _ in b.boxes()] == [(0, 0), (256, 0)]
    assert tma_box((64, 32), 2).swizzle == 64 and tma_box((64, 16), 2).swizzle == 32
    assert tma_box((64, 8), 2).swizzle == 0                      # 16-byte rows: nothing to swizzle
    assert tma_box((4, 64), 2).swizzle == 0                      # boxes of 4 rows would break the XOR phase
    assert tma_box((64, 4), 2) is None                           # 8-byte rows: below TMA's 16-byte minimum
    assert tma_box((64, 48), 2) is None and tma_box((2, 300, 64), 2) is None


# -- host CUtensorMap parameters (the driver call itself needs a GPU) ------------------------------------


def test_tensor_map_params_fp16_operands():
    p = TM.tensor_map_params("fp16", 0x7f0000000000, [4096, 1000], [1008, 1], [128, 64])
    assert p.data_type == 6 and p.rank == 2                       # CU_TENSOR_MAP_DATA_TYPE_FLOAT16
    assert p.global_dim == (1000, 4096) and p.global_strides == (2016,)   # innermost first, bytes
    assert p.box_dim == (64, 128) and p.element_strides == (1, 1)
    assert p.swizzle == 3 and p.interleave == 0 and p.oob_fill == 0  # 128B swizzle, zero fill
    assert p.l2_promotion == TM.L2_PROMOTION["128"]  # KERNELC_TMA_L2_PROMOTION's default
    b = TM.tensor_map_params("bf16", 0x1000, [1000, 4096], [4096, 1], [64, 256])
    assert b.data_type == 9 and b.box_dim == (64, 64) and b.swizzle == 3  # 512-byte rows: 128-byte boxes


@pytest.mark.parametrize("dtype,block,box,swizzle", [
    ("fp16", [64, 32], (32, 64), 2), ("fp16", [64, 16], (16, 64), 1), ("fp32", [32, 8], (8, 32), 1),
    ("fp32", [32, 4], (4, 32), 0), ("fp8e4nv", [128, 128], (128, 128), 3), ("fp32", [256, 64], (32, 256), 3),
    ("fp16", [512, 64], (64, 256), 3), ("fp16", [2, 8, 64], (64, 8, 2), 3), ("int8", [256], (128,), 0),
])
def test_tensor_map_box_and_swizzle(dtype, block, box, swizzle):
    shape = [1024] * len(block)
    strides = [1024 ** (len(block) - 1 - d) for d in range(len(block))]
    p = TM.tensor_map_params(dtype, 0x1000, shape, strides, block)
    assert p.box_dim == box and p.swizzle == swizzle


def test_tensor_map_params_reject_what_tma_cannot_address():
    with pytest.raises(TM.TensorMapError, match="16-byte aligned base"):
        TM.tensor_map_params("fp16", 0x1002, [64, 64], [64, 1], [64, 64])
    with pytest.raises(TM.TensorMapError, match="multiples of 16 bytes"):
        TM.tensor_map_params("fp16", 0x1000, [64, 60], [60, 1], [64, 64])
    with pytest.raises(TM.TensorMapError, match="dimension"):
        TM.tensor_map_params("fp16", 0x1000, [0, 64], [64, 1], [64, 64])
    assert TM.tensor_map_params("fp32", 0x1000, [8, 8], [8, 1], [8, 8], padding="nan").oob_fill == 1


def test_tensor_maps_are_cached_per_tensor_and_block():
    TM.clear_cache()
    calls = []

    def fake(p):
        calls.append(p)
        return bytes([len(calls)]) * 128

    m1 = TM.cached_tensor_map("fp16", 0x1000, [64, 64], [64, 1], [64, 64], encoder=fake)
    m2 = TM.cached_tensor_map("fp16", 0x1000, [64, 64], [64, 1], [64, 64], encoder=fake)
    m3 = TM.cached_tensor_map("fp16", 0x1000, [64, 64], [64, 1], [32, 64], encoder=fake)
    assert m1 is m2 and m3 is not m1 and len(calls) == 2
    assert bytes(m3) == bytes([2]) * 128
    # a tensor TMA cannot address gets a zero placeholder (its kernel was specialised not to use TMA)
    z = TM.cached_tensor_map("fp16", 0x1002, [64, 64], [64, 1], [64, 64], encoder=fake)
    assert bytes(z) == bytes(128) and len(calls) == 2
    TM.clear_cache()


def test_descriptor_argument_packs_its_tensor_map():
    np = pytest.importorskip("numpy")
    from kernelc.compiler.abi import descriptor_fields, machine_kind, pack_expressions
    from kernelc.language.dtypes import parse_type
    from kernelc.runtime.driver import ArgBuffer
    ty = parse_type("tensordesc<fp16[64, 64]>")
    assert [f.role for f in descriptor_fields(ty, "sm_90a")][-1] == "tensormap"
    assert "tensormap" not in [f.role for f in descriptor_fields(ty, "sm_80")]
    assert "tensormap" not in [f.role for f in descriptor_fields(ty)]
    assert machine_kind("tensormap") == "tmap"
    assert pack_expressions(["d"], ["d.base", "d.tensormap"]) == ["v0.base.data_ptr()", "_kc_tensor_map(v0)"]
    # the launch buffer holds the 128 bytes by value
    TM.clear_cache()
    x = np.zeros((64, 64), np.float16)
    d = kernelc.TensorDescriptor.from_tensor(x, [64, 64])

    class _Base:  # a numpy array has no data_ptr(); what the launch reads off a torch tensor
        dtype = x.dtype

        def data_ptr(self):
            return 0x100000

    d.base = _Base()
    import kernelc.runtime.tensor_map as tm_mod
    m = tm_mod.descriptor_tensor_map(d, encoder=lambda p: bytes(range(128)))
    buf = ArgBuffer(("ptr", "i32", "tmap"))
    buf.struct.a2 = m
    import ctypes
    assert ctypes.string_at(buf.ptrs[2], 128) == bytes(range(128))
    TM.clear_cache()


def test_cache_key_includes_kernelc_tma(monkeypatch):
    from kernelc.runtime.cache import cache_key
    from kernelc.compiler.backend import parse_target
    args = (matmul_tma.matmul_tma_kernel, {"M": "i32"}, {}, {}, (), 4, 3, parse_target("sm_90a"))
    k1 = cache_key(*args)
    monkeypatch.setenv("KERNELC_TMA", "0")
    assert cache_key(*args) != k1


def test_descriptor_matmul_example_runs_in_the_interpreter():
    torch = pytest.importorskip("torch")
    a = torch.randn(200, 96, dtype=torch.float16)
    b = torch.randn(96, 150, dtype=torch.float16)
    for config in ({}, dict(BLOCK_SIZE_M=64, BLOCK_SIZE_N=64, BLOCK_SIZE_K=32)):
        c = matmul_tma.matmul_tma(a, b, **config)
        torch.testing.assert_close(c.float(), a.float() @ b.float(), atol=0.05, rtol=1e-2)


def test_generated_launch_packs_descriptor_fields_and_tensor_maps(monkeypatch):
    """The launch function generated for a TMA kernel writes base, shapes, strides and the encoded
    128-byte map of each descriptor into the argument buffer (the driver call itself is faked)."""
    import ctypes
    import types
    torch = pytest.importorskip("torch")
    from kernelc.compiler.abi import machine_kind, machine_params
    from kernelc.runtime import driver, fastpath
    from kernelc.runtime.launcher import Loaded
    ck = _mm()
    kinds = [machine_kind(str(t)) for _, t, _ in machine_params(ck.signature, ck.target.arch)]
    buf = driver.ArgBuffer(tuple(kinds))
    seen = {}

    def fake_launch(func, g0, g1, g2, *rest):
        params = rest[-2]
        for i, k in enumerate(kinds):
            size = 128 if k == "tmap" else ctypes.sizeof(driver.CTYPE[k])
            seen[i] = ctypes.string_at(ctypes.c_void_p.from_address(params + 8 * i).value, size)
        return (0,)

    monkeypatch.setattr(driver, "_drv", lambda: types.SimpleNamespace(cuLaunchKernel=fake_launch,
                                                                       CUstream=lambda s: s))
    fn_obj = types.SimpleNamespace(handle=1, function=1, threads=128, shared=0, name="k")
    ent = Loaded(ck, fn_obj, buf, [("tensordesc", t) for t in ck.signature.values()][:3] + ["i32"] * 3)
    cmask = [False] * 6 + [True] * 4
    launch = fastpath.make_launch(ent, matmul_tma.matmul_tma_kernel, cmask)
    TM.clear_cache()
    monkeypatch.setattr(TM, "encode", lambda p: p.global_dim[0].to_bytes(8, "little") * 16)
    descs = []
    for shape in ((300, 64), (64, 208), (300, 208)):
        t = torch.empty(shape, dtype=torch.float16)
        descs.append(kernelc.TensorDescriptor.from_tensor(t, [128, 64]))
    launch(1, 1, 1, 0, *descs, 300, 208, 64)
    by_name = dict(zip(ck.arg_names, (seen[i] for i in range(len(kinds)))))
    assert int.from_bytes(by_name["a_desc.shape0"], "little") == 300
    assert int.from_bytes(by_name["b_desc.stride0"], "little") == 208
    assert int.from_bytes(by_name["a_desc.base"], "little") == descs[0].base.data_ptr()
    for name, inner in (("a_desc", 64), ("b_desc", 208), ("c_desc", 208)):
        assert by_name[f"{name}.tensormap"] == inner.to_bytes(8, "little") * 16  # innermost global dim first
    TM.clear_cache()


@pytest.mark.parametrize("dt,engine,mma", [("fp16", "wgmma", "HGMMA.64x128x16.F32"),
                                           ("fp8e4nv", "wgmma", "QGMMA.64x128x32.F32.E4M3.E4M3"),
                                           ("fp32", "mma.sync", "HMMA.1688.F32.TF32")])
def test_k_major_tma_tiles_feed_every_tensor_core_path(dt, engine, mma):
    sig = {"a_desc": f"tensordesc<{dt}[128, 64]>", "b_desc": f"tensordesc<{dt}[128, 64]>", "c_ptr": "*fp32",
           "M": "i32", "N": "i32", "K": "i32"}
    ck = kernelc.compile(matmul_bt, sig, dict(BM=128, BN=128, BK=64), target="sm_90a", num_warps=4, num_stages=3,
                         divisibility={"a_desc": 16, "b_desc": 16})
    ops = _ops(ck)
    assert any(o.startswith(mma) for o in ops) and "UTMALDG.2D" in ops and ck.n_spills == 0
    assert [d["engine"] for d in ck.reports["dots"]] == [engine]
    assert not any(o.startswith(("LDGSTS", "LDG")) for o in ops)


def test_async_wgmma_accumulators_are_not_read_before_the_final_wait(monkeypatch):
    """With a wgmma group left in flight, reading the accumulators before wait_group 0 (say, a conversion LLVM
    sinks into the loop exit) makes ptxas serialise every wgmma (C7514); the final wait hands them over."""
    from examples.kernels import matmul
    monkeypatch.setenv("KERNELC_WGMMA_ASYNC", "1")
    sig = dict(a_ptr="*fp16", b_ptr="*fp16", c_ptr="*fp16", M="i32", N="i32", K="i32", stride_am="i32",
               stride_ak="i32", stride_bk="i32", stride_bn="i32", stride_cm="i32", stride_cn="i32")
    ck = kernelc.compile(matmul.matmul_kernel, sig, dict(BLOCK_SIZE_M=128, BLOCK_SIZE_N=128, BLOCK_SIZE_K=64,
                                                          GROUP_SIZE_M=8), target="sm_90a", num_warps=4, num_stages=3,
                         divisibility={n: 16 for n in sig}, equal_to_1=("stride_ak", "stride_bn", "stride_cn"))
    ops = _ops(ck)
    assert _count(ops, "HGMMA") == 8 and ops.count("WARPGROUP.ARRIVE") == 1


def test_autotune_warmup_compiles_each_config_with_its_own_block_shapes():
    """Configs set descriptor block shapes in a pre-hook (Triton's pattern): the parallel warm-up runs the
    hook on copies, so each compile sees its own block shapes and the caller's descriptors stay as they were."""
    np = pytest.importorskip("numpy")
    from kernelc.runtime.tuning import _hook_copies
    x = np.zeros((256, 256), np.float16)
    a_desc = kernelc.TensorDescriptor.from_tensor(x, [16, 16])
    cfg = [c for c in matmul_tma.get_configs() if c.kwargs["BLOCK_SIZE_N"] == 256][-1]
    args, kw = _hook_copies(["a_desc", "b_desc", "c_desc", "M"], (a_desc, a_desc, a_desc, 256), {}, cfg)
    assert args[0] is not a_desc and args[0].block_shape == [128, 64] and args[1].block_shape == [64, 256]
    assert a_desc.block_shape == [16, 16] and args[3] == 256


@pytest.mark.parametrize("inner_div, tma_store", [(16, True), (1, False)])
def test_tma_store_needs_rows_that_end_on_16_bytes(inner_div, tma_store):
    """A TMA store wrote the whole 16-byte chunk a row ends in (H200): without knowing the innermost
    extent is a multiple of 16 bytes, the store takes the masked generic path."""
    from tests.block_kernels import desc_copy
    sig = {"in_desc": "tensordesc<fp32[32, 32]>", "out_desc": "tensordesc<fp32[32, 32]>"}
    ck = kernelc.compile(desc_copy, signature=sig, constexprs={"BM": 32, "BN": 32}, target="sm_90a", num_warps=4,
                         divisibility={"in_desc": 16, "out_desc.base": 16, "out_desc.stride0": 16,
                                       "out_desc.shape1": inner_div})
    sass = ck.asm["sass"]
    assert "UTMALDG" in sass
    assert ("UTMASTG" in sass) == tma_store
