"""CUtensorMaps built on the device, for descriptors made in the kernel (``kl.make_tensor_descriptor``).

A host ``TensorDescriptor`` arrives with its map encoded by the driver (runtime/tensor_map.py). A
descriptor made in the kernel has runtime base, shape and strides, so the kernel writes the map
itself, once per program, at its entry (sm_90a, PTX ISA 8.3):

    warp 0      zero 128 bytes of shared memory (one 32-bit word per lane); ``bar.warp.sync``
    lane 0      ``tensormap.replace.tile.<field>.shared::cta`` for every field: address, rank, box,
                global dims and byte strides, element strides, element type, swizzle, OOB fill;
                ``bar.warp.sync``
    warp 0      ``tensormap.cp_fenceproxy.global.shared::cta.tensormap::generic.release.gpu`` copies
                the map to this program's slot of a global scratch buffer
    all         CTA barrier, then ``fence.proxy.tensormap::generic.acquire.gpu`` on the slot, after
                which the copy engine may read the map (``cp.async.bulk.tensor`` wants it in global,
                const or param space, not shared).

The slot is ``scratch + (linear program id * maps + i) * 128``; the scratch buffer is a hidden last
kernel parameter (``SCRATCH_PARAM``) that the launcher allocates per stream
(``CompiledKernel.global_scratch_bytes`` per program; runtime/scratch.py). The box and swizzle are
the same ``TmaBox`` as a host map's, so the tile code does not know which kind it reads through.

A made descriptor qualifies (``passes/lower_descriptors.device_map_eligible``, which tags its ops
``tma=True``) when it is made at the kernel's top level (the map is built before the body, and before a
warp-specialised split, so the producer warp sees it)
from scalars the entry can compute -- arguments, program ids, constants and arithmetic on them --
and the axis analysis proves its base and byte strides 16-byte aligned, as TMA requires. Others
keep the generic lowering (masked loads/stores), which is correct everywhere.
"""
from __future__ import annotations

from typing import Optional

from ...language.dtypes import tensor_descriptor_type
from ..ir.core import Op
from ..target_rules import TMA_PTX_ELEMTYPE as PTX_ELEMTYPE
from . import tma as T
from .lowering import Lowering

SLOT_BYTES = 128  # one CUtensorMap
SCRATCH_PARAM = "kc_global_scratch"

PTX_FILL = {"zero": 0, "nan": 1}  # padding -> .fill_mode
PTX_SWIZZLE = {0: 0, 32: 1, 64: 2, 128: 3}  # swizzle bytes -> .swizzle_mode

# -- the maps --------------------------------------------------------------------------------------


class DeviceTensorMap:
    """The map of one descriptor made in the kernel: slot ``index`` of the program's scratch."""

    def __init__(self, make: Op, index: int, ty: tensor_descriptor_type, box: T.TmaBox):
        self.make, self.index, self.ty, self.box = make, index, ty, box
        self.param = f"device_tensormap{index}"  # a stable name (prefetch order, reports)
        self.addr: Optional[str] = None  # i64 generic address of the slot, set at the entry

    def address(self, lw: Lowering) -> str:
        assert self.addr is not None, "internal: a device tensor map used before the entry built it"
        return self.addr

    def report(self) -> dict:
        return {"made_at": f"{self.make.loc.file}:{self.make.loc.line}", "param": self.param, "device": True,
                "dtype": self.ty.element_ty.name, "block_shape": list(self.ty.block_shape),
                "box_shape": list(self.box.box_shape), "swizzle": self.box.swizzle, "padding": self.ty.padding}


