"""z-lab's reference MLX DFlash as a benchmark peer (`python -m dflash bench --peer zlab`).

The code is z-lab's own, from the `dflash==0.1.0` wheel on PyPI (file `dflash/model_mlx.py`).
It is fetched once into `$DFLASH_CACHE` and imported by file path under another module name, so
it never shadows this package and none of it is copied here. We only call its public
`load_draft` and `stream_generate`, on our loaded target, with the same prompt ids and block size.

Two things it does that we must undo or work around:
- `load_draft(id)` always goes through `huggingface_hub.snapshot_download`; we point that name,
  inside its module only and only while loading, at our local drafter directory (a copy without
  our Markov head's weights when it has one: its loader takes no unknown weights).
- `stream_generate` wraps the target's tapped decoder layers in hooks (and leaves them there);
  after each run we put the original layers back so our own engine sees an untouched model.
"""

from __future__ import annotations

import importlib.util
import json
import os
import sys
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path
from time import perf_counter
from typing import Callable, Optional

import mlx.core as mx

from .builtin import cache_dir, fetch_wheel

NAME = "zlab"
WHEEL_NAME, WHEEL_VERSION = "dflash", "0.1.0"
MODULE_NAME = "zlab_dflash_model_mlx"
SOURCE_IN_WHEEL = "dflash/model_mlx.py"


def source_path() -> Path:
    """Where the peer's `model_mlx.py` lives once fetched."""
    return cache_dir() / "peers" / f"zlab-dflash-{WHEEL_VERSION}" / "model_mlx.py"


def fetch(progress: Callable[[str], None] = print) -> Path:
    """The peer's source file, downloading the wheel (no dependencies, ~30 kB) on first use."""
    src = source_path()
    if src.is_file():
        return src
    wheel = fetch_wheel(WHEEL_NAME, WHEEL_VERSION, progress, "(~30 kB, the z-lab peer)")
    src.parent.mkdir(parents=True, exist_ok=True)
    tmp = src.with_name(src.name + f".tmp{os.getpid()}")
    with zipfile.ZipFile(wheel) as z:
        tmp.write_bytes(z.read(SOURCE_IN_WHEEL))
    os.replace(tmp, src)
    return src


def load_module(src: Path):
    """Import the peer's file as `zlab_dflash_model_mlx` (never as `dflash.*`)."""
    if MODULE_NAME in sys.modules:
        return sys.modules[MODULE_NAME]
    spec = importlib.util.spec_from_file_location(MODULE_NAME, src)
    module = importlib.util.module_from_spec(spec)
    sys.modules[MODULE_NAME] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[MODULE_NAME]
        raise
    return module


@dataclass(frozen=True)
class PeerRun:
    """One peer generation, measured the way our Summary measures ours."""

    token_ids: tuple[int, ...]  # generated ids, cut before the first stop token (as ours)
    ttft_s: float
    decode_s: float  # first token to last token
    decode_tok_s: float  # tokens after the first / decode_s
    cycles: int
    tau: float  # committed tokens per verify cycle (stop token included, as the peer emits it)
    reported_tok_s: float  # the peer's own generation_tps (its definition: n / time since prefill)


class ZlabPeer:
    """z-lab's `stream_generate` bound to our target model, tokenizer and drafter directory."""

    name = NAME

    def __init__(self, module, lm, tokenizer, draft_dir: str | Path):
        self.mod, self.lm, self.tokenizer = module, lm, tokenizer
        with tempfile.TemporaryDirectory(prefix="zlab-draft-") as tmp:
            draft_dir = str(_without_head(Path(draft_dir).resolve(), Path(tmp)))
            download = module.snapshot_download
            module.snapshot_download = lambda *a, **k: draft_dir
            try:
                self.draft = module.load_draft(draft_dir)
                mx.eval(self.draft.parameters())  # read before the copy goes
            finally:
                module.snapshot_download = download
        self.stop_ids = set(tokenizer.eos_token_ids)

    def generate(self, prompt_ids: list[int], max_tokens: int, block_size: int,
                 temperature: float = 0.0, top_p: float = 1.0) -> PeerRun:
        ids, sizes, t_first, t_last = [], [], None, None
        reported = 0.0
        t0 = perf_counter()
        try:
            for r in self.mod.stream_generate(self.lm, self.draft, self.tokenizer, mx.array(prompt_ids),
                                              block_size=block_size, max_tokens=max_tokens,
                                              temperature=temperature, top_p=top_p):
                now = perf_counter()
                if r.tokens:
                    if t_first is None:
                        t_first = now
                    else:
                        sizes.append(len(r.tokens))
                    ids.extend(r.tokens)
                    t_last = now
                reported = r.generation_tps
        finally:
            self._unhook()
        cut = next((i for i, t in enumerate(ids) if t in self.stop_ids), len(ids))
        ids = ids[:cut]
        decode_s = (t_last - t_first) if t_first is not None else 0.0
        return PeerRun(
            token_ids=tuple(ids),
            ttft_s=(t_first - t0) if t_first is not None else 0.0,
            decode_s=decode_s,
            decode_tok_s=(len(ids) - 1) / decode_s if decode_s > 0 and len(ids) > 1 else 0.0,
            cycles=len(sizes),
            tau=sum(sizes) / len(sizes) if sizes else 0.0,
            reported_tok_s=reported,
        )

    def _unhook(self) -> None:
        """Put back the decoder layers the peer wrapped, and drop its hidden-state list."""
        layers = self.mod._get_layers(self.lm)
        for i, layer in enumerate(layers):
            if isinstance(layer, self.mod._LayerHook):
                layers[i] = layer._layer
        self.lm.pop("_hidden_states", None)


def _without_head(draft_dir: Path, tmp: Path) -> Path:
    """draft_dir, or a copy in tmp of its config and its weights but the Markov head's."""
    cfg = json.loads((draft_dir / "config.json").read_text())
    if not (cfg.get("dflash_config") or {}).get("markov_rank"):
        return draft_dir
    weights = {k: v for f in sorted(draft_dir.glob("*.safetensors")) for k, v in mx.load(str(f)).items()
               if not k.startswith("markov.")}
    mx.save_safetensors(str(tmp / "model.safetensors"), weights)
    (tmp / "config.json").write_text(json.dumps(cfg))
    return tmp


def load_peer(pair, draft_dir: Optional[str | Path], progress: Callable[[str], None] = print) -> ZlabPeer:
    """The z-lab peer for a loaded pair; raises (any exception) with the reason it cannot run."""
    if draft_dir is None:
        raise ValueError("the pair has no drafter directory to give the peer")
    return ZlabPeer(load_module(fetch(progress)), pair.target.model, pair.tokenizer, draft_dir)


def load_recorded(pair, log) -> tuple[object, dict]:
    """For `bench --peer zlab`: (peer or None, the JSON's record of it: version, and why it
    could not run if so)."""
    from .load import resolve

    info = {"name": NAME, "package": f"{WHEEL_NAME}=={WHEEL_VERSION}",
            "file": SOURCE_IN_WHEEL, "available": False, "error": None}
    try:
        draft_dir = resolve(pair.draft_id, "drafter", log) if pair.draft_id else None
        peer = load_peer(pair, draft_dir, log)
    except Exception as e:  # offline, a family or drafter format it does not handle, ...
        info["error"] = f"{type(e).__name__}: {e}"
        log(f"peer zlab cannot run: {info['error']}")
        return None, info
    info["available"] = True
    return peer, info
