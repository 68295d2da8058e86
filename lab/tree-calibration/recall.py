"""How often the target's next token is among a block position's top-W candidates, when they are
chosen by the drafter's base logits (as the engine chooses them now) or by base + the Markov
head's bias from the true previous token (path-conditioned choice), given the path before it is
the target's own. Where most tree paths stop because the target's token is not a candidate
(replay.py), this says whether choosing candidates per parent would change that.

    python lab/tree-calibration/recall.py PROMPTS.jsonl PER_CATEGORY [--skip N]
"""
import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from prompts import pick, staged  # noqa: E402  (this folder is on the path: the script's own)
from dflash import backend  # noqa: E402

backend.setup()
import mlx.core as mx  # noqa: E402
import numpy as np  # noqa: E402

from dflash.load import load_pair  # noqa: E402

STAGED = 64
WIDTHS = (1, 2, 4, 8, 16, 32)

ap = argparse.ArgumentParser()
ap.add_argument("prompts"), ap.add_argument("per_category", type=int), ap.add_argument("--skip", type=int, default=0)
a = ap.parse_args()
picked = pick(a.prompts, a.per_category, a.skip)
pair = load_pair(progress=lambda m: None)
t, d = pair.target, pair.drafter
B, vocab = d.block_size, d.vocab
col_of = vocab.rows_of if vocab is not None else (lambda x: x)
ranks = {"base": [], "head": []}  # [depth-1 (0..14)] lists of ranks of the target's token
for r in picked:
    for s, g, dc in staged(pair, r["prompt"], STAGED):
        base = d.draft_logits(t, g[s], B, dc).astype(mx.float32)  # [15, n] columns
        prev = mx.array(g[s + 1 : s + B - 1])  # the true token before positions 2..15
        head = mx.concatenate([base[:1], base[1:] + d.markov(t.embed(prev)).astype(mx.float32)])
        toks = np.array(g[s + 1 : s + B])
        want = np.array(col_of(toks))
        outside = ~np.isin(toks, vocab.ids) if vocab is not None else np.zeros(B - 1, bool)
        for name, lg in (("base", base), ("head", head)):
            lg = np.array(lg)
            v = lg[np.arange(B - 1), want]
            ranks[name].append(np.where(outside, 10**9, (lg > v[:, None]).sum(1)))
    print(r["category"], flush=True)
for name in ranks:
    rk = np.array(ranks[name])  # [positions, 15]
    print(name, " ".join(f"top{w} {np.mean(rk[:, 1:] < w):.3f}" for w in WIDTHS), "(depths 2-15)")
    print(name, "top8 by depth", " ".join(f"{np.mean(rk[:, k] < 8):.2f}" for k in range(B - 1)))
