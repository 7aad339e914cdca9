"""Profiling sessions: ``start`` / ``finalize`` / ``activate`` / ``deactivate``, and the routing of
scope and kernel events to the sessions that are recording.

A session has a name (its output path without extension), a context (``"shadow"``: the scope
stack; ``"python"``: the Python call path), a mode (``None`` or ``"pcsampling[:period=N]"``), a hook
(``"kernelc"``: kernelc launches get their launch configuration and launch metadata) and a backend
(``cupti`` or ``cpu``, see :mod:`profiler.backends`).  Several sessions may run at once; each
records only while active.  Under ``python -m kprof`` the command line owns one session: ``start``
in the script returns its id and ``finalize`` in the script does nothing (the CLI writes at exit).
"""
from __future__ import annotations

import atexit
import collections
import os
import sys
import threading
import time
from typing import Any, Dict, List, Optional, Tuple

from . import backends, context, distributed
from .format import TIME_METRIC, write_profile
from .tree import ProfileData, build_tree

__all__ = ["start", "finalize", "activate", "deactivate", "get", "sessions", "Session", "parse_mode",
           "is_mode", "parse_formats", "MODES", "CONTEXTS", "FORMATS"]

MODES = ("pcsampling",)
CONTEXTS = ("shadow", "python")
FORMATS = ("hatchet", "chrome")
HOOKS = (None, "kernelc", "triton")  # "triton": Proton's spelling, same meaning here
DEFAULT_NAME = "kprof"

# -- module state read on hot paths (scopes, launch hooks) ------------------------------------
active: Tuple["Session", ...] = ()        # sessions recording now
timing: Tuple["Session", ...] = ()        # active sessions that need host timestamps of scopes
python_ctx = False                        # some active session uses context="python"

_sessions: Dict[int, "Session"] = {}
_next_id = 0
_lock = threading.RLock()
_cli_session: Optional[int] = None        # the session owned by `python -m kprof`
_atexit_registered = False


def parse_mode(mode: Optional[str]) -> Tuple[Optional[str], Dict[str, Any]]:
    """``None``/``""`` -> ``(None, {})``; ``"pcsampling:period=10"`` -> ``("pcsampling", {"period": 10})``.

    Options follow the mode name after ``:`` and are separated by ``:`` or ``,``
    (``pcsampling:period=10:drain=2``); numbers are converted, a bare ``key`` is ``True``."""
    if mode is None or mode == "":
        return None, {}
    if not isinstance(mode, str):
        raise TypeError(f"mode must be a string such as 'pcsampling', got {mode!r}")
    head, _, rest = mode.partition(":")
    head = head.strip().lower()
    if head not in MODES:
        raise ValueError(f"unknown mode {mode!r}; expected one of {', '.join(MODES)} "
                         "(optionally with options, e.g. pcsampling:period=10)")
    opts: Dict[str, Any] = {}
    for item in filter(None, (p.strip() for p in rest.replace(",", ":").split(":"))):
        k, eq, v = item.partition("=")
        k = k.strip().lower()
        if not k:
            raise ValueError(f"bad mode option {item!r} in {mode!r}; expected key=value, e.g. {head}:period=10")
        if not eq:
            opts[k] = True
            continue
        v = v.strip()
        try:
            val: Any = int(v)
        except ValueError:
            try:
                val = float(v)
            except ValueError:
                val = v
        opts[k] = val
    return head, opts


def is_mode(text: str) -> bool:
    """Whether ``text`` names a profiling mode (so ``-m text`` on the command line is a mode)."""
    try:
        return parse_mode(text)[0] is not None
    except (ValueError, TypeError):
        return False


def parse_formats(fmt) -> Tuple[str, ...]:
    items = [fmt] if isinstance(fmt, str) else list(fmt or ["hatchet"])
    out: List[str] = []
    for item in items:
        for f in str(item).split(","):
            f = f.strip().lower()
            if f in ("chrome_trace", "perfetto", "trace"):
                f = "chrome"
            if f not in FORMATS:
                raise ValueError(f"unknown output format {f!r}; expected hatchet, chrome or both (hatchet,chrome)")
            if f not in out:
                out.append(f)
    return tuple(out)


