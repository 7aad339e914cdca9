# R2's CUDA_ERROR_ILLEGAL_INSTRUCTION at 08's TMA case (kernelc, 512 in the second repeat): the same cases with the harness fix
S=bench/experiments/tutorial_gaps/host_gpu_split.py
CASES="g08:1024:triton-tma g08:512:triton-tma"
timeout 48 python3 $S --impl kernelc --tutorials .ext/tutorials --cases $CASES --repeats 3 --budget-s 36 --tag g08 --out $OUT/g08.kernelc.json > $OUT/g08.kernelc.log 2>&1; echo "g08 rc=$?"
python3 -c "
import json; d=json.load(open('$OUT/g08.kernelc.json'))
errs=[r['case']+': '+r['error'][:100] for r in d['rows'] if 'error' in r]
print('rows', len(d['rows']), 'errors', len(errs), errs[:3])
" 2>&1 | tail -3
tail -5 $OUT/g08.kernelc.log
