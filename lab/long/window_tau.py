"""The drafter's chain tau against the context length, for context windows of the drafter's
attention, teacher-forced: the target's greedy answer is decoded once per prompt, then each
setting walks it as the engine's chain would (`--tree 0 --block-size 16`: draft 15 tokens from
the committed context and the staged token, commit the agreeing prefix plus the target's token).
The walk depends only on the drafts, so its tau is the engine's; one prefill serves all settings.

    python lab/long/window_tau.py PROMPTS.jsonl OUT.json [TOKENS] [SETTINGS]

SETTINGS: comma-separated, "full" or a window ("512"), optionally with sinks ("512+4": the
context's first 4 positions stay visible too).
"""

import json
import sys
import time

from dflash import backend

backend.setup()

import mlx.core as mx  # noqa: E402
import numpy as np  # noqa: E402

from dflash import drafter as drafter_mod  # noqa: E402
from dflash.config import GenerationConfig  # noqa: E402
from dflash.engine import stream  # noqa: E402
from dflash.load import encode_prompt, load_pair  # noqa: E402

B = 16


def with_sinks(sinks):
    """Attention.visible with the context's first `sinks` positions visible to every query."""
    real = drafter_mod.Attention.visible

    def visible(self, n_ctx, n_block):
        start, mask = real(self, n_ctx, n_block)
        if not sinks or start == 0:
            return start, mask
        full = np.ones((n_block, n_ctx + n_block), bool)
        full[:, sinks:start] = False
        full[:, start:] = mask
        return 0, full
    return visible


def walk(pair, full, start, dcache):
    """Cycles and committed tokens of the chain walk over full[start:]."""
    target, drafter = pair.target, pair.drafter
    t, cycles, lengths = start, 0, []
    while t < len(full) - 1:
        for c in dcache:
            c.offset = t  # the drafter sees the context before the staged token
        drafted = drafter.chain(target, full[t], B, dcache).tolist()
        truth = full[t + 1 : t + B]
        acc = 0
        while acc < len(truth) and drafted[acc] == truth[acc]:
            acc += 1
        lengths.append(acc)
        cycles += 1
        t += acc + 1
    return cycles, lengths


def answered(pair, row: dict, tokens: int):
    """(prompt ids, prompt + the target's greedy answer, the tapped features of all of it)."""
    ids = encode_prompt(pair.tokenizer, row.get("messages") or row["prompt"])
    s = list(stream(pair, ids, GenerationConfig(mode="target", max_tokens=int(tokens))))[-1]
    full = ids + list(s.token_ids)
    feats = []
    pair.target.prefill(full, pair.target.make_cache(), on_chunk=feats.append)
    return ids, full, mx.concatenate(feats, axis=1)


def main(src, dst, tokens=96, settings="full,512,1024"):
    pair = load_pair()
    drafter = pair.drafter
    rows = [json.loads(l) for l in open(src) if l.strip()]
    out = []
    for row in rows:
        t0 = time.time()
        ids, full, feats = answered(pair, row, tokens)
        dcache = drafter.make_cache()
        drafter.extend_context(feats, dcache)
        res = {"id": row.get("id"), "category": row.get("category"), "context": len(ids), "tokens": len(full) - len(ids)}
        for setting in settings.split(","):
            window, _, sinks = setting.partition("+")
            drafter_mod.Attention.visible = with_sinks(int(sinks or 0))
            for layer in drafter.layers:
                layer.self_attn.window = None if window == "full" else int(window)
            cycles, lengths = walk(pair, full, len(ids), dcache)
            res[setting] = round(sum(a + 1 for a in lengths) / cycles, 3) if cycles else 0.0
        out.append(res)
        print(json.dumps(res), f"{time.time() - t0:.0f}s", flush=True)
        json.dump(out, open(dst, "w"), indent=1)


if __name__ == "__main__":
    main(*sys.argv[1:])
