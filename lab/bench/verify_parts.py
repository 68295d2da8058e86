"""What a tree verify pass of R rows costs on this host's device, and which parts grow with R:
the whole pass (graph building and evaluation apart), then the same pass with its attention
replaced by a pass-through (q) and with the head on one row only, and the parts alone: all the
target's linears at R rows (and, where they are quantized, the same as dense matmuls of their
dequantized weights), the head at R rows, a layer's attention at R rows (30 calls).
Medians over --reps; each pass's cache growth is trimmed away after it. The MLP variants need
the `target._mlp` hook that commit cc1379b removed (check out its parent to run them);
without it they are skipped.

    python lab/bench/verify_parts.py --rows 1 17 65 129 --reps 20 [--out X.json]
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
import mlx.nn as nn  # noqa: E402
import numpy as np  # noqa: E402

from dflash import kernels, tree  # noqa: E402
from dflash import target as target_mod  # noqa: E402
from dflash.load import encode_prompt, load_pair  # noqa: E402
from dflash.policy import _sample_tree  # noqa: E402
from mlx_lm.models.activations import swiglu  # noqa: E402

PROMPT = "Explain how a hash map works, with an example in Python."


def timed(fn, reps):
    """(median ms to build the graph, median ms to evaluate it)."""
    build, run = [], []
    for i in range(reps + 2):
        t0 = time.perf_counter()
        out = fn()
        t1 = time.perf_counter()
        mx.eval(out)
        t2 = time.perf_counter()
        if i >= 2:  # two warm-ups: kernels compile
            build.append(1e3 * (t1 - t0)), run.append(1e3 * (t2 - t1))
    return round(float(np.median(build)), 3), round(float(np.median(run)), 3)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, nargs="+", default=[1, 17, 65, 129])
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--out")
    a = ap.parse_args()
    pair = load_pair(progress=lambda s: None)
    t = pair.target
    cache = t.make_cache()
    t.prefill(encode_prompt(pair.tokenizer, PROMPT) * 4, cache)  # ~200 keys of context
    res = {"device": str(mx.default_device()), "context": cache[0].offset, "rows": {}}
    linears = [m for _, m in t.model.named_modules() if isinstance(m, (nn.QuantizedLinear, nn.Linear))]
    attn = t.layers[0].self_attn
    hq, hkv, hd = attn.n_heads, attn.n_kv_heads, t.hidden_size // attn.n_heads
    dt = t.embed(mx.array([1])).dtype

    def width(m):  # a linear's input features (a quantized one packs 32 // bits to a uint32)
        return m.weight.shape[1] * (32 // m.bits if hasattr(m, "bits") else 1)

    dense = [mx.dequantize(m.weight, m.scales, m.biases, m.group_size, m.bits).astype(dt)
             for m in linears if isinstance(m, nn.QuantizedLinear)]
    dense = dense if len(dense) == len(linears) else None  # all quantized (the GPU's target)
    mx.eval(dense)
    gate_up = {}

    def fused_mlp(mlp, x, rows):
        g, u = mlp.gate_proj, mlp.up_proj
        names = ("weight", "scales", "biases") if hasattr(g, "scales") else ("weight",)
        if id(mlp) not in gate_up:
            gate_up[id(mlp)] = [mx.concatenate([getattr(g, n), getattr(u, n)]) for n in names]
            mx.eval(gate_up[id(mlp)])
        if len(names) == 1:
            gu = x @ gate_up[id(mlp)][0].T
        else:
            w, sc, b = gate_up[id(mlp)]
            gu = mx.quantized_matmul(x, w, sc, b, transpose=True, group_size=g.group_size, bits=g.bits)
        n = gu.shape[-1] // 2
        return mlp.down_proj(swiglu(gu[..., :n], gu[..., n:]))

    dense_of, halves_of = {}, {}

    def dense_w(lin):  # a linear's weight as a dense matrix in the activations' dtype (cached)
        if id(lin) not in dense_of:
            w = lin.weight if not hasattr(lin, "scales") else mx.dequantize(
                lin.weight, lin.scales, lin.biases, lin.group_size, lin.bits)
            dense_of[id(lin)] = w.astype(dt)
            mx.eval(dense_of[id(lin)])
        return dense_of[id(lin)]

    def split_k(lin, x):  # a quantized linear as two matmuls over the halves of its input
        if not hasattr(lin, "scales"):
            return lin(x)
        K = x.shape[-1]
        cuts = ((0, K // 2), (K // 2, K))
        if id(lin) not in halves_of:
            per, g = 32 // lin.bits, lin.group_size
            halves_of[id(lin)] = [[mx.contiguous(a) for a in (lin.weight[:, s // per : e // per],
                                   lin.scales[:, s // g : e // g], lin.biases[:, s // g : e // g])] for s, e in cuts]
            mx.eval(halves_of[id(lin)])
        parts = [mx.quantized_matmul(x[..., s:e], *w, transpose=True, group_size=lin.group_size, bits=lin.bits)
                 for (s, e), w in zip(cuts, halves_of[id(lin)])]
        return parts[0] + parts[1]

    for R in a.rows:
        tr = _sample_tree(R - 1, 15) if R > 1 else None
        layout = tree.Layout.of(tr) if tr is not None else None
        ids = mx.array([tr.tokens if tr is not None else [5]])

        def forward(head_rows=None):
            def fn():
                logits, feats, _ = t.forward(ids, cache, tree=layout)
                for c in cache:
                    c.trim(R)
                return [logits[:, :head_rows] if head_rows else logits, feats]
            return fn

        row = {"pass": timed(forward(), a.reps)}
        if R > 1:
            orig = kernels.tree_attention_gpu
            target_mod.kernels.tree_attention_gpu = lambda q, k, v, scale, visible: q
            row["pass, attention a pass-through"] = timed(forward(), a.reps)
            target_mod.kernels.tree_attention_gpu = orig
        fakes = [] if R == 1 else [("_rope_at", lambda rope, x, positions: x),
                                   ("_rope_at by table", lambda rope, x, positions: target_mod._rotate(
                                       x, x[:, :1], target_mod._rope_table(rope, positions))[0])]
        if True:  # parts of the layer replaced, one at a time
            for name, fake in (*fakes,
                               ("_mlp", lambda mlp, x, rows: x),
                               ("_mlp with gate+up as one matmul", fused_mlp),
                               ("_mlp with down dense", lambda mlp, x, rows: swiglu(
                                   mlp.gate_proj(x), mlp.up_proj(x)) @ dense_w(mlp.down_proj).T),
                               ("_mlp all dense", lambda mlp, x, rows: swiglu(
                                   x @ dense_w(mlp.gate_proj).T, x @ dense_w(mlp.up_proj).T) @ dense_w(mlp.down_proj).T),
                               ("_mlp with down split in two", lambda mlp, x, rows: split_k(
                                   mlp.down_proj, swiglu(mlp.gate_proj(x), mlp.up_proj(x)))),
                               ("_mlp without swiglu", lambda mlp, x, rows: mlp.down_proj(mlp.gate_proj(x) * mlp.up_proj(x))),
                               ("_mlp with uncompiled silu", lambda mlp, x, rows: mlp.down_proj(nn.silu(mlp.gate_proj(x)) * mlp.up_proj(x))),
                               ("_mlp gate and down only", lambda mlp, x, rows: mlp.down_proj(mlp.gate_proj(x))),
                               ("_mlp down only", lambda mlp, x, rows: mlp.down_proj(mx.concatenate([x[..., :512]] * 3, axis=-1)))):
                fn = name.split()[0]
                if not hasattr(target_mod, fn):  # the _mlp hook is gone (layers call their own MLP)
                    continue
                orig = getattr(target_mod, fn)
                setattr(target_mod, fn, fake)
                row[f"pass, {name} a pass-through" if name == fn else f"pass, {name}"] = timed(forward(), a.reps)
                setattr(target_mod, fn, orig)
        head = t.logits
        t.logits = lambda h: head(h[:, -1:])
        row["pass, head on one row"] = timed(forward(), a.reps)
        t.logits = head
        x = {n: mx.random.normal((1, R, n)).astype(dt) for n in {width(m) for m in linears}}
        row["linears alone"] = timed(lambda: [m(x[width(m)]) for m in linears], a.reps)
        if dense:
            row["linears alone, dequantized"] = timed(lambda: [x[width(m)] @ w.T for m, w in zip(linears, dense)], a.reps)
        hx = mx.random.normal((1, R, t.hidden_size)).astype(dt)
        row["head alone"] = timed(lambda: t.logits(hx), a.reps)
        if R > 1:
            S = cache[0].offset + R
            q = mx.random.normal((1, hq, R, hd)).astype(dt)
            k, v = (mx.random.normal((1, hkv, S, hd)).astype(dt) for _ in range(2))
            row["attention alone x layers"] = timed(
                lambda: [kernels.tree_attention_gpu(q, k, v, hd ** -0.5, layout.visible) for _ in t.layers], a.reps)
        res["rows"][R] = row
        print(R, json.dumps(row), flush=True)
    if a.out:
        Path(a.out).write_text(json.dumps(res, indent=1))


if __name__ == "__main__":
    main()
