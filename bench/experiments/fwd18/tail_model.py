"""A causal grid's tail under the hardware's dispatch, modelled: programs go, in launch order, to the first free
slot (an SM's share: 3 slots an SM for the fp8 pointer forward's 64x128 programs, 1 for the FA3 order's 128x128,
4 for fp16 D=64's 64x64), each costing its key blocks plus a fixed cost ``f`` (in key blocks). Prints the makespan
over the mean work a slot (1.0: no tail) for launch order, a head's row blocks heaviest first (LPT 1), and the
heaviest first across groups of G heads (LPT G). B=4, H=32 (128 heads), N 4096. Nothing here is a test.

    python3 bench/experiments/fwd18/tail_model.py
"""
import heapq

HEADS, SMS = 128, 132


def makespan(costs, slots):
    free = [0.0] * slots
    for c in costs:
        heapq.heappush(free, heapq.heappop(free) + c)
    return max(free)


def model(row_blocks, blocks, per_sm, f=1.0, groups=(1, 4, 8, 16, 32)):
    slots = SMS * per_sm
    mean = sum(blocks(s) + f for s in range(row_blocks)) * HEADS / slots
    out = {"launch order": makespan([blocks(s) + f for _ in range(HEADS) for s in range(row_blocks)], slots) / mean}
    for g in groups:
        order = [blocks(s) + f for _ in range(HEADS // g) for s in reversed(range(row_blocks)) for _ in range(g)]
        out[f"LPT {g}"] = makespan(order, slots) / mean
    return out


def main():
    cases = {
        "fp8 pointer 64x128 (64 row blocks of 1..32 key blocks), 3 an SM": (64, lambda s: (s + 2) // 2, 3),
        "fp16 FA3 order 128x128 (32 row blocks of 1..32), 1 an SM": (32, lambda s: s + 1, 1),
        "fp16 D=64 64x64 (64 row blocks of 1..64), 4 an SM": (64, lambda s: s + 1, 4),
    }
    for name, (nb, blocks, per_sm) in cases.items():
        r = model(nb, blocks, per_sm)
        print(f"{name}: " + ", ".join(f"{k} {v:.3f}" for k, v in r.items()))
    nc = makespan([33.0] * (64 * HEADS), 3 * SMS) / (33.0 * 64 * HEADS / (3 * SMS))
    print(f"non-causal fp8 pointer (32 key blocks each), 3 an SM: {nc:.3f}")


if __name__ == "__main__":
    main()
