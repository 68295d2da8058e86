"""A plain install (`pip install .`, a wheel) works outside the checkout: the shipped drafter,
presets and prompt suites travel in the wheel as dflash/assets."""

import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # builds and installs a wheel
ROOT = Path(__file__).resolve().parents[1]


def test_a_wheel_installed_elsewhere_generates_with_its_own_assets(tmp_path):
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(tmp_path / "wheel"), str(ROOT)],
                   check=True, capture_output=True)
    (wheel,) = (tmp_path / "wheel").glob("dflash_playground-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    for f in ("presets.json", "bench/long.jsonl", "prompts/eval.jsonl", "smollm2-135m-instruct-dflash/model.safetensors",
              "smollm2-135m-instruct-dflash/config.json", "smollm2-135m-instruct-dflash/draft_vocab.npy"):
        assert f"dflash/assets/{f}" in names
    site = tmp_path / "site"
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", str(site), str(wheel)],
                   check=True, capture_output=True)
    away = tmp_path / "elsewhere"
    away.mkdir()
    env = {**os.environ, "PYTHONPATH": str(site)}  # ahead of the checkout's editable install
    r = subprocess.run([sys.executable, "-m", "dflash", "generate", "--max-tokens", "6", "Hi"], cwd=away, env=env,
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-2000:]
    assert f"loading drafter {site / 'dflash' / 'assets'}" in r.stderr and "[dflash] 6 tokens" in r.stderr
    assert r.stdout.strip()
