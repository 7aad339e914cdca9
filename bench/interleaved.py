"""Timing several implementations of one computation with their launches interleaved, so each comparison is
made inside one stretch of GPU time.

Why: on an H200, do_bench's per-call median lands on one of two levels about 0.6% apart, and which one looks
random from call to call (the seventeenth session's paired rounds, docs/performance.md). A ratio of two
separate do_bench calls then mostly counts how often each landed high. Here every repetition times each
implementation once, in a rotating order, each after the same L2 flush: a level that holds over a stretch of
time holds for all of them alike, and the per-repetition ratios cancel it (R1a, one H200: Triton against its own
control within 0.002-0.16% in four rows, 95% intervals +-0.02-0.17%, where separate calls gave +-0.3-0.8%).

    times = interleaved({"a": fa, "b": fb}, rep=100)    # {"a": [ms, ...], "b": [ms, ...]}, one per repetition
    paired_log_ratio_mean(times["b"], times["a"])        # mean of log(b_i / a_i) over repetitions (2% trimmed)
"""
from __future__ import annotations

import math
import statistics
from typing import Callable, Dict, List


def interleaved(fns: Dict[str, Callable], warmup: float = 25, rep: float = 100, flush_l2: bool = True,
                max_reps: int = 2000) -> Dict[str, List[float]]:
    """``{name: [ms per repetition]}``: about ``rep`` ms of GPU time per implementation (after ``warmup`` ms, also
    interleaved), each run timed with its own CUDA events after an L2 flush (kernelc's 256 MB buffer, as
    ``do_bench``). Each repetition runs the implementations in a fresh random order (seeded: the same for the same
    number of repetitions), so none always runs first nor always after the same one: in R1a (H200, 2026-11-29) a
    rotation, where each column always followed the same other, read Triton against its own control at +0.16%."""
    import random
    import torch
    from kernelc.runtime.timing import _l2_flush_buffer
    names = list(fns)
    cache = _l2_flush_buffer() if flush_l2 else None
    for f in fns.values():
        f()
    torch.cuda.synchronize()
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    s.record()
    for _ in range(3):
        for f in fns.values():
            if cache is not None:
                cache.zero_()
            f()
    e.record()
    torch.cuda.synchronize()
    # the flush's time is in this estimate, so reps err on the low side; a repetition runs every implementation
    est = max(s.elapsed_time(e) / (3 * len(names)), 1e-4)
    n_warm = max(1, int(warmup / est))
    n_rep = max(3, min(max_reps, int(rep / est)))
    for _ in range(n_warm):
        for f in fns.values():
            f()
    ev = {n: [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(n_rep)]
          for n in names}
    rng = random.Random(n_rep)
    for i in range(n_rep):
        order = list(names)
        rng.shuffle(order)
        for n in order:
            if cache is not None:
                cache.zero_()
            a, b = ev[n][i]
            a.record()
            fns[n]()
            b.record()
    torch.cuda.synchronize()
    return {n: [a.elapsed_time(b) for a, b in ev[n]] for n in names}


def paired_log_ratio(num: List[float], den: List[float]) -> float:
    """Median over repetitions of log(num_i / den_i): the two implementations' time ratio within a repetition."""
    return statistics.median(math.log(a / b) for a, b in zip(num, den) if a > 0 and b > 0)


TRIM = 0.02


def paired_log_ratio_mean(num: List[float], den: List[float], trim: float = TRIM) -> float:
    """Mean over repetitions of log(num_i / den_i), the ``trim`` share most extreme on each side left out.

    The figure a round reports since R3. Kernels of about 70 us (softmax fwd, permute, rope on an H200, R1b) run
    at one of two levels about 2.5% apart launch by launch, and a column's level is not shared with the other
    columns of its repetition (their times correlate at -0.3): the per-repetition ratios are then a mixture, whose
    median depends on how the two levels mix (softmax fwd's median said -0.56% where the mean said +0.07%). The
    mean weighs each launch's time as a run of many launches does; the 2% trim drops a disturbed repetition."""
    logs = sorted(math.log(a / b) for a, b in zip(num, den) if a > 0 and b > 0)
    k = int(len(logs) * trim)
    return statistics.fmean(logs[k:len(logs) - k] if len(logs) > 2 * k else logs)