class Session:
    """One profiling session (see the module docstring).  ``pcsampling`` integrations may read
    ``id``, ``name``, ``path``, ``context``, ``mode``, ``mode_options``, ``backend`` and set
    ``kernel_activity`` / ``extra``; the profile tree is handed to them at the end."""

    def __init__(self, sid: int, name: str, base: str, ctx: str, mode: Optional[str], mode_options: Dict[str, Any],
                 hook: Optional[str], formats: Tuple[str, ...]):
        self.id = sid
        self.name = name
        self.base = base                       # output path without extension, as given
        self.base_abs = os.path.abspath(base)  # where it is written (the script may chdir)
        self.claim: Optional[str] = None       # the claim file that reserves base_abs for this process
        self.context = ctx
        self.mode = mode
        self.mode_options = mode_options
        self.hook = hook
        self.formats = formats
        self.backend: Any = None
        self.active = False
        self.windows: List[list] = []          # cupti: correlation-id windows while active
        self.data = ProfileData(trace="chrome" in formats)
        self.kernel_activity = "serialized" if mode == "pcsampling" else "concurrent"
        self.pcsampling: Any = None            # the profiler.pcsampling module when attached
        self.extra: Dict[str, Any] = {}        # free space for integrations
        # pcsampling: correlation id -> (kernel key, KernelInfo or None) while recording, and
        # ``kernels``: correlation id -> (kernel frame, KernelInfo or None) once the tree is built.
        self.kernel_cids: Optional[Dict[int, tuple]] = {} if mode == "pcsampling" else None
        self.kernels: Dict[int, tuple] = {}
        self.kernel_nodes: Dict[tuple, Any] = {}  # (ctx, name, device type, id) -> kernel frame, after build
        self.started_ns = time.perf_counter_ns()

    @property
    def path(self) -> str:
        """The hatchet profile this session writes."""
        return self.base + ".hatchet"

    @property
    def trace_path(self) -> str:
        return self.base + ".trace.json"

    @property
    def backend_name(self) -> str:
        return getattr(self.backend, "name", "none")

    def __repr__(self):
        return (f"<kprof session {self.id} {self.name!r} context={self.context} backend={self.backend_name}"
                f"{' mode=' + self.mode if self.mode else ''}{' active' if self.active else ''}>")

    # -- keys ------------------------------------------------------------------------------
    def scope_key(self, node: int, name: str, pykey) -> Any:
        if self.context == "python" and pykey is not None:
            return ((None, name),) + pykey
        return node

    def launch_key(self, node: int, pykey) -> Any:
        if self.context == "python" and pykey is not None:
            return pykey
        return node

    # -- records from the cupti backend (called on CUPTI's thread) ----------------------------
    def add_gpu_record(self, value, name: str, is_kernel: bool, device: int, start: int, end: int,
                       nbytes: Optional[int], stream: int, cid: int) -> None:
        pykey = None
        if type(value) is tuple:
            value, pykey = value
        info = metrics = None
        if type(value) is context.KernelLaunch:
            if self.hook is not None:
                info, metrics = value.info, value.metrics
            value = value.node
        ctx = pykey if (self.context == "python" and pykey is not None) else value
        extra = None
        if info is not None:
            name = info.display_name
            extra = info.extra
        elif not is_kernel:
            metrics = {"bytes": nbytes} if nbytes else None
            extra = {"kind": name.split()[0]}
        self.data.add_kernel(ctx, name, "CUDA", device, end - start, metrics, extra)
        if is_kernel and "distributed" in self.extra and distributed.is_collective_kernel(name):
            distributed.add_instance(self, (ctx, name, "CUDA", device), end - start)
        if self.kernel_cids is not None and is_kernel:
            self.kernel_cids[cid] = ((ctx, name, "CUDA", device), info)
        if self.data.events is not None:
            self.data.add_event(name, "kernel" if is_kernel else "memory", start, end, f"GPU {device}",
                                f"stream {stream}", ctx, {"correlation": cid})

    # -- output ----------------------------------------------------------------------------
    def add_launch_callback(self, fn) -> None:
        """Call ``fn(correlation_id=..., name=...)`` after every launch CUPTI reports (PC sampling
        drains its buffers there).  Only on the cupti backend; raises RuntimeError elsewhere."""
        add = getattr(self.backend, "add_launch_listener", None)
        if add is None:
            raise RuntimeError(f"the {self.backend_name} backend does not see launches")
        add(fn)

    def build(self):
        """``(root, device_info)`` of what was recorded so far (also fills ``self.kernels`` for
        the pcsampling integration)."""
        from cubintools.demangle import demangle
        from .device_info import device_info
        nodes: Dict[tuple, Any] = {}
        drain_metrics()
        root = build_tree(self.data, context.names_of, demangle, nodes=nodes, link_of=context.scope_link)
        self.kernel_nodes = nodes
        if self.kernel_cids is not None:
            self.kernels = {cid: (nodes[key], info) for cid, (key, info) in self.kernel_cids.items() if key in nodes}
        return root, device_info(self.data.devices)


