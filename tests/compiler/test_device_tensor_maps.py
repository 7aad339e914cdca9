"""Tensor maps built on the device for descriptors made in the kernel (codegen/device_tensor_map.py),
checked on CPU down to PTX and SASS: which descriptors qualify, every ``tensormap.replace`` field with
the encoding the PTX ISA gives, the copy to global scratch and the acquire fence, the hidden scratch
parameter, line info on the ``make_tensor_descriptor`` lines, and the warp-specialised producer."""
import re

import pytest
import torch

import kernelc
from examples.kernels import matmul_persistent as MP
from tests import block_kernels as BK
from tests.compiler import tma_kernels as TK

MM_SIG = {"a_ptr": "*fp16", "b_ptr": "*fp16", "c_ptr": "*fp32", "M": "i32", "N": "i32", "K": "i32"}
DIV16 = {"M": 16, "N": 16, "K": 16}


def _mm(divisibility=DIV16, target="sm_90a", sig=MM_SIG):
    return kernelc.compile(BK.dev_desc_matmul, signature=sig, constexprs={"BM": 128, "BN": 128, "BK": 64},
                           target=target, num_warps=4, divisibility=divisibility)


def _fields(ptx):
    """{(field, ord or None): [values]} of the tensormap.replace instructions, in order."""
    out = {}
    for m in re.finditer(r"tensormap\.replace\.tile\.(\w+)\.shared::cta\.b1024\.b\d+ \[[^\]]+\], ([^;]+);", ptx):
        args = [a.strip() for a in m.group(2).split(",")]
        key = (m.group(1), int(args[0]) if len(args) == 2 else None)
        out.setdefault(key, []).append(args[-1])
    return out


def _ops(ck):
    return [re.sub(r"^\s*/\*[0-9a-f]+\*/\s*(@!?U?P\w+\s+)?", "", l).split(" ")[0]
            for l in ck.asm["sass"].splitlines() if re.match(r"\s*/\*[0-9a-f]{4,}\*/", l)]


def test_made_descriptors_copy_through_maps_built_at_the_entry():
    ck = _mm()
    assert ck.global_scratch_bytes == 3 * 128  # a, b, c: one 128-byte map each per program
    maps = ck.reports["tensor_maps"]
    assert [m["dtype"] for m in maps] == ["fp16", "fp16", "fp32"] and all(m["device"] for m in maps)
    assert [m["box_shape"] for m in maps] == [[128, 64], [64, 64], [128, 32]]  # inner box = one 128-byte panel
    ptx = ck.asm["ptx"]
    f = _fields(ptx)
    # PTX ISA encodings: rank-1; elemtype f16 = 6, f32 = 7; 128B swizzle = 3; zero fill = 0
    assert f[("rank", None)] == ["1"] * 3
    assert f[("elemtype", None)] == ["6", "6", "7"]
    assert f[("swizzle_mode", None)] == ["3"] * 3 and f[("fill_mode", None)] == ["0"] * 3
    assert f[("interleave_layout", None)] == ["0"] * 3
    assert len(f[("global_address", None)]) == 3
    for k in (0, 1):  # innermost dimension first
        assert len(f[("box_dim", k)]) == len(f[("global_dim", k)]) == len(f[("element_stride", k)]) == 3
    assert len(f[("global_stride", 0)]) == 3 and ("global_stride", 1) not in f
    # warp 0 publishes each map to global scratch; everyone acquires it before the copy engine reads it
    assert ptx.count("tensormap.cp_fenceproxy.global.shared::cta.tensormap::generic.release.gpu.sync.aligned") == 3
    assert ptx.count("fence.proxy.tensormap::generic.acquire.gpu") == 3
    assert re.search(r"\.param \.u64 \.ptr \.global \.align 128 \w+_param_6\n\)", ptx)  # the hidden 7th parameter
    ops = _ops(ck)
    assert "UTMALDG.2D" in ops and "UTMASTG.2D" in ops and any(o.startswith("HGMMA") for o in ops)
    assert "UTMACCTL.IV" in ops  # the acquire fences
    assert ck.n_spills == 0 and ck.local_bytes == 0


def test_map_building_is_attributed_to_the_make_tensor_descriptor_lines():
    ck = _mm()
    src = open(BK.__file__).read().splitlines()
    line = next(i + 1 for i, l in enumerate(src) if "a_desc = kl.make_tensor_descriptor(a_ptr" in l)
    pcs = ck.source_map.line_to_pcs("block_kernels.py", line)
    assert pcs
    sass = {int(m.group(1), 16): m.group(2) for m in re.finditer(r"/\*([0-9a-f]{4,})\*/\s+(.*?);", ck.asm["sass"])}
    assert any("STS" in sass.get(pc, "") or "UTMA" in sass.get(pc, "") for pc in pcs)


