"""Prepared launches: one kernel launch whose grid, options and every argument but its tensors are fixed.

``fn.prepare(grid, *args, **options)`` binds ``args`` once and returns ``launch(*tensors, stream=None)``, which takes
the tensor (and ``TensorDescriptor``) arguments in the kernel's order and launches with the rest as given to
``prepare``. A wrapper that launches one shape many times (the attention forwards' launch plans) keeps one: a call
then checks each tensor's part of the specialisation key (dtype, 16-byte alignment, CUDA) against the one it was
specialised for, looks its compiled entry up by a key built once, and calls the entry's generated launch with the
constants in place -- instead of the binder's type test and key part for every one of ~35 parameters.

Anything else (a tensor that changes the key, no compiled entry yet, an in-memory cache that lost it, another
device, hooks registered, options the fast path does not take) goes through ``fn[grid](...)``, the general launch,
which compiles and checks as always; the first call specialises the prepared launch to its entry. No tensor is kept:
the general path gets the call's own tensors back in their places.

A descriptor argument's slot also takes a plain tensor: the descriptor given to ``prepare`` rebased onto it (its
shape, strides, block and padding, the call's tensor as the base). A call then checks that tensor as a pointer
argument is checked (dtype, alignment, CUDA) instead of building a ``TensorDescriptor`` and its key part: a forward
that passes five descriptors a call saves ~1 us of host time on each (the attention forward's ``DESC`` plans).
"""
from __future__ import annotations

from typing import Any, Callable, Dict, List

from . import hooks

_FAST_OPTIONS = ("num_warps", "num_stages")


def prepare(fn, grid, args, options: Dict[str, Any]) -> Callable:
    """``launch(*tensors, stream=None)`` for ``fn[grid](*args, **options)`` with the tensor arguments of ``args``
    replaced by the call's (see the module doc)."""
    import torch
    from ..tools.tensor_descriptor import TensorDescriptor
    values, launch_opts = fn.bind(list(args), dict(options))
    names = fn.arg_names
    # the varying arguments: tensors and descriptors that are kernel arguments (not constexprs), in the kernel's order
    vary = [i for i, n in enumerate(names)
            if n not in fn.constexpr_names and isinstance(values[n], (torch.Tensor, TensorDescriptor))]
    template = [values[n] for n in names]
    for i in vary:
        template[i] = None  # no tensor kept: each call puts its own back
    # launch options only (keyword kernel arguments are in ``template``; an option that is also a parameter, such as
    # a kernel's own num_stages, is passed as the parameter)
    opts = {k: v for k, v in launch_opts.items() if k not in names}
    # a tuple grid within the launch limits the binder checks (x < 2^31, y and z < 2^16); else the general path always
    g3 = tuple(grid) + (1,) * (3 - len(grid)) if type(grid) is tuple and 0 < len(grid) <= 3 and all(
        type(x) is int and 0 < x < (2147483648 if i == 0 else 65536) for i, x in enumerate(grid)) else None
    fastable = g3 is not None and set(opts) <= set(_FAST_OPTIONS)
    state: List[Any] = [None]   # the compiled entry the fast body launches (None: the general path only)
    ns: Dict[str, Any] = {}

    # a descriptor slot given a tensor: the prepared descriptor rebased onto it (the module doc)
    rebase = {i: _rebaser(values[names[i]]) for i in vary if isinstance(values[names[i]], TensorDescriptor)}
    Tensor = torch.Tensor

    def general(*ts, stream=None):
        vals = list(template)
        for i, t in zip(vary, ts):
            vals[i] = rebase[i](t) if i in rebase and isinstance(t, Tensor) else t
        out = fn[grid](*vals, **(opts if stream is None else dict(opts, stream=stream)))
        if fastable:
            _specialise(fn, vals, vary, launch_opts, state, ns)
        return out

    ns.update({f"_R{j}": rebase[i] for j, i in enumerate(vary) if i in rebase})
    ns.update(_general=general, _S=state, _SM=[None], _MISS=_MISS, _hooks_enter=hooks._enter_hooks, _hooks_exit=hooks._exit_hooks,
              _Tensor=Tensor,
              _getdev=getattr(torch._C, "_cuda_getDevice", lambda: 0),
              _getstream=getattr(torch._C, "_cuda_getCurrentRawStream", lambda d: 0),
              _stream_handle=lambda s: int(getattr(s, "cuda_stream", s)))
    if rebase and fastable:  # what _specialise's machine-value launch is generated from
        ns.update(_template=template, _g3=g3, _values=values)
    src = _source(fn, template, vary, g3 if fastable else None, values, ns)
    exec(compile(src, f"<kernelc prepared launch {fn.__name__}>", "exec"), ns)
    return ns["launch"]


