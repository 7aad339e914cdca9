"""From a profile file to :class:`~analyzer.facts.KernelFacts`: hot kernels and their artifacts.

Kernel frames are grouped by kernel and compiled variant (the kernelc cache key, else the launch
options and constexprs), so the same kernel launched from several scopes is one entry and two
configs of one kernel are two entries; entries are ranked by GPU time.

What the analyzer reads from a kprof kernel frame's ``kprof`` dict (all optional):

``kind`` (``"kernel"``), ``kernel`` (name), ``cache_key``, ``signature``, ``constexprs``,
``num_warps``, ``num_stages``, ``target``, ``grid`` (else parsed from the frame name
``"name [grid 4x1x1, warps 4, ...]"``), ``source`` (``{"file", "first_line", "lines"}``),
``instructions`` (per-PC samples), ``n_regs`` / ``shared`` / ``n_spills`` (used when no artifacts are
found), and the launch's specialisation: ``divisibility`` + ``equal_to_1``, or ``args`` (a list of
``{"name", "kind", "value"}`` or a ``{name: value}`` dict of scalar arguments).

Artifacts: the kernelc disk cache entry named by ``cache_key`` (``KERNELC_CACHE_DIR``), else a copy of
it next to the profile (``PROFILE.kernels/<cache key>/``, written by ``--bundle-artifacts``).  Nothing is
executed implicitly: if the entry is gone, or if ``--arch`` asks for another target, the kernel is
recompiled from its source file only when the user asked for it (:class:`SourcePolicy`,
``--recompile-from-source``; the module is imported by path, the file named on stderr, and a file
outside the current working directory also needs ``--allow-import-outside``).  A module this process
has already imported is reused (no code runs).  Otherwise the kernel is analysed from the profile
alone and the report says what is missing and how to get it.
"""
from __future__ import annotations

import hashlib
import importlib.util
import os
import re
import sys
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Tuple

from profiler.format import COUNT_METRIC, DEVICE_ID, TIME_METRIC, ProfileNode, read_profile

from . import lines as L
from .facts import Device, KernelFacts, apply_compiled, base, positive_int, _literal
from .schema import clean_extra, finite

_NAME_INFO = re.compile(r"^(?P<name>.*?)\s*\[(?P<info>[^\[\]]*)\]\s*$")
_GRID = re.compile(r"grid\s+(\d+)(?:x(\d+))?(?:x(\d+))?")
_WARPS = re.compile(r"warps\s+(\d+)")
_STAGES = re.compile(r"stages\s+(\d+)")
_SMEM = re.compile(r"smem\s+(\d+)\s*(KiB|B)")


@dataclass
class KernelGroup:
    """All frames of one compiled kernel variant."""
    name: str
    frames: List[ProfileNode] = field(default_factory=list)
    extra: Dict[str, Any] = field(default_factory=dict)
    time_ns: float = 0.0
    count: int = 0
    grids: Dict[Tuple[int, int, int], float] = field(default_factory=dict)
    device_id: Optional[str] = None
    name_info: Dict[str, Any] = field(default_factory=dict)
    invalid: List[str] = field(default_factory=list)   # malformed kprof fields left out (analyzer.schema)

    @property
    def is_kernelc(self) -> bool:
        # the sampler marks every sampled kernel "kind": "kernel"; a library kernel (cuDNN, cuBLAS) has nothing
        # else, a kernelc kernel has the hook's launch record or the source the sampler knew it by
        return "cache_key" in self.extra or (self.extra.get("kind") == "kernel" and any(
            k in self.extra for k in ("signature", "backend", "source", "num_warps", "constexprs")))

    @property
    def sampled(self) -> bool:
        return any(L.is_sample_frame(c) for f in self.frames for c in f.children)


@dataclass
class OtherKernel:
    name: str
    time_ns: float
    count: int


def _num(v) -> float:
    return finite(v)   # NaN, inf, text and bools from a hand-edited profile count as 0


