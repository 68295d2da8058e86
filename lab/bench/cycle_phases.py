"""Where a tree cycle's time goes on this host: each phase of engine._tree_cycle timed alone
(an eval barrier after each; a pass's graph building
and its evaluation apart), medians over cycles, then plain target steps for reference.

    python lab/bench/cycle_phases.py [--nodes 8 32] [--cycles 12]
"""
import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from dflash import backend  # noqa: E402

backend.setup()
import mlx.core as mx  # noqa: E402
import numpy as np  # noqa: E402

from dflash import tree  # noqa: E402
from dflash.engine import DraftContext  # noqa: E402
from dflash.load import encode_prompt, load_pair  # noqa: E402

PROMPT = "Explain how a hash map works, with an example in Python."


def run(pair, nodes: int, cycles: int) -> dict:
    t, d = pair.target, pair.drafter
    cache, ctx = t.make_cache(), DraftContext(d)
    staged = int(mx.argmax(t.prefill(encode_prompt(pair.tokenizer, PROMPT), cache, on_chunk=ctx.add)).item())
    ms: dict[str, list[float]] = {}

    def lap(name, t0):
        now = time.perf_counter()
        ms.setdefault(name, []).append(1000 * (now - t0))
        return now

    for _ in range(cycles):
        t0 = time.perf_counter()
        c = ctx.cache()
        mx.eval([x.state for x in c])
        t0 = lap("context", t0)
        logits = d.draft_logits(t, staged, d.block_size, c)
        t0 = lap("drafter graph", t0)
        mx.eval(logits)
        t0 = lap("drafter eval", t0)
        ids, logp, bias = tree.draft(d, t, logits)
        t0 = lap("candidates+transitions", t0)
        tr = tree.build(staged, ids, logp, nodes, bias).spine_first()
        layout = tree.Layout.of(tr)
        t0 = lap("build+layout", t0)
        out, feats, _ = t.forward(mx.array([tr.tokens]), cache, tree=layout)
        posterior = mx.argmax(out[0], axis=-1)
        t0 = lap("verify graph", t0)
        mx.eval(posterior, feats)
        t0 = lap("verify eval", t0)
        keep, staged = tree.accept(tr, posterior.tolist())
        tree.compact(cache, len(tr), keep)
        ctx.add(feats[:, mx.array(keep)])
        mx.eval([x.state for x in cache])
        lap("accept+compact", t0)
    for _ in range(cycles):  # plain steps: the baseline's unit
        t0 = time.perf_counter()
        out, feats, _ = t.forward(mx.array([[staged]]), cache)
        nxt = mx.argmax(out[0, -1])
        t1 = lap("plain step graph", t0)
        staged = nxt.item()
        lap("plain step eval", t1)
        lap("plain step", t0)
    return {k: round(float(np.median(v)), 2) for k, v in ms.items()}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--nodes", type=int, nargs="+", default=[8, 32])
    ap.add_argument("--cycles", type=int, default=12)
    a = ap.parse_args()
    pair = load_pair(progress=lambda s: None)
    run(pair, a.nodes[0], 3)  # warm-up: kernels compiled, caches allocated
    for n in a.nodes:
        print(json.dumps({"device": str(mx.default_device()), "nodes": n, "ms": run(pair, n, a.cycles)}))


if __name__ == "__main__":
    main()
