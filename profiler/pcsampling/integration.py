"""The seam between a kprof session and PC sampling: ``attach(session)`` and ``finish(session, root)``.

The session protocol (duck-typed; everything but ``mode`` is optional):

``session.mode``
    the mode string, ``"pcsampling"`` or
    ``"pcsampling:period=N[:drain=K][:hw_mb=M][:scratch_mb=M][:collection=serialized|continuous][:keep=1]"``.
``session.mode_options`` (or ``session.options``)
    a dict of those options (parsed from ``mode`` with :func:`parse_mode` when absent).
``session.device``
    the CUDA device index (default: torch's current device).
``session.add_launch_callback(fn)``
    if the session's CUPTI callback sees every launch (torch, cuBLAS, kernelc), it calls
    ``fn(correlation_id=..., name=...)`` (any arguments are accepted) after each launch; the sampler
    drains CUPTI there.  Without it, CUPTI is drained after kernelc launches (kernelc's launch hook)
    and at ``finish``.
``session.kernels``
    ``{correlation_id: (kernel ProfileNode, LaunchRecord or None)}`` for the launches the session
    recorded (also read as ``session.kernel_nodes``), or ``session.kernel_paths``:
    ``{correlation_id: (frame-name path from below the root to the kernel frame, LaunchRecord or
    None)}`` when the nodes only exist once the tree is built.  Samples of a launch go under its
    node.  Samples whose launch is not there are matched by kernel name to the tree's kernel frames
    (``kprof.kernel`` or the frame name; among several, those with the sampled kernel's kernelc
    cache key); a name that still matches no frame, or several, gets its own frame under the root
    (``extra["pcsampling"]["unmatched"] = True``).

``attach`` starts a :class:`~.sampler.PCSampler` (failing soft: one stderr line, the session runs
without samples) and returns it; ``finish`` stops it, releases CUPTI and writes the samples into
``root`` (line children, ``extra["instructions"]``, ``extra["source"]``; a summary in
``root.extra["pcsampling"]``).  Kernel timing is untouched: the session's CUPTI activity records
time the kernels in the same pass.
"""

from __future__ import annotations

from typing import Any

from .attribution import KernelCode, PCCounts, annotate, attribute
from .sampler import PCSampler, _say, demangle

__all__ = ["attach", "finish", "parse_mode", "sampler_of"]

_INT_OPTIONS = ("period", "drain", "drain_every", "hw_mb", "scratch_mb", "capacity", "keep")
KEEP_DEFAULT = False  # see PCSampler's keep_enabled
_samplers: dict[int, tuple[Any, PCSampler]] = {}


def parse_mode(mode: str | None) -> tuple[str, dict[str, Any]]:
    """``"pcsampling:period=12"`` -> ``("pcsampling", {"period": 12})``; options are separated by
    ``:`` or ``,``; integers are converted, a bare ``key`` is ``True``.  Raises ValueError for a
    malformed option."""
    if not mode:
        return "", {}
    name, _, rest = str(mode).partition(":")
    parts = rest.replace(",", ":").split(":")
    opts: dict[str, Any] = {}
    for part in parts:
        if not part:
            continue
        key, eq, value = part.partition("=")
        key = key.strip().lower()
        if not eq:
            opts[key] = True
            continue
        value = value.strip()
        if key in _INT_OPTIONS:
            try:
                opts[key] = int(value)
            except ValueError:
                raise ValueError(f"{name}: option {key} must be an integer, got {value!r}") from None
        else:
            opts[key] = value
    return name.strip().lower(), opts


def sampler_of(session: Any) -> PCSampler | None:
    entry = _samplers.get(id(session))
    return entry[1] if entry is not None and entry[0] is session else None


def attach(session: Any) -> PCSampler:
    """Start PC sampling for ``session`` (see the module docstring); never raises for a missing GPU,
    permissions or a busy CUPTI."""
    opts = getattr(session, "mode_options", None)
    if not isinstance(opts, dict):
        opts = getattr(session, "options", None)
    if not isinstance(opts, dict):
        opts = parse_mode(getattr(session, "mode", "") or "")[1]
    forward = getattr(session, "add_launch_callback", None)
    try:
        sampler = PCSampler(period=opts.get("period"), device=getattr(session, "device", None),
                            drain_every=int(opts.get("drain", opts.get("drain_every", 1))),
                            scratch_mb=int(opts.get("scratch_mb", 64)), hw_mb=int(opts.get("hw_mb", 128)),
                            capacity=int(opts.get("capacity", 16384)),
                            # ``keep``: leave the context enabled (stopped) at the end so later samplers
                            # still learn modules loaded after this session (see sampler.py)
                            keep_enabled=bool(opts.get("keep", KEEP_DEFAULT)),
                            collection=str(opts.get("collection", "serialized")))
    except (TypeError, ValueError) as e:  # e.g. period=3: say so once, run without samples
        sampler = PCSampler(quiet=True, hook_kernelc=False)
        sampler.error = str(e)
        _say(f"{e}; continuing without instruction samples")
        _samplers[id(session)] = (session, sampler)
        return sampler
    _samplers[id(session)] = (session, sampler)
    if isinstance(getattr(session, "extra", None), dict):
        session.extra["pcsampler"] = sampler
    if sampler.start() and callable(forward):
        try:
            forward(sampler.on_launch)
            sampler.drain_on_kernelc = False  # the session's callback already sees kernelc launches
        except Exception:
            sampler.drain_on_kernelc = True
    return sampler


