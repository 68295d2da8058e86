"""Loading a target + drafter pair (local directories or Hub ids) and checking they fit."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Optional

import mlx.core as mx

from .backend import Backend, active, on_cpu
from .drafter import Drafter, load_drafter
from .registry import BUILTIN_TARGET, find_drafter, supported_bases
from .target import SUPPORTED_FAMILIES, Target


@dataclass
class Pair:
    target: Target
    drafter: Optional[Drafter]
    tokenizer: object  # mlx_lm TokenizerWrapper
    model_id: str
    draft_id: Optional[str]
    costs: Optional[dict] = None  # measured forward costs, for adaptive verify lengths (policy.py)
    step_prior: Optional[tuple] = None  # ((context, ms), ...): a GPU's warm steps (policy.Fallback)
    backend: Backend = field(default_factory=Backend)  # what the pair computes with (backend.py)
    # a sharded target (distributed.py): agree(cycle, finish) raises unless every rank's
    # cycle took the same decision
    agree: Optional[Callable[..., None]] = None


def resolve(path_or_repo: str, what: str, progress: Callable[[str], None] = print) -> Path:
    """A local directory as is; otherwise a Hub repo id fetched through huggingface_hub."""
    p = Path(path_or_repo).expanduser()
    if p.is_dir():
        return p
    if p.exists() or path_or_repo.count("/") != 1 or path_or_repo.startswith((".", "/", "~")):
        raise ValueError(f"{what} {path_or_repo!r} is neither a directory nor a Hub repo id")
    from huggingface_hub import snapshot_download

    progress(f"fetching {what} {path_or_repo} from the Hugging Face Hub")
    try:
        return Path(snapshot_download(
            path_or_repo, allow_patterns=["*.json", "*.safetensors", "*.jinja", "*.txt", "*.model"]))
    except Exception as e:
        if type(e).__name__ in ("LocalEntryNotFoundError", "OfflineModeIsEnabled"):
            why = ("no connection to the Hugging Face Hub and no copy in its cache (a Hub model "
                   "downloads once, then works offline; the embedded pair always does)")
        else:
            why = f"{type(e).__name__}: {one_line(e)}"
        raise ValueError(f"cannot fetch {what} {path_or_repo!r}: {why}") from None


def one_line(e: Exception, limit: int = 300) -> str:
    """An exception's message on one line (library messages span many: parameter lists, hints)."""
    text = " ".join(str(e).split())
    return text if len(text) <= limit else text[:limit] + "..."


def check_pair(target: Target, drafter: Drafter) -> None:
    """Raise ValueError, before any generation, when the drafter was not made for this target."""
    a = drafter.args
    problems = []
    if a.hidden_size != target.hidden_size:
        problems.append(f"hidden size {a.hidden_size} != target's {target.hidden_size}")
    if a.vocab_size != target.vocab_size:
        problems.append(f"vocab size {a.vocab_size} != target's {target.vocab_size}")
    if a.num_target_layers != target.num_layers:
        problems.append(f"made for a {a.num_target_layers}-layer target, this one has {target.num_layers}")
    bad_taps = [t for t in a.target_layer_ids if not 0 <= t < target.num_layers]
    if bad_taps:
        problems.append(f"target_layer_ids {bad_taps} outside the target's {target.num_layers} layers")
    if not 0 <= a.mask_token_id < target.vocab_size:
        problems.append(f"mask_token_id {a.mask_token_id} outside the vocabulary of {target.vocab_size}")
    if problems:
        raise ValueError("drafter does not fit the target: " + "; ".join(problems))


TARGET_DTYPES = ("auto", "stored", "float32")


def load_target(model: str, progress: Callable[[str], None] = print, dtype: str = "auto",
                backend: Optional[Backend] = None):
    """(mlx-lm model, tokenizer, model_type) for a directory, a Hub id or the builtin target.

    dtype "float32" dequantizes every quantized layer (exact: the same weights, fp32 arithmetic);
    "auto" does so only where fp32 verification is cheap (CPU with an optimized BLAS) and the
    model fits in a quarter of RAM; otherwise the model runs as stored. Target-only and DFlash
    always share one choice. (Casting the builtin GGUF's fp32 norms to bf16 on the H200 halves a
    step but breaks the promise: a token's bf16 logits differ alone and inside a 16-token block,
    and 7 of 12 bench prompts diverged from target-only; lab/bench/results/h200-smollm2.md.)
    """
    from mlx_lm import load
    if dtype not in TARGET_DTYPES:
        raise ValueError(f"target dtype {dtype!r} is not one of {TARGET_DTYPES}")

    if model == BUILTIN_TARGET:
        from .builtin import ensure_builtin_target

        path = ensure_builtin_target(progress=progress)
    else:
        path = resolve(model, "target", progress)
    model_type = _target_type(model, path)
    progress(f"loading target {model}")
    try:
        lm, tokenizer = load(str(path))
    except Exception as e:  # mlx-lm / transformers: missing tokenizer files, weights of another shape...
        raise ValueError(f"cannot load target {model!r}: {type(e).__name__}: {one_line(e)}") from None
    if dtype == "auto":
        dtype = _auto_dtype(lm, backend or active())
    if dtype == "float32":
        from mlx_lm.utils import dequantize_model

        progress("dequantizing the target to float32")
        lm = dequantize_model(lm)
        lm.set_dtype(mx.float32)
        mx.eval(lm.parameters())
    return lm, tokenizer, model_type


