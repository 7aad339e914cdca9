"""``python -m kprof`` / ``kprof``: run a Python script (or module) under a profiling session.

The script runs as ``__main__`` with its own ``sys.argv``; kprof exits with the script's exit code
and writes the profile whatever happens: normal end, an exception (traceback printed as Python
would, exit code 1), ``sys.exit(n)``, Ctrl-C (SIGINT) or SIGTERM (the profile is written, then the
process dies of the same signal, as it would have without kprof).  Signal handlers are restored.
"""
from __future__ import annotations

import argparse
import os
import runpy
import signal
import sys
import traceback
from typing import List, Optional, Tuple

from . import distributed as _distributed
from . import session as _session

PROG = "kprof"
WRITE_FAILED = 3   # exit status when the program succeeded but its profile could not be written

USAGE = f"""{PROG} [options] script.py [args...]
       {PROG} [options] -m module [args...]"""

DESCRIPTION = """Profile a Python program: every GPU kernel (torch, cuBLAS, kernelc, ...) timed by CUPTI and
attributed to profiler.scope()s or Python call paths; without a GPU or CUPTI, kernelc interpreter
launches and scopes timed with the host clock. Writes NAME.hatchet (view it with kprof-viewer)."""

EPILOG = """-m: if the value is a profiling mode (pcsampling, pcsampling:period=N) it selects the mode;
any other value is a module to run like `python -m MODULE`, and the remaining arguments are its
own (e.g. `kprof -m pytest -q tests`). Put kprof's options before it.

examples:
  python -m kprof examples/train.py --steps 10
  python -m kprof -n step -c python -o out/ train.py
  python -m kprof -m pcsampling train.py
  python -m kprof --format chrome -m pytest -q tests/test_model.py

The exit status is the program's; the profile is written even when it raises, calls sys.exit,
or is stopped with Ctrl-C or SIGTERM. If the program succeeded but the profile could not be
written, kprof says why and exits with status 3.

Under torchrun (or any launcher that sets RANK and WORLD_SIZE) each rank writes NAME.rank<r>.hatchet
and rank 0 then writes NAME.merged.hatchet (per-rank times, imbalance, collective wait):
  torchrun --nproc-per-node 8 -m kprof -n train train.py"""

_VALUE_OPTS = {"-n": "name", "--name": "name", "-c": "context", "--context": "context", "-m": "mode",
               "--mode": "mode", "-o": "output_dir", "--output-dir": "output_dir", "-f": "format",
               "--format": "format", "-b": "backend", "--backend": "backend", "-k": "hook", "--hook": "hook",
               "--merge-timeout": "merge_timeout"}


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog=PROG, usage=USAGE, description=DESCRIPTION, epilog=EPILOG,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("-n", "--name", default="kprof", help="profile name: writes NAME.hatchet (default: kprof)")
    p.add_argument("-c", "--context", choices=list(_session.CONTEXTS), default="shadow",
                   help="attribute kernels to scopes (shadow, default) or to Python call paths (python)")
    p.add_argument("-m", "--mode", metavar="MODE", default=None,
                   help="profiling mode: pcsampling[:period=N] (instruction sampling); see below for -m MODULE")
    p.add_argument("-o", "--output-dir", metavar="DIR", default=None, help="directory for the output (default: .)")
    p.add_argument("-f", "--format", default="hatchet",
                   help="hatchet (default), chrome (a trace for Perfetto: NAME.trace.json) or hatchet,chrome")
    p.add_argument("-b", "--backend", choices=["auto", "cupti", "cpu"], default="auto",
                   help="measurement backend (default: auto = cupti when CUDA and CUPTI work, else cpu)")
    p.add_argument("-k", "--hook", choices=["kernelc", "none"], default="kernelc",
                   help="kernelc launch hook: launch configuration and launch_metadata flops/bytes (default: kernelc)")
    p.add_argument("--merge-timeout", type=float, metavar="SECONDS", default=_distributed.options.merge_timeout,
                   help="under torchrun: how long rank 0 waits for the other ranks' profiles before merging "
                        "what exists (default: %(default)s)")
    p.add_argument("--no-merge", action="store_true",
                   help="under torchrun: write only the per-rank profiles (merge later with python -m profiler.merge)")
    return p


