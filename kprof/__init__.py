"""``python -m kprof script.py``: the kprof profiler's command line (see :mod:`profiler.cli`).

The profiler itself is the :mod:`profiler` package (``import profiler``).
"""