def parse_frame_name(name: str) -> Tuple[str, Dict[str, Any]]:
    """``"mm [grid 8x1x1, warps 4, stages 3, smem 96KiB]"`` -> ``("mm", {"grid": (8, 1, 1), ...})``."""
    m = _NAME_INFO.match(name)
    if not m:
        return name, {}
    info: Dict[str, Any] = {}
    text = m.group("info")
    g = _GRID.search(text)
    if g:
        info["grid"] = tuple(int(x) if x else 1 for x in g.groups())
    w = _WARPS.search(text)
    if w:
        info["num_warps"] = int(w.group(1))
    s = _STAGES.search(text)
    if s:
        info["num_stages"] = int(s.group(1))
    sm = _SMEM.search(text)
    if sm:
        info["shared"] = int(sm.group(1)) * (1024 if sm.group(2) == "KiB" else 1)
    return (m.group("name") if info else name), info


def _is_kernel_frame(node: ProfileNode) -> bool:
    if L.is_sample_frame(node):
        return False
    if node.extra and node.extra.get("kind") == "kernel":
        return True
    if DEVICE_ID in node.metrics and TIME_METRIC in node.metrics:
        return True
    return any(L.is_sample_frame(c) for c in node.children)


def kernel_groups(root: ProfileNode) -> Tuple[List[KernelGroup], List[OtherKernel], float]:
    """``(kernelc groups ranked by time, other kernels (torch, cuBLAS...), total GPU time in ns)``."""
    groups: Dict[tuple, KernelGroup] = {}
    others: Dict[str, OtherKernel] = {}
    total = 0.0
    for node, depth in root.walk():
        if depth == 0 or not _is_kernel_frame(node):
            continue
        t = _num(node.metrics.get(TIME_METRIC))
        c = int(_num(node.metrics.get(COUNT_METRIC)))
        total += t
        extra, invalid = clean_extra(node.extra)
        short, info = parse_frame_name(node.name)
        is_kc = extra.get("kind") == "kernel" or "cache_key" in extra
        sampled = any(L.is_sample_frame(ch) for ch in node.children)
        if not is_kc and not sampled:
            o = others.setdefault(node.name, OtherKernel(node.name, 0.0, 0))
            o.time_ns += t
            o.count += c
            continue
        kname = extra.get("kernel") if isinstance(extra.get("kernel"), str) else short
        if extra.get("cache_key"):
            key = (kname, "key", str(extra["cache_key"]))
        else:
            key = (kname, "cfg", extra.get("num_warps", info.get("num_warps")),
                   extra.get("num_stages", info.get("num_stages")), repr(sorted((extra.get("constexprs") or {}).items())))
        g = groups.get(key)
        if g is None:
            g = groups[key] = KernelGroup(kname)
        g.frames.append(node)
        g.invalid.extend(k for k in invalid if k not in g.invalid)
        g.time_ns += t
        g.count += c
        if extra and (not g.extra or len(extra) > len(g.extra)):
            g.extra = extra
        for k, v in info.items():
            g.name_info.setdefault(k, v)
        grid = extra.get("grid") if isinstance(extra.get("grid"), (list, tuple)) else info.get("grid")
        if grid:
            gt = tuple(positive_int(x, 2**31) or 1 for x in (tuple(grid) + (1, 1, 1))[:3])
            g.grids[gt] = g.grids.get(gt, 0.0) + t
        if g.device_id is None and node.metrics.get(DEVICE_ID) is not None:
            g.device_id = str(node.metrics.get(DEVICE_ID))
    ranked = sorted(groups.values(), key=lambda g: (-g.time_ns, g.name))
    return ranked, sorted(others.values(), key=lambda o: -o.time_ns), total


