"""(att26) att23's A/B script (``bench/experiments/att23/bwd_ab.py``: entries interleaved round by round, order reversed
each round, ``attention_bwd`` called directly, cuDNN through autograd, every entry's gradients checked against the
default's and cuDNN's) with this session's causal entries added to its ``ENTRIES`` (D=128, ds):

- ``one``: ds's dK/dV kernel with causal's diagonal and the blocks below it in one loop, masked every trip
  (``ONE_LOOP``), no producer warpgroup;
- ``onews``: ``ONE_LOOP`` with a producer warpgroup (``WS=1``) for that one loop. With two loops ``WS=1`` gave the
  producer to the diagonal's (the compiler specialises one loop a kernel): att24's ``dswsc`` measured that, not this;
- ``onewsrows``: ``onews`` with the LSE/delta rows ringed by TMA (``ROWS_TMA``: the non-causal default's loop, masked);
- ``rows``: the causal default with ``ROWS_TMA`` (two loops, no producer; att25's tie), for reference.

    python3 bench/experiments/att26/bwd_ab.py --seq 4096 --head-dim 128 --causal 1 --entries cudnn def onews ...
"""
import importlib.util
import os

HERE = os.path.dirname(os.path.abspath(__file__))
_spec = importlib.util.spec_from_file_location("att23_bwd_ab", os.path.join(HERE, "..", "att23", "bwd_ab.py"))
AB = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(AB)

# every knob named (att27: the causal default became onewsrows, DS_ONE_LOOP, so a knob left out would take its value):
# the entries are what they were in session 26's R1; "def" is the default of the tree it runs on
AB.ENTRIES.update({
    "one": dict(dkdv_config=dict(ONE_LOOP=True, WS=0, ROWS_TMA=False)),
    "onews": dict(dkdv_config=dict(ONE_LOOP=True, WS=1, ROWS_TMA=False)),
    "onewsrows": dict(dkdv_config=dict(ONE_LOOP=True, WS=1, ROWS_TMA=True)),
    "rows": dict(dkdv_config=dict(ONE_LOOP=False, ROWS_TMA=True)),
})

if __name__ == "__main__":
    AB.main()
