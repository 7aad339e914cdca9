"""``kprof-analyze``: stall-to-line reports, diagnostics and autotune suggestions for kernelc kernels.

::

    kprof-analyze profile.hatchet [--kernel REGEX] [--json] [--arch sm_90a] [--top N] [--lines N]
                  [--no-check] [--no-color] [-o FILE] [--fail-on {error,warning}]
                  [--verify script.py [-- script args...]]

Exit status: 0, or 1 with ``--fail-on`` when a finding of that severity (or worse) is reported, or 2
for bad input (unreadable profile, a ``--kernel`` pattern that matches nothing, a bad ``--arch``).
"""
from __future__ import annotations

import argparse
import os
import sys
from typing import List, Optional

EPILOG = """\
examples:
  kprof-analyze run.hatchet                         hottest kernels: lines, diagnostics, configs
  kprof-analyze run.hatchet --kernel matmul --json  one kernel, JSON (schema kprof-analyze/1)
  kprof-analyze run.hatchet --arch sm_90a           analyse (recompile) for another target
  kprof-analyze run.hatchet --verify train.py -- --steps 10
                                                    re-run train.py with each suggested config
                                                    forced (KERNELC_OVERRIDE) and time the kernel
"""


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(
        prog="kprof-analyze", formatter_class=argparse.RawDescriptionHelpFormatter, epilog=EPILOG,
        description="Tell a kernel author what is wrong with their kernelc kernels, on which line, and "
                    "which configs to try.")
    ap.add_argument("profile", help="a kprof (or Proton) .hatchet profile")
    ap.add_argument("-k", "--kernel", metavar="REGEX", help="only kernels whose name matches (re.search, any case)")
    ap.add_argument("--json", action="store_true", help="print the report as JSON (schema kprof-analyze/1)")
    ap.add_argument("--arch", metavar="ARCH", help="target to analyse for, e.g. sm_90a (artifacts for another "
                    "target, or missing from the cache, are recompiled from source)")
    ap.add_argument("--top", type=int, default=5, metavar="N", help="analyse the N hottest kernels (default 5; 0: all)")
    ap.add_argument("--lines", type=int, default=8, metavar="N", help="hottest source lines per kernel (default 8)")
    ap.add_argument("--no-check", action="store_true", help="do not compile the suggested configs to check them")
    ap.add_argument("--no-color", action="store_true", help="plain text even on a terminal (also NO_COLOR=1)")
    ap.add_argument("-o", "--output", metavar="FILE", help="write the report (text or JSON) to FILE")
    ap.add_argument("--fail-on", choices=("error", "warning"), help="exit 1 if a finding of this severity or worse "
                    "is reported")
    ap.add_argument("--tune", action="store_true", help="time the current and the suggested configs on synthetic "
                    "inputs shaped like the profiled launch (needs a GPU; the user's program is not re-run)")
    ap.add_argument("--verify", metavar="SCRIPT", help="re-run SCRIPT (arguments after --) with each suggested "
                    "config forced on its kernel and report the measured times")
    return ap


def main(argv: Optional[List[str]] = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    script_args: List[str] = []
    if "--" in argv:
        i = argv.index("--")
        argv, script_args = argv[:i], argv[i + 1:]
    ap = build_parser()
    args = ap.parse_args(argv)
    import analyzer
    try:
        rep = analyzer.analyze(args.profile, kernel=args.kernel, arch=args.arch, top=args.top,
                               validate=not args.no_check, n_lines=args.lines)
    except analyzer.AnalyzerError as e:
        print(f"kprof-analyze: {e}", file=sys.stderr)
        return 2
    if args.verify:
        if not os.path.isfile(args.verify):
            print(f"kprof-analyze: --verify {args.verify}: no such script", file=sys.stderr)
            return 2
        from .verify import verify
        rows = []
        for k in rep.kernels:
            if not k.suggestions:
                continue
            if not args.json:
                print(f"kprof-analyze: verifying {len(k.suggestions)} config(s) of {k.name} with {args.verify} ...",
                      file=sys.stderr)
            rows.extend(verify(args.verify, script_args, k.name, k.suggestions))
        rep.verification = rows
        if not rows:
            rep.notes.append("--verify: no kernel has suggested configs to verify")
    tune_text = ""
    if args.tune:
        from .tune import render, tune
        results = {}
        for k in rep.kernels:
            res = tune(k.facts, k.suggestions)
            results[k.name] = res
            tune_text += render(k.name, res)
        rep.tuning = results
    if args.json:
        text = rep.json_text() + "\n"
    else:
        color = (not args.no_color and not args.output and sys.stdout.isatty() and not os.environ.get("NO_COLOR"))
        text = rep.render(color=color) + tune_text
    if args.output:
        with open(args.output, "w") as f:
            f.write(text)
    else:
        sys.stdout.write(text)
        sys.stdout.flush()
    if args.fail_on:
        worst = {"error": ("error",), "warning": ("error", "warning")}[args.fail_on]
        if any(d.severity in worst for d in rep.findings):
            return 1
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
