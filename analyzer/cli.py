"""``kprof-analyze``: stall-to-line reports, diagnostics and autotune suggestions for kernelc kernels.

::

    kprof-analyze profile.hatchet [--kernel REGEX] [--json] [--arch sm_90a] [--top N] [--lines N]
                  [--no-check] [--no-color] [-o FILE] [--html FILE] [--fail-on {error,warning}]
                  [--recompile-from-source [--allow-import-outside]] [--bundle-artifacts]
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
  kprof-analyze run.hatchet --arch sm_90a --recompile-from-source
                                                    analyse (recompile) for another target
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
    ap.add_argument("--html", metavar="FILE", help="write a self-contained HTML report (flame graph, kernel pages "
                    "with source, SASS, stall heat and these diagnoses inline) to FILE instead of printing the text")
    ap.add_argument("--fail-on", choices=("error", "warning"), help="exit 1 if a finding of this severity or worse "
                    "is reported")
    ap.add_argument("--recompile-from-source", action="store_true", help="when a kernel's cache entry is missing "
                    "(or --arch asks for another target), import the kernel's source file named in the profile to "
                    "recompile it: its top level runs; the file is named on stderr first")
    ap.add_argument("--allow-import-outside", action="store_true", help="with --recompile-from-source, also import "
                    "source files outside the current working directory")
    ap.add_argument("--bundle-artifacts", action="store_true", help="copy the profiled kernels' cache entries to "
                    "PROFILE.kernels/ (next to the profile), where kprof-analyze finds them on another machine")
    ap.add_argument("--max-size", metavar="SIZE", help="largest profile file to load, e.g. 4G (default 1G; also "
                    "KPROF_MAX_PROFILE_SIZE)")
    ap.add_argument("--tune", action="store_true", help="time the current config, the suggested ones and the "
                    "usual/model-ranked tile configs on synthetic inputs shaped like the profiled launch (needs a GPU; "
                    "the user's program is not re-run, the kernels' source files are imported as with "
                    "--recompile-from-source)")
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
    from profiler import options
    if args.max_size is not None:
        try:
            options.set_override("max_profile_bytes", options.parse_size(args.max_size, "--max-size"))
        except options.OptionError as e:
            ap.error(str(e))
    try:
        return _main(args, script_args)
    finally:
        options.set_override("max_profile_bytes", None)


def _main(args, script_args: List[str]) -> int:
    import analyzer
    from .load import SourcePolicy
    if args.allow_import_outside and not (args.recompile_from_source or args.tune):
        print("kprof-analyze: --allow-import-outside needs --recompile-from-source", file=sys.stderr)
        return 2
    # --tune launches the kernels, so it imports their source files (as --recompile-from-source does)
    policy = SourcePolicy(recompile_from_source=args.recompile_from_source or args.tune,
                          allow_import_outside=args.allow_import_outside)
    from profiler.textsafe import encodable, term_escape
    try:
        rep = analyzer.analyze(args.profile, kernel=args.kernel, arch=args.arch, top=args.top,
                               validate=not args.no_check, n_lines=args.lines, source_policy=policy)
    except analyzer.AnalyzerError as e:
        print(f"kprof-analyze: {term_escape(e)}", file=sys.stderr)
        return 2
    if args.bundle_artifacts:
        from .load import bundle_artifacts, bundle_dir
        keys = [k.facts.cache_key for k in rep.kernels]
        done = bundle_artifacts(args.profile, keys)
        print(f"kprof-analyze: {len(done)} of {len([k for k in keys if k])} kernel artifacts in "
              f"{bundle_dir(args.profile)}", file=sys.stderr)
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
                print(f"kprof-analyze: verifying {len(k.suggestions)} config(s) of {term_escape(k.name)} with "
                      f"{args.verify} ...",
                      file=sys.stderr)
            rows.extend(verify(args.verify, script_args, k.name, k.suggestions))
        rep.verification = rows
        if not rows:
            rep.notes.append("--verify: no kernel has suggested configs to verify")
    tune_text = ""
    if args.tune:
        from .tune import render, tune
        results = []
        for k in rep.kernels:
            res = tune(k.facts, k.suggestions)
            k.tuning = res
            results.append(dict(res, rank=k.rank, name=k.name))
            tune_text += render(f"{k.name} (rank {k.rank}, {_config_text(k.facts.config())})", res)
        rep.tuning = results
    if args.html:
        from profiler.viewer.html_report import HtmlReportError
        from .html import write_html_report
        try:
            print(f"kprof-analyze: wrote {write_html_report(args.html, rep)}", file=sys.stderr)
        except HtmlReportError as e:
            print(f"kprof-analyze: {term_escape(e)}", file=sys.stderr)
            return 2
    if not args.html or args.json or args.output:  # with --html alone the page is the report
        if args.json:
            text = rep.json_text() + "\n"
        else:
            color = (not args.no_color and not args.output and sys.stdout.isatty() and not os.environ.get("NO_COLOR"))
            text = rep.render(color=color) + tune_text
        if args.output:
            with open(args.output, "w", encoding="utf-8") as f:   # files are UTF-8 whatever the locale
                f.write(text)
        else:
            sys.stdout.write(encodable(text, getattr(sys.stdout, "encoding", None)))
            sys.stdout.flush()
    if args.fail_on:
        worst = {"error": ("error",), "warning": ("error", "warning")}[args.fail_on]
        if any(d.severity in worst for d in rep.findings):
            return 1
    return 0


def _config_text(cfg) -> str:
    return ", ".join(f"{k}={v}" for k, v in cfg.items())


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