def get(sid: int) -> Session:
    try:
        return _sessions[sid]
    except KeyError:
        raise ValueError(f"no kprof session {sid} (sessions: {sorted(_sessions) or 'none'})") from None


def sessions() -> List[Session]:
    return list(_sessions.values())


def _base_path(name: Optional[str], output_dir: Optional[str]) -> str:
    name = DEFAULT_NAME if not name else os.fspath(name)
    for ext in (".hatchet", ".trace.json", ".json"):
        if name.endswith(ext):
            name = name[: -len(ext)]
            break
    name = os.path.expanduser(name)
    if output_dir and not os.path.isabs(name):
        name = os.path.join(os.path.expanduser(output_dir), name)
    return name


def start(name: Optional[str] = DEFAULT_NAME, *, context: str = "shadow", mode: Optional[str] = None,
          hook: Optional[str] = "kernelc", backend: Optional[str] = None, output_dir: Optional[str] = None,
          format="hatchet", data: Optional[str] = None) -> int:
    """Start (and activate) a profiling session; returns its id.

    ``name``: output path without extension (``NAME.hatchet``, ``NAME.trace.json``), relative to
    ``output_dir`` (default: the current directory).  ``context``: ``"shadow"`` (scopes) or
    ``"python"`` (call paths).  ``mode``: ``None`` or ``"pcsampling[:period=N]"``.  ``hook``:
    ``"kernelc"`` (default) or ``None``.  ``backend``: ``None`` (automatic), ``"cupti"`` or ``"cpu"``.
    ``format``: ``"hatchet"`` (default), ``"chrome"`` or ``"hatchet,chrome"``.  ``data`` is accepted
    for Proton compatibility (``"tree"`` only).
    """
    global _next_id
    if _cli_session is not None and _cli_session in _sessions and not _starting_cli:
        return _cli_session
    ctx = context
    if ctx not in CONTEXTS:
        raise ValueError(f"unknown context {ctx!r}; expected 'shadow' (scopes) or 'python' (call paths)")
    if hook not in HOOKS:
        raise ValueError(f"unknown hook {hook!r}; expected 'kernelc' or None")
    if data not in (None, "tree"):
        raise ValueError(f"unknown data structure {data!r}; kprof records a tree")
    mode_name, mode_opts = parse_mode(mode)
    formats = parse_formats(format)
    hook = "kernelc" if hook == "triton" else hook
    with _lock:
        sid = _next_id
        _next_id += 1
        base, rank = _base_path(name, output_dir), distributed.rank_info()
        s = Session(sid, name or DEFAULT_NAME, distributed.rank_base(base, rank), ctx, mode_name, mode_opts, hook,
                    formats)
        s.backend = backends.select(backend, kernel_activity=s.kernel_activity)
        if rank is not None:
            distributed.session_started(s, rank, base)
        _claim_output(s)
        try:
            if mode_name == "pcsampling":
                _attach_pcsampling(s)
            _sessions[sid] = s
            _activate(s)
        except BaseException:
            _sessions.pop(sid, None)
            _release_claim(s)
            s.active = False
            try:
                s.backend.release(s)
            finally:
                _refresh()
            raise
        _register_atexit()
    return sid


