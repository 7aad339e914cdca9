"""``triton.profiler.viewer`` (``proton-viewer``) on kprof's viewer.

``parse(metrics, filename, include=, exclude=, threshold=)`` returns the profile to show and the metric
names; ``print_tree(tree, metrics, depth=, format=, print_sorted=)`` prints it with kprof-viewer;
``main()`` takes proton-viewer's command line (``-l -m -i -e -t -d -f --print-sorted --diff-profile``).
"""
from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import List, Optional, Sequence


@dataclass
class ParsedProfile:
    """What :func:`parse` returns in place of Proton's hatchet GraphFrame (``.dataframe`` loads the
    pandas table through hatchet, as Proton's has)."""

    filename: str
    metrics: List[str]
    include: Optional[str] = None
    exclude: Optional[str] = None
    threshold: Optional[float] = None

    @property
    def dataframe(self):
        from profiler.viewer import load_dataframe
        return load_dataframe(self.filename)

    def argv(self, depth: int = 100, format: Optional[str] = None, print_sorted: bool = False) -> List[str]:
        a = [self.filename, "-m", ",".join(self.metrics), "-d", str(depth)]
        for flag, v in (("-i", self.include), ("-e", self.exclude), ("-t", self.threshold), ("-f", format)):
            if v is not None:
                a += [flag, str(v)]
        return a + (["--print-sorted"] if print_sorted else [])


def parse(metrics: Sequence[str], filename: str, include: Optional[str] = None, exclude: Optional[str] = None,
          threshold: Optional[float] = None):
    """Check the file and the metrics (``time/ms``, ``tflop16/s``, ...); returns ``(tree, metrics)``."""
    from profiler.viewer import tree
    from profiler.viewer import metrics as M
    profile = tree.load(filename)
    cat = M.catalog(profile.raw_names, profile.additive)
    resolved = M.resolve_list(list(metrics), cat, profile.raw_names)  # raises a clear error on a bad name
    names = [m.name for m in resolved]
    return ParsedProfile(filename, list(metrics), include, exclude, threshold), names


def print_tree(gf: ParsedProfile, metrics, depth: int = 100, format: Optional[str] = None,
               print_sorted: bool = False) -> None:
    """Print the profile tree with kprof-viewer (to ``sys.stdout``)."""
    from profiler.viewer.cli import main as viewer_main
    rc = viewer_main(gf.argv(depth, format, print_sorted), stdout=sys.stdout, stderr=sys.stderr)
    if rc:
        raise RuntimeError(f"kprof-viewer could not show {gf.filename} (exit status {rc})")


def read(filename: str):
    """Proton's ``read``: ``(graphframe, inclusive metric names, exclusive metric names, device info)``."""
    from profiler.viewer import tree
    from profiler.viewer import load_graphframe
    profile = tree.load(filename)
    raw = list(profile.raw_names)
    return load_graphframe(filename), [n for n in raw if n in profile.additive], \
        [n for n in raw if n not in profile.additive], profile.device_info


def main(argv: Optional[Sequence[str]] = None) -> int:
    """proton-viewer's command line, answered by kprof-viewer (same flags)."""
    from profiler.viewer.cli import main as viewer_main
    return viewer_main(list(sys.argv[1:] if argv is None else argv))
