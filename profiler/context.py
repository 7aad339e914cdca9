"""Where a measurement belongs: the scope stack (``context="shadow"``) or the Python call path
(``context="python"``), captured cheaply at launch time and turned into frame names at the end.

* **Scope ids.** Scope paths are interned in one process-wide trie: ``(parent id, name) -> id``
  (``ROOT`` is 0).  A thread's current position is one int, so capturing the shadow context of a
  launch is one attribute read.
* **Per-thread state.** Every thread has a :class:`ThreadContext` (``node``: current scope id,
  ``stack``: the ids to return to).  Threads never see each other's scopes.  A *native* thread
  that never entered a scope (torch's autograd engine runs CUDA backward ops on its own C++
  thread) inherits the main thread's current scope, so ``with scope("backward"): loss.backward()``
  holds the backward kernels.
* **Timelines.**  While the ``cupti`` backend attributes launches without a per-launch callback
  (its default), every change of a thread's ``node`` is also appended, with a CUPTI-clock
  timestamp, to that thread's timeline; a kernel is placed by its launch API record (thread id,
  start time) with :func:`node_at`.  A scope costs two clock reads; a launch costs nothing here.
  The launch API records cost CUPTI a record per launch, and they are needed only once some
  thread's node is not the root: with ``arm`` (:func:`timelines_on`), the first entry off the root
  (a scope, a kernelc launch) turns them on through ``arm()`` before its time is read
  (:func:`_arming_clock`); until then every launch is the root's.
* **External correlation ids** (``cupti_attribution = "external-correlation"``, see
  :mod:`profiler.options`): each change of a thread's node also replaces the id the thread has on
  CUPTI's external-correlation stack (:func:`ext_id`), so each launch's API record comes with its
  node; then only the main thread's timeline (for native threads) and a thread's returns to the
  root (for launches with no id) are kept.  Ids carry a generation, so an id left on another
  thread's stack by an earlier profile is never taken for a node of this one.
* **Python call paths.** :func:`python_key` walks ``frame.f_back`` and keeps ``(code, line)``
  pairs, innermost first; :func:`frame_names` turns such a key into ``file:line@function`` frames
  (outermost first) and drops kprof's, runpy's and kernelc's launch machinery frames.
"""
from __future__ import annotations

import bisect
import os
import sys
import threading
from typing import Any, Callable, Dict, Iterable, List, Optional, Tuple

ROOT = 0
ROOT_NAME = "ROOT"

# -- scope trie ------------------------------------------------------------------------------
_ids: dict = {}            # (parent id, name) -> id
_parents: List[int] = [-1]
_names: List[str] = [ROOT_NAME]
_kids: List[dict] = [{}]   # per id: child name -> child id (a scope's entry: no key tuple to build and hash)
_trie_lock = threading.Lock()


def intern(parent: int, name: str) -> int:
    """The id of scope ``name`` under scope ``parent`` (created on first use)."""
    key = (parent, name)
    nid = _ids.get(key)
    if nid is None:
        with _trie_lock:
            nid = _ids.get(key)
            if nid is None:
                nid = len(_names)
                _kids.append({})
                _names.append(name)
                _parents.append(parent)
                _ids[key] = nid
                _kids[parent][name] = nid
    return nid


def scope_names(node: int) -> List[str]:
    """Scope names from the root's child down to ``node`` (``[]`` for the root)."""
    out = []
    while node > 0:
        out.append(_names[node])
        node = _parents[node]
    out.reverse()
    return out


def scope_link(node: Any):
    """``(parent id, name)`` of scope id ``node``; ``None`` for the root or a key that is not a
    scope id (a Python call path).  Lets the tree builder place every scope in O(1)."""
    if type(node) is KernelLaunch:
        node = node.node
    if type(node) is int and 0 < node < len(_names):
        return _parents[node], _names[node]
    return None