def _session_kernels(session: Any, root: Any) -> dict[int, tuple]:
    for name in ("kernels", "kernel_nodes"):
        k = getattr(session, name, None)
        if isinstance(k, dict) and k:
            return k
    paths = getattr(session, "kernel_paths", None)
    out: dict[int, tuple] = {}
    if isinstance(paths, dict):
        for cid, entry in paths.items():
            path, rec = (entry[0], entry[1] if len(entry) > 1 else None) if isinstance(entry, tuple) else (entry, None)
            node = _find_path(root, path)
            if node is not None:
                out[int(cid)] = (node, rec)
    return out


def _find_path(root: Any, path: Any) -> Any:
    node = root
    for name in path or ():
        node = next((c for c in node.children if c.name == name), None)
        if node is None:
            return None
    return node if node is not root else None


def _kernel_index(root: Any) -> dict[str, list[Any]]:
    index: dict[str, list[Any]] = {}
    for node, depth in root.walk():
        if depth == 0 or node.frame_type == "line":
            continue
        names = set()
        if node.extra and isinstance(node.extra.get("kernel"), str):
            names.add(node.extra["kernel"])
        if node.extra and node.extra.get("kind") == "kernel" or "device_id" in node.metrics:
            names.add(node.name)
            names.add(node.name.split(" [", 1)[0])
        for n in names:
            index.setdefault(n, []).append(node)
    return index


def finish(session: Any, root: Any) -> dict[str, Any]:
    """Stop sampling and write the samples into ``root``; returns a summary
    (``{"samples", "kernels", "unmatched_launches", ...}``, empty when sampling never ran)."""
    entry = _samplers.pop(id(session), None)
    if entry is None:
        return {}
    sampler = entry[1]
    if not sampler.ran:
        sampler.close()
        return {"error": sampler.error} if sampler.error else {}
    sampler.close()
    return annotate_tree(sampler, root, _session_kernels(session, root))


def annotate_tree(sampler: PCSampler, root: Any, kernels: dict[int, tuple]) -> dict[str, Any]:
    """Put ``sampler``'s samples under the kernel frames of ``root`` (see :func:`finish`)."""
    info = sampler.info()
    per_node: dict[int, list[Any]] = {}   # id(node) -> [node, PCCounts, KernelCode or None]
    unmatched: list[PCCounts] = []
    for key, counts in sampler.table.by_launch().items():
        entry = kernels.get(key) if key > 0 else None
        if not entry:
            unmatched.append(counts)
            continue
        node = entry[0] if isinstance(entry, (tuple, list)) else entry
        rec = entry[1] if isinstance(entry, (tuple, list)) and len(entry) > 1 else None
        _add(per_node, node, counts, sampler, rec)
    index = _kernel_index(root) if unmatched else {}
    n_unmatched = 0
    for counts in unmatched:
        nodes = index.get(counts.function) or index.get(demangle(counts.function)) or []
        if len(nodes) > 1:
            code = sampler.code_for(counts.function, counts.cubin_crc)
            key = getattr(code, "cache_key", None)
            keyed = [n for n in nodes if key and (n.extra or {}).get("cache_key") == key]
            nodes = keyed or nodes
        if len(nodes) == 1:
            node = nodes[0]
        else:
            n_unmatched += max(1, len(counts.correlation_ids))
            node = root.child(demangle(counts.function))
            node.extra = dict(node.extra or {})
            node.extra.setdefault("kind", "kernel")
            node.extra.setdefault("kernel", counts.function)
            ps = dict(node.extra.get("pcsampling") or {})
            ps["unmatched"] = True
            node.extra["pcsampling"] = ps
        _add(per_node, node, counts, sampler, None)
    total = 0
    for node, counts, code in per_node.values():
        a = attribute(counts, code)
        total += a.total
        annotate(node, a, code, info)
    summary = dict(info)
    summary.update({"samples": total, "kernels": len(per_node), "unmatched_launches": n_unmatched})
    root.extra = dict(root.extra or {})
    root.extra["pcsampling"] = summary
    return summary


def _add(per_node: dict[int, list[Any]], node: Any, counts: PCCounts, sampler: PCSampler, rec: Any) -> None:
    slot = per_node.get(id(node))
    if slot is None:
        code = _code(sampler, node, counts, rec)
        per_node[id(node)] = [node, counts.copy(), code]
    else:
        slot[1].merge(counts)
        if slot[2] is None:
            slot[2] = _code(sampler, node, counts, rec)


def _code(sampler: PCSampler, node: Any, counts: PCCounts, rec: Any) -> KernelCode | None:
    compiled = getattr(rec, "compiled", None) if rec is not None else None
    jit = getattr(rec, "function", None) if rec is not None else None
    if compiled is not None:
        if getattr(compiled, "name", counts.function) != counts.function:
            compiled = None  # the record belongs to another function (e.g. a helper kernel)
        else:
            sampler.note_kernel(compiled, jit)
    cache_key = (node.extra or {}).get("cache_key") if getattr(node, "extra", None) else None
    return sampler.code_for(counts.function, counts.cubin_crc, compiled=compiled, jit=jit, cache_key=cache_key)
