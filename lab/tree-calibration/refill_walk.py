"""The chain's tau with a refilled second pass (refill.py's idea as a drafting policy), replayed
along the target's greedy answers: pass 1 drafts the chain (`Drafter.chain`: base + the Markov
head after each drafted token); where its first k drafts are all right, pass 2 runs with them
written into block positions 1..k and the chain's positions k+1.. come from it instead. A walk
commits each cycle's accepted drafts plus the target's token, as the engine does.

    python lab/tree-calibration/refill_walk.py PROMPTS.jsonl PER_CATEGORY [--staged 64] [--k 2 4 6]
"""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from prompts import block_logits, head_bias, pick, refill_cli, staged  # noqa: E402  (this folder is on the path: the script's own)
from dflash import backend  # noqa: E402

backend.setup()
import mlx.core as mx  # noqa: E402
import numpy as np  # noqa: E402

a, pair = refill_cli(64, [2, 4, 6])
t, d = pair.target, pair.drafter
B = d.block_size


def chain_from(block, start, prev, dc):
    """Token ids drafted greedily (base + head bias) at block positions start..B-1 of `block`,
    the token before position `start` being `prev`."""
    base, out = block_logits(pair, block, dc), []
    for j in range(start - 1, B - 1):  # row j is block position j + 1
        row = base[j] + (head_bias(pair, prev) if d.has_markov and j >= 1 else 0)
        prev = int(d.column_tokens(mx.array([int(np.argmax(row))])).item())
        out.append(prev)
    return out


def run(drafts, truth):
    n = 0
    while n < len(drafts) and drafts[n] == truth[n]:
        n += 1
    return n


acc = {k: [] for k in [0] + a.k}  # per prompt: accepted drafts at each staged index
for r in pick(a.prompts, a.per_category, 0):
    per = {k: [] for k in acc}
    for s, g, dc in staged(pair, r["prompt"], a.staged):
        truth = g[s + 1 : s + B]
        first = chain_from([g[s]] + [d.mask_token_id] * (B - 1), 1, g[s], dc)
        n1 = run(first, truth)
        per[0].append(n1)
        for k in a.k:
            if n1 < k:  # pass 2 would be built on a wrong prefix: the cycle is pass 1's
                per[k].append(n1)
                continue
            block = [g[s]] + first[:k] + [d.mask_token_id] * (B - 1 - k)
            per[k].append(k + run(chain_from(block, k + 1, first[k - 1], dc), truth[k:]))
    for k in acc:
        acc[k].append(per[k])
    print(r["category"], " ".join(f"k={k}: {np.mean(per[k]):.2f}" for k in per), flush=True)


def walk(accepted):
    s, cycles, committed = 0, 0, 0
    while s < len(accepted):
        cycles, committed, s = cycles + 1, committed + accepted[s] + 1, s + accepted[s] + 1
    return committed / cycles


for k in acc:
    taus = [walk(p) for p in acc[k]]
    name = "pass 1 only (the chain now)" if k == 0 else f"refill after {k} right drafts"
    print(f"{name}: mean tau {np.mean(taus):.3f}, pooled accepted/index {np.mean(np.concatenate(acc[k])):.3f}")