def device_for(device_info: Dict[str, Any], device_id: Optional[str], arch: Optional[str]) -> Device:
    """The :class:`Device` of a kernel: the profile's device_info entry for its device, with ``arch``
    (``--arch``) replacing the architecture (and then the SM count, if the architectures differ)."""
    entry = None
    # GPU entries only: a CPU-backend profile describes the interpreter ("arch": "interpreter")
    for dtype, devs in sorted((device_info or {}).items(), key=lambda kv: kv[0] != "CUDA"):
        if not isinstance(devs, dict):
            continue
        gpu = {k: v for k, v in devs.items() if isinstance(v, dict)
               and str(v.get("arch", "")).strip().lower().replace("sm_", "").rstrip("af").isdigit()}
        if device_id is not None and str(device_id) in gpu:
            entry = gpu[str(device_id)]
            break
        if entry is None and gpu:
            entry = next(iter(gpu.values()))
    from cubintools.target import ARCH_SPECIFIC_DEFAULT, parse_target
    prof_arch = None
    num_sms = clock = None
    mem = (None, None)
    if isinstance(entry, dict):
        try:
            a = int(str(entry.get("arch", "")).strip().lower().replace("sm_", "").rstrip("af") or 0)
            if a:
                prof_arch = parse_target(ARCH_SPECIFIC_DEFAULT.get(a, f"sm_{a}")).arch
        except (ValueError, TypeError):
            prof_arch = None
        num_sms, clock = entry.get("num_sms"), entry.get("clock_rate")   # checked by Device.for_arch
        # memory clock (kHz) and bus width (bits): used only when plausible (the roofline divides by them)
        mem = (positive_int(entry.get("memory_clock_rate"), 100_000_000), positive_int(entry.get("bus_width"), 65_536))
    if arch:
        want = parse_target(arch).arch
        if prof_arch and parse_target(prof_arch).sm != parse_target(want).sm:
            return Device.for_arch(want)          # the profile's SM count is for another GPU
        return _with_memory(Device.for_arch(want, num_sms, clock, "profile" if num_sms else "assumed"), mem)
    if prof_arch:
        return _with_memory(Device.for_arch(prof_arch, num_sms, clock, "profile" if num_sms else "assumed"), mem)
    return Device.for_arch("sm_90a")


def _with_memory(dev: Device, mem) -> Device:
    dev.memory_clock_khz, dev.bus_width_bits = mem
    return dev


# -------------------------------------------------------------------------------------------------
# artifacts


def bundle_dir(profile_path: str) -> str:
    """Where a profile's kernel artifacts travel with it: ``PROFILE.kernels/<cache key>/``."""
    return str(profile_path) + ".kernels"


def _cache_entry(key: str, profile_path: Optional[str] = None) -> Optional[str]:
    from kernelc.runtime.cache import entry_path
    key = str(key)
    if len(key) < 3 or not key.isalnum():
        return None
    found = entry_path(key)
    if found is None and profile_path:
        bundled = os.path.join(bundle_dir(profile_path), key)
        if os.path.isfile(os.path.join(bundled, "meta.json")):
            found = bundled
    return found


def load_cached(key: str, profile_path: Optional[str] = None, notes: Optional[List[str]] = None):
    """The :class:`CompiledKernel` of a kernel's cache entry (the disk cache, else the bundle next to
    the profile), or None (missing, or corrupt: then why is added to ``notes``)."""
    path = _cache_entry(key, profile_path)
    if path is None:
        return None
    from kernelc.runtime.cache import load_entry_dir
    try:
        return load_entry_dir(path)
    except Exception as e:
        if notes is not None:
            notes.append(f"cache entry {path} is unusable ({str(e).splitlines()[0] if str(e) else type(e).__name__})")
        return None


def bundle_artifacts(profile_path: str, keys) -> List[str]:
    """Copy the cache entries of ``keys`` next to the profile (``PROFILE.kernels/``) so that the
    analyzer finds them on another machine; returns the keys copied (valid entries only)."""
    import shutil
    from kernelc.runtime.cache import load_entry_dir
    done = []
    for key in sorted({str(k) for k in keys if k}):
        src = _cache_entry(key)
        if src is None:
            continue
        try:
            load_entry_dir(src)
        except Exception:
            continue
        dst = os.path.join(bundle_dir(profile_path), key)
        if not os.path.isdir(dst):
            tmp = dst + f".tmp{os.getpid()}"
            shutil.copytree(src, tmp)
            os.replace(tmp, dst)
        done.append(key)
    return done


_MODULES: Dict[str, Any] = {}


