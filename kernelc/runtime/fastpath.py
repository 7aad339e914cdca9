"""The launch fast path: Python source generated per kernel (argument binding, specialisation key)
and per compiled specialisation (argument packing + cuLaunchKernel), so a cached launch costs one
key tuple, one dict lookup, a few ctypes field writes and one foreign call.

Anything unusual (no compiled entry yet, hooks registered, extra keyword options, the interpreter)
falls back to the general path in ``JITFunction.run``. ``TensorDescriptor`` arguments take the fast
path too: the binder passes the descriptor object through and the generated ``launch`` of the
compiled specialisation writes its flattened fields (``kernelc/compiler/abi.py``).
"""
from __future__ import annotations

import ctypes
import inspect
import struct
from typing import Any, Dict, List

from ..tools.tensor_descriptor import TensorDescriptor
from . import hooks


def spec_part(v, specialize: bool = True):
    """The specialisation of one runtime argument (also used as part of the cache key)."""
    if hasattr(v, "data_ptr"):
        return ("*", v.dtype, v.data_ptr() & 15 == 0, v.is_cuda)
    if v is True or v is False:
        return "i1"
    if type(v) is int or isinstance(v, int):
        if -2147483648 <= v < 2147483648:
            t = "i32"
        elif -9223372036854775808 <= v < 9223372036854775808:
            t = "i64"
        elif 0 <= v < 18446744073709551616:
            t = "u64"
        else:
            raise TypeError(f"the integer {v} does not fit in 64 bits (ints are passed as int32, int64 or uint64)")
        if not specialize:
            return (t,)
        return (t, v == 1, v & 15 == 0)
    if isinstance(v, float):
        if abs(v) > 3.4028234663852886e38 and abs(v) != float("inf"):
            raise TypeError(f"the float {v!r} does not fit in fp32 (Python floats are passed as fp32)")
        return "fp32"
    if hasattr(v, "__index__") and not hasattr(v, "dtype"):  # other integer types (not numpy/torch scalars)
        return spec_part(v.__index__(), specialize)
    if isinstance(v, TensorDescriptor):
        return descriptor_part(v, specialize)
    raise TypeError(f"unsupported argument type {type(v).__name__}; pass a torch tensor, int, float, bool "
                    f"or kernelc.TensorDescriptor")


# (dtype, block shape, padding) -> the descriptor's kernel type as text: building the type costs more than the
# rest of a launch's key
_DESC_TYPES: Dict[tuple, str] = {}


def descriptor_part(d, specialize: bool = True) -> tuple:
    """The specialisation of a TensorDescriptor argument: its type (dtype, block shape, padding) and,
    as for pointers and ints, 16-byte alignment of the base and divisibility by 16 of each shape and
    stride but the last (``kernelc/compiler/abi.py`` names the fields)."""
    base = d.base
    tkey = (base.dtype, tuple(d.block_shape), d.padding)
    ty = _DESC_TYPES.get(tkey)
    if ty is None:
        ty = _DESC_TYPES[tkey] = str(d.kl_type)
    if not specialize:
        n = len(d.shape)
        return ("tensordesc", ty, False, bool(getattr(base, "is_cuda", False)), (False,) * n, (False,) * (n - 1))
    shape, strides = d.shape, d.strides
    dkey = (*shape, *strides)  # 2 x rank entries: one table serves every rank
    div = _DESC_DIVS.get(dkey)
    if div is None:
        if len(_DESC_DIVS) > 4096:
            _DESC_DIVS.clear()
        div = _DESC_DIVS[dkey] = (tuple([s & 15 == 0 for s in shape]), tuple([s & 15 == 0 for s in strides[:-1]]))
    return ("tensordesc", ty, base.data_ptr() & 15 == 0, bool(getattr(base, "is_cuda", False)), div[0], div[1])


# (*shape, *strides) of a descriptor -> which shapes and strides (all but the last) are divisible by 16
_DESC_DIVS: Dict[tuple, tuple] = {}


# int argument -> its specialisation part (spec_part(v)), filled as launches meet values
_INT_PARTS: Dict[int, Any] = {}


def _int_part(v: int):
    part = spec_part(v)  # raises TypeError beyond 64 bits: the binder's general path names it
    if len(_INT_PARTS) >= 4096:
        _INT_PARTS.clear()
    _INT_PARTS[v] = part
    return part