# -- per-thread state ------------------------------------------------------------------------
class KernelLaunch:
    """Stands in for a thread's scope id while a kernelc kernel is being launched on the GPU, so a
    CUPTI launch callback that reads the thread's context also gets the kernel's description.
    Interned by :mod:`profiler.hooks` (equal launches share one object)."""

    __slots__ = ("node", "info", "metrics")

    def __init__(self, node: int, info: Any, metrics: Any):
        self.node = node
        self.info = info
        self.metrics = metrics


class ThreadContext:
    __slots__ = ("node", "stack", "inherit", "tstack", "kprev", "kstart", "kkey", "tid", "times", "nodes", "thread",
                 "ext")

    def __init__(self, inherit: bool = False, tid: int = 0, thread: Any = None):
        self.node: Any = ROOT        # current scope id (a KernelLaunch during a GPU kernelc launch)
        self.stack: List[int] = []   # scope ids to return to
        self.inherit = inherit       # a native thread: attribute to the main thread's scope while at ROOT
        self.tstack: list = []       # host timing of open scopes: [node, start_ns, child_ns, key]
        self.kprev: Any = ROOT       # node to restore after a kernelc launch
        self.kstart = 0              # host start of an interpreted kernelc launch
        self.kkey: Any = None        # context key of that launch
        self.tid = tid               # the thread id CUPTI's API records carry (low 32 bits of the ident)
        self.times: List[int] = []   # timeline (see the module notes): CUPTI-clock times ...
        self.nodes: List[Any] = []   # ... and the node from that time on
        self.thread = thread         # its threading.Thread (thread ids are reused)
        self.ext = False             # an id of ours is on CUPTI's external-correlation stack of this thread


TID_MASK = 0xFFFFFFFF   # CUPTI's API records carry the low 32 bits of pthread_self (= threading.get_ident())
MAIN = ThreadContext(tid=threading.main_thread().ident & TID_MASK, thread=threading.main_thread())
_by_tid: Dict[int, ThreadContext] = {MAIN.tid: MAIN}
# _clock: what an entry off the root reads (the timeline clock, or _arming_clock until the first such
# entry); _tclock: the timeline clock itself, which entries at the root read (a thread's first use, its end)
_clock: Optional[Callable[[], int]] = None
_tclock: Optional[Callable[[], int]] = None
_arm: Optional[Callable[[], None]] = None
_arm_lock = threading.Lock()


class _Local(threading.local):
    def __init__(self):
        t = threading.current_thread()
        if t is threading.main_thread():
            self.ctx = MAIN
        else:
            # _DummyThread: a thread not started by `threading` (C++ worker calling into Python).
            self.ctx = ThreadContext(inherit=isinstance(t, threading._DummyThread), tid=threading.get_ident() & TID_MASK,
                                     thread=t)
            _by_tid[self.ctx.tid] = self.ctx
            if _clock is not None:
                mark(self.ctx)
            self.farewell = _Farewell(self.ctx)


class _Farewell:
    """Kept in a thread's ``local``: dropped when the thread ends, it ends the thread's timeline
    there, so that a thread started later under the same id (pthread ids are reused: torch's
    autograd thread after kernelc's compile threads) is not taken for it."""

    __slots__ = ("ctx",)

    def __init__(self, ctx: ThreadContext):
        self.ctx = ctx

    def __del__(self):
        clock = _tclock
        if clock is not None:
            try:
                self.ctx.times.append(clock())
                self.ctx.nodes.append(ENDED)
            except Exception:
                pass


ENDED = object()   # a timeline's node after its thread ended
local = _Local()
# The hot paths (a scope's entry and exit, the kernelc hook) read the thread's context from a plain
# threading.local: an attribute of the subclass above takes the generic (slower) lookup. It is filled
# from ``local`` on a thread's first use (:func:`ctx_slow`) and dies with the thread, like ``local``'s.
fast = threading.local()
fast.ctx = local.ctx


def ctx_slow() -> ThreadContext:
    """The calling thread's context on its first use of ``fast`` (``except AttributeError`` of ``fast.ctx``)."""
    c = fast.ctx = local.ctx
    return c


def current() -> ThreadContext:
    return local.ctx


