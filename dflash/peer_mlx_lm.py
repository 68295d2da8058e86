"""mlx-lm's own decoding as a second baseline (`python -m dflash bench --baseline mlx-lm`).

The bench's target-only is this engine's plain decoding (one `Target.forward` a token). This
runs mlx-lm's `stream_generate` on the same loaded model and prompt ids, so that a speedup can
also be read against what most MLX users decode with. Its rate is measured as ours is: tokens
after the first over the time from the first token to the last (mlx-lm's own `generation_tps`
counts one token more over the same time).
"""

from __future__ import annotations

from dataclasses import dataclass
from time import perf_counter

import mlx.core as mx

NAME = "mlx-lm"


@dataclass(frozen=True)
class Run:
    token_ids: tuple[int, ...]
    decode_tok_s: float
    ttft_s: float


def generate(pair, ids: list[int], max_tokens: int, temperature: float = 0.0, top_p: float = 1.0,
             seed: int = 0) -> Run:
    """mlx-lm's `stream_generate` on `pair`'s target model from prompt `ids`."""
    from mlx_lm import stream_generate
    from mlx_lm.sample_utils import make_sampler

    mx.random.seed(seed)
    sampler = make_sampler(temperature, top_p=top_p)
    tokens, times = [], []
    t0 = perf_counter()
    for r in stream_generate(pair.target.model, pair.tokenizer, mx.array(ids), max_tokens=max_tokens,
                             sampler=sampler):
        if r.finish_reason == "stop":  # its last response repeats the stop token: not output
            break
        tokens.append(r.token)
        times.append(perf_counter())
    if not tokens:
        return Run((), 0.0, perf_counter() - t0)
    span = times[-1] - times[0]
    return Run(tuple(tokens), (len(tokens) - 1) / span if span > 0 else 0.0, times[0] - t0)
