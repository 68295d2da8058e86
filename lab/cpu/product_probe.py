"""The product code on this host: backend.setup(choice), a random-weight SmolLM2-135M-shaped fp32
llama, rows alone vs in a block / a tree (bitwise), and forward costs at a 128-token context.

python lab/cpu/product_probe.py auto|Sandybridge|SkylakeX [--reps N] [--no-check]
"""
import json, os, statistics, sys, time
from dataclasses import asdict

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, ROOT)
from dflash import backend  # noqa: E402


def main() -> None:
    b = backend.setup(sys.argv[1])
    reps = int(sys.argv[sys.argv.index("--reps") + 1]) if "--reps" in sys.argv else 5
    import mlx.core as mx  # noqa: E402
    import numpy as np  # noqa: E402
    from mlx_lm.models import llama  # noqa: E402
    from mlx_lm.models.cache import trim_prompt_cache  # noqa: E402

    from dflash import tree  # noqa: E402
    from dflash.drafter import load_drafter  # noqa: E402
    from dflash.target import Target  # noqa: E402

    mx.set_default_device(mx.cpu)
    args = llama.ModelArgs(model_type="llama", hidden_size=576, num_hidden_layers=30, intermediate_size=1536,
                           num_attention_heads=9, rms_norm_eps=1e-5, vocab_size=49152, num_key_value_heads=3,
                           head_dim=64, max_position_embeddings=8192, rope_theta=100000.0, tie_word_embeddings=True)
    mx.random.seed(0)
    lm = llama.Model(args)
    lm.set_dtype(mx.float32)
    mx.eval(lm.parameters())
    drafter = load_drafter(os.path.join(ROOT, "assets", "smollm2-135m-instruct-dflash"), dtype=mx.float32)
    t = Target(lm, "llama", drafter.target_layer_ids, row_tile=b.row_tile)
    rng = np.random.default_rng(0)
    ids, cand = rng.integers(100, 40000, 450).tolist(), rng.integers(100, 40000, 40).tolist()
    out = {"backend": asdict(b), "threads": os.environ.get("OPENBLAS_NUM_THREADS"),
           "affinity": len(os.sched_getaffinity(0)), "mlx": mx.__version__}
    if "--no-check" not in sys.argv:
        res = {}
        cache = t.make_cache()
        t.forward(mx.array([ids]), cache)
        for L in (5, 16, 33):
            together = t.forward(mx.array([cand[:L]]), cache)[0]
            trim_prompt_cache(cache, L)
            res[f"block{L}"] = sum(not mx.array_equal(t.forward(mx.array([[x]]), cache)[0][0, -1], together[0, i]).item()
                                   for i, x in enumerate(cand[:L]))
            trim_prompt_cache(cache, L)
        tr = tree.build(ids[-1], np.array(cand[:24]).reshape(6, 4), -np.arange(24.0).reshape(6, 4) / 4, 20)
        trim_prompt_cache(cache, 1)
        together = t.forward(mx.array([tr.tokens]), cache, tree=tree.Layout.of(tr))[0]
        bad = 0
        for r in range(len(tr)):
            trim_prompt_cache(cache, cache[0].offset - 449)
            path, n = [], r
            while n >= 0:
                path.append(tr.tokens[n])
                n = tr.parents[n]
            for x in reversed(path):
                alone = t.forward(mx.array([[x]]), cache)[0][0, -1]
            bad += not mx.array_equal(alone, together[0, r]).item()
        res[f"tree{len(tr)}"] = bad
        out["rows_differ"] = res
    cache, dcache = t.make_cache(), drafter.make_cache()
    staged = mx.argmax(t.prefill(ids[:128], cache, on_chunk=lambda f: drafter.extend_context(f, dcache))).item()
    ms = {}
    for rep in range(reps + 1):
        for k in (1, 5, 9, 16, 33):
            t0 = time.perf_counter()
            mx.eval(*t.forward(mx.array([cand[:k]]), cache)[:2])
            if rep:
                ms.setdefault(str(k), []).append(1e3 * (time.perf_counter() - t0))
            trim_prompt_cache(cache, k)
        t0 = time.perf_counter()
        mx.eval(mx.argmax(drafter.propose(t, staged, 16, dcache), axis=-1))
        if rep:
            ms.setdefault("draft", []).append(1e3 * (time.perf_counter() - t0))
    out["median_ms"] = {k: round(statistics.median(v), 1) for k, v in ms.items()}
    print(json.dumps(out), flush=True)


if __name__ == "__main__":
    main()