def record_slots(values: str) -> Dict[str, str]:
    """What the generated launch sets each ``LaunchRecord`` slot to, ``values`` being the source of the argument
    tuple.  The record is built with ``object.__new__`` and these stores rather than a call of ``__init__`` with
    13 arguments: ~0.1 us less per hooked launch on CPU (issue 23; docs/performance.md).  Every slot must be here
    (tests/runtime/test_fastpath.py checks it against ``LaunchRecord.__slots__`` and ``__init__``'s record)."""
    return {"name": "_name", "grid": "(_kc_g0, _kc_g1, _kc_g2)", "num_warps": "num_warps",
            "num_stages": "num_stages", "shared": "_kc_ck.shared", "stream": "_kc_st", "backend": "'cuda'",
            "compiled": "_kc_ck", "cache_key": "_kc_ck.cache_key", "function": "_fn", "_values": values,
            "_cmask": "_cmask", "_metadata_fn": "_metadata_fn", "_metadata": "None", "_args": "None",
            "_constexprs": "None"}


def make_binder(fn) -> Any:
    """Generate ``fast(grid, <params>, num_warps=4, num_stages=3, num_ctas=1, stream=None, **kw)`` for ``fn``
    (its ``warm_key`` attribute: the same binding, returning ``JITFunction.warmup``'s memo key: the arguments'
    specialisation as a launch keys it, the options, the raw override/interpreter knobs and the device)."""
    params = list(fn.signature.parameters.values())
    names = [p.name for p in params]
    for reserved in ("grid", "stream", "kw"):
        if reserved in names:
            return None  # a parameter shadows an option name: keep the general path
    # num_warps / num_stages may be kernel parameters too (the tutorial softmax): then the parameter
    # is also the option (see jit.SHARED_OPTIONS), so the generated signature has it only once
    opt_parts = [f"{o}={d}" for o, d in (("num_warps", 4), ("num_stages", 3)) if o not in names]
    # Triton's num_ctas=1 (tutorial 05 passes it) is the default and changes nothing: it stays on the fast path
    ctas_check = ""
    if "num_ctas" not in names:
        opt_parts.append("num_ctas=1")
        ctas_check = "    if num_ctas != 1:\n        kw['num_ctas'] = num_ctas\n"
    if any(n.startswith("_") for n in names):
        return None  # could shadow the generated code's own names (_kc_*, _p_*, _cache, ...)
    defaults = {}
    sig_parts = []
    for p in params:
        if p.kind not in (p.POSITIONAL_OR_KEYWORD, p.POSITIONAL_ONLY):
            return None
        if p.default is not inspect.Parameter.empty:
            defaults[f"_d_{p.name}"] = p.default
            sig_parts.append(f"{p.name}=_d_{p.name}")
        else:
            sig_parts.append(p.name)
    pre = []        # per runtime parameter: its key part and the value the launch needs
    key_parts = []
    runtime = []
    for n in names:
        if n in fn.constexpr_names:
            key_parts.append(f"('c', {n})")
            continue
        spec = n not in fn.do_not_specialize
        # the common kinds inline, each giving exactly spec_part's key part (the tests compare the two); the rest
        # (bool, big ints, int subclasses, out-of-range floats, errors) through spec_part
        # a specialised int's part from a table by value (one dict lookup, one shared tuple: no tuple built a call)
        int_cond, int_key = (f"type({n}) is int", f"_ints.get({n}) or _int_part({n})") if spec else \
            (f"type({n}) is int and -2147483648 <= {n} < 2147483648", "('i32',)")
        pre.append(f"""    if isinstance({n}, _Tensor):  # subclasses too (nn.Parameter)
        _p_{n} = {n}.data_ptr()
        _k_{n} = ('*', {n}.dtype, _p_{n} & 15 == 0, {n}.is_cuda)
    elif {int_cond}:
        _p_{n} = {n}
        _k_{n} = {int_key}
    elif type({n}) is _TD:
        _p_{n} = {n}
        _k_{n} = _desc({n}, {spec})
    elif type({n}) is float and -3.4028234663852886e38 <= {n} <= 3.4028234663852886e38:
        _p_{n} = {n}
        _k_{n} = 'fp32'
    elif {n} is None:
        _p_{n} = None
        _k_{n} = ('c', None)
    else:
        _p_{n} = {n}
        _k_{n} = _spec({n}, {spec})""")
        key_parts.append(f"_k_{n}")
        runtime.append(f"_p_{n}")
    meta = ", ".join(f"'{n}': {n}" for n in names)
    values = f"({', '.join(names)},)"
    record = "        _kc_ck = _kc_ent.compiled\n        _kc_rec = _new(_Record)\n" + "".join(
        f"        _kc_rec.{slot} = {expr}\n" for slot, expr in record_slots(values).items())
    launch_args = ''.join(', ' + r for r in runtime)
    bind = chr(10).join("    " + ln for blk in pre for ln in blk.splitlines())
    # the body after the grid is known: ``fast`` takes any grid; ``fast3`` (what ``kernel[grid]`` binds for a
    # tuple grid it has validated once) takes its three dimensions and skips the per-call grid checks
    tail = f"""    try:
        _kc_f = _kc_ent.fast
    except AttributeError:  # an entry other than launcher.Loaded (tests' stand-ins)
        _kc_f = _getattr(_kc_ent.launch, 'fast', _kc_ent.launch)
    _kc_st = _getstream(_kc_dev) if stream is None else _stream_handle(stream)
    if _hooks_enter or _hooks_exit:
{record}
        for _kc_h in _hooks_enter:
            _kc_h(_kc_rec)
        _kc_f(_kc_g0, _kc_g1, _kc_g2, _kc_st{launch_args})
        for _kc_h in _hooks_exit:
            _kc_h(_kc_rec)
        return _kc_ent.compiled
    _kc_f(_kc_g0, _kc_g1, _kc_g2, _kc_st{launch_args})
    return _kc_ent.compiled
"""
    head = f"""{ctas_check}    if kw:
        return _slow(GRID, {values}, kw, num_warps, num_stages, stream)
    try:
{bind}
    except TypeError:  # an argument kernelc cannot pass: the general path names it
        return _slow(GRID, {values}, kw, num_warps, num_stages, stream)
    _kc_dev = _getdev()
    try:
        _kc_ent = _cache.get((({', '.join(key_parts)},), num_warps, num_stages, _kc_dev))
    except TypeError:
        _kc_ent = None
    if _kc_ent is None:
        return _slow(GRID, {values}, kw, num_warps, num_stages, stream)
"""
    sig = ', '.join(sig_parts + opt_parts)
    src = f"""
def fast(grid, {sig}, stream=None, **kw):
{head.replace("GRID", "grid")}    if type(grid) is tuple:
        _kc_g = grid
    else:
        _kc_g = grid({{{meta}, 'num_warps': num_warps, 'num_stages': num_stages}})
        if type(_kc_g) is not tuple:
            _kc_g = (_kc_g,) if type(_kc_g) is int else ()
    _kc_n = len(_kc_g)
    if _kc_n == 3:
        _kc_g0, _kc_g1, _kc_g2 = _kc_g
    elif 0 < _kc_n < 3:
        _kc_g0, _kc_g1, _kc_g2 = _kc_g[0], _kc_g[1] if _kc_n > 1 else 1, 1
    else:
        _kc_g0 = None
    if not (type(_kc_g0) is int and 0 < _kc_g0 < 2147483648 and type(_kc_g1) is int and 0 < _kc_g1 < 65536
            and type(_kc_g2) is int and 0 < _kc_g2 < 65536):
        # empty, malformed or too large: the general path launches nothing or says what is wrong
        return _slow(grid, {values}, kw, num_warps, num_stages, stream)
{tail}

def fast3(_kc_g0, _kc_g1, _kc_g2, {sig}, stream=None, **kw):
{head.replace("GRID", "(_kc_g0, _kc_g1, _kc_g2)")}{tail}"""
    # what JITFunction.warmup memoises on: the launch key of these arguments, computed as the launch computes it
    # (constexprs with their type: a warmup with BLOCK=True is not one with BLOCK=1); None: the general key
    # one flat tuple (a constexpr as its type and value, at fixed places): hashing a nested key costs ~0.1 us a level.
    # With the knobs that can change warmup's result (KERNELC_OVERRIDE, KERNELC_INTERPRET, raw) and the device
    warm_parts = [f"type({n}), {n}" if n in fn.constexpr_names else f"_k_{n}" for n in names]
    src += f"""

def warm_key({', '.join(sig_parts + opt_parts)}, stream=None, **kw):
    if kw{" or num_ctas != 1" if "num_ctas" not in names else ""}:
        return None
    try:
{chr(10).join("    " + ln for blk in pre for ln in blk.splitlines())}
    except TypeError:
        return None
    return ({', '.join(warm_parts)}, num_warps, num_stages, _warm_env(), _device())
"""
    from .launcher import get_state
    from .device import current_device, warmup_knobs
    import torch
    st = get_state(fn)
    ns = dict(defaults)
    ns.update(_warm_env=warmup_knobs, _device=current_device, _getattr=getattr, _ints=_INT_PARTS, _int_part=_int_part, _spec=spec_part, _desc=descriptor_part, _TD=TensorDescriptor, _Tensor=torch.Tensor, _cache=st["cache"], _hooks_enter=hooks._enter_hooks, _hooks_exit=hooks._exit_hooks,
              _getdev=getattr(torch._C, "_cuda_getDevice", lambda: 0),
              _getstream=getattr(torch._C, "_cuda_getCurrentRawStream", lambda d: 0),
              _stream_handle=lambda s: int(getattr(s, "cuda_stream", s)), _slow=_make_slow(fn),
              _Record=hooks.LaunchRecord, _new=object.__new__, _name=fn.__name__, _fn=fn, _metadata_fn=fn.launch_metadata,
              _cmask=[n in fn.constexpr_names for n in names])
    exec(compile(src, f"<kernelc launcher {fn.__name__}>", "exec"), ns)
    ns["fast"].warm_key = ns["warm_key"]
    ns["fast"].fast3 = ns["fast3"]
    return ns["fast"]