def _rebaser(desc) -> Callable:
    """``rebase(tensor)``: ``desc`` with ``tensor`` as its base. Made once per slot: a subclass whose class attributes
    are ``desc``'s own but the base, so a call sets one attribute of a new object and runs no checks (``prepare``'s
    caller vouches for the tensor's shape; the launch checks its dtype, alignment and device)."""
    attrs = {k: v for k, v in vars(desc).items() if k != "base"}
    cls = type("Rebased" + type(desc).__name__, (type(desc),), attrs)
    new = object.__new__

    def rebase(t):
        d = new(cls)
        d.base = t
        return d
    return rebase


def _literal(v, i, ns) -> str:
    """``v`` as source: ints, bools, None and finite floats as literals (exact), anything else as a global."""
    if v is None or type(v) in (bool, int) or (type(v) is float and v == v and abs(v) != float("inf")):
        return repr(v)
    ns[f"_C{i}"] = v
    return f"_C{i}"


def _source(fn, template, vary, g3, values, ns) -> str:
    """The generated ``launch``. With a specialised entry (``_S[0]``): per varying argument its data pointer and the
    check of its key part against the entry's (``_D``/``_A``/``_U``: dtype, alignment, CUDA; ``_K``: a descriptor's
    part), then the entry's launch with every runtime value in the kernel's order, constants as literals."""
    from ..tools.tensor_descriptor import TensorDescriptor
    params = [f"t{j}" for j in range(len(vary))]
    sig = ", ".join(params + ["stream=None"])
    back = f"    return _general({''.join(p + ', ' for p in params)}stream=stream)\n"
    if g3 is None:
        return f"def launch({sig}):\n{back}"
    names = fn.arg_names
    pre, checks, out = [], [], []
    pos = {i: j for j, i in enumerate(vary)}
    for i, n in enumerate(names):
        if n in fn.constexpr_names:
            continue
        if i in pos:
            j = pos[i]
            if isinstance(values[n], TensorDescriptor):
                # a tensor: the prepared descriptor rebased onto it, checked as a pointer argument (_B: the slot's
                # key part takes the base's alignment, not with do_not_specialize)
                pre.append(f"        if type(t{j}) is _Tensor:\n"
                           f"            p{j} = t{j}.data_ptr()\n"
                           f"            c{j} = t{j}.dtype is _D{j} and (_B{j} or (not p{j} & 15) is _A{j}) and "
                           f"t{j}.is_cuda is _U{j}\n"
                           f"            t{j} = _R{j}(t{j})\n"
                           f"        else:\n"
                           f"            c{j} = _desc(t{j}, _N{j}) == _K{j}")
                checks.append(f"c{j}")
                out.append(f"t{j}")
            else:
                pre.append(f"        p{j} = t{j}.data_ptr()")
                checks.append(f"t{j}.dtype is _D{j} and (not p{j} & 15) is _A{j} and t{j}.is_cuda is _U{j}")
                out.append(f"p{j}")
        else:
            out.append(_literal(template[i], i, ns))
    cond = " and ".join(checks + ["_getdev() == _dev", "_cache.get(_key) is _e"])
    # descriptor slots: the machine-value launch when _specialise could make one (_machine_source), else as below
    first = "" if not any(isinstance(values[names[i]], TensorDescriptor) for i in vary) else (
        f"    _m = _SM[0]\n    if _m is not None:\n        _r = _m({''.join(p + ', ' for p in params)}stream)\n"
        f"        if _r is not _MISS:\n            return _r\n")
    return f"""def launch({sig}):
{first}    _e = _S[0]
    if _e is not None and not (_hooks_enter or _hooks_exit):
{chr(10).join(pre)}
        if {cond}:
            _e.fast({g3[0]}, {g3[1]}, {g3[2]}, _getstream(_dev) if stream is None else _stream_handle(stream),
                    {', '.join(out)})
            return _e.compiled
{back}"""


_MISS = object()  # what the machine-value launch returns when the call is not its (the caller goes on)


