"""Which cycles are the slow ones? One long-suite row run twice in one process with the fixed
64-node tree; per cycle: the context, verify ms in each run, the tree's depth, the accepted path,
and whether the caches had to move nodes (a path off the spine) or only trim.

    python lab/long/why_cycles.py ROW_ID [RUNS [TABLE]]
Knobs (environment): WHY_CACHE_LIMIT (bytes: mx.set_cache_limit), WHY_KERNEL_MAX (the tree
kernel's score limit, kernels.KERNEL_MAX_SCORES), WHY_BUCKET (the masked call's keys padded to a
multiple of this, padding masked out: its temporaries keep one size for a while), WHY_SLICES (the
masked call over the fetched keys, a new shape every cycle, as before the forty-first session's
TreeAttention over the cache's buffer), WHY_NOSPLIT (mx.fast's masked call over the buffer
instead of the split kernel, as in the forty-first session), WHY_PAD (the drafter's context grows
by a multiple of this many rows, padding trimmed: its projections keep one shape whatever a cycle
accepted; forty-fourth session), WHY_TREE (the tree's nodes; 0: the default, Fallback's choices),
and MLX's own (MLX_USE_CUDA_GRAPHS=0, MLX_MAX_OPS_PER_BUFFER ...).
"""

import json
import os
import statistics
import sys

from dflash import backend

backend.setup()

from dflash.config import GenerationConfig  # noqa: E402
from dflash.engine import stream, warm  # noqa: E402
from dflash.events import Cycle  # noqa: E402
from dflash.load import encode_prompt, load_pair  # noqa: E402


def depth(parents):
    d = [0]
    for p in parents:  # node i+1's parent (0: the root)
        d.append(d[p] + 1)
    return max(d)


def padded(bucket):
    import mlx.core as mx

    def attend(q, k, v, scale, visible):
        R, S = q.shape[2], k.shape[2]
        pad = -S % bucket
        if pad:
            zeros = mx.zeros((*k.shape[:2], pad, k.shape[3]), k.dtype)
            k, v = mx.concatenate([k, zeros], 2), mx.concatenate([v, zeros], 2)
        mask = mx.concatenate([mx.ones((R, S - R), dtype=mx.bool_), visible,
                               mx.zeros((R, pad), dtype=mx.bool_)], axis=1)
        return mx.fast.scaled_dot_product_attention(q, k, v, scale=scale, mask=mask)
    return attend


def pad_context(multiple):
    """DraftContext.cache with the pending rows padded to a multiple of `multiple`, trimmed after."""
    import mlx.core as mx

    from dflash import engine

    def cache(self):
        if self.pending:
            f = mx.concatenate(self.pending, axis=1)
            pad = -f.shape[1] % multiple
            if pad:
                f = mx.concatenate([f, mx.zeros((f.shape[0], pad, f.shape[2]), f.dtype)], axis=1)
            self.drafter.extend_context(f, self._cache)
            for c in self._cache if pad else ():
                c.trim(pad)
            self.pending = []
        return self._cache
    engine.DraftContext.cache = cache


def main(row_id, runs=2, show_table=""):
    import mlx.core as mx

    from dflash.backends import kernels

    if "WHY_CACHE_LIMIT" in os.environ:
        mx.set_cache_limit(int(os.environ["WHY_CACHE_LIMIT"]))
    if "WHY_KERNEL_MAX" in os.environ:
        kernels.KERNEL_MAX_SCORES = int(os.environ["WHY_KERNEL_MAX"])
    if "WHY_BUCKET" in os.environ:
        kernels.masked_attention = padded(int(os.environ["WHY_BUCKET"]))
    if "WHY_NOSPLIT" in os.environ:
        kernels.split_available = lambda *a: False
    if "WHY_BUCKET" in os.environ or "WHY_SLICES" in os.environ:  # the masked call on the fetched keys
        kernels.TreeAttention.over = lambda self, cache: lambda q, k, v, scale: kernels.tree_attention_gpu(
            q, k, v, scale, self.visible)
    if "WHY_PAD" in os.environ:
        pad_context(int(os.environ["WHY_PAD"]))
    tree = int(os.environ.get("WHY_TREE", "64")) or None
    pair = load_pair()
    warm(pair)
    row = next(r for r in map(json.loads, open("assets/bench/long.jsonl")) if r["id"] == row_id)
    ids = encode_prompt(pair.tokenizer, row.get("messages") or row["prompt"])
    table = []
    for _ in range(int(runs)):
        cycles = [e for e in stream(pair, ids, GenerationConfig(max_tokens=128, tree=tree)) if isinstance(e, Cycle)]
        table.append(cycles)
        v = [c.verify_s * 1e3 for c in cycles]
        print(f"{row_id} {len(cycles)} cycles: verify mean {statistics.mean(v):5.1f} median "
              f"{statistics.median(v):5.1f} max {max(v):6.1f} ms; slow (>2x median) at "
              f"{[i for i, t in enumerate(v) if t > 2 * statistics.median(v)]}; cache "
              f"{mx.get_cache_memory() / 2**20:.0f} MiB, peak {mx.get_peak_memory() / 2**20:.0f} MiB", flush=True)
    if not show_table:
        return
    print(f"{row_id}: {len(ids)} prompt tokens; verify ms per run; depth; accepted; moved")
    for i, c in enumerate(table[0]):
        moved = tuple(c.path) != tuple(range(1, c.accepted + 1))
        times = " ".join(f"{t[i].verify_s * 1e3:6.1f}" if i < len(t) else "     -" for t in table)
        print(f"{i:3} ctx {len(ids) + c.total_tokens - len(c.committed):5} {times}  d{depth(c.parents):2} "
              f"acc {c.accepted:2} {'moved' if moved else ''}", flush=True)


if __name__ == "__main__":
    main(*sys.argv[1:])
