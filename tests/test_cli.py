"""`python -m dflash generate` end to end on a tiny model saved to disk."""

import json
import subprocess
import sys

import pytest

from dflash.drafter import save_drafter
from tests.tiny import save_tiny_model, tiny_drafter


@pytest.fixture(scope="module")
def dirs(tmp_path_factory):
    root = tmp_path_factory.mktemp("cli")
    return save_tiny_model(root / "model", "qwen3"), save_drafter(tiny_drafter(), root / "drafter")


def generate(*args):
    return subprocess.run([sys.executable, "-m", "dflash", "generate", *args],
                          capture_output=True, text=True, timeout=120)


def test_json_stream_ends_with_summary(dirs):
    model, drafter = dirs
    common = ["--model", str(model), "--prompt", "t7 t9 t11 t20", "--no-chat-template",
              "--max-tokens", "12", "--json"]
    fast = generate(*common, "--draft", str(drafter), "--block-size", "4")
    plain = generate(*common, "--mode", "target")
    assert fast.returncode == 0 and plain.returncode == 0, fast.stderr + plain.stderr
    lines = [json.loads(l) for l in fast.stdout.splitlines()]
    assert lines[0]["kind"] == "prefill" and {l["kind"] for l in lines[1:-1]} == {"cycle"}
    s = lines[-1]
    assert s["kind"] == "summary" and s["mode"] == "dflash" and s["block_size"] == 4
    assert {"token_ids", "text", "tau", "acceptance_lengths", "decode_tok_s"} <= set(s)
    assert len(s["acceptance_lengths"]) == s["cycles"] == len(lines) - 2
    assert s["token_ids"] == json.loads(plain.stdout.splitlines()[-1])["token_ids"]


def test_text_mode_and_errors(dirs):
    model, drafter = dirs
    ok = generate("--model", str(model), "--draft", str(drafter), "--prompt", "t5 t6", "--max-tokens", "5")
    assert ok.returncode == 0 and "[dflash]" in ok.stderr and "tau" in ok.stderr
    bad = generate("--model", str(model), "--draft", str(drafter), "--prompt", "t5", "--block-size", "99")
    assert bad.returncode == 2 and "block_size must be in 2..8" in bad.stderr
    missing = generate("--model", str(model), "--draft", "/nonexistent/drafter", "--prompt", "t5")
    assert missing.returncode == 2 and "neither a directory nor a Hub repo id" in missing.stderr
    unpaired = generate("--model", str(model), "--prompt", "t5")
    assert unpaired.returncode == 2 and "no known DFlash drafter" in unpaired.stderr