@dataclass(frozen=True)
class SourcePolicy:
    """Whether the analyzer may import a kernel's source file (running its top level) to recompile it.

    ``recompile_from_source``: the user asked for it (``--recompile-from-source``);
    ``allow_import_outside``: files outside ``cwd`` (default: the current working directory) too."""
    recompile_from_source: bool = False
    allow_import_outside: bool = False
    cwd: Optional[str] = None

    def refusal(self, path: str) -> Optional[str]:
        """Why ``path`` may not be imported, or None."""
        if not self.recompile_from_source:
            return (f"recompiling needs its source file {path} imported (its top level runs): pass "
                    "--recompile-from-source (API: source_policy=SourcePolicy(recompile_from_source=True))")
        root = os.path.realpath(self.cwd or os.getcwd())
        real = os.path.realpath(path)
        if not self.allow_import_outside and os.path.commonpath([root, real]) != root:
            return (f"its source file {path} is outside the working directory {root}: pass "
                    "--allow-import-outside to import it")
        return None


NO_IMPORT = SourcePolicy()


def _already_imported(path: str):
    for mod in list(sys.modules.values()):
        f = getattr(mod, "__file__", None)
        if f and not f.endswith(".pyc"):
            try:
                if os.path.abspath(f) == path or os.path.samefile(f, path):
                    return mod
            except OSError:
                continue
    return _MODULES.get(path)


def import_module_from(path: str, policy: SourcePolicy = NO_IMPORT):
    """The module of a Python file: one this process already imported, else imported by path when
    ``policy`` allows it (raises PermissionError naming the file and the flag otherwise)."""
    path = os.path.abspath(path)
    mod = _already_imported(path)
    if mod is not None:
        return mod
    why = policy.refusal(path)
    if why is not None:
        raise PermissionError(why)
    print(f"kprof-analyze: importing {path} to recompile its kernels", file=sys.stderr)
    name = "_kprof_analyze_" + hashlib.sha1(path.encode()).hexdigest()[:12]
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot import {path}")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    d = os.path.dirname(path)
    added = d not in sys.path
    if added:
        sys.path.insert(0, d)
    try:
        spec.loader.exec_module(mod)
    except BaseException:
        sys.modules.pop(name, None)
        raise
    finally:
        if added and d in sys.path:
            sys.path.remove(d)
    _MODULES[path] = mod
    return mod


def find_function(module, name: str):
    """The ``@jit`` function called ``name`` in ``module`` (through autotune/heuristics wrappers)."""
    from kernelc.language.core import DeviceFunction

    def unwrap(obj):
        seen = 0
        while obj is not None and not isinstance(obj, DeviceFunction) and seen < 8:
            obj = getattr(obj, "fn", None)
            seen += 1
        return obj if isinstance(obj, DeviceFunction) else None

    cand = unwrap(getattr(module, name, None))
    if cand is not None and cand.__name__ == name:
        return cand
    for v in list(vars(module).values()):
        f = unwrap(v)
        if f is not None and f.__name__ == name:
            return f
    return cand


def kernel_source_file(facts: KernelFacts, extra: Optional[dict] = None) -> Optional[str]:
    src = (extra or {}).get("source") or facts.source or {}
    if isinstance(src, dict) and src.get("file") and os.path.isfile(src["file"]):
        return src["file"]
    pat = re.compile(rf"^\s*def\s+{re.escape(facts.name)}\s*\(", re.M)
    for path in sorted(set(facts._files.values())):
        try:
            if os.path.isfile(path) and pat.search(open(path, encoding="utf-8", errors="replace").read()):
                return path
        except OSError:
            continue
    return None


def kernel_function(facts: KernelFacts, extra: Optional[dict] = None):
    """The kernel's ``@jit`` function from its source file, or None (sets ``facts.function``); the file
    is imported only as ``facts.source_policy`` allows (a refusal is noted once in ``facts.notes``)."""
    if facts.function is not None:
        return facts.function
    path = kernel_source_file(facts, extra)
    if path is None:
        return None
    try:
        mod = import_module_from(path, facts.source_policy or NO_IMPORT)
        facts.function = find_function(mod, facts.name)
    except PermissionError as e:
        facts.import_refusal = str(e)
        return None
    except Exception as e:  # the user's module may fail to import here (missing deps, side effects)
        facts.notes.append(f"could not import {path} to recompile {facts.name}: {type(e).__name__}: {e}")
        return None
    return facts.function


