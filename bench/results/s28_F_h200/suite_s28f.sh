# The GPU suite on main (session 28's final call (merged main)).
cat .ext/gpu/req/HEAD.txt 2>/dev/null
timeout 345 python3 -m pytest -v -m gpu -n 8 -p no:cacheprovider tests -rfE --durations=10 > $OUT/gpu_tests.log 2>&1; echo "pytest rc=$?"
grep -vE " (PASSED|SKIPPED) " $OUT/gpu_tests.log | tail -30
