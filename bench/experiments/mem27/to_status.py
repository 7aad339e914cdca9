"""ab27.py's JSON -> the bench row's rounds under its bench_memory_bound name, as mem21/issue21_status.py reads a
call (``{"rows": [{"benchmark", "rounds"}]}``); the Liger rows are left out (not rows of the status table).

    python3 bench/experiments/mem27/to_status.py AB27.json OUT.json
"""
import json
import sys

NAME = "rope 4x4096x32x128 bf16"


def main(argv) -> int:
    d = json.load(open(argv[0]))
    rows = [{"benchmark": NAME, "rounds": r["rounds"], "from": f"{argv[0].split('/')[-1]} row ours"}
            for r in d["rows"] if r.get("row") == "ours" and r.get("rounds")]
    with open(argv[1], "w") as f:
        json.dump({"gpu": d.get("gpu"), "cols": d.get("cols"), "rows": rows}, f)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
