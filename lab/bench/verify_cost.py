"""Where does a k-token verify pass of the builtin target spend its time? A target forward of
k = 1..16 tokens at a 128-token context, then the model's ops alone at M = 1 and 16 rows (each
op 30 times in one graph, so launch costs count as they do inside a forward).

    python lab/bench/verify_cost.py [--reps 20] [--draft DIR [--draft-only]] [--out FILE.json]
"""

import argparse
import json
import statistics
import sys
from pathlib import Path
from time import perf_counter

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from dflash import backend  # noqa: E402

backend.setup()  # before mlx loads: the CPU BLAS, the CUDA buffer sizes
import mlx.core as mx  # noqa: E402

from dflash.drafter import load_drafter  # noqa: E402
from dflash.load import load_target  # noqa: E402
from dflash.registry import BUILTIN_TARGET  # noqa: E402
from dflash.target import Target  # noqa: E402

KS = (1, 2, 4, 8, 16)
CHAIN = 30  # one op repeated in one graph: as many as the target has layers


def median_ms(fn, reps: int) -> float:
    fn()
    times = []
    for _ in range(reps):
        t = perf_counter()
        fn()
        times.append(perf_counter() - t)
    return statistics.median(times) * 1e3


def forward_costs(target: Target, reps: int, context: int = 128) -> dict:
    cache = target.make_cache()
    target.prefill(list(range(100, 100 + context)), cache)

    def run(k):
        logits, _, _ = target.forward(mx.array([[200] * k]), cache)
        mx.eval(logits)
        target.rollback(cache, {}, k, 0)

    def backbone(k):  # the same forward without the vocabulary head
        h = target.embed(mx.array([[200] * k]))
        from mlx_lm.models.base import create_attention_mask
        mask = create_attention_mask(h, cache[0])
        for layer, c in zip(target.layers, cache):
            h = layer(h, mask, c)
        mx.eval(h)
        target.rollback(cache, {}, k, 0)

    return {"forward": {k: median_ms(lambda: run(k), reps) for k in KS},
            "backbone": {k: median_ms(lambda: backbone(k), reps) for k in KS}}


def op_costs(target: Target, reps: int) -> dict:
    layer = target.layers[0]
    a, mlp = layer.self_attn, layer.mlp
    H = target.hidden_size
    out = {}
    for M in (1, 16):
        x = mx.random.normal((1, M, H))
        xi = mx.random.normal((1, M, 1536))
        q = mx.random.normal((1, a.n_heads, M, 64))
        k = mx.random.normal((1, a.n_kv_heads, 128 + M, 64))
        mask = "causal" if M > 1 else None
        ops = {
            "q_proj": lambda: a.q_proj(x),
            "k_proj": lambda: a.k_proj(x),
            "gate_proj": lambda: mlp.gate_proj(x),
            "down_proj": lambda: mlp.down_proj(xi),
            "rms_norm": lambda: layer.input_layernorm(x),
            "rope": lambda: a.rope(q, offset=128),
            "sdpa_fp32": lambda: mx.fast.scaled_dot_product_attention(q, k, k, scale=0.125, mask=mask),
            "sdpa_bf16": lambda: mx.fast.scaled_dot_product_attention(
                q.astype(mx.bfloat16), k.astype(mx.bfloat16), k.astype(mx.bfloat16), scale=0.125, mask=mask),
            "head": lambda: target.logits(x),
        }
        for name, op in ops.items():
            out.setdefault(name, {})[M] = median_ms(lambda: mx.eval([op() for _ in range(CHAIN)]), reps) / CHAIN * 1e3
    return out  # microseconds per op


def draft_costs(target: Target, path: str, reps: int, context: int = 128) -> dict:
    """One drafter pass (block 16 + argmax) at a 128-token context, by the drafter's dtype: its
    precision changes what it proposes, never what is committed."""
    out = {}
    for dtype in (mx.float32, mx.bfloat16, mx.float16):
        drafter = load_drafter(path, dtype)
        target.tap_ids = list(drafter.target_layer_ids)
        cache, dcache = target.make_cache(), drafter.make_cache()
        target.prefill(list(range(100, 100 + context)), cache,
                       on_chunk=lambda f: drafter.extend_context(f, dcache))
        mx.eval([c.state for c in dcache])
        out[str(dtype).split(".")[-1]] = median_ms(
            lambda: mx.eval(mx.argmax(drafter.propose(target, 200, 16, dcache), axis=-1)), reps)
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--draft", default=None, help="also time this drafter's pass in fp32 and bf16")
    ap.add_argument("--draft-only", action="store_true")
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    res = {"device": str(mx.default_device()), "mlx": mx.__version__}
    if args.draft:
        lm, _, model_type = load_target(BUILTIN_TARGET, progress=lambda s: None, dtype="stored")
        res["draft"] = draft_costs(Target(lm, model_type), args.draft, args.reps)
        print("draft", json.dumps(res["draft"]), flush=True)
        save(res, args.out)
        if args.draft_only:
            return
    for dtype in ("stored", "float32"):
        lm, _, model_type = load_target(BUILTIN_TARGET, progress=lambda s: None, dtype=dtype)
        target = Target(lm, model_type)
        res[dtype] = forward_costs(target, args.reps)
        res[dtype]["ops_us"] = op_costs(target, args.reps)
        print(dtype, json.dumps(res[dtype]), flush=True)
        save(res, args.out)
    # bf16 activations: what a cheaper verify could cost (not lossless here: for reference only)
    lm, _, model_type = load_target(BUILTIN_TARGET, progress=lambda s: None, dtype="stored")
    lm.set_dtype(mx.bfloat16)
    res["stored_bf16_act"] = forward_costs(Target(lm, model_type), args.reps)
    print("stored_bf16_act", json.dumps(res["stored_bf16_act"]), flush=True)
    save(res, args.out)


def save(res: dict, path) -> None:
    if path:
        Path(path).write_text(json.dumps(res, indent=1))


if __name__ == "__main__":
    main()