def _attach_pcsampling(s: Session) -> None:
    try:
        from . import pcsampling
    except ImportError as e:
        print(f"kprof: mode pcsampling is not available ({e}); profiling kernel times only", file=sys.stderr)
        return
    attach = getattr(pcsampling, "attach", None)
    if attach is None:
        print("kprof: profiler.pcsampling has no attach(session); profiling kernel times only", file=sys.stderr)
        return
    try:
        attach(s)
        s.pcsampling = pcsampling
    except Exception as e:
        print(f"kprof: PC sampling could not start ({type(e).__name__}: {e}); profiling kernel times only",
              file=sys.stderr)


def _targets(session: Optional[int]) -> List[Session]:
    if session is None:
        return list(_sessions.values())
    return [get(session)]


def _activate(s: Session) -> None:
    if not s.active:
        s.active = True
        s.backend.attach(s)
        _refresh()


def _deactivate(s: Session) -> None:
    if s.active:
        s.active = False
        s.backend.detach(s)
        _refresh()


def activate(session: Optional[int] = None) -> None:
    """Resume recording for ``session`` (default: all sessions)."""
    with _lock:
        for s in _targets(session):
            _activate(s)


def deactivate(session: Optional[int] = None) -> None:
    """Pause recording for ``session`` (default: all sessions); its data stays until finalize."""
    with _lock:
        for s in _targets(session):
            _deactivate(s)


def finalize(session: Optional[int] = None, output_format: Optional[str] = None) -> List[str]:
    """Stop ``session`` (default: all sessions) and write its profile(s); returns the paths written.

    Under ``python -m kprof`` a call from the profiled script does nothing (the command line writes
    the profile when the script ends).  ``output_format`` overrides the session's formats.
    """
    if _cli_session is not None and not _finalizing_cli:
        return []
    written: List[str] = []
    errors: List[str] = []
    finished: List[tuple] = []
    with _lock:
        targets = _targets(session)
        for s in targets:
            _deactivate(s)
        for s in targets:
            try:
                paths = _finish(s, parse_formats(output_format) if output_format else s.formats)
                written += paths
                finished.append((s, paths))
            except Exception as e:
                errors.append(f"{s.base}: {type(e).__name__}: {e}")
            finally:
                _sessions.pop(s.id, None)
                _release_claim(s)
                try:
                    s.backend.release(s)
                except Exception as e:
                    errors.append(f"{s.base}: releasing {s.backend_name}: {e}")
        _refresh()
    for s, paths in finished:  # rank 0 under torchrun: wait for the other ranks' files (not holding the lock)
        written += distributed.after_finalize(s, paths)
    if errors:
        raise OSError("kprof: could not write the profile: " + "; ".join(errors))
    return written


def _finish(s: Session, formats: Tuple[str, ...]) -> List[str]:
    s.backend.flush()
    errors = getattr(s.backend, "errors", None)
    if errors:
        print(f"kprof: {len(errors)} CUPTI problem(s) while profiling, first: {errors[0]}", file=sys.stderr)
        errors.clear()
    root, devinfo = s.build()
    distributed.annotate(s, root, s.kernel_nodes)
    if s.pcsampling is not None:
        finish = getattr(s.pcsampling, "finish", None)
        if finish is not None:
            try:
                finish(s, root)
            except Exception as e:
                print(f"kprof: PC sampling results could not be added ({type(e).__name__}: {e})", file=sys.stderr)
    out = []
    os.makedirs(os.path.dirname(s.base_abs), exist_ok=True)
    if "hatchet" in formats:
        moved = write_profile(s.base_abs + ".hatchet", root, devinfo)
        if moved:
            _warn_non_finite(s.path, moved)
        out.append(s.path)
    if "chrome" in formats:
        from .trace import write_trace
        write_trace(s.base_abs + ".trace.json", s, root)
        out.append(s.trace_path)
    return out


