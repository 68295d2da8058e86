"""Per prompt, the target's greedy answer and, at every staged index of it, the tree's inputs as
the engine computes them (`tree.draft`: the drafter's top-8 per block position, their
log-probs and the Markov head's transitions), so that tree policies can be replayed offline.

    python lab/tree-calibration/collect.py PROMPTS.jsonl PER_CATEGORY OUT.npz [--skip N]

PER_CATEGORY prompts of each category, --width candidates a position (default the engine's 8) (after skipping the first N of each), 128 staged indices
each; the greedy answer runs 16 tokens past them (EOS ignored, as a tree may accept up to 15).
The drafter's context at staged index s holds the target's features of the prompt and of
g_0..g_{s-1}, as the engine's `_DraftContext` does."""
import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from prompts import pick, staged  # noqa: E402  (this folder is on the path: the script's own)
from dflash import backend  # noqa: E402

backend.setup()
import mlx.core as mx  # noqa: E402
import numpy as np  # noqa: E402

from dflash import tree  # noqa: E402
from dflash.load import load_pair  # noqa: E402

STAGED = 128


def spine_pool(drafter, target, logits, width):
    """tree.draft's (ids, logp, transitions) over a pool a position: the base's top width/2
    columns, then the top of base + bias(the spine's column before it) not among them (the
    spine: the greedy chain through the head, Drafter.chain), `width` in all."""
    base = np.array(logits.astype(mx.float32))
    lp = base - np.logaddexp.reduce(base, axis=-1, keepdims=True)
    half = width // 2
    cols = [list(np.argsort(-base[0], kind="stable")[:width])]
    prev = int(np.argmax(base[0]))
    for j in range(1, base.shape[0]):
        b = np.array(drafter.markov(target.embed(drafter.column_tokens(mx.array([prev])))).astype(mx.float32))[0]
        own = list(np.argsort(-base[j], kind="stable")[:width])
        picks = [c for c in np.argsort(-(base[j] + b), kind="stable")[:width] if c not in own[:half]]
        cols.append(own[:half] + picks[: width - half])
        prev = int(np.argmax(base[j] + b))
    cols = np.array(cols)
    bias = np.array(tree._transitions(drafter, target, mx.array(cols)))
    ids = cols if drafter.token_ids is None else drafter.token_ids[cols]
    return ids, np.take_along_axis(lp, cols, 1), bias

ap = argparse.ArgumentParser()
ap.add_argument("prompts"), ap.add_argument("per_category", type=int), ap.add_argument("out")
ap.add_argument("--skip", type=int, default=0)
ap.add_argument("--width", type=int, default=tree.WIDTH, help="candidates kept a position (replay any fewer)")
ap.add_argument("--spine-pool", action="store_true",
                help="each position's candidates: the base's top 8 and the top 8 of base + the Markov "
                     "bias after the spine's token before it (the head's own picks), 16 in all")
ap.add_argument("--draft", default=None, help="a drafter directory (default: the shipped one)")
a = ap.parse_args()
picked = pick(a.prompts, a.per_category, a.skip)

pair = load_pair(draft=a.draft, progress=lambda m: None)
target, drafter = pair.target, pair.drafter
B = drafter.block_size
out = {}
W = 2 * tree.WIDTH if a.spine_pool else a.width
draft = spine_pool if a.spine_pool else tree.draft
for n, r in enumerate(picked):
    t0 = time.time()
    cand = np.zeros((STAGED, B - 1, W), np.int32)
    logp = np.zeros((STAGED, B - 1, W), np.float32)
    bias = np.zeros((STAGED, B - 1, W, W), np.float16)
    for s, g, dcache in staged(pair, r["prompt"], STAGED):  # g: STAGED + B tokens
        logits = drafter.draft_logits(target, g[s], B, dcache)
        cand[s], logp[s], bias[s] = draft(drafter, target, logits, W)
    key = f"{r['category']}-{n}"
    out[f"{key}/g"], out[f"{key}/cand"], out[f"{key}/logp"], out[f"{key}/bias"] = np.array(g), cand, logp, bias
    print(f"{key}: {time.time() - t0:.1f} s", flush=True)
np.savez_compressed(a.out, **out)