def _make_slow(fn):
    params = set(fn.arg_names)

    def slow(grid, values, kw, num_warps, num_stages, stream):
        kwargs = dict(kw)
        if "num_warps" not in params:  # else it is already among ``values``
            kwargs["num_warps"] = num_warps
        if "num_stages" not in params:
            kwargs["num_stages"] = num_stages
        if stream is not None:
            kwargs["stream"] = stream
        return fn.run(*values, grid=grid, **kwargs)
    return slow


_STREAMS: Dict[int, Any] = {}


def _stream_obj(raw: int):
    """cuda-python CUstream for a raw stream handle, built once (saves converting an int per launch)."""
    from .driver import _drv
    obj = _STREAMS.get(raw)
    if obj is None:
        obj = _drv().CUstream(raw)
        if len(_STREAMS) < 1024:
            _STREAMS[raw] = obj
    return obj


# argument-buffer kind -> struct format character (standard sizes; fields placed at ctypes' offsets)
_STRUCT_CODE = {"ptr": "Q", "i1": "b", "i8": "b", "i16": "h", "i32": "i", "i64": "q", "u8": "B", "u16": "H",
                "u32": "I", "u64": "Q", "fp32": "f", "fp64": "d", "tmap": "128s"}


def _packer(buf):
    """``struct.Struct(...).pack_into`` laid out as ``buf``'s ctypes struct, or None (a kind it cannot pack, e.g. a
    16-bit float)."""
    kinds = getattr(buf, "kinds", None)
    if kinds is None or any(k not in _STRUCT_CODE for k in kinds):
        return None
    fmt, pos = "<", 0
    for i, k in enumerate(kinds):
        off = getattr(buf.struct_t, f"a{i}").offset
        if off > pos:
            fmt += f"{off - pos}x"
        fmt += _STRUCT_CODE[k]
        pos = off + struct.calcsize("<" + _STRUCT_CODE[k])
    if struct.calcsize(fmt) > ctypes.sizeof(buf.struct_t):
        return None
    return struct.Struct(fmt).pack_into