def current_node() -> int:
    """The calling thread's scope id for attribution (a native thread at ROOT: the main thread's)."""
    c = local.ctx
    n = c.node
    if type(n) is not int:
        n = n.node
    if n == ROOT and c.inherit:
        n = MAIN.node
        if type(n) is not int:
            n = n.node
    return n


def push(name: str) -> int:
    """Enter scope ``name`` on this thread; returns its id."""
    c = local.ctx
    parent = c.node
    if type(parent) is not int:  # a kernelc launch that raised before its exit hook
        parent = c.kprev
    nid = _ids.get((parent, name))
    if nid is None:
        nid = intern(parent, name)
    c.stack.append(parent)
    c.node = nid
    if _clock is not None:
        if _ext is None:
            c.times.append(_clock())
            c.nodes.append(nid)
        else:
            _ext_changed(c)
    return nid


def pop() -> None:
    """Leave the innermost scope of this thread."""
    c = local.ctx
    c.node = c.stack.pop() if c.stack else ROOT
    if _clock is not None:
        if _ext is None:
            c.times.append(_clock())
            c.nodes.append(c.node)
        else:
            _ext_changed(c)


# -- timelines -------------------------------------------------------------------------------
def mark(c: ThreadContext) -> None:
    """Record ``c.node`` as the thread's node from now on (when timelines are on); ``c`` is the
    calling thread's context (the kernelc hook) or a thread's first entry."""
    clock = _clock
    if clock is not None:
        if _ext is None:
            n = c.node
            c.times.append((_tclock if type(n) is int and n == ROOT else clock)())
            c.nodes.append(n)
        else:
            _ext_changed(c)


def _arming_clock() -> int:
    """``_clock`` until the first entry off the root: turns the launch API records on (``arm``), then
    reads the timeline clock -- so every launch after this entry has its API record.  A thread that
    comes here while another arms waits for it."""
    global _clock, _arm
    with _arm_lock:
        arm, _arm = _arm, None
        if arm is not None:
            try:
                arm()
            except Exception:   # the backend records its own errors; placement then falls back to the root
                pass
            if _tclock is not None:
                _clock = _tclock
    return (_tclock or _clock_gone)()


def _clock_gone() -> int:   # timelines went off while arming
    return 0


def armed() -> bool:
    """Whether entries off the root read the timeline clock directly (nothing left to arm)."""
    return _clock is not _arming_clock


def _mark_all() -> None:
    clock = _tclock
    for c in list(_by_tid.values()):
        c.times.append(clock())
        c.nodes.append(c.node)


def timelines_on(clock: Callable[[], int], external: Optional[Tuple[Callable, Callable]] = None,
                 arm: Optional[Callable[[], None]] = None) -> None:
    """Start timelines with ``clock`` (the clock of CUPTI's records): each known thread begins at its
    current node.  ``external``: ``(push(id), pop())`` of CUPTI's external-correlation stack of the
    calling thread, to place launches by external correlation ids (see the module notes).  ``arm``:
    called once, at the first entry of any thread off the root (now, if a thread is off it already;
    not with ``external``), before that entry's time is read."""
    global _clock, _tclock, _ext, _ext_gen, _arm
    live = set(threading.enumerate())
    for tid, c in list(_by_tid.items()):
        if c is not MAIN and c.thread not in live:
            _by_tid.pop(tid, None)
        c.times, c.nodes = [], []
    if arm is not None and (external is not None or any(type(c.node) is not int or c.node != ROOT
                                                        for c in list(_by_tid.values()))):
        arm()
        arm = None
    with _arm_lock:
        _tclock = clock
        _arm = arm
        _clock = clock if arm is None else _arming_clock
    _mark_all()
    if external is not None:
        _ext_gen += 1
        _ext_objects.clear()   # a generation's KernelLaunch ids live as long as its timelines
        _ext_index.clear()
        _ext = external
        _ext_changed(local.ctx)
    _register_new_threads(True)


