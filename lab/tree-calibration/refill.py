"""Would a second drafter pass with the chosen path written into its block help? The drafter
fills [staged, MASK x 15]; here block positions 1..k also hold the target's own tokens (what an
accepted path of k drafts holds) and the rest stay MASK. Per position after k: how often the
target's token is the top-1 / among the top 8, with MASK there (the engine's one pass), with the
Markov head's bias from the true previous token (what the trees use), and with the prefix
written in (a refill pass; the drafter never saw real tokens there in training); split by
whether the engine's chain (pass 1, base + head) was itself right through position k ("on the
chain": a refill would only repeat it) or not (the path is a sibling's: a tree's other branches).

    python lab/tree-calibration/refill.py PROMPTS.jsonl PER_CATEGORY [--staged 32] [--k 1 2 4]
"""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from prompts import block_logits, head_bias, pick, refill_cli, staged  # noqa: E402  (this folder is on the path: the script's own)
from dflash import backend  # noqa: E402

backend.setup()
import mlx.core as mx  # noqa: E402
import numpy as np  # noqa: E402

a, pair = refill_cli(32, [1, 2, 4])
t, d = pair.target, pair.drafter
B, vocab = d.block_size, d.vocab
col_of = vocab.rows_of if vocab is not None else (lambda x: x)
hits = {}  # (k, kind) -> [n, top1, top8] at positions k+1 .. k+3


def score(key, lg, want, ok):
    v = lg[np.arange(len(want)), want]
    rank = (lg > v[:, None]).sum(1)
    h = hits.setdefault(key, np.zeros((3, 3)))
    h[:, 0] += ok
    h[:, 1] += ok * (rank < 1)
    h[:, 2] += ok * (rank < 8)


for r in pick(a.prompts, a.per_category, 0):
    for s, g, dc in staged(pair, r["prompt"], a.staged):
        mask = [g[s]] + [d.mask_token_id] * (B - 1)
        base = block_logits(pair, mask, dc)  # [15, n]: positions 1..15
        # the engine's chain (base + head after each drafted token): right through position k?
        chain = []
        for j in range(B - 1):
            row = base[j] + (head_bias(pair, chain[-1]) if j and d.has_markov else 0)
            chain.append(int(d.column_tokens(mx.array([int(np.argmax(row))])).item()))
        chain_ok = np.cumprod(np.array(chain) == np.array(g[s + 1 : s + B]))
        for k in a.k:
            split = "on the chain" if chain_ok[k - 1] else "off the chain"
            pos = np.arange(k, k + 3)  # rows of positions k+1..k+3
            toks = np.array(g[s + 1 + k : s + 4 + k])
            want = np.array(col_of(toks))
            ok = np.isin(toks, vocab.ids) if vocab is not None else np.ones(3, bool)
            want = np.where(ok, want, 0)
            score((k, split, "mask"), base[pos], want, ok)
            if d.has_markov:  # the head's bias from the true previous token
                prev = mx.array(g[s + k : s + k + 3])
                bias = np.array(d.markov(t.embed(prev)).astype(mx.float32))
                score((k, split, "mask+head"), base[pos] + bias, want, ok)
            filled = block_logits(pair, [g[s]] + g[s + 1 : s + 1 + k] + [d.mask_token_id] * (B - 1 - k), dc)
            score((k, split, "refill"), filled[pos], want, ok)
            if d.has_markov:
                score((k, split, "refill+head"), filled[pos] + bias, want, ok)
    print(r["category"], flush=True)
for (k, split, kind), h in sorted(hits.items()):
    print(f"k={k} {split} (n {int(h[0, 0])}) {kind:12s} " + "  ".join(
        f"pos {k + 1 + i}: top1 {h[i, 1] / h[i, 0]:.3f} top8 {h[i, 2] / h[i, 0]:.3f}" for i in range(3)))
