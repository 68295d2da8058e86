"""The default CPU path (fp32 target, OpenBLAS when installed) keeps a token's logits bitwise
equal fed alone or inside a 16-token block, past the 384-key point where BLAS kernels switch."""

import mlx.core as mx
import pytest

from dflash import backend
from dflash.load import load_target
from dflash.registry import BUILTIN_TARGET
from dflash.target import Target


@pytest.fixture(scope="module")
def target():
    lm, tok, model_type = load_target(BUILTIN_TARGET, progress=lambda m: None)
    return Target(lm, model_type, row_tile=backend.active().row_tile), tok


def test_auto_dtype_follows_the_blas(target):
    t, _ = target
    quantized = hasattr(t.backbone.embed_tokens, "scales")
    assert quantized == (backend.active().blas is None)  # fp32 only where fp32 verification is fast


@pytest.mark.parametrize("context", [450, 505])  # 505: the block's rows straddle key 512
def test_block_rows_equal_single_token_rows(target, context):
    t, tok = target
    text = "The tide mill stood at the mouth of the river for three hundred years. " * 40
    ids = tok.encode(text)[:context]
    block = tok.encode(" It ground corn for the village and timber for the boats, and it never stopped.")[:16]
    cache = t.make_cache()
    t.forward(mx.array([ids]), cache)
    together, _, _ = t.forward(mx.array([block]), cache)

    cache = t.make_cache()
    t.forward(mx.array([ids]), cache)
    alone = [t.forward(mx.array([[b]]), cache)[0][0, -1] for b in block]
    for i, row in enumerate(alone):
        assert mx.array_equal(row, together[0, i]), f"row {i} differs"


@pytest.mark.slow
@pytest.mark.parametrize("context", [450, 509])  # 509: the tree's deeper nodes past key 512
def test_tree_rows_equal_single_token_rows(target, context):
    """A tree pass (tree.py) past the 384-key point: each node's logits == its root path fed
    token by token after the context."""
    import numpy as np

    from dflash import tree

    t, tok = target
    ids = tok.encode("The tide mill stood at the mouth of the river for three hundred years. " * 40)[:context]
    cand = tok.encode(" It ground corn for the village and timber for the boats, and it never stopped.")
    grid = np.array(cand[:12]).reshape(4, 3)
    tr = tree.build(ids[-1], grid, -np.arange(12.0).reshape(4, 3) / 4, 9)
    cache = t.make_cache()
    t.forward(mx.array([ids[:-1]]), cache)
    together, _, _ = t.forward(mx.array([tr.tokens]), cache, tree=tree.Layout.of(tr))
    for r in range(len(tr)):
        path, n = [], r
        while n >= 0:
            path.append(tr.tokens[n])
            n = tr.parents[n]
        cache = t.make_cache()
        t.forward(mx.array([ids[:-1]]), cache)
        for x in reversed(path):
            alone = t.forward(mx.array([[x]]), cache)[0][0, -1]
        assert mx.array_equal(alone, together[0, r]), f"node {r} differs"


@pytest.mark.slow
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
        for cfg in (GenerationConfig(max_tokens=40), GenerationConfig(max_tokens=40, adaptive=True),
                    GenerationConfig(max_tokens=40, tree=0), GenerationConfig(max_tokens=40, tree=32)):
            *_, fast = stream(pair, ids, cfg)
            assert fast.token_ids == plain.token_ids, row["prompt"]


@pytest.mark.skipif(backend.active().row_tile != 0, reason="batched only with the Sandybridge kernels")
@pytest.mark.parametrize("L,S", [(1, 1100), (16, 1100), (16, 1024), (5, 700), (16, 7000), (1, 8100)])
def test_batched_chunks_sum_what_the_loop_sums(L, S):
    """p @ v with the whole key chunks' products in one batched matmul (`_p_at_v`) is bitwise the
    chunk-by-chunk loop, with several chunks (whose order would show) and a padded last one."""
    from dflash.backends import cpu_attention

    p = mx.softmax(mx.random.normal((1, 3, 3, L, S), key=mx.random.key(0)) * 3, axis=-1)
    v = mx.random.normal((1, 3, S + 200, 64), key=mx.random.key(1))[:, :, :S]  # a cache's view
    loop = cpu_attention._add_chunks(None, p, v[:, :, None], 256)
    assert mx.array_equal(cpu_attention._p_at_v(p, v, 256, batched=True), loop).item()
    reversed_sum = sum(p[..., c : c + 256] @ v[:, :, None, c : c + 256] for c in range(768, -1, -256))
    assert not mx.array_equal(reversed_sum, cpu_attention._add_chunks(None, p[..., :1024], v[:, :, None, :1024], 256)).item()