def timelines_off() -> None:
    global _clock, _tclock, _arm, _ext
    _register_new_threads(False)
    if _ext is not None:
        c = local.ctx
        if c.ext:
            try:
                _ext[1]()
            except Exception:
                pass
            c.ext = False
        _ext = None
        _ext_objects.clear()
        _ext_index.clear()
    with _arm_lock:
        _clock = _tclock = _arm = None
    for c in list(_by_tid.values()):
        c.times, c.nodes = [], []


# -- external correlation ids ----------------------------------------------------------------
_ext: Optional[Tuple[Callable, Callable]] = None   # (push, pop) while launches are placed by external ids
_ext_gen = 0
EXT_GEN_SHIFT = 40
_EXT_LOW = (1 << EXT_GEN_SHIFT) - 1
_EXT_OBJ = 1 << 39          # low parts from here on name a KernelLaunch, below are scope ids
_ext_objects: List[Any] = []   # this generation's KernelLaunch objects (one per kernelc launch, like timeline entries)
_ext_index: Dict[int, int] = {}


def ext_id(node: Any) -> int:
    """The external correlation id of ``node`` (a scope id or a KernelLaunch) in this generation."""
    if type(node) is int:
        low = node
    else:
        low = _ext_index.get(id(node))
        if low is None:
            with _trie_lock:
                low = _ext_index.get(id(node))
                if low is None:
                    low = _EXT_OBJ + len(_ext_objects)
                    _ext_objects.append(node)   # kept: its id() is never reused for another object
                    _ext_index[id(node)] = low
    return (_ext_gen << EXT_GEN_SHIFT) | low


def ext_node(eid: int) -> Any:
    """The node of external correlation id ``eid``, or None if it is of another generation."""
    if eid >> EXT_GEN_SHIFT != _ext_gen:
        return None
    low = eid & _EXT_LOW
    if low >= _EXT_OBJ:
        i = low - _EXT_OBJ
        return _ext_objects[i] if i < len(_ext_objects) else None
    return low if low < len(_names) else None


def _ext_changed(c: ThreadContext) -> None:
    """``c`` (the calling thread's context) has a new node: replace its external id.  A launch with
    no id is placed by the timeline, which then needs only the main thread's changes (native
    threads take its node) and a thread's returns to the root."""
    ext = _ext
    n = c.node
    scope = type(n) is not int or n != ROOT
    if c is MAIN or not scope:
        c.times.append(_clock())
        c.nodes.append(n)
    try:
        if c.ext:
            c.ext = False
            ext[1]()
        if scope:
            ext[0](ext_id(n))
            c.ext = True
    except Exception:
        pass


_prev_thread_profile: Any = None
_registering = False


def _on_thread_start(frame, event, arg):
    # Set with threading.setprofile while timelines are on, it runs once, at the first call of a
    # new thread's run(): the thread gets its context and timeline now, so that its launches are
    # told apart from the main thread's even if it never enters a scope and has ended by the time
    # its records are joined (a thread without a context is taken for a native one).
    prev = _prev_thread_profile
    sys.setprofile(prev)
    try:
        local.ctx
    except Exception:
        pass
    if prev is not None:
        prev(frame, event, arg)


def _register_new_threads(on: bool) -> None:
    """Chain :func:`_on_thread_start` into ``threading.setprofile`` (a profile function the program
    set there keeps working), or take it out again."""
    global _prev_thread_profile, _registering
    getprofile = getattr(threading, "getprofile", lambda: getattr(threading, "_profile_hook", None))
    if on and not _registering:
        prev = getprofile()
        _prev_thread_profile = None if prev is _on_thread_start else prev
        threading.setprofile(_on_thread_start)
        _registering = True
    elif not on and _registering:
        if getprofile() is _on_thread_start:
            threading.setprofile(_prev_thread_profile)
        _prev_thread_profile = None
        _registering = False


def live_threads() -> Dict[int, Any]:
    """CUPTI thread id -> the live ``threading.Thread`` with that id (for :func:`node_at`)."""
    return {t.ident & TID_MASK: t for t in threading.enumerate() if t.ident}


