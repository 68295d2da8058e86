"""Tiny random-weight models for the tests: targets of each family, drafters, a fake tokenizer."""

from __future__ import annotations

import importlib

import mlx.core as mx

from dflash.drafter import Drafter, DrafterArgs
from dflash.load import Pair
from dflash.target import Target

VOCAB = 64
EOS = 3
HIDDEN = 32

_COMMON = dict(hidden_size=HIDDEN, num_hidden_layers=4, intermediate_size=64,
               num_attention_heads=4, num_key_value_heads=2, rms_norm_eps=1e-5,
               vocab_size=VOCAB, tie_word_embeddings=True, max_position_embeddings=512)

CONFIGS = {
    # untied heads: with tied ones a random tiny model greedily repeats one token from the start,
    # which would let a lossless test pass whatever the caches held (qwen3_moe keeps the tied
    # head's code path, and tiny_model(..., tied=True) gives any family one)
    "llama": dict(_COMMON, model_type="llama", rope_theta=10000.0, tie_word_embeddings=False),
    "qwen3": dict(_COMMON, model_type="qwen3", head_dim=8, rope_theta=10000.0,
                  tie_word_embeddings=False),
    "qwen2": dict(_COMMON, model_type="qwen2", rope_theta=10000.0, tie_word_embeddings=False),
    "qwen3_moe": dict(_COMMON, model_type="qwen3_moe", head_dim=8, rope_theta=10000.0,
                      num_experts=4, num_experts_per_tok=2, moe_intermediate_size=32,
                      decoder_sparse_step=1, mlp_only_layers=[], norm_topk_prob=True),
    "qwen3_next": dict(_COMMON, model_type="qwen3_next", tie_word_embeddings=False, head_dim=8,
                       linear_num_value_heads=4, linear_num_key_heads=2, linear_key_head_dim=8,
                       linear_value_head_dim=8, linear_conv_kernel_dim=4, full_attention_interval=2,
                       num_experts=4, num_experts_per_tok=2, moe_intermediate_size=32,
                       shared_expert_intermediate_size=32, decoder_sparse_step=1,
                       mlp_only_layers=[], norm_topk_prob=True, rope_theta=10000.0,
                       partial_rotary_factor=0.5),
    "qwen3_5": dict(
        model_type="qwen3_5",
        text_config=dict(_COMMON, model_type="qwen3_5", tie_word_embeddings=False, head_dim=8,
                         linear_num_value_heads=4, linear_num_key_heads=2,
                         linear_key_head_dim=8, linear_value_head_dim=8,
                         linear_conv_kernel_dim=4, full_attention_interval=2,
                         rope_parameters={"type": "default", "rope_theta": 10000.0,
                                          "partial_rotary_factor": 0.5})),
}


def tiny_model(family: str, seed: int = 0, tied: bool | None = None):
    """tied: override the family's tie_word_embeddings (the head is then the embedding)."""
    mx.random.seed(seed)
    mod = importlib.import_module(f"mlx_lm.models.{family}")
    config = CONFIGS[family] if tied is None else dict(CONFIGS[family], tie_word_embeddings=tied)
    model = mod.Model(mod.ModelArgs.from_dict(config))
    model.set_dtype(mx.float32)
    mx.eval(model.parameters())
    return model


def tiny_drafter(num_target_layers: int = 4, taps=(0, 2), block_size: int = 8, seed: int = 1,
                 window: int | None = None):
    """window: every layer a sliding one over the context's last `window` positions."""
    mx.random.seed(seed)
    args = DrafterArgs(hidden_size=HIDDEN, intermediate_size=64, num_hidden_layers=2,
                       num_attention_heads=4, num_key_value_heads=2, vocab_size=VOCAB,
                       num_target_layers=num_target_layers, mask_token_id=VOCAB - 1,
                       target_layer_ids=list(taps), block_size=block_size, head_dim=8,
                       rope_theta=10000.0, max_position_embeddings=512,
                       layer_types=["sliding_attention"] * 2 if window else None, sliding_window=window)
    d = Drafter(args)
    d.set_dtype(mx.float32)
    mx.eval(d.parameters())
    return d


class FakeDetokenizer:
    def reset(self):
        self.tokens, self.last_segment = [], ""

    def add_token(self, t):
        self.tokens.append(t)
        self.last_segment = f"<{t}>"

    def finalize(self):
        self.last_segment = ""

    @property
    def text(self):
        return "".join(f"<{t}>" for t in self.tokens)


class FakeTokenizer:
    eos_token_ids = {EOS}
    chat_template = None

    def __init__(self):
        self.detokenizer = FakeDetokenizer()

    def encode(self, text, **_):
        return [5 + (ord(c) % (VOCAB - 6)) for c in text]


class CheckedTarget(Target):
    """A Target that refuses ids outside its vocabulary: MLX's embedding gather does not check,
    and reading past the table corrupts memory (a segfault later, somewhere else)."""

    def forward(self, ids, cache, *args, **kw):
        lo, hi = mx.min(ids).item(), mx.max(ids).item()
        assert 0 <= lo and hi < self.vocab_size, f"ids {lo}..{hi} outside the vocabulary of {self.vocab_size}"
        return super().forward(ids, cache, *args, **kw)


def tiny_pair(family: str, drafter=None, seed: int = 0) -> Pair:
    model = tiny_model(family, seed)
    taps = drafter.target_layer_ids if drafter is not None else None
    return Pair(CheckedTarget(model, family, taps), drafter, FakeTokenizer(), f"tiny-{family}", None)


def save_tiny_model(path, family: str = "qwen3", seed: int = 0):
    """An mlx-lm model directory (weights, config, a word-level tokenizer) for CLI / Hub tests."""
    import json

    from mlx.utils import tree_flatten
    from tokenizers import Tokenizer, models, pre_tokenizers

    path.mkdir(parents=True, exist_ok=True)
    model = tiny_model(family, seed)
    mx.save_safetensors(str(path / "model.safetensors"), dict(tree_flatten(model.parameters())))
    (path / "config.json").write_text(json.dumps(CONFIGS[family]))
    tok = Tokenizer(models.WordLevel({f"t{i}": i for i in range(VOCAB)}, unk_token="t0"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.save(str(path / "tokenizer.json"))
    (path / "tokenizer_config.json").write_text(json.dumps(
        {"tokenizer_class": "PreTrainedTokenizerFast", "eos_token": f"t{EOS}", "unk_token": "t0"}))
    return path
