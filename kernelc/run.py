"""``python -m kernelc.run script.py [args...]``: run an unmodified Triton program on kernelc.

``import triton`` and every ``triton.*`` import in the program (and in the libraries it imports)
resolve to kernelc (``kernelc/compat/alias.py``); a real Triton is never imported. Also
``python -m kernelc.run -m package.module [args...]``, and :func:`run_path` for notebooks and tests.
``--interpret`` runs every kernel in the CPU interpreter (as ``KERNELC_INTERPRET=1``).
"""
from __future__ import annotations

import argparse
import os
import runpy
import sys
from typing import List, Optional, Sequence


def run_path(path: str, argv: Sequence[str] = (), run_name: str = "__main__") -> dict:
    """Run the Triton program at ``path`` with ``argv`` as its arguments under the alias; returns its
    globals. ``sys.argv`` and ``sys.path[0]`` are the script's while it runs and restored after."""
    from .compat import install
    install()
    old_argv, old_path0 = sys.argv, sys.path[0] if sys.path else None
    sys.argv = [path, *argv]
    script_dir = os.path.dirname(os.path.abspath(path))
    sys.path.insert(0, script_dir)
    try:
        return runpy.run_path(path, run_name=run_name)
    finally:
        sys.argv = old_argv
        if sys.path and sys.path[0] == script_dir:
            del sys.path[0]
        elif old_path0 is not None and script_dir in sys.path:
            sys.path.remove(script_dir)


def run_module(module: str, argv: Sequence[str] = ()) -> dict:
    """As :func:`run_path` for ``python -m module``."""
    from .compat import install
    install()
    old_argv = sys.argv
    sys.argv = [module, *argv]
    try:
        return runpy.run_module(module, run_name="__main__", alter_sys=True)
    finally:
        sys.argv = old_argv


def main(argv: Optional[List[str]] = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m kernelc.run",
        description="Run an unmodified Triton program with `import triton` resolved to kernelc.")
    ap.add_argument("--interpret", action="store_true", help="run every kernel in the CPU interpreter")
    ap.add_argument("--bench-points", type=int, metavar="N",
                    help="run only the first N x values of each triton.testing.Benchmark (a quick CPU smoke run)")
    ap.add_argument("-m", dest="module", help="run a module (as python -m) instead of a script")
    ap.add_argument("script", nargs="?", help="the program to run")
    ap.add_argument("args", nargs=argparse.REMAINDER, help="its arguments")
    argv = list(sys.argv[1:] if argv is None else argv)
    # As with `python -m mod args`, everything after the module name (or the script) belongs to the
    # program: `-m pytest -q -x` must not have `-q` parsed as one of ours.
    rest: List[str] = []
    takes_value = {"--bench-points"}
    i = 0
    while i < len(argv):
        arg = argv[i]
        if arg in takes_value:
            i += 2
            continue
        if arg == "-m" and i + 1 < len(argv):
            argv, rest = argv[:i + 2], argv[i + 2:]
            break
        if arg.startswith("-m") and len(arg) > 2:
            argv, rest = argv[:i + 1], argv[i + 1:]
            break
        if not arg.startswith("-"):
            argv, rest = argv[:i + 1], argv[i + 1:]
            break
        i += 1
    a = ap.parse_args(argv)
    a.args = list(a.args) + rest
    if a.interpret:
        os.environ["KERNELC_INTERPRET"] = "1"
    if a.bench_points is not None:
        if a.bench_points < 1:
            ap.error("--bench-points must be 1 or more")
        from . import testing
        testing.bench_points = a.bench_points
    if a.module:
        rest = ([a.script] if a.script else []) + list(a.args)
        run_module(a.module, rest)
        return 0
    if not a.script:
        ap.error("give a script to run (or -m module)")
    if not os.path.isfile(a.script):
        ap.error(f"no such file: {a.script}")
    run_path(a.script, a.args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
