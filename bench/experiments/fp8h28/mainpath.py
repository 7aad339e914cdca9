"""main's (eb79b89d) fp8 call on the host, in this process: what ``attention_fp8`` did per call before fp8h28 -- the
plan key, ``torch.empty(shape, device=, dtype=)``, ``_Plan.launch`` (its own frame) with the three ``_scale_arg``
calls, and the prepared launch through its descriptor body (each slot's tensor rebased onto a new descriptor object,
whose fields and map the entry's launch reads off it) -- on a plan of its own (``desc=1``: another key, the same
config) whose machine-value launch is switched off. The one difference from main's code: the prepared launch's two
lines that look for the machine-value launch and find none. Nothing here is a test.
"""
from __future__ import annotations


def main_fp8(A, first=None):
    """``call(q8, k8, v8t, q_scale, k_scale, v_scale, causal, sm_scale, key_order=False)`` as main's; ``first``:
    this tree's ``attention_fp8`` as it is, for the plan's first call (default ``A.attention_fp8``; a harness that
    wrapped that one passes the original)."""
    import torch
    first = first or A.attention_fp8
    off = set()

    def call(q8, k8, v8t, q_scale, k_scale, v_scale, causal=False, sm_scale=None, key_order=False):
        out_dtype = kernel = fold_scale = lpt = diag_split = mask_fold = even_n = one_loop = refill_top = None
        desc = 1
        config = {}
        device = q8.device
        key = ("fp8", q8.shape, k8.shape, v8t.shape, q8.stride(), k8.stride(), v8t.stride(), q8.dtype, k8.dtype,
               v8t.dtype, device, causal, sm_scale, out_dtype, fold_scale, kernel, lpt, key_order, diag_split,
               mask_fold, even_n, desc, one_loop, refill_top, *config.items())
        plan = A._PLANS.get(key)
        if plan is None:  # made (and its first launch run) by this tree's attention_fp8 under the same key
            o = first(q8, k8, v8t, q_scale, k_scale, v_scale, causal, sm_scale, key_order=key_order,
                                desc=1)
            plan = A._PLANS[key]
            if plan.run is not None and "_SM" in plan.run.__globals__:
                plan.run.__globals__["_SM"][0] = None  # main had no machine-value launch
                off.add(id(plan))
            return o
        o = torch.empty(plan.out_shape, device=device, dtype=plan.out_dtype)
        plan.launch(q8, k8, v8t, o, o, A._scale_arg(q_scale, device), A._scale_arg(k_scale, device),
                    A._scale_arg(v_scale, device))
        return o

    def still_off():
        """Whether every plan this made still has no machine-value launch (a respecialisation would re-arm it)."""
        return all(p.run.__globals__["_SM"][0] is None for p in A._PLANS.values() if id(p) in off)
    call.still_off = still_off
    return call
