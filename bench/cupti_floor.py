"""Run a script with only CUPTI's kernel/memcpy/memset activity records on (records counted and
dropped, no callbacks, no kprof): the floor any CUPTI-based profiler pays.

    python bench/cupti_floor.py script.py args...

Used by bench_profiler_overhead.py as the ``cupti-floor`` row of the ``train`` workload.
"""
from __future__ import annotations

import runpy
import sys


def enable_activity_only() -> list:
    from cupti import cupti
    seen = [0]

    def requested():
        return 8 << 20, 0

    def completed(activities):
        seen[0] += len(activities)

    cupti.activity_register_callbacks(requested, completed)
    for kind in (cupti.ActivityKind.CONCURRENT_KERNEL, cupti.ActivityKind.MEMCPY, cupti.ActivityKind.MEMSET):
        cupti.activity_enable(kind)
    return seen


def main() -> int:
    script, sys.argv = sys.argv[1], sys.argv[1:]
    enable_activity_only()
    try:
        runpy.run_path(script, run_name="__main__")
    except SystemExit as e:
        return int(e.code or 0) if not isinstance(e.code, str) else 1
    finally:
        from cupti import cupti
        cupti.activity_flush_all(1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