def make_launch(ent, fn, cmask: List[bool]):
    """Generate ``launch(g0, g1, g2, stream, <runtime values>)`` for one compiled specialisation:
    tensors arrive as data pointers already; the values go into the reusable argument struct."""
    from .driver import _drv, _libcuda, check, context_made_current
    n = sum(1 for c in cmask if not c)
    args = [f"v{i}" for i in range(n)]
    exprs = [f"v{i}" for i in range(n)]
    if any(isinstance(k, tuple) for k in ent.kinds):
        # tensor descriptors: one struct field per machine parameter of the compiled kernel
        from ..compiler.abi import machine_params, pack_expressions
        runtime_names = [name for name, c in zip(fn.arg_names, cmask) if not c]
        machine = [m for m, _, _ in machine_params(ent.compiled.signature, ent.compiled.target.arch)]
        exprs = pack_expressions(runtime_names, machine)
    scratch = getattr(ent.compiled, "global_scratch_bytes", 0)
    if scratch:  # the hidden last parameter: global scratch for every program (runtime/scratch.py)
        exprs.append(f"_kc_scratch(g0 * g1 * g2 * {scratch}, stream, {ent.device})")
    lines = [f"    s.a{j} = {x}" for j, x in enumerate(exprs)]
    packer = _packer(ent.buffer)
    if packer is not None and exprs:
        # one struct.pack_into writes every field (a descriptor kernel has ~25: one ctypes field write each
        # cost 3x more); a value the format rejects (out of its range) falls back to ctypes' field writes
        packed = ", ".join(x.replace("_kc_tensor_map(", "_kc_tensor_map_bytes(") for x in exprs)
        lines = [f"    try:\n        _pack(s, 0, {packed})\n    except _StructError:"] + ["    " + ln for ln in lines]
    # cuda-python's cuLaunchKernel with a prebuilt parameter array measured faster than a ctypes call
    # into libcuda (docs/performance.md, "Launches"); KERNELC_LAUNCH_IMPL=ctypes keeps the other.
    from .. import options
    impl = options.get("KERNELC_LAUNCH_IMPL")
    if impl == "cuda-python":
        call = "    err = _cu(func, g0, g1, g2, threads, 1, 1, shared, _streams.get(stream) or _stream_obj(stream), ptrs, 0)[0]"
    else:
        call = "    err = _cu(handle, g0, g1, g2, threads, 1, 1, shared, stream, ptrs, None)"
    src = f"""
def launch(g0, g1, g2, stream{''.join(', ' + a for a in args)}):
{chr(10).join(lines) if lines else '    pass'}
{call}
    if err and _context_made_current(err):
    {call}
    if err:
        _fail(err)
"""
    f = ent.function

    def fail(err):
        check(_drv().CUresult(int(err)), "cuLaunchKernel", f.name)

    ns = {"s": ent.buffer.struct, "handle": f.handle, "func": f.function, "threads": f.threads, "shared": f.shared,
          "ptrs": ent.buffer.ptrs_addr, "_fail": fail, "_streams": _STREAMS, "_stream_obj": _stream_obj,
          "_context_made_current": lambda err: context_made_current(err, ent.device),
          "_cu": _drv().cuLaunchKernel if impl == "cuda-python" else _libcuda()}
    from .tensor_map import descriptor_tensor_map, descriptor_tensor_map_bytes
    ns["_kc_tensor_map"] = descriptor_tensor_map  # d.tensormap fields (abi.py): the cached encoded CUtensorMap
    ns["_kc_tensor_map_bytes"] = descriptor_tensor_map_bytes
    ns["_pack"], ns["_StructError"] = packer, struct.error
    from .scratch import scratch_pointer
    from .driver import TensorMapBuffer
    ns["_kc_scratch"], ns["_TMB"] = scratch_pointer, TensorMapBuffer
    mnames = None
    if any(isinstance(k, tuple) for k in ent.kinds) and packer is not None:
        # ``launch.machine(g0, g1, g2, stream, <machine values>)``: the same launch taking every machine parameter
        # as its value (a tensormap field as its 128 bytes), for a caller that computes the fields itself -- a
        # prepared launch whose descriptors differ between calls only in their base (runtime/prepared.py)
        mvals = [f"m{j}" for j in range(len(exprs) - (1 if scratch else 0))]
        tmaps = {j for j, k in enumerate(ent.buffer.kinds) if k == "tmap"}
        mexprs = mvals + exprs[len(mvals):]
        mlines = [f"        s.a{j} = {'_TMB.from_buffer_copy(' + x + ')' if j in tmaps else x}"
                  for j, x in enumerate(mexprs)]
        src += f"""

def machine(g0, g1, g2, stream{''.join(', ' + a for a in mvals)}):
    try:
        _pack(s, 0, {', '.join(mexprs)})
    except _StructError:
{chr(10).join(mlines)}
{call}
    if err and _context_made_current(err):
    {call}
    if err:
        _fail(err)
"""
        mnames = machine
    exec(compile(src, f"<kernelc launch {fn.__name__}>", "exec"), ns)
    launch = ns["launch"]
    if mnames is not None:
        launch.machine = ns["machine"]
        launch.machine.names = mnames  # the machine parameters' names, in order (compiler/abi.py)
    # the generated fast path passes every declared runtime argument; a specialisation that made some of them
    # constexpr (None arguments) takes fewer, so `launch.fast` drops those (Liger's cross-entropy passes Nones)
    cx = getattr(fn, "constexpr_names", ())
    keep = [i for i, (name, c) in enumerate(zip(fn.arg_names, cmask)) if name not in cx and not c]
    declared = sum(1 for name in fn.arg_names if name not in cx)
    if len(keep) == declared:
        launch.fast = launch
    else:
        pos = {i: j for j, i in enumerate(i for i, name in enumerate(fn.arg_names) if name not in cx)}
        ws = [f"w{j}" for j in range(declared)]
        wsrc = (f"def fast(g0, g1, g2, stream, {', '.join(ws)}):\n"
                f"    return launch(g0, g1, g2, stream{''.join(', w' + str(pos[i]) for i in keep)})\n")
        wns = {"launch": launch}
        exec(compile(wsrc, f"<kernelc launch {fn.__name__} (fast path)>", "exec"), wns)
        launch.fast = wns["fast"]
        if mnames is not None:
            launch.fast.machine = launch.machine
    return launch
