"""Target pass costs on a random-weight target, alone or sharded (run under mlx.launch): how the
verify/step cost ratio moves when every pass pays communication. Random weights: costs only,
no tau.

    python lab/distributed/pass_costs.py --shape qwen3-8b --out one.json             # one device
    mlx.launch --backend nccl -n 2 --python python3 -- \
        lab/distributed/pass_costs.py --shape qwen3-8b --distributed --out two.json  # sharded

For each k in --ks: the median ms of a k-token forward on a --context-token cache (then trimmed
back), its ratio to the 1-token step, and, sharded, dflash.distributed.describe's all_sum cost
of that pass (timed alone). Rank 0 prints and writes the JSON.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import mlx.core as mx
from mlx_lm.models import qwen3
from mlx_lm.models.cache import make_prompt_cache

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from dflash import distributed  # noqa: E402

SHAPES = {  # Qwen3-8B's config.json; "tiny" checks the script on a CPU
    "qwen3-8b": dict(hidden_size=4096, num_hidden_layers=36, intermediate_size=12288,
                     num_attention_heads=32, num_key_value_heads=8, head_dim=128, vocab_size=151936),
    "tiny": dict(hidden_size=64, num_hidden_layers=2, intermediate_size=128,
                 num_attention_heads=4, num_key_value_heads=2, head_dim=16, vocab_size=256),
}


def model_of(shape: str, dtype) -> qwen3.Model:
    args = qwen3.ModelArgs(model_type="qwen3", rms_norm_eps=1e-6, rope_theta=1e6, tie_word_embeddings=False,
                           max_position_embeddings=40960, **SHAPES[shape])
    model = qwen3.Model(args)
    model.set_dtype(dtype)
    return model


def pass_ms(model, k: int, context: int, reps: int) -> float:
    cache = make_prompt_cache(model)
    ids = mx.array([[(7 * i) % 1000 + 10 for i in range(context + k)]])
    mx.eval(model(ids[:, :context], cache=cache))
    times = []
    for _ in range(reps + 2):  # two warm-ups: the first JIT-compiles on CUDA
        t = time.perf_counter()
        mx.eval(model(ids[:, context:], cache=cache))
        times.append((time.perf_counter() - t) * 1000)
        for c in cache:
            c.trim(k)
    return sorted(times[2:])[reps // 2]


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--shape", choices=SHAPES, default="qwen3-8b")
    p.add_argument("--dtype", choices=["bfloat16", "float16", "float32"], default="bfloat16")
    p.add_argument("--ks", default="1,2,4,8,16,32")
    p.add_argument("--context", type=int, default=512)
    p.add_argument("--reps", type=int, default=10)
    p.add_argument("--distributed", nargs="?", const="any", default=None, metavar="BACKEND")
    p.add_argument("--out", default=None)
    a = p.parse_args(argv)
    group = distributed.init(a.distributed) if a.distributed else None
    model = model_of(a.shape, getattr(mx, a.dtype))
    if group is not None:
        model.shard(group)
    mx.eval(model.parameters())
    ks = [int(k) for k in a.ks.split(",")]
    ms = {k: pass_ms(model, k, a.context, a.reps) for k in ks}
    doc = {"shape": a.shape, "dtype": a.dtype, "context": a.context, "device": str(mx.default_device()),
           "world_size": group.size() if group else 1, "backend": a.distributed,
           "pass_ms": ms, "ratio_to_step": {k: v / ms[1] for k, v in ms.items()}}
    if group is not None:
        per_sum = {k: distributed.comm_ms(group, SHAPES[a.shape]["hidden_size"], k, getattr(mx, a.dtype)) for k in ks}
        n = 2 * SHAPES[a.shape]["num_hidden_layers"]
        doc.update(all_sums_per_pass=n, all_sum_ms=per_sum, pass_comm_ms={k: n * v for k, v in per_sum.items()},
                   comm_measured=distributed.COMM_MEASURED)
    if group is None or group.rank() == 0:
        print(json.dumps(doc, indent=1))
        if a.out:
            Path(a.out).write_text(json.dumps(doc, indent=1))
    if group is not None:  # mlx.launch ends the others when one exits: leave together
        mx.eval(mx.distributed.all_sum(mx.array(1), group=group))
    return 0


if __name__ == "__main__":
    sys.exit(main())
