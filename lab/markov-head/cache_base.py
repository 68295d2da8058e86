"""The shipped drafter's block hidden states at every answer position of a few prompts' greedy
answers, on the CPU: what the Markov head is calibrated and evaluated on without a GPU.

    python lab/markov-head/cache_base.py --prompts assets/prompts/eval.jsonl --per-category 2 \
        --out /tmp/markov/eval.npz
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from dflash import backend  # noqa: E402

backend.setup()  # before mlx loads: the CPU BLAS
import mlx.core as mx
import numpy as np

from dflash import train as T
from dflash.load import load_pair

ROWS = 64  # blocks per drafter call


def pick(prompts, per_category: int):
    seen: dict[str, int] = {}
    out = []
    for cat, text in prompts:
        seen[cat] = seen.get(cat, 0) + 1
        if seen[cat] <= per_category:
            out.append((cat, text))
    return out


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--prompts", required=True)
    p.add_argument("--per-category", type=int, default=2)
    p.add_argument("--max-tokens", type=int, default=128)
    p.add_argument("--draft", default="assets/smollm2-135m-instruct-dflash")
    p.add_argument("--out", required=True)
    args = p.parse_args()
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    pair = load_pair("builtin:smollm2-135m-instruct", args.draft, progress=lambda s: None)
    target, drafter = pair.target, pair.drafter
    prompts = pick(T.read_prompts(args.prompts), args.per_category)
    t0 = time.perf_counter()
    ds = T.generate_data(target.model, pair.tokenizer, prompts, out.with_suffix(".data.npz"),
                         args.max_tokens, batch_size=len(prompts), progress=print)
    print(f"{len(ds)} answers in {time.perf_counter() - t0:.0f}s", flush=True)
    io, B, mask = T.FrozenIO(target), drafter.block_size, drafter.mask_token_id
    L = int(ds.lengths.max())
    cols = {k: [] for k in ("h", "labels", "valid", "prev", "seq", "anchor")}
    for i in range(len(ds)):
        t1 = time.perf_counter()
        feats = T.target_features(target, mx.array(T.pad_ids(ds, [i], L, 0)))
        for keys, b in T.every_anchor(ds, np.array([i]), L, B, ROWS, mask, 0):
            n = len(keys)
            h = T.drafter_forward(drafter, io, feats, mx.array(b["block"]), mx.array(b["anchors"]),
                                  mx.array(b["rows"]))[:n, 1:]
            cols["h"].append(np.array(h.astype(mx.float32)))
            cols["labels"].append(b["labels"][:n])
            cols["valid"].append(b["valid"][:n])
            cols["prev"].append(np.concatenate([b["block"][:n, :1], b["labels"][:n, :-1]], 1))
            cols["seq"].append(np.full(n, i))
            cols["anchor"].append(np.array([a for _, a in keys]))
        print(f"answer {i + 1}/{len(ds)}: {ds.lengths[i] - ds.prompt_lens[i]} tokens, "
              f"{time.perf_counter() - t1:.0f}s", flush=True)
    np.savez(out, **{k: np.concatenate(v) for k, v in cols.items()})


if __name__ == "__main__":
    main()
