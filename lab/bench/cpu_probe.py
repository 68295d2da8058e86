"""CPU profile probe for issue 6: BLAS choice, dtype, t(k), bitwise row invariance.

Run from the repository root with the venv active, one question per invocation (the BLAS is
chosen before mlx is imported, so it cannot change inside one process):

    python lab/bench/cpu_probe.py --blas ref      matmul
    python lab/bench/cpu_probe.py --blas openblas matmul
    python lab/bench/cpu_probe.py --blas openblas tk --weights fp32 --ks 1,2,4,8,16 --ctx 512
    python lab/bench/cpu_probe.py --blas openblas draft --weights fp32
    python lab/bench/cpu_probe.py --blas openblas --threads 1 bitwise --weights fp32
    python lab/bench/cpu_probe.py --blas openblas quantdiff --tokens 250 --prompts 8

--blas openblas loads Debian's libopenblas0-pthread in-process with RTLD_GLOBAL before
`import mlx.core`, so libmlx's undefined cblas_sgemm resolves to it (no LD_PRELOAD).
Results print as one JSON line per measurement.
"""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import statistics
import sys
import time
from pathlib import Path

OPENBLAS = "/usr/lib/x86_64-linux-gnu/openblas-pthread/libblas.so.3"
ROOT = Path(__file__).resolve().parents[2]


def setup_blas(which: str, threads: int | None, coretype: str | None = None) -> None:
    if coretype:  # OpenBLAS kernel family (Debian's build is DYNAMIC_ARCH); read at load
        os.environ["OPENBLAS_CORETYPE"] = coretype
    if threads:
        os.environ["OPENBLAS_NUM_THREADS"] = str(threads)
    if which == "openblas":
        ctypes.CDLL(OPENBLAS, mode=ctypes.RTLD_GLOBAL)
    elif which != "ref":
        raise ValueError(f"--blas must be ref or openblas (got {which!r})")


def out(**kw):
    print(json.dumps(kw), flush=True)


def timed(fn, reps: int, warm: int = 2) -> dict:
    for _ in range(warm):
        fn()
    ts = []
    for _ in range(reps):
        t = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t)
    return {"median_ms": round(1e3 * statistics.median(ts), 2), "min_ms": round(1e3 * min(ts), 2),
            "reps": reps}


KEY_CHUNK = 256  # < OpenBLAS's K block (GEMM_Q), so no matmul below splits its reduction