def _machine_source(fn, ent, template, vary, g3, values, ns):
    """``_mfast(t0, ..., stream)`` for an entry whose launch takes machine values (``fastpath.make_launch``'s
    ``machine``) and a prepared launch with descriptor slots: each call passes tensors there (anything else returns
    ``_MISS``), so a descriptor's fields are the prepared descriptor's but its base -- shapes and strides as literals,
    the tensormap by the tensor's address from a per-slot cache (the map depends on the address alone once the dtype
    check passed) -- and no descriptor object is built, read or hashed per call. None when the entry has none."""
    from ..compiler.abi import field_of
    from ..tools.tensor_descriptor import TensorDescriptor
    from .tensor_map import descriptor_tensor_map_bytes, slot_cache
    mach = getattr(ent.fast, "machine", None)
    if mach is None or getattr(mach, "names", None) is None:
        return None
    names = fn.arg_names
    index = {n: i for i, n in enumerate(names)}
    pos = {i: j for j, i in enumerate(vary)}
    out = []
    for m in mach.names:
        f = field_of(m)
        if f is None:
            i = index[m]
            if i in pos:
                if isinstance(values[m], TensorDescriptor):
                    return None
                out.append(f"p{pos[i]}")
            else:
                out.append(_literal(template[i], i, ns))
            continue
        param, field = f
        i = index[param]
        if i not in pos or not isinstance(values[param], TensorDescriptor):
            return None
        j = pos[i]
        if field.role == "base":
            out.append(f"p{j}")
        elif field.role == "tensormap":
            cache = slot_cache()
            rebase = ns[f"_R{j}"]

            def miss(t, p, cache=cache, rebase=rebase):
                raw = cache[p] = descriptor_tensor_map_bytes(rebase(t))
                return raw
            ns[f"_TM{j}"], ns[f"_tmk{j}"] = cache, miss
            out.append(f"(_TM{j}.get(p{j}) or _tmk{j}(t{j}, p{j}))")
        else:
            out.append(repr(int(field.host_value(values[param]))))
    params = [f"t{j}" for j in range(len(vary))]
    pre, checks = [], []
    for j, i in enumerate(vary):
        if isinstance(values[names[i]], TensorDescriptor):
            pre.append(f"    if type(t{j}) is not _Tensor:\n        return _MISS")
            checks.append(f"t{j}.dtype is _D{j} and (_B{j} or (not p{j} & 15) is _A{j}) and t{j}.is_cuda is _U{j}")
        else:
            checks.append(f"t{j}.dtype is _D{j} and (not p{j} & 15) is _A{j} and t{j}.is_cuda is _U{j}")
        pre.append(f"    p{j} = t{j}.data_ptr()")
    ns["_mach"], ns["_me"] = mach, ent
    cond = " and ".join(checks + ["_getdev() == _dev", "_cache.get(_key) is _me"])
    return f"""def _mfast({', '.join(params)}, stream):
    if _S[0] is not _me or _hooks_enter or _hooks_exit:
        return _MISS
{chr(10).join(pre)}
    if not ({cond}):
        return _MISS
    _mach({g3[0]}, {g3[1]}, {g3[2]}, _getstream(_dev) if stream is None else _stream_handle(stream),
          {', '.join(out)})
    return _me.compiled
"""


def _specialise(fn, vals, vary, opts, state, ns) -> None:
    """Point the prepared launch at the compiled entry ``vals`` launched with: its key as the launcher builds it,
    and each varying argument's key part, for the generated checks."""
    import torch
    from ..tools.tensor_descriptor import TensorDescriptor
    from .fastpath import descriptor_part
    from .launcher import get_state
    state[0] = None
    if "_SM" in ns:
        ns["_SM"][0] = None
    if not fn._fast:  # the fast path is off for this kernel (interpreter, override, blocking launches)
        return
    st = get_state(fn)
    names = fn.arg_names
    cmask = fn.constexpr_mask(dict(zip(names, vals)))
    try:
        dev = getattr(torch._C, "_cuda_getDevice", lambda: 0)()
        key = (st["spec"].key(vals, cmask), opts.get("num_warps", 4), opts.get("num_stages", 3), dev)
        ent = st["cache"].get(key)
    except (TypeError, AttributeError, RuntimeError):  # an unhashable constexpr, no CUDA: the general path
        return
    if ent is None or not hasattr(ent, "fast") or any(cmask[i] for i in vary):
        return
    for j, i in enumerate(vary):
        v = vals[i]
        if isinstance(v, TensorDescriptor):
            spec = names[i] not in fn.do_not_specialize
            ns[f"_K{j}"], ns[f"_N{j}"] = descriptor_part(v, spec), spec
            b = v.base
            ns[f"_D{j}"], ns[f"_A{j}"] = getattr(b, "dtype", None), bool(spec and b.data_ptr() & 15 == 0)
            ns[f"_B{j}"], ns[f"_U{j}"] = not spec, bool(getattr(b, "is_cuda", False))
        else:
            ns[f"_D{j}"], ns[f"_A{j}"], ns[f"_U{j}"] = v.dtype, v.data_ptr() & 15 == 0, bool(v.is_cuda)
    ns.update(_desc=descriptor_part, _cache=st["cache"], _key=key, _dev=dev)
    state[0] = ent
    if "_SM" in ns and ns.get("_g3") is not None:
        src = _machine_source(fn, ent, ns["_template"], vary, ns["_g3"], ns["_values"], ns)
        if src is not None:
            exec(compile(src, f"<kernelc prepared machine launch {fn.__name__}>", "exec"), ns)
            ns["_SM"][0] = ns["_mfast"]
