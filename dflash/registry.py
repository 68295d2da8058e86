"""Known target -> drafter pairs and how a target name finds its drafter (docs/algorithm.md: Supported targets)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Optional

from .builtin import BUILTIN_TARGET_ID as BUILTIN_TARGET

_HERE = Path(__file__).resolve().parent
# an installed wheel carries assets/ as dflash/assets (pyproject.toml); a checkout has it beside dflash/
ASSETS = _HERE / "assets" if (_HERE / "assets").is_dir() else _HERE.parent / "assets"
BUILTIN_DRAFTER = ASSETS / "smollm2-135m-instruct-dflash"

# base name -> drafter (Hub id, or a directory shipped in assets/)
DRAFTERS: dict[str, str] = {
    "Qwen3-4B": "z-lab/Qwen3-4B-DFlash-b16",
    "Qwen3-8B": "z-lab/Qwen3-8B-DFlash-b16",
    "Qwen3.5-4B": "z-lab/Qwen3.5-4B-DFlash",
    "Qwen3.5-9B": "z-lab/Qwen3.5-9B-DFlash",
    "Qwen3.5-27B": "z-lab/Qwen3.5-27B-DFlash",
    "Qwen3.5-35B-A3B": "z-lab/Qwen3.5-35B-A3B-DFlash",
    "Qwen3.6-27B": "z-lab/Qwen3.6-27B-DFlash",
    "Qwen3.6-35B-A3B": "z-lab/Qwen3.6-35B-A3B-DFlash",
    "SmolLM2-135M-Instruct": str(BUILTIN_DRAFTER),
}

# what the playground offers in its model picker: label -> (target, drafter)
PICKER: dict[str, tuple[str, str]] = {
    "SmolLM2-135M-Instruct (embedded)": (BUILTIN_TARGET, str(BUILTIN_DRAFTER)),
    **{f"{base} (Hub)": (f"mlx-community/{base}-4bit", hub)
       for base, hub in DRAFTERS.items() if hub.startswith("z-lab/")},
}


def base_name(target: str) -> str:
    """'mlx-community/Qwen3.6-27B-4bit' -> 'qwen3.6-27b-4bit' (org stripped, lowercased)."""
    if target == BUILTIN_TARGET:
        return "smollm2-135m-instruct"
    return target.rstrip("/").split("/")[-1].lower()


def find_drafter(target: str) -> Optional[str]:
    """The drafter for `target`: exact base match, else the longest base followed by - or _."""
    name = base_name(target)
    best = None
    for base in DRAFTERS:
        b = base.lower()
        if name == b:
            return DRAFTERS[base]
        if re.match(re.escape(b) + r"[-_]", name) and (best is None or len(b) > len(best)):
            best = b
    return next(v for k, v in DRAFTERS.items() if k.lower() == best) if best else None


def supported_bases() -> str:
    return ", ".join(DRAFTERS)
