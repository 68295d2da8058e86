"""What the scripts here share: the prompts (the first `per_category` of each category of a
prompts file, one JSON object a line, after skipping the first `skip`) and the walk along the
target's greedy answer to one (`staged`)."""
import json
from pathlib import Path


def pick(path, per_category: int, skip: int = 0) -> list[dict]:
    seen, picked = {}, []
    for line in Path(path).read_text().splitlines():
        if not line.strip():
            continue
        r = json.loads(line)
        i = seen[r["category"]] = seen.get(r["category"], -1) + 1
        if skip <= i < skip + per_category:
            picked.append(r)
    return picked


def staged(pair, prompt: str, n: int):
    """(s, g, drafter cache) for each staged index s < n of the target's greedy answer g (n +
    block tokens) to `prompt`, the drafter's context holding the target's features of everything
    before s, as the engine's drafter context does."""
    import mlx.core as mx

    from dflash.load import encode_prompt

    t, d = pair.target, pair.drafter
    cache, pf, gf = t.make_cache(), [], []
    g = [int(mx.argmax(t.prefill(encode_prompt(pair.tokenizer, prompt), cache, on_chunk=pf.append)).item())]
    while len(g) < n + d.block_size:
        lg, f, _ = t.forward(mx.array([[g[-1]]]), cache)
        gf.append(f), g.append(int(mx.argmax(lg[0, -1]).item()))
    dc = d.make_cache()
    d.extend_context(mx.concatenate(pf, axis=1), dc)
    for s in range(n):
        if s:
            d.extend_context(gf[s - 1], dc)
        yield s, g, dc


def refill_cli(staged_default: int, k_default: list[int]):
    """refill.py's and refill_walk.py's arguments, and the pair they name (after backend.setup())."""
    import argparse

    from dflash.load import load_pair

    ap = argparse.ArgumentParser()
    ap.add_argument("prompts"), ap.add_argument("per_category", type=int)
    ap.add_argument("--staged", type=int, default=staged_default)
    ap.add_argument("--k", type=int, nargs="+", default=k_default)
    ap.add_argument("--draft", default=None, help="a drafter directory (default: the shipped one)")
    a = ap.parse_args()
    return a, load_pair(draft=a.draft, progress=lambda m: None)


def block_logits(pair, block: list[int], dc):
    """The drafter's logits [B-1, columns] (numpy float32) for block positions 1..B-1 of
    `block`, its context `dc`."""
    import mlx.core as mx
    import numpy as np

    t, d = pair.target, pair.drafter
    h = d(t.embed(mx.array(block)[None]), dc)[0, 1:]
    lg = d.vocab.logits(t, h) if d.vocab is not None else t.logits(h)
    return np.array(lg.astype(mx.float32))


_BIAS = {}  # (id(pair), tok) -> the head's row: the scripts ask for the same rows again and again


def head_bias(pair, tok: int):
    """The Markov head's bias over the drafter's columns after token `tok` (numpy float32),
    computed once per pair and token."""
    import mlx.core as mx
    import numpy as np

    key = (id(pair), int(tok))
    if key not in _BIAS:
        t, d = pair.target, pair.drafter
        _BIAS[key] = np.array(d.markov(t.embed(mx.array([int(tok)]))).astype(mx.float32))[0]
    return _BIAS[key]