def emit_device_tensor_maps(lw: Lowering) -> None:
    """At the kernel entry (after ``declare_tensor_maps``): build every in-kernel descriptor's map in
    this program's scratch slot, and declare the scratch parameter."""
    maps = [m for m in lw.tensor_maps.values() if isinstance(m, DeviceTensorMap)]
    if not maps:
        return
    e = lw.e
    first = maps[0].make.loc
    e.set_loc(first.file, first.line, first.col)  # the map building shows up on the descriptors' lines
    lw.params.append(("ptr addrspace(1)", SCRATCH_PARAM, "noundef align 128"))
    lw.reports["global_scratch_bytes"] = SLOT_BYTES * len(maps)
    slot0 = _program_slot(lw, len(maps))
    smem0 = lw.scratch(SLOT_BYTES * len(maps))
    w0 = e.val(f"icmp eq i32 {lw.warp}, 0")
    t0 = T.elected(lw)
    lane4 = e.val(f"shl i32 {lw.lane}, 2")
    smem, glob = [], []
    for m in maps:
        s = T.smem_addr(lw, smem0 + m.index * SLOT_BYTES)
        smem.append(s)
        g = e.val(f"getelementptr i8, ptr addrspace(1) {slot0}, i64 {m.index * SLOT_BYTES}")
        glob.append(e.val(f"ptrtoint ptr addrspace(1) {g} to i64"))
        e.asm("void", "@$0 st.shared.b32 [$1], 0;", "b,r", [("i1", w0), ("i32", e.val(f"add i32 {s}, {lane4}"))])
    e.asm("void", "bar.warp.sync -1;", "", [])
    for m, s in zip(maps, smem):
        e.set_loc(m.make.loc.file, m.make.loc.line, m.make.loc.col)
        _replace_fields(lw, m, s, t0)
    e.asm("void", "bar.warp.sync -1;", "", [])
    for s, g in zip(smem, glob):
        e.asm("void", "@$0 tensormap.cp_fenceproxy.global.shared::cta.tensormap::generic.release.gpu.sync.aligned "
                      f"[$1], [$2], {SLOT_BYTES};", "b,l,r", [("i1", w0), ("i64", g), ("i32", s)])
    lw.barrier()
    for m, g in zip(maps, glob):
        e.asm("void", f"fence.proxy.tensormap::generic.acquire.gpu [$0], {SLOT_BYTES};", "l", [("i64", g)])
        m.addr = g


def _program_slot(lw: Lowering, n_maps: int) -> str:
    """``scratch + linear program id * n_maps * 128`` (a global pointer)."""
    e = lw.e
    sreg = lambda r: e.val(f"zext i32 {e.call('i32', f'llvm.nvvm.read.ptx.sreg.{r}', [])} to i64")  # noqa: E731
    x, y, z, nx, ny = (sreg(r) for r in ("ctaid.x", "ctaid.y", "ctaid.z", "nctaid.x", "nctaid.y"))
    yz = e.val(f"add i64 {y}, {e.val(f'mul i64 {ny}, {z}')}")
    pid = e.val(f"add i64 {x}, {e.val(f'mul i64 {nx}, {yz}')}")
    off = e.val(f"mul i64 {pid}, {n_maps * SLOT_BYTES}")
    return e.val(f"getelementptr i8, ptr addrspace(1) %{SCRATCH_PARAM}, i64 {off}")


def _replace_fields(lw: Lowering, m: DeviceTensorMap, smem: str, t0: str) -> None:
    """Lane 0 writes every field of the zeroed map at ``smem``; arrays are innermost dimension first."""
    e = lw.e
    mk, ty, box = m.make, m.ty, m.box
    n = ty.ndim
    eb = ty.element_ty.itemsize
    base = e.val(f"ptrtoint ptr addrspace(1) {lw.scalar(mk.operands[0])} to i64")
    shapes = [lw.scalar(v) for v in mk.operands[1:1 + n]]
    strides = [e.val(f"mul i64 {lw.scalar(v)}, {eb}") for v in mk.operands[1 + n:]]

    def put(field: str, bits: int, value: str, ord_: Optional[int] = None) -> None:
        where = "[$1]" if ord_ is None else f"[$1], {ord_}"
        e.asm("void", f"@$0 tensormap.replace.tile.{field}.shared::cta.b1024.b{bits} {where}, $2;", "b,r," +
              ("l" if bits == 64 else "r"), [("i1", t0), ("i32", smem), (f"i{bits}", value)])

    def put_imm(field: str, value: int) -> None:  # these fields take an immediate only
        e.asm("void", f"@$0 tensormap.replace.tile.{field}.shared::cta.b1024.b32 [$1], {value};", "b,r",
              [("i1", t0), ("i32", smem)])

    put("global_address", 64, base)
    put_imm("rank", n - 1)
    for k, (d, b) in enumerate(zip(reversed(shapes), reversed(box.box_shape))):
        put("box_dim", 32, str(b), k)
        put("global_dim", 32, d, k)
        put("element_stride", 32, "1", k)
    for k, s in enumerate(reversed(strides)):
        put("global_stride", 64, s, k)
    put_imm("elemtype", PTX_ELEMTYPE[ty.element_ty.name])
    put_imm("interleave_layout", 0)
    put_imm("swizzle_mode", PTX_SWIZZLE[box.swizzle])
    put_imm("fill_mode", PTX_FILL[ty.padding])