def _warn_non_finite(path: str, moved: List[Tuple[str, str, str]]) -> None:
    from .textsafe import term_escape
    shown = ", ".join(f"{m!r} of {f!r} = {v}" for f, m, v in moved[:5])
    more = f" and {len(moved) - 5} more" if len(moved) > 5 else ""
    print(term_escape(f"kprof: warning: {path}: {len(moved)} metric value(s) are NaN or infinite and were left out "
                      f"of the metrics (kept as text under \"kprof\".\"non_finite_metrics\"): {shown}{more}"),
          file=sys.stderr)


# -- one file per process ----------------------------------------------------------------------
# A session reserves its output path with a claim file beside it (".NAME.hatchet.kprof-owner",
# holding the pid) when it starts.  A second live process that would write the same path (a
# subprocess profiling itself, a concurrent run in the same directory) gets NAME.pid<PID> instead,
# so no process ever writes over another's profile.  A claim whose process is gone is taken over.
CLAIM_SUFFIX = ".hatchet.kprof-owner"


def _claim_path(base_abs: str) -> str:
    d, b = os.path.split(base_abs)
    return os.path.join(d, "." + b + CLAIM_SUFFIX)


def _pid_alive(pid: int) -> bool:
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    except OSError:
        return False
    return True


def _try_claim(base_abs: str) -> Optional[bool]:
    """True: claimed (or already ours); False: a live process holds it; None: could not tell
    (unwritable directory: the write at the end reports that)."""
    path = _claim_path(base_abs)
    me = os.getpid()
    for _ in range(3):
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
        except FileExistsError:
            try:
                with open(path, "r", encoding="ascii", errors="replace") as f:
                    owner = int((f.read(32).strip() or "0"))
            except (OSError, ValueError):
                owner = 0
            if owner == me:
                return True
            if _pid_alive(owner):
                return False
            try:  # a stale claim (its process ended without releasing it)
                os.unlink(path)
            except FileNotFoundError:
                pass
            except OSError:
                return None
            continue
        except OSError:
            return None
        try:
            os.write(fd, str(me).encode("ascii"))
        finally:
            os.close(fd)
        return True
    return None


def _claim_output(s: Session) -> None:
    """Reserve ``s``'s output path for this process, or move the session to ``NAME.pid<PID>``."""
    try:
        os.makedirs(os.path.dirname(s.base_abs), exist_ok=True)
    except OSError:
        return
    got = _try_claim(s.base_abs)
    if got is False:
        suffix = f".pid{os.getpid()}"
        print(f"kprof: {s.path} belongs to another running process; this process (pid {os.getpid()}) writes "
              f"{s.base + suffix}.hatchet", file=sys.stderr)
        s.base += suffix
        s.base_abs += suffix
        got = _try_claim(s.base_abs)
    if got:
        s.claim = _claim_path(s.base_abs)


def _release_claim(s: Session) -> None:
    path, s.claim = s.claim, None
    if path is None:
        return
    try:
        with open(path, "r", encoding="ascii", errors="replace") as f:
            owner = f.read(32).strip()
        if owner == str(os.getpid()):
            os.unlink(path)
    except OSError:
        pass


# -- fork ----------------------------------------------------------------------------------------
def _after_fork_in_child() -> None:
    """A forked child (``os.fork``, multiprocessing's fork workers) does not own its parent's
    sessions: it neither records into them nor writes them (at exit or at the end of ``python -m
    kprof``), so the parent's profile is never overwritten.  The child may start sessions of its own."""
    global _sessions, _lock, _cli_session, active, timing, python_ctx
    _lock = threading.RLock()      # another thread of the parent may have held it at fork time
    for s in _sessions.values():
        s.active = False
        s.claim = None
    _sessions = {}
    _cli_session = None
    active, timing, python_ctx = (), (), False
    _metrics_q.clear()   # the parent's scope metrics, for the parent's sessions
    # Not _refresh(): unhooking takes kernelc's hook lock, which another thread of the parent may
    # have held at fork time.  The kernelc hook stays registered and does nothing without sessions.
    from . import hooks
    hooks.sessions_gone()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


