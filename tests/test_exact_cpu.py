"""The default CPU path (fp32 target, OpenBLAS when installed) keeps a token's logits bitwise
equal fed alone or inside a 16-token block, past the 384-key point where BLAS kernels switch."""

import mlx.core as mx
import pytest

from dflash import blas
from dflash.load import load_target
from dflash.registry import BUILTIN_TARGET
from dflash.target import Target


@pytest.fixture(scope="module")
def target():
    lm, tok, model_type = load_target(BUILTIN_TARGET, progress=lambda m: None)
    return Target(lm, model_type), tok


def test_auto_dtype_follows_the_blas(target):
    t, _ = target
    quantized = hasattr(t.backbone.embed_tokens, "scales")
    assert quantized == (blas.loaded is None)  # fp32 only where fp32 verification is fast


def test_block_rows_equal_single_token_rows(target):
    t, tok = target
    text = "The tide mill stood at the mouth of the river for three hundred years. " * 40
    ids = tok.encode(text)[:450]
    block = tok.encode(" It ground corn for the village and timber for the boats, and it never stopped.")[:16]
    cache = t.make_cache()
    t.forward(mx.array([ids]), cache)
    together, _, _ = t.forward(mx.array([block]), cache)

    cache = t.make_cache()
    t.forward(mx.array([ids]), cache)
    alone = [t.forward(mx.array([[b]]), cache)[0][0, -1] for b in block]
    for i, row in enumerate(alone):
        assert mx.array_equal(row, together[0, i]), f"row {i} differs"


def test_embedded_pair_dflash_equals_target_only():
    """The product's promise on the real embedded pair: identical ids, fixed and adaptive blocks."""
    import json

    from dflash.config import GenerationConfig
    from dflash.engine import stream
    from dflash.load import encode_prompt, load_pair
    from dflash.registry import ASSETS

    pair = load_pair(progress=lambda m: None)
    rows = [json.loads(l) for l in (ASSETS / "prompts" / "eval.jsonl").read_text().splitlines()]
    for row in rows[::20]:  # one prompt from each of three categories
        ids = encode_prompt(pair.tokenizer, row["prompt"])
        *_, plain = stream(pair, ids, GenerationConfig(mode="target", max_tokens=40))
        for cfg in (GenerationConfig(max_tokens=40), GenerationConfig(max_tokens=40, adaptive=True)):
            *_, fast = stream(pair, ids, cfg)
            assert fast.token_ids == plain.token_ids, row["prompt"]