@pytest.mark.parametrize("L,S", [(129, 129), (512, 512), (512, 1500), (300, 1100)])
def test_a_prompt_chunk_takes_the_cheap_causal_path(L, S):
    """A causal pass of more than PREFILL_ROWS rows (a prompt chunk) is plain causal attention,
    in numpy, and no longer the row-invariant path; both modes prefill alike (DFlash equals
    target-only: test_embedded_pair_dflash_equals_target_only, tests/test_tree.py)."""
    from dflash.backends import cpu_attention

    q = mx.random.normal((1, 9, L, 64), key=mx.random.key(0))
    k, v = (mx.random.normal((1, 3, S, 64), key=mx.random.key(s)) * 3 for s in (1, 2))
    want = mx.fast.scaled_dot_product_attention(q, k, v, scale=0.125, mask="causal")
    got = cpu_attention.rows_invariant(q, k, v, 0.125)
    assert mx.allclose(got, want, atol=1e-4).item()
    calls = []
    cheap = cpu_attention.prefill
    try:
        cpu_attention.prefill = lambda *a: calls.append(a) or cheap(*a)
        cpu_attention.rows_invariant(q, k, v, 0.125)
        cpu_attention.rows_invariant(q[:, :, -cpu_attention.PREFILL_ROWS :], k, v, 0.125)  # a block: exact
    finally:
        cpu_attention.prefill = cheap
    assert len(calls) == 1


@pytest.mark.parametrize("rows,L", [(1, 16), (3, 16), (16, 16), (3, 100)])
def test_row_chunked_attention_is_causal_attention(rows, L):
    """The GPU verify attention (`Backend.attention_rows`): L query rows attended in chunks of
    `rows`, each chunk given the keys up to its last row, equal one causal call (a pass longer
    than MAX_CHUNKED_ROWS, a prefill, is one call)."""
    from dflash.backends.kernels import row_chunks

    q = mx.random.normal((1, 9, L, 64), key=mx.random.key(0))
    k, v = (mx.random.normal((1, 3, 300, 64), key=mx.random.key(s)) for s in (1, 2))
    full = mx.fast.scaled_dot_product_attention(q, k, v, scale=0.125, mask="causal")
    assert mx.allclose(row_chunks(q, k, v, 0.125, rows), full, atol=1e-5).item()


def test_target_forward_with_row_chunked_attention(target):
    t, tok = target
    chunked = Target(t.model, t.model_type, attention_rows=3)
    assert chunked._attend is not None and chunked._attend.keywords == {"rows": 3}
    ids = tok.encode("The tide mill stood at the mouth of the river for three hundred years. " * 20)[:300]
    block = mx.array([tok.encode(" It ground corn for the village and timber for the boats.")[:16]])
    out = []
    for tgt in (t, chunked):
        cache = tgt.make_cache()
        tgt.forward(mx.array([ids]), cache)
        out.append(tgt.forward(block, cache)[0])
    assert mx.allclose(out[0], out[1], atol=1e-3).item()
    assert (mx.argmax(out[0], -1) == mx.argmax(out[1], -1)).all().item()


@pytest.mark.skipif(backend.active().row_tile != 0, reason="these kernels need padded rows")
def test_padded_rows_change_no_bits_where_rows_are_exact(target):
    """Intel's padded-rows pass (cpu_rows.py: projections and down on padded rows, gate/up and
    the head on the real ones) gives this host's row-exact kernels' bits: block, tree, step."""
    import numpy as np
    from dflash import tree

    t, tok = target
    padded = Target(t.model, t.model_type, row_tile=8)
    ids = tok.encode("The tide mill stood at the mouth of the river for three hundred years. " * 4)[:60]
    tr = tree.build(ids[55], np.array(ids[:12]).reshape(4, 3), -np.arange(12.0).reshape(4, 3) / 4, 11)
    outs = []
    for target_ in (t, padded):
        cache = target_.make_cache()
        target_.forward(mx.array([ids[:50]]), cache)
        outs.append([target_.forward(mx.array([ids[50:55]]), cache)[0],
                     target_.forward(mx.array([tr.tokens]), cache, tree=tree.Layout.of(tr))[0],
                     target_.forward(mx.array([[5]]), cache)[0]])
    for a, b in zip(*outs):
        assert mx.array_equal(a, b)


@pytest.mark.parametrize("q_shape, k_shape", [
    ((1, 3, 3, 5, 64), (1, 3, 1, 64, 37)),  # a chain block over a context
    ((1, 3, 3, 1, 64), (1, 3, 1, 64, 16)),  # a step whose keys fill a tile
    ((1, 3, 12, 3, 64), (1, 3, 12, 64, 5)),  # a tree's rows against their ancestors
    ((1, 3, 3, 17, 64), (1, 3, 1, 64, 200)),
])
def test_padded_scores_are_the_product(q_shape, k_shape):
    """cpu_rows.scores in fixed 8 x 16 calls computes q @ k_t (Intel's score path)."""
    from dflash.backends import cpu_rows

    q, k_t = mx.random.normal(q_shape), mx.random.normal(k_shape)
    got = cpu_rows.scores(q, k_t, 8)
    assert got.shape == (q @ k_t).shape
    assert mx.allclose(got, q @ k_t, rtol=1e-5, atol=1e-5).item()
