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

A made descriptor qualifies when ``passes/lower_descriptors.device_map_build`` says so; the pass
writes ``tensor_map={slot, build, check_alignment}`` on its ``make_tensor_descriptor``:

- ``build='entry'``: made at the kernel's top level from scalars the entry can compute (arguments,
  program ids, constants and arithmetic on them). The map is built once, before the body and before
  a warp-specialised split, so the producer warp sees it.
- ``build='here'``: made anywhere else -- inside loops and branches, from addresses and leading
  dimensions loaded from memory (grouped GEMMs). The map is built where the op is, each time it
  runs, with the same sequence into the same per-program slot (``build_device_tensor_map_here``).
- ``check_alignment``: a base or stride came from memory, where no analysis sees its alignment; the
  build traps when it is not 16-byte aligned (``make_tensor_descriptor``'s contract, as in Triton).
  ``'guarded'``: the map's only users are TMA stores under an ``scf.if`` that tests that alignment
  (a grouped GEMM's C with a loaded ldc); no trap, the masked store runs instead.

Others keep the generic lowering (masked loads/stores), which is correct everywhere.
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
    """The map of one descriptor made in the kernel: slot ``index`` of the program's scratch, built at the
    entry or where its ``make_tensor_descriptor`` is (the op's ``tensor_map`` attribute, written by
    passes/lower_descriptors.py)."""

    def __init__(self, make: Op, ty: tensor_descriptor_type, box: T.TmaBox):
        plan = make.attrs["tensor_map"]
        self.make, self.ty, self.box = make, ty, box
        self.index, self.build = plan["slot"], plan["build"]
        self.check_alignment = plan.get("check_alignment") or False  # True (trap) | 'guarded' | False
        self.param = f"device_tensormap{self.index}"  # a stable name (prefetch order, reports)
        self.addr: Optional[str] = None  # i64 generic address of the slot, set at the entry

    def address(self, lw: Lowering) -> str:
        assert self.addr is not None, "internal: a device tensor map used before it was built"
        return self.addr

    def report(self) -> dict:
        return {"made_at": f"{self.make.loc.file}:{self.make.loc.line}", "param": self.param, "device": True,
                "built": self.build, "dtype": self.ty.element_ty.name, "block_shape": list(self.ty.block_shape),
                "box_shape": list(self.box.box_shape), "swizzle": self.box.swizzle, "padding": self.ty.padding}


def emit_device_tensor_maps(lw: Lowering) -> None:
    """At the kernel entry (after ``declare_tensor_maps``): declare the scratch parameter, compute every
    map's slot address, and build the maps of descriptors made at the top level in their slots (the
    others are built where they are made: ``build_device_tensor_map_here``)."""
    maps = sorted((m for m in lw.tensor_maps.values() if isinstance(m, DeviceTensorMap)), key=lambda m: m.index)
    if not maps:
        return
    e = lw.e
    first = maps[0].make.loc
    e.set_loc(first.file, first.line, first.col)  # the map building shows up on the descriptors' lines
    n_slots = max(m.index for m in maps) + 1
    lw.params.append(("ptr addrspace(1)", SCRATCH_PARAM, "noundef align 128"))
    lw.reports["global_scratch_bytes"] = SLOT_BYTES * n_slots
    slot0 = _program_slot(lw, n_slots)
    glob = {}
    for m in maps:
        g = e.val(f"getelementptr i8, ptr addrspace(1) {slot0}, i64 {m.index * SLOT_BYTES}")
        glob[m.index] = e.val(f"ptrtoint ptr addrspace(1) {g} to i64")
        if m.build == "here":
            m.addr = glob[m.index]  # its slot; the map in it is valid once the make op has run
    entry = [m for m in maps if m.build == "entry"]
    if entry:
        _build(lw, entry, [glob[m.index] for m in entry])


def build_device_tensor_map_here(lw: Lowering, m: DeviceTensorMap, in_loop: bool) -> None:
    """Build ``m`` in its slot where its ``make_tensor_descriptor`` is (inside loops and branches, from
    loaded values); the code runs each time the op does. In a loop the slot still holds the previous
    trip's map: thread 0, which issues every bulk copy, first waits for its bulk stores to finish
    (loads through the map were waited for on their mbarriers before their tiles were used); a kernel
    without TMA stores has nothing to wait for."""
    if in_loop and any((o.name == "descriptor_store" and o.attrs.get("tma")) or o.name == "bulk_reduce"
                       for o in lw.fn.walk()):
        lw.e.asm("void", "@$0 cp.async.bulk.wait_group 0;", "b", [("i1", T.elected(lw))])
    _build(lw, [m], [m.addr])


def _build(lw: Lowering, maps, glob) -> None:
    """Write ``maps`` in shared memory, publish them to their global slots ``glob`` (i64 addresses)
    and acquire them for the copy engine (the sequence in the module docstring)."""
    e = lw.e
    smem0 = lw.scratch(SLOT_BYTES * len(maps))
    lw.smem_access(smem0, smem0 + SLOT_BYTES * len(maps), True)  # earlier users of the scratch are done
    w0 = e.val(f"icmp eq i32 {lw.warp}, 0")
    t0 = T.elected(lw)
    lane4 = e.val(f"shl i32 {lw.lane}, 2")
    smem = []
    for k, m in enumerate(maps):
        s = T.smem_addr(lw, smem0 + k * SLOT_BYTES)
        smem.append(s)
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
    if m.check_alignment == "guarded":
        # only stores under a run-time test of this alignment use the map (passes/lower_descriptors.py,
        # ``_split_on_extent``): where the test fails the map is never read, so it only has to be well-formed
        base = e.val(f"and i64 {base}, -16")
        strides = [e.val(f"and i64 {st}, -16") for st in strides]
    elif m.check_alignment:
        # an address or leading dimension read from memory: TMA needs 16-byte alignment, so a violated
        # ``make_tensor_descriptor`` contract stops the kernel here rather than copying from elsewhere
        bits = base
        for st in strides:
            bits = e.val(f"or i64 {bits}, {st}")
        bad = e.val(f"icmp ne i64 {e.val(f'and i64 {bits}, 15')}, 0")
        e.asm("void", "@$0 trap;", "b", [("i1", bad)])

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