def specialization(facts: KernelFacts, extra: dict) -> Tuple[Dict[str, int], Tuple[str, ...], bool]:
    """``(divisibility, equal_to_1, known)`` of the profiled launch."""
    spec = extra.get("specialization") if isinstance(extra.get("specialization"), dict) else {}
    div = extra.get("divisibility", spec.get("divisibility"))
    eq1 = extra.get("equal_to_1", spec.get("equal_to_1"))
    if isinstance(div, dict) or isinstance(eq1, (list, tuple)):
        return dict(div or {}), tuple(eq1 or ()), True
    if facts.specialization:
        return dict(facts.specialization.get("divisibility") or {}), tuple(facts.specialization.get("equal_to_1") or ()), True
    values = facts.arg_values
    if values:
        div, eq1 = {}, []
        for name, v in values.items():
            if isinstance(v, bool) or not isinstance(v, int):
                continue
            if v == 1:
                eq1.append(name)
            elif v % 16 == 0:
                div[name] = 16
        return div, tuple(eq1), True
    # unknown: assume the common case (sizes and strides multiples of 16) so that nothing is
    # reported that the real launch may not have had
    div = {n: 16 for n, t in facts.signature.items() if str(t).startswith(("i", "u")) and not str(t).startswith("i1")}
    return div, (), False


def _arg_values(extra: dict) -> Dict[str, Any]:
    args = extra.get("args")
    out: Dict[str, Any] = {}
    if isinstance(args, dict):
        for k, v in args.items():
            if isinstance(v, (int, float)) and not isinstance(v, bool):
                out[str(k)] = v
            elif isinstance(v, dict) and isinstance(v.get("value"), (int, float)):
                out[str(k)] = v["value"]
    elif isinstance(args, list):
        for a in args:
            if isinstance(a, dict) and isinstance(a.get("name"), str) and a.get("kind") in ("int", "float", None) \
                    and isinstance(a.get("value"), (int, float)) and not isinstance(a.get("value"), bool):
                out[a["name"]] = a["value"]
    return out


def recompile(facts: KernelFacts, extra: dict, arch: str):
    """Compile the profiled kernel again for ``arch``; returns the CompiledKernel or raises."""
    fn = kernel_function(facts, extra)
    if fn is None and facts.import_refusal:
        raise PermissionError(facts.import_refusal)
    if fn is None:
        raise LookupError(f"the source of {facts.name} was not found (profile source: "
                          f"{(extra.get('source') or {}).get('file', 'none')})")
    if not facts.signature:
        raise LookupError(f"the profile does not record the signature of {facts.name}")
    div, eq1, known = specialization(facts, extra)
    import kernelc
    ck = kernelc.compile(fn, signature=dict(facts.signature), constexprs=dict(facts.constexprs), target=arch,
                         num_warps=facts.num_warps, num_stages=facts.num_stages, divisibility=div, equal_to_1=eq1)
    if not known:
        facts.specialization_known = False
        facts.notes.append("the launch's specialisation (16-byte divisibility, arguments equal to 1) is not in "
                           "the profile: recompiled assuming integer arguments are multiples of 16")
    return ck


