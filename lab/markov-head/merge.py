"""A Markov head's weights alone, and back into a drafter, the base's tensors byte for byte.

    python lab/markov-head/merge.py --extract RUN_DIR_OR_SAFETENSORS HEAD.safetensors
    python lab/markov-head/merge.py HEAD.safetensors DRAFTER_DIR [--out NEW_DIR]

`--extract` keeps only the `markov.*` tensors of a trained drafter (float16: what the engine
loads). Merging replaces the drafter's head (or adds one) and sets `markov_rank` in its
config.json; every other tensor's bytes are copied unchanged, which is checked after writing.
Without --out the drafter is changed in place. Plain Python (json, struct): it runs wherever
the repo does, MLX or not.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import shutil
import struct
import sys
from pathlib import Path

HEAD_KEYS = ("markov.in_proj.weight", "markov.out_proj.weight")
WEIGHTS = "model.safetensors"


def read_st(path: Path) -> tuple[dict, dict[str, bytes]]:
    """(metadata, {name: (dtype, shape, raw bytes)}) of a safetensors file."""
    raw = Path(path).read_bytes()
    if len(raw) < 8:
        raise ValueError(f"{path}: not a safetensors file (too short)")
    n = struct.unpack("<Q", raw[:8])[0]
    try:
        header = json.loads(raw[8 : 8 + n])
    except (json.JSONDecodeError, UnicodeDecodeError):
        raise ValueError(f"{path}: not a safetensors file (bad header)") from None
    meta = header.pop("__metadata__", {}) or {}
    body = raw[8 + n :]
    tensors = {}
    for k, v in header.items():
        a, b = v["data_offsets"]
        if not 0 <= a <= b <= len(body):
            raise ValueError(f"{path}: tensor {k} lies outside the file (truncated?)")
        tensors[k] = (v["dtype"], list(v["shape"]), body[a:b])
    return meta, tensors


def write_st(path: Path, tensors: dict, meta: dict) -> None:
    header, off = {"__metadata__": meta} if meta else {}, 0
    for k in sorted(tensors):
        dtype, shape, data = tensors[k]
        header[k] = {"dtype": dtype, "shape": shape, "data_offsets": [off, off + len(data)]}
        off += len(data)
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)  # the data starts 8-byte aligned
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h)
        for k in sorted(tensors):
            f.write(tensors[k][2])
    tmp.replace(path)


def extract(src: Path, dst: Path) -> dict:
    """The `markov.*` tensors of `src` (a drafter directory or its safetensors) into `dst`."""
    src = src / WEIGHTS if src.is_dir() else src
    meta, tensors = read_st(src)
    head = {k: tensors[k] for k in HEAD_KEYS if k in tensors}
    if len(head) != 2:
        raise ValueError(f"{src} has no Markov head (expected {', '.join(HEAD_KEYS)})")
    for k, (dtype, _, _) in head.items():
        if dtype != "F16":
            raise ValueError(f"{src}: {k} is {dtype}, not float16 (train with --save-dtype float16)")
    dst.parent.mkdir(parents=True, exist_ok=True)
    write_st(dst, head, {"format": "mlx"})
    return {k: v[1] for k, v in head.items()}


def _check_head(head: dict, cfg: dict, rows: int, where: str) -> int:
    """The head's rank, after checking its tensors against the drafter's config."""
    if sorted(head) != sorted(HEAD_KEYS):
        raise ValueError(f"{where}: expected exactly {', '.join(HEAD_KEYS)}, found {sorted(head)}")
    (d_in, s_in, _), (d_out, s_out, _) = head[HEAD_KEYS[0]], head[HEAD_KEYS[1]]
    if d_in != "F16" or d_out != "F16":
        raise ValueError(f"{where}: the head must be float16 (found {d_in}, {d_out})")
    rank = s_in[0]
    if s_in != [rank, cfg["hidden_size"]] or s_out != [rows, rank] or rank < 1:
        raise ValueError(f"{where}: head shapes {s_in}, {s_out} do not fit this drafter "
                         f"(expected [R, {cfg['hidden_size']}], [{rows}, R])")
    return rank


def _draft_rows(drafter: Path, cfg: dict) -> int:
    vocab = drafter / "draft_vocab.npy"
    if not vocab.exists():
        return cfg["vocab_size"]
    import numpy as np

    return len(np.load(vocab))


def _digest(tensors: dict) -> str:
    h = hashlib.sha256()
    for k in sorted(tensors):
        h.update(k.encode() + tensors[k][0].encode() + bytes(str(tensors[k][1]), "ascii") + tensors[k][2])
    return h.hexdigest()


def merge(head_file: Path, drafter: Path, out: Path | None = None) -> dict:
    """Put the head of `head_file` into drafter directory `drafter` (or a copy of it in `out`)."""
    cfg = json.loads((drafter / "config.json").read_text())
    _, head = read_st(head_file)
    rank = _check_head(head, cfg, _draft_rows(drafter, cfg), str(head_file))
    meta, tensors = read_st(drafter / WEIGHTS)
    base = {k: v for k, v in tensors.items() if not k.startswith("markov.")}
    before = _digest(base)
    if out is not None and out.resolve() != drafter.resolve():
        shutil.copytree(drafter, out, dirs_exist_ok=True)
        drafter = out
    cfg.setdefault("dflash_config", {})["markov_rank"] = rank
    write_st(drafter / WEIGHTS, {**base, **head}, meta)
    (drafter / "config.json").write_text(json.dumps(cfg, indent=2) + "\n")
    _, after = read_st(drafter / WEIGHTS)
    if _digest({k: v for k, v in after.items() if not k.startswith("markov.")}) != before:
        raise RuntimeError(f"{drafter}: the base tensors changed while merging")
    return {"drafter": str(drafter), "rank": rank, "base_tensors": len(base), "base_sha256": before}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("src", help="HEAD.safetensors (merge) or a run directory / safetensors (--extract)")
    p.add_argument("dst", help="DRAFTER_DIR (merge) or HEAD.safetensors to write (--extract)")
    p.add_argument("--extract", action="store_true", help="write only the head of SRC into DST")
    p.add_argument("--out", type=Path, default=None, help="merge into a copy of DRAFTER_DIR here")
    a = p.parse_args(argv)
    try:
        if a.extract:
            res = extract(Path(a.src), Path(a.dst))
        else:
            res = merge(Path(a.src), Path(a.dst), a.out)
    except (OSError, ValueError, KeyError) as e:
        print(f"merge.py: {e}", file=sys.stderr)
        return 1
    print(json.dumps(res))
    return 0


if __name__ == "__main__":
    sys.exit(main())