def chunked_sdpa(queries, keys, values, cache, scale, mask, sinks=None):
    """Attention whose p @ v sums fixed 256-key chunks aligned at absolute position 0.

    A token's row then reduces over the same chunks, in the same order, whether it is decoded
    alone (S = t + 1 keys) or inside a block (S = t + 16 keys, the extra ones weighted 0).
    """
    import mlx.core as mx

    B, Hq, L, D = queries.shape
    Hkv, S = keys.shape[1], keys.shape[2]
    q = (queries * scale).reshape(B, Hkv, Hq // Hkv, L, D)
    k, v = keys[:, :, None], values[:, :, None]
    scores = q @ k.swapaxes(-1, -2)
    if L > 1:
        qpos = mx.arange(S - L, S)[:, None]
        scores = mx.where(mx.arange(S)[None] <= qpos, scores, -mx.inf)
    p = mx.softmax(scores, axis=-1, precise=True)
    out = None
    for c in range(0, S, KEY_CHUNK):
        pc, vc = p[..., c : c + KEY_CHUNK], v[..., c : c + KEY_CHUNK, :]
        pad = KEY_CHUNK - pc.shape[-1]
        if pad:
            pc = mx.pad(pc, [(0, 0)] * 4 + [(0, pad)])
            vc = mx.pad(vc, [(0, 0)] * 3 + [(0, pad), (0, 0)])
        part = pc @ vc
        out = part if out is None else out + part
    return out.reshape(B, Hq, L, D)


def load_model(weights: str):
    """The builtin target as converted (q4) or with every quantized layer dequantized (fp32)."""
    sys.path.insert(0, str(ROOT))
    import mlx.core as mx
    from mlx_lm import load
    from mlx_lm.utils import dequantize_model

    from dflash.builtin import ensure_builtin_target
    from dflash.target import Target

    if os.environ.get("PROBE_ATTN") == "chunked":
        import mlx_lm.models.llama as llama

        llama.scaled_dot_product_attention = chunked_sdpa
    model, tok = load(str(ensure_builtin_target(progress=lambda s: None)))
    if weights == "fp32":
        model = dequantize_model(model)
        model.set_dtype(mx.float32)
    elif weights != "q4":
        raise ValueError(f"--weights must be q4 or fp32 (got {weights!r})")
    mx.eval(model.parameters())
    return Target(model, "llama", [1, 7, 14, 20, 27]), tok


def text_ids(tok, n: int) -> list[int]:
    """n token ids of real text: the bench prompts' words, repeated."""
    words = []
    for suite in ("chat", "code", "math"):
        for line in (ROOT / "assets/bench" / f"{suite}.jsonl").read_text().splitlines():
            words.append(json.loads(line)["prompt"])
    ids = []
    while len(ids) < n:
        ids += tok.encode(" ".join(words))
    return ids[:n]


def cmd_matmul(a):
    import mlx.core as mx

    mx.random.seed(0)
    x = mx.random.normal((1024, 1024))
    y = mx.random.normal((1024, 1024))
    r = timed(lambda: mx.eval(x @ y), reps=a.reps)
    out(what="matmul 1024^3 fp32", gflops=round(2 * 1024**3 / r["median_ms"] / 1e6, 2), **r)
    W = mx.random.normal((1536, 576))
    E = mx.random.normal((49152, 576))
    for m in (1, 16):
        h = mx.random.normal((1, m, 576))
        out(what=f"x[{m},576] @ W[1536,576].T", **timed(lambda: mx.eval(h @ W.T), reps=a.reps * 4))
        out(what=f"x[{m},576] @ E[49152,576].T", **timed(lambda: mx.eval(h @ E.T), reps=a.reps))


def cmd_tk(a):
    import mlx.core as mx

    target, tok = load_model(a.weights)
    cache = target.make_cache()
    ids = text_ids(tok, a.ctx + 16)
    target.prefill(ids[: a.ctx], cache)
    for k in [int(s) for s in a.ks.split(",")]:
        blk = mx.array(ids[a.ctx : a.ctx + k])[None]

        def step():
            logits, feats, _ = target.forward(blk, cache)
            mx.eval(logits, feats)
            for c in cache:
                c.trim(k)

        out(what="t(k)", weights=a.weights, blas=a.blas, k=k, ctx=a.ctx, **timed(step, a.reps))
    for k in (1, 15, 16):
        h = mx.random.normal((1, k, target.hidden_size))
        out(what="lm_head", weights=a.weights, blas=a.blas, k=k,
            **timed(lambda: mx.eval(target.logits(h)), a.reps))


def cmd_draft(a):
    import mlx.core as mx

    from dflash.drafter import Drafter, DrafterArgs

    target, tok = load_model(a.weights)
    d = Drafter(DrafterArgs(hidden_size=576, intermediate_size=1536, num_hidden_layers=5,
                            num_attention_heads=9, num_key_value_heads=3, vocab_size=49152,
                            num_target_layers=30, mask_token_id=2,
                            target_layer_ids=[1, 7, 14, 20, 27], head_dim=64))
    mx.eval(d.parameters())
    dcache = d.make_cache()
    d.extend_context(mx.random.normal((1, a.ctx, 5 * 576)), dcache)
    mx.eval([c.state for c in dcache])
    for B in (4, 8, 16):
        out(what="draft (propose incl. lm_head)", weights=a.weights, blas=a.blas, block=B, ctx=a.ctx,
            **timed(lambda: mx.eval(d.propose(target, 42, B, dcache)), a.reps))


def cmd_bitwise(a):
    """Logits of each token fed alone == its row inside a 16-token block (same cache)?"""
    import mlx.core as mx

    target, tok = load_model(a.weights)
    ids = text_ids(tok, 4096)
    B = 16
    n = equal = argmax_diff = 0
    worst = 0.0
    for p in range(a.prompts):
        start = 37 + 211 * p  # prompts of different lengths and contents
        seq = ids[start : start + a.ctx0 + 7 * p + a.blocks * B]
        s = a.ctx0 + 7 * p
        cache = target.make_cache()
        target.prefill(seq[:s], cache)
        for _ in range(a.blocks):
            blk, _, _ = target.forward(mx.array(seq[s : s + B])[None], cache)
            mx.eval(blk)
            for c in cache:
                c.trim(B)
            rows = []
            for j in range(B):
                r, _, _ = target.forward(mx.array([[seq[s + j]]]), cache)
                mx.eval(r)
                rows.append(r[0, 0])
            one = mx.stack(rows)
            same = mx.all(one == blk[0], axis=-1)
            n += B
            equal += int(same.sum().item())
            argmax_diff += int((one.argmax(-1) != blk[0].argmax(-1)).sum().item())
            worst = max(worst, float(mx.abs(one - blk[0]).max().item()))
            s += B
    out(what="bitwise alone-vs-block", weights=a.weights, blas=a.blas,
        threads=os.environ.get("OPENBLAS_NUM_THREADS"), coretype=os.environ.get("OPENBLAS_CORETYPE"),
        attn=a.attn, ctx0=a.ctx0, positions=n, bitwise_equal=equal,
        argmax_differs=argmax_diff, max_abs_diff=worst)


def cmd_quantdiff(a):
    """Greedy text from the q4 model; teacher-forced q4 vs fp32 logits at every generated position."""
    import mlx.core as mx
    import numpy as np

    sys.path.insert(0, str(ROOT))
    from dflash.load import encode_prompt

    q, tok = load_model("q4")
    f, _ = load_model("fp32")
    prompts = []
    for suite in ("chat", "code", "math"):
        for line in (ROOT / "assets/bench" / f"{suite}.jsonl").read_text().splitlines():
            prompts.append(json.loads(line)["prompt"])
    prompts = prompts[:: max(1, len(prompts) // a.prompts)][: a.prompts]
    n = differ = 0
    diffs, first_div, margins = [], [], []
    for text in prompts:
        ids = encode_prompt(tok, text)
        cache = q.make_cache()
        logits = q.prefill(ids, cache)
        gen, rows = [], []
        for _ in range(a.tokens):
            rows.append(np.array(logits))
            t = int(logits.argmax().item())
            gen.append(t)
            if t in tok.eos_token_ids:
                break
            logits = q.forward(mx.array([[t]]), cache)[0][0, -1]
        # q4 logits as decoded one token at a time; fp32 teacher-forced on the same text
        lq = np.stack(rows)
        lf = f.forward(mx.array(ids + gen[:-1])[None], f.make_cache())[0][0, len(ids) - 1 :]
        lf = np.array(lf)
        d = np.abs(lq - lf).max(-1)
        dis = lq.argmax(-1) != lf.argmax(-1)
        srt = np.sort(lq, -1)
        margins += list((srt[:, -1] - srt[:, -2])[dis])
        diffs += list(d)
        n += len(gen)
        differ += int(dis.sum())
        first_div.append(int(np.argmax(dis)) if dis.any() else None)
    out(what="q4 vs fp32-dequantized logits", blas=a.blas, positions=n, argmax_differs=differ,
        max_abs_diff=float(max(diffs)), median_max_abs_diff=float(np.median(diffs)),
        q4_margin_where_differs=[round(float(m), 4) for m in margins],
        first_divergence_per_prompt=first_div)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--blas", default="ref", help="ref (the wheel's) or openblas (in-process)")
    ap.add_argument("--threads", type=int, help="OPENBLAS_NUM_THREADS")
    ap.add_argument("--attn", default="mlx", help="mlx (mx.fast SDPA) or chunked (chunked_sdpa)")
    ap.add_argument("--coretype", help="OPENBLAS_CORETYPE, e.g. Sandybridge (default: detected)")
    ap.add_argument("--reps", type=int, default=7)
    sub = ap.add_subparsers(dest="cmd", required=True)
    sub.add_parser("matmul")
    p = sub.add_parser("tk")
    p.add_argument("--weights", default="q4")
    p.add_argument("--ks", default="1,2,4,8,16")
    p.add_argument("--ctx", type=int, default=512)
    p = sub.add_parser("draft")
    p.add_argument("--weights", default="q4")
    p.add_argument("--ctx", type=int, default=512)
    p = sub.add_parser("bitwise")
    p.add_argument("--weights", default="fp32")
    p.add_argument("--prompts", type=int, default=3)
    p.add_argument("--blocks", type=int, default=5)
    p.add_argument("--ctx0", type=int, default=100)
    p = sub.add_parser("quantdiff")
    p.add_argument("--tokens", type=int, default=250)
    p.add_argument("--prompts", type=int, default=8)
    a = ap.parse_args()
    setup_blas(a.blas, a.threads, a.coretype)
    os.environ["PROBE_ATTN"] = a.attn
    sys.path.insert(0, str(ROOT))
    globals()[f"cmd_{a.cmd}"](a)


if __name__ == "__main__":
    main()