def build_facts(group: KernelGroup, device: Device, *, arch: Optional[str] = None, total_ns: float = 0.0,
                recompile_missing: bool = True, source_policy: SourcePolicy = NO_IMPORT,
                profile_path: Optional[str] = None) -> KernelFacts:
    """Facts of one kernel group: profile numbers, samples, and artifacts (cache or recompiled)."""
    extra = group.extra
    info = group.name_info
    facts = KernelFacts(name=group.name, device=device, time_ns=group.time_ns, count=group.count)
    facts.source_policy = source_policy
    facts.share = group.time_ns / total_ns if total_ns else None
    if group.grids:
        facts.grids = sorted(group.grids.items(), key=lambda kv: -kv[1])
        facts.grid = facts.grids[0][0]
    if group.invalid:
        facts.notes.append(f"the profile's {', '.join(repr(k) for k in group.invalid)} field(s) of this kernel "
                           "have the wrong type or range and were ignored")
    warps = positive_int(extra.get("num_warps"), 64) or positive_int(info.get("num_warps"), 64)
    facts.launch_known = bool(warps)   # else 4 and 3 below are placeholders nothing prints (a library kernel)
    facts.num_warps = warps or 4
    facts.num_stages = positive_int(extra.get("num_stages"), 64) or positive_int(info.get("num_stages"), 64) or 3
    cx = extra.get("constexprs")
    if isinstance(cx, dict):
        facts.constexprs = {k: _literal(v) for k, v in cx.items()}
    sig = extra.get("signature")
    if isinstance(sig, dict):
        facts.signature = {k: str(v) for k, v in sig.items()}
    facts.cache_key = extra.get("cache_key")
    if isinstance(extra.get("source"), dict):
        facts.source = extra["source"]
        facts.add_files([extra["source"].get("file")])
    facts.arg_values = _arg_values(extra)
    if isinstance(extra.get("args"), list):
        facts.launch_args = [a for a in extra["args"] if isinstance(a, dict)]
    for f in group.frames:   # launch-metadata counters (flops16, bytes, ...) summed over the launches
        for k, v in f.metrics.items():
            if str(k).startswith("flops") or k == "bytes":
                facts.metrics[k] = facts.metrics.get(k, 0.0) + _num(v)
    L.collect(facts, group.frames)
    # profile-only resource numbers (overwritten by the artifacts when found)
    facts.n_regs = int(_num(extra.get("n_regs")))
    facts.shared = int(_num(extra.get("shared")) or info.get("shared") or 0)
    facts.n_spills = int(_num(extra.get("n_spills")))

    from cubintools.target import parse_target
    want = parse_target(arch).arch if arch else None
    ck = load_cached(facts.cache_key, profile_path, facts.notes) if facts.cache_key else None
    if ck is not None:
        facts.artifact_origin = "cache"
        cached_arch = getattr(ck.target, "arch", None)
        if want and cached_arch != want:
            try:
                ck2 = recompile(facts, extra, want)
                facts.notes.append(f"the cached build is for {cached_arch}; recompiled for {want}")
                ck, facts.artifact_origin = ck2, "recompiled"
            except Exception as e:
                facts.notes.append(f"the cached build is for {cached_arch}; recompiling for {want} failed "
                                   f"({type(e).__name__}: {e}): analysing the {cached_arch} build")
        apply_compiled(facts, ck)
    elif recompile_missing and group.is_kernelc:
        target = want or extra.get("target") or device.arch
        try:
            ck = recompile(facts, extra, target)
            apply_compiled(facts, ck)
            facts.artifact_origin = "recompiled"
            why = "no cache key in the profile" if not facts.cache_key else \
                f"cache entry {str(facts.cache_key)[:12]} not found"
            facts.notes.append(f"{why}: recompiled {facts.name} for {ck.target.arch} from its source")
        except Exception as e:
            why = f"cache entry {str(facts.cache_key)[:12]} not found" if facts.cache_key else "no cache key"
            msg = str(e).splitlines()[0] if str(e) else type(e).__name__
            if isinstance(e, PermissionError):
                facts.notes.append(f"no artifacts ({why}): static diagnostics skipped; {msg}; or bring the "
                                   f"artifacts along: kprof-analyze PROFILE --bundle-artifacts on the machine that "
                                   f"profiled copies them to PROFILE.kernels/")
            else:
                facts.notes.append(f"no artifacts ({why}; recompiling failed: {msg}): static diagnostics skipped")
    elif not group.is_kernelc:
        facts.notes.append("not a kernelc kernel (no artifacts): only its samples are analysed")
    # the profile's view of the launch wins over the artifact's where they disagree
    if positive_int(extra.get("num_warps"), 64):
        facts.num_warps = positive_int(extra["num_warps"], 64)
    if facts.source and facts.source.get("file") and os.path.isfile(facts.source["file"]) and facts.source.get("lines"):
        _check_source_unchanged(facts)
    return facts


def _check_source_unchanged(facts: KernelFacts) -> None:
    src = facts.source
    try:
        with open(src["file"], encoding="utf-8", errors="replace") as f:
            disk = f.read().splitlines()
    except OSError:
        return
    first = int(src.get("first_line") or 1)
    stored = [str(x).rstrip() for x in src["lines"]]
    now = [x.rstrip() for x in disk[first - 1: first - 1 + len(stored)]]
    if now != stored:
        facts.notes.append(f"{base(src['file'])} changed since the profile was taken: source text is shown as "
                           "profiled; recompiled artifacts follow the file on disk")


def read(path: str):
    return read_profile(path)