def _target_type(model: str, path: Path) -> str:
    """The model_type of a target directory, refusing what mlx-lm would fail on with a traceback."""
    cfg_file = path / "config.json"
    if not cfg_file.is_file():
        raise ValueError(f"target {model!r} has no config.json")
    try:
        cfg = json.loads(cfg_file.read_text())
    except ValueError as e:
        raise ValueError(f"target {model!r}: config.json is not valid JSON: {e}") from None
    if not isinstance(cfg, dict):
        raise ValueError(f"target {model!r}: config.json is not a JSON object")
    if "dflash_config" in cfg or "DFlashDraftModel" in (cfg.get("architectures") or ()):
        raise ValueError(f"target {model!r} is a DFlash drafter, not a target model")
    model_type = cfg.get("model_type")
    if model_type not in SUPPORTED_FAMILIES:
        raise ValueError(
            f"target {model!r} is a {model_type!r} model; supported families: "
            f"{', '.join(SUPPORTED_FAMILIES)}")
    if not any(path.glob("*.safetensors")):
        raise ValueError(f"target {model!r} has no *.safetensors weights in {path}")
    return model_type


def _auto_dtype(lm, backend: Backend) -> str:
    from mlx.utils import tree_flatten

    params = tree_flatten(lm.parameters())
    # CPU + OpenBLAS (blas.py): a 16-token fp32 forward costs ~2.5x a 1-token one (4-bit: ~14x)
    if not on_cpu() or backend.blas is None or not any(k.endswith(".scales") for k, _ in params):
        return "stored"
    fp32_bytes = 8 * sum(v.nbytes for _, v in params)  # <= 8x: 4-bit packed -> float32
    fits = fp32_bytes < 0.25 * os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    return "float32" if fits else "stored"


def load_pair(model: Optional[str] = None, draft: Optional[str] = None, mode: str = "dflash",
              progress: Callable[[str], None] = print, target_dtype: str = "auto",
              backend: Optional[Backend] = None) -> Pair:
    """Load the target and (for mode "dflash") its drafter, from the registry when not given.

    backend: what this process computes with (default: what backend.setup() chose); the
    target takes its row padding and GPU attention rows from it.

    A target with no known drafter and none given is an error: we never run target-only and
    call it DFlash.
    """
    model = model or BUILTIN_TARGET
    if mode == "dflash" and draft is None:
        draft = find_drafter(model)
        if draft is None:
            raise ValueError(
                f"no known DFlash drafter for target {model!r}; pass --draft or use one of: "
                f"{supported_bases()}")
    drafter = None
    if mode == "dflash":
        progress(f"loading drafter {draft}")
        drafter = load_drafter(resolve(draft, "drafter", progress))
    backend = backend or active()
    lm, tokenizer, model_type = load_target(model, progress, target_dtype, backend)
    target = Target(lm, model_type, drafter.target_layer_ids if drafter else None,
                    attention_rows=backend.attention_rows, row_tile=backend.row_tile)
    if drafter is not None:
        check_pair(target, drafter)
        drafter.set_dtype(_float_dtype(target))
    return Pair(target, drafter, tokenizer, model, draft if mode == "dflash" else None, backend=backend)


def _float_dtype(target: Target) -> mx.Dtype:
    """The target's activation dtype, read off its final norm (quantized layers say nothing;
    on CPU a float16 drafter would also hit a ~40x slower quantized-matmul path)."""
    return target.backbone.norm.weight.dtype


def encode_prompt(tokenizer, text: str | list[dict], chat_template: bool = True) -> list[int]:
    """Token ids of `text`, wrapped as one user turn when the tokenizer has a chat template; a
    list of {"role", "content"} messages is a conversation (it needs the chat template)."""
    has_template = chat_template and getattr(tokenizer, "chat_template", None)
    if isinstance(text, list) and not has_template:
        raise ValueError("a conversation (messages) needs the tokenizer's chat template")
    if has_template:
        messages = text if isinstance(text, list) else [{"role": "user", "content": text}]
        rendered = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
        return tokenizer.encode(rendered, add_special_tokens=False)
    return tokenizer.encode(text)
