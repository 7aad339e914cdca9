"""``kprof-viewer``: show a kprof or Proton profile in the terminal.

Exit status: 0 on success, 1 for a bad profile, metric or kernel name (one ``error:`` line on
stderr), 2 for bad command-line usage.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import threading
from typing import IO, Sequence

from .. import options
from ..format import ProfileFormatError
from ..textsafe import encodable, term_escape
from . import metrics as M
from . import render, report, tree
from .html_report import HtmlReportError, write_report
from .source_view import SourceViewError, source_report

PROG = "kprof-viewer"

METRICS_HELP = """\
metrics to show, comma-separated, any number (default: time/ms,time/%%).
Raw metrics are those in the file (time, count, flops16, bytes, ...; 'time' means 'time (ns)').
Derived: time/{s,ms,us,ns}, avg_time/{s,ms,us,ns} (time/count), flops (all widths),
flop/s gflop/s tflop/s and flop{8,16,32,64}/s ..., byte/s gbyte/s tbyte/s,
util (max of compute and bandwidth fraction of the device peak; sm_80, sm_89, sm_90, sm_100),
<metric>/%% (share of the total). Merged profiles (torchrun): time/ms:rank<R>, time/ms:{min,median,max,mean},
imbalance (max/median across ranks), wait/ms:max, transfer/ms:... Names and units are case-insensitive."""


class _Fail(Exception):
    """A user-facing error: printed as one line, exit status 1."""


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog=PROG,
        description="Show a kprof or Proton (.hatchet) profile as a tree with metric columns.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="examples:\n"
               f"  {PROG} -m time/ms,tflop16/s,util profile.hatchet\n"
               f"  {PROG} -i attn -d 3 profile.hatchet\n"
               f"  {PROG} --print-sorted -m time/us,time/% profile.hatchet\n"
               f"  {PROG} --diff-profile before.hatchet after.hatchet\n"
               f"  {PROG} --source matmul_kernel profile.hatchet\n"
               f"  {PROG} -m time/ms:max,time/ms:median,imbalance,wait/ms:max train.merged.hatchet\n"
               f"  {PROG} --rank 1 train.merged.hatchet",
    )
    p.add_argument("profile", help="profile file (.hatchet JSON from kprof or Proton)")
    p.add_argument("-l", "--list", action="store_true", help="list the metrics in the file (raw and derivable) and the devices")
    p.add_argument("-m", "--metrics", action="append", metavar="METRICS", help=METRICS_HELP)
    p.add_argument("-d", "--depth", type=int, default=100, metavar="DEPTH",
                   help="show DEPTH levels below the root (default: 100)")
    p.add_argument("-i", "--include", metavar="REGEX",
                   help="keep only the paths through frames whose name matches (re.search); totals are recomputed")
    p.add_argument("-e", "--exclude", metavar="REGEX",
                   help="drop frames whose name matches, with their subtrees; totals are recomputed")
    p.add_argument("-t", "--threshold", type=float, metavar="THRESHOLD",
                   help="hide frames whose first metric is below THRESHOLD (|difference| with --diff-profile); "
                        "parents of shown frames stay")
    p.add_argument("-f", "--format", default="full", metavar="FORMAT",
                   help="Python frame names (file:line@function): full (default), file_function_line, "
                        "function_line or file_function (':' for '_' is accepted)")
    p.add_argument("--print-sorted", "--print_sorted", dest="print_sorted", action="store_true",
                   help="print a flat list of frames (merged by name), hottest first, instead of the tree")
    p.add_argument("--diff-profile", metavar="OTHER", help="show this profile minus OTHER, frame by frame")
    p.add_argument("--rank", type=int, metavar="R",
                   help="merged profile (NAME.merged.hatchet): show rank R alone, as its own profile")
    p.add_argument("--source", metavar="KERNEL",
                   help="show KERNEL's source with per-line samples, share and top stall reasons")
    p.add_argument("--html", metavar="FILE",
                   help="write one self-contained HTML report (flame graph, kernel pages with source and SASS) "
                        "to FILE instead of printing; -m, -i, -e, -f and --diff-profile apply")
    p.add_argument("--no-color", action="store_true", help="plain text even on a terminal (also: NO_COLOR=1)")
    p.add_argument("--max-size", metavar="SIZE",
                   help="largest profile file to load, e.g. 4G or 500M (default 1G; also KPROF_MAX_PROFILE_SIZE)")
    p.add_argument("-w", "--width", type=int, metavar="COLUMNS",
                   help="output width (default: the terminal's, or 160 when not a terminal)")
    return p


def main(argv: Sequence[str] | None = None, *, stdout: IO[str] | None = None, stderr: IO[str] | None = None) -> int:
    """Run the viewer; returns the exit status (``stdout``/``stderr`` are for tests)."""
    out = stdout if stdout is not None else sys.stdout
    err = stderr if stderr is not None else sys.stderr
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as e:  # argparse already printed its usage message
        return int(e.code or 0)
    try:
        if args.max_size is not None:
            options.set_override("max_profile_bytes", options.parse_size(args.max_size, "--max-size"))
        try:
            return _deep_safe(_run, args, out, err)
        finally:
            options.set_override("max_profile_bytes", None)
    except (ProfileFormatError, M.MetricError, SourceViewError, HtmlReportError, _Fail, options.OptionError) as e:
        _say(err, f"{PROG}: error: {e}")
        return 1
    except BrokenPipeError:  # e.g. piped into `head`: stop quietly, as other CLI tools do
        try:
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())  # so the flush at interpreter exit cannot fail
        except (OSError, ValueError, AttributeError):
            pass
        return 0


_STACK_BYTES = 1 << 30   # reserved, not committed: only the pages a deep tree touches are used


def _deep_safe(fn, *args):
    """Run ``fn(*args)`` so that the tree walks of the reports (recursive, a few frames per tree
    level) work on any tree the reader accepts (``KPROF_MAX_PROFILE_DEPTH`` frames): in a thread
    with a large stack and a recursion limit to match.  Exceptions are re-raised here."""
    depth = options.get("max_profile_depth")
    need = 8 * depth + 2000
    if need <= sys.getrecursionlimit():
        return fn(*args)
    result: list = []
    failure: list = []

    def target():
        try:
            result.append(fn(*args))
        except BaseException as e:  # handed to the calling thread
            failure.append(e)

    old_limit = sys.getrecursionlimit()
    old_stack = threading.stack_size()
    try:
        threading.stack_size(_STACK_BYTES)
        sys.setrecursionlimit(need)
        t = threading.Thread(target=target, name="kprof-viewer", daemon=True)   # Ctrl-C ends the process
        t.start()
    except (ValueError, RuntimeError, MemoryError):  # no large stacks here: run as is
        sys.setrecursionlimit(old_limit)
        return fn(*args)
    finally:
        threading.stack_size(old_stack)
    try:
        t.join()
    finally:
        sys.setrecursionlimit(old_limit)
    if failure:
        raise failure[0]
    return result[0]


def _say(err: IO[str], text: str) -> None:
    # Messages quote names from the profile: escaped like everything else printed.
    err.write(encodable(term_escape(text), getattr(err, "encoding", None)) + "\n")


def _note(err: IO[str], text: str) -> None:
    _say(err, f"{PROG}: note: {text}")


def _compile(flag: str, pattern: str | None) -> re.Pattern[str] | None:
    if pattern is None:
        return None
    try:
        return re.compile(pattern)
    except re.error as e:
        raise _Fail(f"{flag}: bad regular expression {pattern!r}: {e}") from None


def _prepare(path: str, args: argparse.Namespace, frame_format: str,
             inc: re.Pattern[str] | None, exc: re.Pattern[str] | None) -> tree.Profile:
    profile = tree.load(path)
    if args.rank is not None:
        try:
            profile = tree.select_rank(profile, args.rank)
        except ValueError as e:
            raise _Fail(str(e)) from None
    tree.apply_frame_format(profile.root, frame_format)
    root = profile.root
    if inc is not None:
        root = tree.include(root, inc)
    if exc is not None:
        root = tree.exclude(root, exc)
    if root is not profile.root:
        tree.compute_inclusive(root, profile.additive)
        profile.root = root
    return profile


def _resolve_metrics(profile: tree.Profile, specs: list[str] | None, err: IO[str]) -> list[M.Metric]:
    cat = M.catalog(profile.raw_names, profile.additive)
    wanted = specs if specs else M.default_specs(cat, profile.raw_names)
    if not wanted:
        raise _Fail(f"{profile.path}: the profile has no metrics to show")
    metrics = M.resolve_list(wanted, cat, profile.raw_names)
    return _check_util(metrics, profile, cat, err)


def _check_util(metrics: list[M.Metric], profile: tree.Profile, cat: dict, err: IO[str]) -> list[M.Metric]:
    if not any(m.kind == "util" for m in metrics):
        return metrics
    usable, note = M.util_note(profile.device_info)
    if note:
        _note(err, f"{profile.label}: {note}")
    if usable:
        return metrics
    kept = [m for m in metrics if m.kind != "util"]
    if not kept:  # util was all that was asked for: show the default columns rather than nothing
        kept = M.resolve_list(M.default_specs(cat, profile.raw_names), cat, profile.raw_names)
    return kept


def _run(args: argparse.Namespace, out: IO[str], err: IO[str]) -> int:
    frame_format = tree.normalize_frame_format(args.format)
    if frame_format is None:
        raise _Fail(f"-f: unknown frame format {args.format!r}; expected one of {', '.join(tree.FRAME_FORMATS)}")
    if args.depth < 0:
        raise _Fail(f"-d: depth must be 0 or more, got {args.depth}")
    inc = _compile("-i", args.include)
    exc = _compile("-e", args.exclude)
    color = render.want_color(args.no_color, out)
    width = render.output_width(args.width, out)
    output = render.Output(color=color, width=width, file=out)
    specs = [s for chunk in args.metrics for s in M.split_specs(chunk)] if args.metrics else None

    if args.list:
        output.lines(report.list_report(tree.load(args.profile)))
        return 0
    profile = _prepare(args.profile, args, frame_format, inc, exc)
    if args.html is not None:
        other = _prepare(args.diff_profile, args, frame_format, inc, exc) if args.diff_profile else None
        pairs = _diff_pairs(profile, other, specs, err) if other is not None else None
        _note(err, f"wrote {write_report(args.html, profile, specs=specs, other=other, pairs=pairs)}")
        return 0
    if args.source is not None:
        output.lines(source_report(profile, args.source, width=width, color=color))
        return 0
    if args.diff_profile:
        other = _prepare(args.diff_profile, args, frame_format, inc, exc)
        pairs = _diff_pairs(profile, other, specs, err)
        output.lines(report.diff_report(profile, other, pairs, depth=args.depth, threshold=args.threshold,
                                        width=width, color=color, sorted_flat=args.print_sorted))
        return 0
    metrics = _resolve_metrics(profile, specs, err)
    if args.print_sorted:
        lines = report.flat_report(profile, metrics, threshold=args.threshold, width=width, color=color)
    else:
        lines = report.tree_report(profile, metrics, depth=args.depth, threshold=args.threshold,
                                   width=width, color=color)
    output.lines(lines)
    return 0


def _diff_pairs(a: tree.Profile, b: tree.Profile, specs: list[str] | None, err: IO[str]) -> list[tuple[M.Metric, M.Metric]]:
    """Metrics present in both profiles, as (metric in a, metric in b); a metric only one of them
    has is left out with a note, one neither has is an error."""
    cat_a = M.catalog(a.raw_names, a.additive)
    cat_b = M.catalog(b.raw_names, b.additive)
    if specs:
        wanted = specs
    else:
        wanted = M.default_specs(cat_a, a.raw_names)
        if not all(_try(w, cat_b, b) for w in wanted):
            wanted = [n for n in a.raw_names if _try(n, cat_b, b)][:1]
        if not wanted:
            raise _Fail(f"{a.label} and {b.label} have no metric in common; nothing to compare")
    pairs: list[tuple[M.Metric, M.Metric]] = []
    seen: set[str] = set()
    # notes wait until it is known whether the diff can go ahead: if not, the one error line says why
    notes: list[str] = []
    for spec in wanted:
        ma, mb = _try(spec, cat_a, a), _try(spec, cat_b, b)
        if ma is None and mb is None:
            M.resolve(spec, cat_a, a.raw_names)  # raises the one-line error with close matches
        if ma is None or mb is None:
            missing = a.label if ma is None else b.label
            notes.append(f"{spec!r} is left out of the diff: {missing} does not have it")
            continue
        if ma.name in seen:
            continue
        seen.add(ma.name)
        pairs.append((ma, mb))
    util_pairs = [p for p in pairs if p[0].kind == "util"]
    if util_pairs:
        for prof in (a, b):
            usable, note = M.util_note(prof.device_info)
            if note:
                notes.append(f"{prof.label}: {note}")
            if not usable:
                pairs = [p for p in pairs if p[0].kind != "util"]
    if not pairs:
        why = f" ({'; '.join(notes)})" if notes else ""
        raise _Fail(f"none of the metrics {', '.join(wanted)} exist in both {a.label} and {b.label}{why}")
    for n in notes:
        _note(err, n)
    return pairs


def _try(spec: str, cat: dict, profile: tree.Profile) -> M.Metric | None:
    try:
        return M.resolve(spec, cat, profile.raw_names)
    except M.MetricError:
        return None


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
