"""The built-in SmolLM2 target: GGUF -> mlx-lm conversion, checked on the real model."""

import hashlib

import mlx.core as mx
import mlx.nn as nn
import pytest
from mlx_lm import generate, load

from dflash import builtin

PARAGRAPH = (
    "The history of the printing press begins in the fifteenth century, when Johannes Gutenberg "
    "developed a system of movable metal type in the German city of Mainz. Before his invention, "
    "books were copied by hand, which made them rare and expensive. The new method allowed printers "
    "to produce many copies of a text quickly and at a lower cost. Within a few decades, printing "
    "shops had spread to most major cities in Europe, and the number of books in circulation grew "
    "enormously. This change helped spread new ideas in science, religion and politics."
)


@pytest.fixture(scope="session")
def converted(tmp_path_factory):
    return builtin.convert_gguf(builtin.find_gguf(), tmp_path_factory.mktemp("builtin") / "model")


@pytest.fixture(scope="session")
def loaded(converted):
    return load(str(converted))


def _hashes(path):
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(path.iterdir())}


@pytest.mark.slow
def test_perplexity(loaded):
    model, tok = loaded
    x = mx.array(tok.encode(PARAGRAPH))[None]
    ppl = mx.exp(nn.losses.cross_entropy(model(x[:, :-1]), x[:, 1:]).mean()).item()
    print(f"perplexity over {x.shape[1]} tokens: {ppl:.2f}")
    assert ppl < 15  # ~10.3; a missed q/k un-permutation gives ~80


def test_conversion_is_deterministic(converted, tmp_path):
    import os
    import subprocess
    import sys

    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True).stdout.strip()  # a pid that has exited
    left = tmp_path / f".again.tmp{dead}-abc"  # what a conversion killed midway left behind
    left.mkdir()
    (left / "model.safetensors").write_bytes(b"x" * 1000)
    (tmp_path / f".again.tmp{os.getpid()}-live").mkdir()  # a live writer's: kept
    again = builtin.convert_gguf(builtin.find_gguf(), tmp_path / "again")
    assert _hashes(again) == _hashes(converted)
    assert sorted(p.name for p in tmp_path.iterdir()) == [f".again.tmp{os.getpid()}-live", "again"]


def test_special_tokens_and_chat_template(loaded):
    _, tok = loaded
    for special in ("<|im_start|>", "<|im_end|>", "<|endoftext|>"):
        ids = tok.encode(special)
        assert len(ids) == 1 and tok.decode(ids) == special
    assert {tok.convert_tokens_to_ids(t) for t in ("<|im_end|>", "<|endoftext|>")} <= tok.eos_token_ids
    text = tok.apply_chat_template([{"role": "user", "content": "Hi"}], add_generation_prompt=True, tokenize=False)
    assert text.endswith("<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n")


@pytest.mark.slow
def test_greedy_answer(loaded):
    model, tok = loaded
    prompt = tok.apply_chat_template(
        [{"role": "user", "content": "What is the capital of France?"}], add_generation_prompt=True
    )
    out = generate(model, tok, prompt, max_tokens=20)
    print(repr(out))
    assert "Paris" in out


@pytest.mark.slow
def test_block_logits_equal_single_token_logits(loaded):
    # DFlash's losslessness on CPU rests on this: verifying a block must score each token
    # exactly as plain one-token decoding does.
    # Through the target adapter, as the engine runs it: on Intel's AVX-512 BLAS mlx-lm's own
    # attention is not row-exact (docs/performance.md), the adapter's is on every CPU.
    from dflash.target import Target

    model, tok = loaded
    target = Target(model, "llama")
    ids = tok.encode(PARAGRAPH)
    prefix, block = mx.array(ids[:8])[None], ids[8:24]
    cache = target.make_cache()
    target.forward(prefix, cache)
    together = target.forward(mx.array(block)[None], cache)[0][0]
    cache = target.make_cache()
    target.forward(prefix, cache)
    alone = mx.concatenate([target.forward(mx.array([[t]]), cache)[0][0] for t in block])
    assert mx.array_equal(together, alone).item(), mx.abs(together - alone).max(axis=-1).tolist()


def test_ensure_builtin_target_is_cached(monkeypatch, tmp_path):
    gguf = builtin.find_gguf()
    monkeypatch.setenv("DFLASH_CACHE", str(tmp_path))
    assert builtin.cache_dir() == tmp_path
    (tmp_path / builtin.GGUF_NAME).symlink_to(gguf)  # no second download
    first = builtin.ensure_builtin_target(progress=lambda s: None)

    def no_second_conversion(*_):
        raise AssertionError("converted again although the cache holds the model")

    monkeypatch.setattr(builtin, "convert_gguf", no_second_conversion)
    assert builtin.ensure_builtin_target(progress=lambda s: None) == first
    assert first.parent == tmp_path and (first / "model.safetensors").exists()
    assert not [p for p in tmp_path.iterdir() if ".tmp" in p.name]


@pytest.mark.slow
def test_self_written_prompts(converted, tmp_path):
    """`train --write-self-prompts`: user turns the target writes itself after a category starter,
    seeded, ended by its own end-of-turn token, dropped when they touch an excluded prompt; the
    .jsonl.xz file they go to reads back as a prompt file and is answered in the same command."""
    import lzma
    import json

    from dflash.load import load_target
    from dflash.train import cli
    from dflash.train.data import STARTERS, read_prompts, self_prompts

    model, tok, _ = load_target(str(converted), progress=lambda s: None, dtype="float32")
    quiet = lambda s: None
    first = self_prompts(model, tok, 12, batch_size=12, max_tokens=40, seed=3, progress=quiet)
    assert 3 <= len(first) <= 12
    for r in first:
        assert any(r["prompt"].startswith(s) for s in STARTERS[r["category"]])
        assert "<|im_end|>" not in r["prompt"] and len(r["prompt"].split()) >= 3
    again = self_prompts(model, tok, 12, batch_size=12, max_tokens=40, seed=3, progress=quiet,
                         exclude=[first[0]["prompt"].upper() + "!"])
    assert again == first[1:]  # seeded; the excluded one (case and punctuation aside) is gone

    out = tmp_path / "self.jsonl.xz"
    rc = cli.main(["--target", str(converted), "--target-dtype", "float32",
                   "--out", str(tmp_path / "run"), "--write-self-prompts", str(out),
                   "--self-prompts", "6", "--prompts", str(out), "--generate-only",
                   "--max-new-tokens", "6", "--gen-batch", "6"])
    recs = [json.loads(line) for line in lzma.decompress(out.read_bytes()).decode().splitlines()]
    assert rc == 0 and recs and read_prompts(out) == [(r["category"], r["prompt"]) for r in recs]
    from dflash.train.data import Dataset
    ds = Dataset.load(tmp_path / "run" / "data.npz")
    assert len(ds) == len(recs) and ds.meta["complete"]