def _refresh() -> None:
    """Recompute the hot-path state after a session changed."""
    global active, timing, python_ctx
    act = tuple(s for s in _sessions.values() if s.active)
    active = act
    timing = tuple(s for s in act if s.backend_name == "cpu" or s.data.events is not None)
    python_ctx = any(s.context == "python" for s in act)
    from . import hooks
    hooks.configure(
        install=any(s.hook == "kernelc" for s in act),
        cupti=any(s.backend_name == "cupti" for s in act),
        python=python_ctx,
        on_launch=kernel_launched,
    )


# -- events from scopes and the kernelc hook ----------------------------------------------------
_now = time.perf_counter_ns


def _numeric(metrics) -> Dict[str, Any]:
    out = {}
    for k, v in metrics.items():
        tv = type(v)
        if tv is not int and tv is not float and (isinstance(v, bool) or not isinstance(v, (int, float))):
            raise TypeError(f"scope metric {k!r} must be a number, got {v!r}")
        out[k if type(k) is str else str(k)] = v
    return out


def scope_metrics(name: str, node: int, metrics, pykey=None) -> None:
    """Credit ``metrics`` to the frame of scope ``name`` (id ``node``) in every active session: for
    numbers known only when the scope ends (Proton's ``cpu_timed_scope``)."""
    values = _numeric(metrics)
    for s in active:
        s.data.add_frame(s.scope_key(node, name, pykey), values)


# Scope metrics of the shadow context, queued at the scope's entry and summed into the sessions' frames in
# bulk (drain_metrics): the entry costs a deque append and a dict copy instead of the sum under the data
# lock, which a step of examples/train.py pays 8 times (its attn and mlp scopes).  Each entry holds the
# sessions active at the entry, so a session that starts or stops later gets exactly what it would have.
_metrics_q: "collections.deque" = collections.deque()
METRICS_Q_MAX = 4096   # entries queued before the next entry sums them (bounds the queue's memory)


def queue_metrics(node: int, name: str, metrics) -> None:
    """A scope with ``metrics`` entered (shadow context, no session timing scopes): queued, see above."""
    q = _metrics_q
    q.append((active, node, name, dict(metrics)))
    if len(q) > METRICS_Q_MAX:
        drain_metrics()


def drain_metrics() -> None:
    """Sum the queued scope metrics into their sessions' frames (any thread; entries appended meanwhile
    are summed now or by the next call).  A value that is not a number is left out, with a warning."""
    q = _metrics_q
    pop = q.popleft
    acc: Dict[tuple, Dict[str, Any]] = {}   # summed per (sessions, scope) first: one add_frame each
    while True:
        try:
            sessions, node, name, metrics = pop()
        except IndexError:
            break
        key = (sessions, node, name)
        a = acc.get(key)
        if a is None:
            a = acc[key] = {}
        for k, v in metrics.items():
            tv = type(v)
            if tv is not int and tv is not float and (isinstance(v, bool) or not isinstance(v, (int, float))):
                _warn_metric(f"scope metric {k!r} must be a number, got {v!r}")
                continue
            if type(k) is not str:
                k = str(k)
            a[k] = a.get(k, 0) + v
    for (sessions, node, name), values in acc.items():
        for s in sessions:
            s.data.add_frame(s.scope_key(node, name, None), values)


_warned_metrics: set = set()


def _warn_metric(msg: str) -> None:
    if msg not in _warned_metrics and len(_warned_metrics) < 20:
        _warned_metrics.add(msg)
        from .textsafe import term_escape
        print(term_escape(f"kprof: warning: {msg}; left out of the profile"), file=sys.stderr)


