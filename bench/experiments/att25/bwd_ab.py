"""(att25) att23's A/B script (``bench/experiments/att23/bwd_ab.py``: entries interleaved round by round, order reversed
each round, ``attention_bwd`` called directly, cuDNN through autograd, every entry's gradients checked against the
default's and cuDNN's) with this session's entry added to its ``ENTRIES``:

- ``rows``: the default with ds's dK/dV loop reading its LSE and delta rows through 1-D descriptors (``ROWS_TMA``),
  which the compiler rings with each Q/dO stage (passes/schedule.py, ``_register_tiles``): the consumers read them
  from shared memory after the stage's barrier instead of 8 + 8 ``LDG.64`` a trip (the non-causal default since R1);
- ``norows``: the default with ``ROWS_TMA`` off (the non-causal default before att25).

    python3 bench/experiments/att25/bwd_ab.py --seq 4096 --head-dim 128 --causal 0 --entries cudnn def rows ...
"""
import importlib.util
import os

HERE = os.path.dirname(os.path.abspath(__file__))
_spec = importlib.util.spec_from_file_location("att23_bwd_ab", os.path.join(HERE, "..", "att23", "bwd_ab.py"))
AB = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(AB)

AB.ENTRIES.update({"rows": dict(dkdv_config=dict(ROWS_TMA=True)), "norows": dict(dkdv_config=dict(ROWS_TMA=False))})

if __name__ == "__main__":
    AB.main()
