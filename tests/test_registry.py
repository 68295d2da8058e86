"""Registry matching, unpaired targets, and Hub ids resolved through a local HF cache."""

import pytest

from dflash.drafter import save_drafter
from dflash.load import load_pair, resolve
from dflash.registry import BUILTIN_DRAFTER, BUILTIN_TARGET, find_drafter
from tests.tiny import save_tiny_model, tiny_drafter


@pytest.mark.parametrize("name, drafter", [
    ("mlx-community/Qwen3.6-27B-4bit", "z-lab/Qwen3.6-27B-DFlash"),
    ("Qwen/Qwen3-8B", "z-lab/Qwen3-8B-DFlash-b16"),
    ("qwen3-8b_mlx", "z-lab/Qwen3-8B-DFlash-b16"),
    ("mlx-community/Qwen3.5-35B-A3B-4bit", "z-lab/Qwen3.5-35B-A3B-DFlash"),
    ("/models/Qwen3.5-4B", "z-lab/Qwen3.5-4B-DFlash"),
    (BUILTIN_TARGET, str(BUILTIN_DRAFTER)),
    ("Qwen3-80B", None),  # Qwen3-8 is not a prefix followed by - or _
    ("Qwen3-8Bx", None),
    ("meta-llama/Llama-3-8B", None),
])
def test_find_drafter(name, drafter):
    assert find_drafter(name) == drafter


def test_unpaired_target_is_an_error_not_a_silent_fallback():
    with pytest.raises(ValueError, match="no known DFlash drafter.*Qwen3-8B"):
        load_pair("someone/Mistral-7B", None, mode="dflash")


def test_unknown_path_is_an_error():
    with pytest.raises(ValueError, match="neither a directory nor a Hub repo id"):
        resolve("./no/such/dir", "drafter")


def _hub_fixture(tmp_path, repo_id: str, files_from):
    """Lay out a Hugging Face cache entry by hand (what snapshot_download leaves behind)."""
    repo = tmp_path / "hub" / ("models--" + repo_id.replace("/", "--"))
    snap = repo / "snapshots" / ("0" * 40)
    snap.mkdir(parents=True)
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text("0" * 40)
    for f in files_from.iterdir():
        (snap / f.name).write_bytes(f.read_bytes())
    return snap


def test_pair_loads_from_hub_ids_offline(tmp_path, monkeypatch):
    """Target and drafter given as Hub ids resolve through huggingface_hub (offline cache)."""
    import huggingface_hub.constants as c

    _hub_fixture(tmp_path, "acme/Tiny-Qwen3", save_tiny_model(tmp_path / "target", "qwen3"))
    save_drafter(tiny_drafter(), tmp_path / "drafter")
    _hub_fixture(tmp_path, "acme/Tiny-Qwen3-DFlash", tmp_path / "drafter")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(c, "HF_HUB_CACHE", str(tmp_path / "hub"))
    monkeypatch.setattr(c, "HF_HUB_OFFLINE", True)

    pair = load_pair("acme/Tiny-Qwen3", "acme/Tiny-Qwen3-DFlash", progress=lambda m: None)
    assert pair.drafter.block_size == 8 and pair.target.num_layers == 4
    with pytest.raises(ValueError, match="cannot fetch drafter 'acme/Missing-DFlash': no connection to the Hug"):
        load_pair("acme/Tiny-Qwen3", "acme/Missing-DFlash", progress=lambda m: None)