def split_argv(argv: List[str]) -> Tuple[List[str], Optional[str], Optional[str], List[str]]:
    """``(kprof options, script, module, target args)``: options end at the first non-option
    word (the script), at ``--``, or at ``-m X`` where X is not a mode (the module)."""
    opts: List[str] = []
    i = 0
    while i < len(argv):
        a = argv[i]
        if a == "--":
            i += 1
            break
        if not a.startswith("-") or a == "-":
            break
        name, eq, val = a.partition("=")
        if name in _VALUE_OPTS and not eq:
            if name in ("-m", "--mode") and i + 1 < len(argv) and not _session.is_mode(argv[i + 1]):
                if name == "-m":
                    return opts, None, argv[i + 1], argv[i + 2:]
            opts.append(a)
            if i + 1 < len(argv):
                opts.append(argv[i + 1])
            i += 2
            continue
        if len(a) > 2 and a[:2] in _VALUE_OPTS and not a.startswith("--"):
            if a[:2] == "-m" and not _session.is_mode(a[2:]):
                return opts, None, a[2:], argv[i + 1:]
        opts.append(a)
        i += 1
    if i < len(argv):
        return opts, argv[i], None, argv[i + 1:]
    return opts, None, None, []


class _Terminated(BaseException):
    """Raised in the main thread by kprof's SIGTERM handler, to unwind the script."""


def _on_sigterm(signum, frame):
    raise _Terminated()


_prev_term = None            # the SIGTERM handler kprof replaced (restored in forked children)
_fork_hook_registered = False


def _after_fork_in_child() -> None:
    # A forked child (multiprocessing's fork workers, os.fork) is not the profiled program's main
    # process: kprof's SIGTERM handler would raise _Terminated inside it (pool.terminate() then
    # prints tracebacks or hangs on a lock the worker held).  It gets the handler it had before.
    try:
        if signal.getsignal(signal.SIGTERM) is _on_sigterm:
            signal.signal(signal.SIGTERM, _prev_term if _prev_term is not None else signal.SIG_DFL)
    except (ValueError, OSError, TypeError):
        pass


def _register_fork_hook() -> None:
    global _fork_hook_registered
    if not _fork_hook_registered and hasattr(os, "register_at_fork"):
        os.register_at_fork(after_in_child=_after_fork_in_child)
        _fork_hook_registered = True


def _our_frame(filename: str) -> bool:
    here = os.path.dirname(os.path.abspath(__file__)) + os.sep
    kprof_dir = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "kprof") + os.sep
    return (filename.startswith((here, kprof_dir)) or filename == runpy.__file__
            or filename.startswith(("<frozen runpy", "<frozen importlib")))


def _trimmed(tb):
    while tb is not None and _our_frame(tb.tb_frame.f_code.co_filename):
        tb = tb.tb_next
    return tb


def _report(exc: BaseException) -> None:
    """Print an uncaught exception as Python would, without kprof's own frames."""
    tb = _trimmed(exc.__traceback__)
    exc.__traceback__ = tb  # the default excepthook prints the exception's own traceback
    try:
        sys.excepthook(type(exc), exc, tb)
    except Exception:
        traceback.print_exception(type(exc), exc, tb)


def _run(script: Optional[str], module: Optional[str], args: List[str]) -> None:
    if module is not None:
        sys.argv = [module] + args
        sys.path.insert(0, os.getcwd())
        runpy.run_module(module, run_name="__main__", alter_sys=True)
    else:
        path = os.path.abspath(script)
        sys.argv = [script] + args
        sys.path.insert(0, os.path.dirname(path))
        runpy.run_path(path, run_name="__main__")