def scope_entered(name: str, node: int, metrics) -> None:
    pykey = context.python_key_here(1) if python_ctx else None
    if timing:
        context.local.ctx.tstack.append([node, _now(), 0, pykey, name])
    if metrics:
        values = _numeric(metrics)
        for s in active:
            s.data.add_frame(s.scope_key(node, name, pykey), values)


def scope_exiting(name: str) -> None:
    c = context.local.ctx
    node = c.node if type(c.node) is int else c.kprev   # the scope being left (a stale launch marker aside)
    ts = c.tstack
    if not ts or ts[-1][0] != node:
        return
    _, start, child, pykey, _ = ts.pop()
    end = _now()
    dur = end - start
    if ts:
        ts[-1][2] += dur
    tid = threading.get_ident()
    for s in timing:
        key = s.scope_key(node, name, pykey)
        if s.backend_name == "cpu":
            s.data.add_frame(key, {TIME_METRIC: max(0, dur - child)})
        if s.data.events is not None:
            clk = s.backend.to_trace_clock
            s.data.add_event(name, "scope", clk(start), clk(end), "host", f"thread {tid}", key)


def kernel_launched(key, info, metrics, start: int, end: int, device_type: str, device_id: int,
                    timed: bool) -> None:
    """A kernelc launch seen by the hook (interpreted, or on a GPU that CUPTI does not watch)."""
    c = context.local.ctx
    dur = end - start
    if timed and c.tstack:
        c.tstack[-1][2] += dur
    node, pykey = key
    for s in active:
        if s.hook is None or (device_type == "CUDA" and s.backend_name == "cupti"):
            continue
        k = s.launch_key(node, pykey)
        s.data.add_kernel(k, info.display_name, device_type, device_id, dur if timed else None, metrics, info.extra)
        if s.data.events is not None and timed:
            clk = s.backend.to_trace_clock
            s.data.add_event(info.display_name, "kernel", clk(start), clk(end), f"{device_type} {device_id}",
                             "interpreter" if device_type == "CPU" else "launch", k)


def host_collective(op: str, backend: str, start: int, end: int) -> None:
    """A synchronous ``torch.distributed`` call timed on the host (:mod:`profiler.distributed`): a
    child frame ``op`` of the calling scope on the cpu backend, like an interpreted launch."""
    c = context.local.ctx
    dur = end - start
    if c.tstack:
        c.tstack[-1][2] += dur      # not the scope's own time
    node = context.current_node()
    pykey = context.python_key_here(2) if python_ctx else None
    for s in active:
        if s.backend_name != "cpu":
            continue
        k = s.launch_key(node, pykey)
        extra = {"kind": "collective", "op": op, "backend": backend}
        s.data.add_kernel(k, op, "host", 0, dur, None, extra)
        if "distributed" in s.extra:
            distributed.add_instance(s, (k, op, "host", 0), dur)
        if s.data.events is not None:
            clk = s.backend.to_trace_clock
            s.data.add_event(op, "collective", clk(start), clk(end), "host", f"thread {threading.get_ident()}", k)


# -- command line ownership and exit ------------------------------------------------------------
_starting_cli = False
_finalizing_cli = False


def start_cli(**kwargs) -> int:
    """Start the session owned by ``python -m kprof``."""
    global _cli_session, _starting_cli
    _starting_cli = True
    try:
        sid = start(**kwargs)
    finally:
        _starting_cli = False
    _cli_session = sid
    return sid


def finalize_cli() -> List[str]:
    global _cli_session, _finalizing_cli
    _finalizing_cli = True
    try:
        return finalize(None)
    finally:
        _finalizing_cli = False
        _cli_session = None


def _register_atexit() -> None:
    global _atexit_registered
    if not _atexit_registered:
        _atexit_registered = True
        atexit.register(_at_exit)


def _at_exit() -> None:
    if not _sessions or _cli_session is not None:
        return
    try:
        paths = finalize(None)
        if paths:
            print(f"kprof: session(s) not finalized; wrote {', '.join(paths)} at exit", file=sys.stderr)
    except Exception as e:
        print(f"kprof: {e}", file=sys.stderr)


distributed.bind_sessions(lambda: active, host_collective)
