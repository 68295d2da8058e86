"""Is the bench's target-only a fair baseline? Our engine's target-only decoding against
mlx-lm's own `stream_generate` on the same loaded target and prompt ids, interleaved (the
order alternating, a warm-up pair unmeasured), greedy, both rates as (tokens - 1) / the time
after the first token.

    python lab/bench/baseline_check.py [--prompts 1] [--max-tokens 128] [--reps 5]
"""

import argparse
import json
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from dflash import backend  # noqa: E402

backend.setup()  # before mlx loads: the CPU BLAS, the CUDA buffer sizes
import mlx.core as mx  # noqa: E402
from mlx_lm import stream_generate  # noqa: E402
from mlx_lm.generate import generation_stream  # noqa: E402
from mlx_lm.sample_utils import make_sampler  # noqa: E402

from dflash.bench import load_suites  # noqa: E402
from dflash.config import GenerationConfig  # noqa: E402
from dflash.engine import stream  # noqa: E402
from dflash.load import encode_prompt, load_pair  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--prompts", type=int, default=1, help="first N prompts of the chat suite")
    ap.add_argument("--max-tokens", type=int, default=128)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--stream", action="store_true", help="also ours on mlx-lm's generation stream")
    args = ap.parse_args()
    pair = load_pair(mode="target", progress=lambda s: None)
    for row in load_suites(["chat"], limit=args.prompts)["chat"]:
        ids = encode_prompt(pair.tokenizer, row["prompt"])
        ours, ref, on_stream, same = [], [], [], True
        order = ["ours", "mlx-lm"] + (["ours-stream"] if args.stream else [])
        for rep in range(args.reps + 1):  # rep 0 unmeasured (warm-up); the order alternates
            for who in (order if rep % 2 else order[::-1]):
                if who.startswith("ours"):
                    cfg = GenerationConfig(mode="target", max_tokens=args.max_tokens)
                    if who == "ours":
                        *_, s = stream(pair, ids, cfg)
                    else:  # on mlx-lm's own generation stream
                        with mx.stream(generation_stream):
                            *_, s = stream(pair, ids, cfg)
                    rate = s.decode_tok_s
                else:
                    toks = []
                    for r in stream_generate(pair.target.model, pair.tokenizer, mx.array(ids),
                                             max_tokens=args.max_tokens, sampler=make_sampler(0.0)):
                        toks.append(r.token)
                    # mlx-lm counts n + 1 tokens over the n intervals after the first: ours
                    # counts n, so its rate is put on ours' footing
                    rate = r.generation_tps * (len(toks) - 1) / len(toks)
                if rep:
                    {"ours": ours, "mlx-lm": ref, "ours-stream": on_stream}[who].append(rate)
            n = min(len(toks), len(s.token_ids))
            same &= toks[:n] == list(s.token_ids)[:n]
        print(json.dumps({"ours_tok_s": round(statistics.median(ours), 2),
                          "mlx_lm_tok_s": round(statistics.median(ref), 2),
                          "same_tokens": same, "ours": [round(x, 2) for x in ours],
                          "mlx_lm": [round(x, 2) for x in ref], "device": str(mx.default_device()),
                          **({"ours_on_stream_tok_s": round(statistics.median(on_stream), 2)} if on_stream else {})}))


if __name__ == "__main__":
    main()
