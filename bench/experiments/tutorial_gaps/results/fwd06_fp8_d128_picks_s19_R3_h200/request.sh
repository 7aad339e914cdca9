# tutorial 06's fp8 d128 forward at N_CTX 2048, Triton's pick (128x64 s3 w4) and kernelc's (64x64 s3 w4), causal and not,
# under each runtime: is the 0.905 of the non-causal table the shared autotune key's pick, and is kernelc's pick right causal?
F=bench/experiments/tutorial_gaps/fwd06_configs.py; T=.ext/tutorials/06-fused-attention.py
for impl in kernelc triton; do for c in 1 0; do
  timeout 24 python3 $F --impl $impl $T --n-ctx 2048 --head-dim 128 --causal $c --fp8 --configs 128x64x3x4 64x64x3x4 \
    --out $RES/$impl.c$c.json > $RES/$impl.c$c.log 2>&1; echo "$impl causal=$c rc=$?"
done; done
for f in $RES/*.json; do echo "== $f"; python3 -c "
import json,sys
d=json.load(open(sys.argv[1])); d=d if isinstance(d,list) else d.get('rows',d)
for r in d: print({k: r.get(k) for k in ('impl','config','causal','ms','ms_graph','host_us','tflops','max_abs_err','error')})" $f 2>&1 | cut -c1-300; done