def node_at(tid: int, t: int, threads: Optional[Dict[int, Any]] = None) -> Any:
    """The node (scope id, or a KernelLaunch) of thread ``tid`` at CUPTI time ``t``.  A thread
    without a timeline, or whose timeline had ended by ``t``, is native (it gets the main thread's
    node) unless ``threads`` (from :func:`live_threads`) has a Python thread under that id."""
    c = _by_tid.get(tid)
    owner = threads.get(tid) if threads else None
    if c is not None and owner is not None and owner is not c.thread and not c.times[1:]:
        c = None  # a dead thread's context (nothing changed while profiling), its id reused since
    if c is not None:
        i = bisect.bisect_right(c.times, t) - 1
        n = c.nodes[i] if i >= 0 else ROOT
        if n is ENDED:
            c = None
        else:
            nn = n.node if type(n) is KernelLaunch else n
            if nn != ROOT or not c.inherit:
                return n
    if c is None and owner is not None and not isinstance(owner, threading._DummyThread):
        return ROOT
    i = bisect.bisect_right(MAIN.times, t) - 1
    n = MAIN.nodes[i] if i >= 0 else ROOT
    return n.node if type(n) is KernelLaunch else n


# -- Python call paths ----------------------------------------------------------------------
MAX_DEPTH = 128


def python_key(frame, limit: int = MAX_DEPTH) -> Tuple:
    """``((code, line), ...)`` from ``frame`` outwards (innermost first)."""
    out = []
    while frame is not None and limit:
        out.append((frame.f_code, frame.f_lineno))
        frame = frame.f_back
        limit -= 1
    return tuple(out)


def python_key_here(skip: int = 1) -> Tuple:
    """The calling thread's Python call path; a native thread without Python frames gets the main
    thread's (it is the one waiting for this work, e.g. in ``loss.backward()``)."""
    try:
        frame = sys._getframe(skip + 1)
    except ValueError:
        frame = None
    if frame is None and local.ctx.inherit:
        frame = sys._current_frames().get(threading.main_thread().ident)
    return python_key(frame)


_PKG_DIRS: List[str] = []


def _skip_dirs() -> List[str]:
    if not _PKG_DIRS:
        here = os.path.dirname(os.path.abspath(__file__))
        _PKG_DIRS.append(here + os.sep)
        _PKG_DIRS.append(os.path.join(os.path.dirname(here), "kprof") + os.sep)
        import runpy
        _PKG_DIRS.append(os.path.abspath(runpy.__file__))
    dirs = list(_PKG_DIRS)
    hooks = sys.modules.get("kernelc.runtime.hooks")
    if hooks is not None:
        dirs.append(os.path.dirname(os.path.abspath(hooks.__file__)) + os.sep)
    return dirs


def _skipped(filename: str, dirs: Iterable[str]) -> bool:
    if filename.startswith("<"):
        return filename.startswith(("<frozen runpy", "<frozen importlib", "<kernelc"))
    return filename.startswith(tuple(dirs))


def _is_runpy(filename: str) -> bool:
    if filename.startswith("<frozen runpy"):
        return True
    return os.path.basename(filename) == "runpy.py" and filename == _runpy_file()


def _runpy_file() -> str:
    import runpy
    return runpy.__file__


def frame_names(key: Tuple) -> List[str]:
    """Frame names, outermost first, for a :func:`python_key` (a ``(None, name)`` entry is a scope
    marker and becomes the frame ``name``)."""
    dirs = _skip_dirs()
    # Frames outside the innermost runpy frame belong to whatever started the program
    # (``python -m``, the ``kprof`` launcher script): not the program's call path.
    for i, (code, _) in enumerate(key):
        if code is not None and _is_runpy(code.co_filename):
            key = key[:i]
            break
    out = []
    for code, line in reversed(key):
        if code is None:
            out.append(str(line))
            continue
        fn = code.co_filename
        if _skipped(fn, dirs):
            continue
        out.append(f"{fn}:{line}@{code.co_name}")
    return out


def names_of(key: Any) -> List[str]:
    """Frame names for any context key: a scope id, a KernelLaunch or a Python call path."""
    if type(key) is KernelLaunch:
        key = key.node
    if isinstance(key, int):
        return scope_names(key)
    return frame_names(key)