def main(argv: Optional[List[str]] = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    opt_args, script, module, target_args = split_argv(argv)
    parser = _parser()
    opts = parser.parse_args(opt_args)
    if script is None and module is None:
        parser.error("no script to profile (kprof [options] script.py [args...] or kprof [options] -m module [args...])")
    try:
        _session.parse_mode(opts.mode)
        _session.parse_formats(opts.format)
    except ValueError as e:
        parser.error(str(e))
    if opts.merge_timeout < 0:
        parser.error(f"--merge-timeout must be 0 or more seconds, got {opts.merge_timeout}")
    _distributed.configure(merge_timeout=opts.merge_timeout, merge=not opts.no_merge)
    if script is not None and not os.path.isfile(script):
        print(f"{PROG}: error: can't open file {script!r}: no such file", file=sys.stderr)
        return 2
    _session.start_cli(name=opts.name, context=opts.context, mode=opts.mode,
                       hook=None if opts.hook == "none" else opts.hook,
                       backend=None if opts.backend == "auto" else opts.backend,
                       output_dir=opts.output_dir, format=opts.format)

    global _prev_term
    prev_term = None
    _register_fork_hook()
    try:
        prev_term = signal.signal(signal.SIGTERM, _on_sigterm)
    except (ValueError, OSError):  # not the main thread, or no signals here
        prev_term = None
    _prev_term = prev_term
    main_pid = os.getpid()

    exit_exc: Optional[SystemExit] = None
    code = 0
    die_of: Optional[int] = None
    try:
        _run(script, module, target_args)
    except SystemExit as e:
        exit_exc = e
    except KeyboardInterrupt as e:
        _report(e)
        die_of = signal.SIGINT
    except _Terminated:
        die_of = signal.SIGTERM
    except BaseException as e:  # the script's uncaught exception
        _report(e)
        code = 1
    finally:
        if prev_term is not None:
            try:
                signal.signal(signal.SIGTERM, prev_term)
            except (ValueError, OSError):
                pass
        held, write_failed = _write_profile() if os.getpid() == main_pid else (None, False)

    if die_of is None and held is not None:
        die_of = held
    if die_of is not None:
        _die(die_of)
    if write_failed:
        # The profile is lost: say so in the exit status, unless the program already failed.
        status = exit_exc.code if exit_exc is not None else code
        if status is None or status == 0:
            return WRITE_FAILED
    if exit_exc is not None:
        raise exit_exc
    return code


def _write_profile() -> Tuple[Optional[int], bool]:
    """Finalize the session.  SIGINT/SIGTERM arriving meanwhile are held back (a second Ctrl-C must
    not lose the profile) and returned, to be re-raised once the profile is written.  Returns
    ``(held signal or None, whether writing failed)``."""
    pending: List[int] = []
    failed = False

    def hold(signum, frame):
        pending.append(signum)
        _distributed.interrupt()  # rank 0 stops waiting for other ranks' profiles and merges what it has

    saved = {}
    for sig in (signal.SIGINT, signal.SIGTERM):
        try:
            saved[sig] = signal.signal(sig, hold)
        except (ValueError, OSError):
            pass
    try:
        paths = _session.finalize_cli()
        for p in paths:
            print(f"{PROG}: wrote {p}", file=sys.stderr)
    except Exception as e:
        failed = True
        msg = str(e)
        if not msg.startswith(f"{PROG}:"):
            msg = f"{PROG}: could not write the profile: {type(e).__name__}: {msg}"
        print(f"{msg} (exit status {WRITE_FAILED})", file=sys.stderr)
    finally:
        for sig, prev in saved.items():
            try:
                signal.signal(sig, prev)
            except (ValueError, OSError):
                pass
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        except Exception:
            pass
    return (pending[0] if pending else None), failed


def _die(sig: int) -> None:
    """End the process by ``sig`` with its default action, as if kprof had not caught it."""
    try:
        signal.signal(sig, signal.SIG_DFL)
        os.kill(os.getpid(), sig)
    except Exception:
        pass
    os._exit(128 + int(sig))