def test_unaligned_strides_keep_the_generic_lowering():
    ck = _mm(divisibility={"M": 16, "N": 16, "K": 1})  # a's row stride K: not provably 16-byte aligned
    maps = ck.reports.get("tensor_maps", [])
    assert [m["block_shape"] for m in maps] == [[64, 128], [128, 128]]  # b and c only
    assert ck.global_scratch_bytes == 2 * 128
    ck = _mm(divisibility={"M": 16, "N": 1, "K": 1})  # nothing aligned: no maps, no scratch
    assert ck.global_scratch_bytes == 0 and "tensormap" not in ck.asm["ptx"]


@pytest.mark.parametrize("target", ["sm_80", "sm_90"])
def test_only_sm_90a_builds_maps(target):
    ck = _mm(target=target)
    assert ck.global_scratch_bytes == 0 and "tensormap" not in ck.asm["ptx"]


def test_kernelc_tma_0_turns_it_off(monkeypatch):
    monkeypatch.setenv("KERNELC_TMA", "0")
    assert _mm().global_scratch_bytes == 0


@pytest.mark.parametrize("anywhere", [False, True])
@pytest.mark.parametrize("kernel", [TK.made_desc_in_loop, TK.made_desc_from_memory])
def test_descriptors_the_entry_cannot_build_get_maps_built_where_they_are_made(kernel, anywhere, monkeypatch):
    sig = {"x_ptr": "*fp16", "y_ptr": "*fp16", "M": "i32", "N": "i32"}
    if kernel is TK.made_desc_from_memory:
        sig = {"x_ptr": "*fp16", "off_ptr": "*i32", "y_ptr": "*fp16", "M": "i32", "N": "i32"}
    monkeypatch.setenv("KERNELC_DEVICE_MAPS_ANYWHERE", "1" if anywhere else "0")
    ck = kernelc.compile(kernel, signature=sig, constexprs={"BM": 64, "BN": 64}, target="sm_90a",
                         divisibility={"M": 16, "N": 16})
    if not anywhere:  # the default until checked on a GPU: the generic lowering, no map
        assert ck.global_scratch_bytes == 0 and "cp.async.bulk.tensor" not in ck.asm["ptx"]
        return
    assert [m["built"] for m in ck.reports["tensor_maps"]] == ["here"]
    assert ck.global_scratch_bytes == 128 and "cp.async.bulk.tensor" in ck.asm["ptx"]
    # a base offset read from memory: nothing proves it 16-byte aligned, so the build checks it
    assert ("trap;" in ck.asm["ptx"]) == (kernel is TK.made_desc_from_memory)


@pytest.mark.parametrize("dtype,code", [("fp16", "6"), ("bf16", "10"), ("fp32", "7"), ("fp8e4nv", "0"), ("i32", "3")])
def test_element_type_encodings(dtype, code):
    sig = {"x_ptr": f"*{dtype}", "y_ptr": f"*{dtype}", "M": "i32", "N": "i32", "stride_b": "i32"}
    ck = kernelc.compile(TK.made_desc_batched_copy, signature=sig, constexprs={"BM": 32, "BN": 64}, target="sm_90a",
                         divisibility={"M": 16, "N": 16, "stride_b": 16})
    assert ck.global_scratch_bytes == 2 * 128
    assert _fields(ck.asm["ptx"])[("elemtype", None)] == [code, code]


def test_nan_padding_sets_the_fill_mode():
    sig = {"x_ptr": "*fp32", "y_ptr": "*fp32", "M": "i32", "N": "i32", "off_m": "i32", "off_n": "i32"}
    ck = kernelc.compile(BK.dev_desc_pad, signature=sig, constexprs={"BM": 32, "BN": 32, "PAD": "nan"},
                         target="sm_90a", divisibility={"M": 16, "N": 16, "off_n": 16})
    assert _fields(ck.asm["ptx"])[("fill_mode", None)] == ["1"]


def test_the_producer_warp_copies_through_maps_built_before_the_split():
    sig = {"a_ptr": "*fp16", "b_ptr": "*fp16", "c_ptr": "*fp16", "M": "i32", "N": "i32", "K": "i32"}
    cx = dict(BLOCK_SIZE_M=128, BLOCK_SIZE_N=128, BLOCK_SIZE_K=64, GROUP_SIZE_M=8, NUM_SMS=132, WARP_SPECIALIZE=True)
    ck = kernelc.compile(MP.matmul_descriptor_persistent_kernel, signature=sig, constexprs=cx, target="sm_90a",
                         num_warps=8, num_stages=4, divisibility=DIV16)
    assert ck.extra_warps == 1 and ck.global_scratch_bytes == 3 * 128
    llir = ck.asm["llir"]
    # the maps are published (and acquired) before the warps split into producer and consumers
    assert llir.index("fence.proxy.tensormap::generic.acquire.gpu") < llir.index("ws_producer")
    assert ck.n_spills == 0


def test_interpreter_runs_the_device_descriptor_matmul():
    a = torch.randn(96, 80, dtype=torch.float16)
    b = torch.randn(80, 72, dtype=torch.float16)
    c = MP.matmul_descriptor_persistent(a, b, BLOCK_SIZE_M=32, BLOCK_SIZE_N=32, BLOCK_SIZE_K=32)
    torch.testing.assert_close(c.float(), a.float() @ b.float(), atol=2e-2, rtol=1e-2)
