"""Checks for the prompt assets: training / eval prompts, bench suites and playground presets."""

from __future__ import annotations

import itertools
import json
import lzma
import re
from collections import Counter
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PROMPTS = ROOT / "lab" / "prompts"  # the shipped drafter's training prompts (data; their scripts: test_lab.py)
TRAIN = PROMPTS / "train.jsonl.xz"
NATURAL = PROMPTS / "train-natural.jsonl.xz"
SELF = sorted(PROMPTS.glob("train-self-*.jsonl.xz"))  # written by the target (train --write-self-prompts)
VAL_SELF = PROMPTS / "val-self-3.jsonl"  # the same, another seed: for train --val-prompts
SHAREGPT = PROMPTS / "train-sharegpt.jsonl.xz"  # written by people (sharegpt.py)
VAL_SHAREGPT = PROMPTS / "val-sharegpt.jsonl"
EVAL = ROOT / "assets" / "prompts" / "eval.jsonl"  # held out: shipped with the product
BENCH = ROOT / "assets" / "bench"
BENCH_SUITES = ("chat", "code", "math")
PRESETS = ROOT / "assets" / "presets.json"

CATEGORIES = {"chat", "explanation", "code", "math", "lists", "creative"}


def norm(text: str) -> str:
    """Lower-case, drop punctuation, collapse whitespace."""
    return " ".join(re.sub(r"[^0-9a-z]+", " ", text.lower()).split())


def read_jsonl(path: Path) -> list[dict]:
    raw = path.read_bytes()
    lines = (lzma.decompress(raw) if path.suffix == ".xz" else raw).decode("utf-8").splitlines()
    assert lines, f"{path} is empty"
    return [json.loads(line) for line in lines]


@pytest.fixture(scope="module")
def train() -> list[dict]:
    return read_jsonl(TRAIN)


@pytest.fixture(scope="module")
def natural() -> list[dict]:
    return read_jsonl(NATURAL)


@pytest.fixture(scope="module")
def self_written() -> list[dict]:
    return [rec for path in SELF for rec in read_jsonl(path)]


@pytest.fixture(scope="module")
def sharegpt() -> list[dict]:
    return read_jsonl(SHAREGPT)


@pytest.fixture(scope="module")
def eval_set() -> list[dict]:
    return read_jsonl(EVAL)


@pytest.fixture(scope="module")
def bench() -> dict[str, list[dict]]:
    return {name: read_jsonl(BENCH / f"{name}.jsonl") for name in BENCH_SUITES}


@pytest.fixture(scope="module")
def presets() -> dict:
    return json.loads(PRESETS.read_text(encoding="utf-8"))


# ----------------------------------------------------------------------------- train


def test_train_schema_and_counts(train):
    assert len(train) >= 8000
    for rec in train:
        assert set(rec) == {"category", "prompt"}
        assert rec["category"] in CATEGORIES
        assert isinstance(rec["prompt"], str) and rec["prompt"].strip() == rec["prompt"] and rec["prompt"]
    counts = Counter(rec["category"] for rec in train)
    assert set(counts) == CATEGORIES
    assert min(counts.values()) >= 1000, counts


def test_train_is_deduplicated(train):
    keys = [norm(rec["prompt"]) for rec in train]
    assert len(set(keys)) == len(keys)


def test_natural_prompts_and_their_variants(natural):
    """Hand-written prompts (natural/*.jsonl), each plain and in decorated variants (the script
    that writes them: tests/test_lab.py)."""
    hand = [json.loads(l)["prompt"] for c in sorted(CATEGORIES)
            for l in (PROMPTS / "natural" / f"{c}.jsonl").read_text(encoding="utf-8").splitlines()]
    assert len(hand) == len({norm(p) for p in hand}) >= 2400
    counts = Counter(rec["category"] for rec in natural)
    assert set(counts) == CATEGORIES and min(counts.values()) >= 1000
    prompts = [rec["prompt"] for rec in natural]
    assert len({norm(p) for p in prompts}) == len(prompts) > 2 * len(hand)
    assert set(hand) <= set(prompts)  # every hand-written prompt is there as written


# ----------------------------------------------------------------------------- eval / bench / presets


def test_self_written_prompts(self_written):
    """The eighth run's prompts the target wrote itself: two seeds, every category, readable by
    the training CLI as they are."""
    from dflash.train.data import STARTERS, read_prompts

    assert len(SELF) == 2 and len(self_written) >= 30000
    assert Counter(r["category"] for r in self_written).keys() == CATEGORIES
    for rec in self_written:
        assert set(rec) == {"category", "prompt"} and rec["prompt"].strip() == rec["prompt"]
        assert any(rec["prompt"].startswith(s) for s in STARTERS[rec["category"]])
    assert sum(len(read_prompts(p)) for p in SELF) == len(self_written)


def test_sharegpt_prompts(sharegpt):
    """People's first turns from ShareGPT, split into training and validation prompts; both read
    by the training CLI as they are, neither holding a URL, an e-mail address or a long number."""
    from dflash.train.data import read_prompts

    val = read_jsonl(VAL_SHAREGPT)
    assert len(sharegpt) >= 6000 and len(val) >= 300
    for rec in sharegpt + val:
        assert set(rec) == {"category", "prompt"} and rec["category"] == "sharegpt"
        text = rec["prompt"]
        assert text.strip() == text and 10 <= len(text) <= 400
        assert not re.search(r"https?://|www\.|\S+@\S+\.\w+|\d{7,}", text), text
    assert len(read_prompts(SHAREGPT)) == len(sharegpt) and len(read_prompts(VAL_SHAREGPT)) == len(val)


def test_eval_schema_and_counts(eval_set):
    assert len(eval_set) == 60
    for rec in eval_set:
        assert set(rec) == {"category", "prompt"}
        assert isinstance(rec["prompt"], str) and rec["prompt"]
    counts = Counter(rec["category"] for rec in eval_set)
    assert counts == {c: 10 for c in CATEGORIES}


def test_bench_schema(bench):
    for name, recs in bench.items():
        assert len(recs) == 8, name
        assert [rec["id"] for rec in recs] == [f"{name}-{i}" for i in range(1, 9)]
        for rec in recs:
            assert set(rec) == {"id", "prompt"}
            assert isinstance(rec["prompt"], str) and rec["prompt"]


def test_presets_schema(presets):
    assert set(presets) == {"chat", "code", "math", "long"}
    for value in presets.values():
        assert isinstance(value, str) and value.strip()
    assert 1200 <= len(presets["long"].split()) <= 2000


# ----------------------------------------------------------------------------- disjointness


@pytest.fixture(scope="module")
def prompt_sets(train, natural, self_written, sharegpt, eval_set, bench, presets) -> dict[str, list[str]]:
    return {
        "train": [r["prompt"] for r in train + natural + self_written + sharegpt],
        "val": [r["prompt"] for r in read_jsonl(VAL_SELF)],
        "val-sharegpt": [r["prompt"] for r in read_jsonl(VAL_SHAREGPT)],
        "eval": [r["prompt"] for r in eval_set],
        "bench": [r["prompt"] for recs in bench.values() for r in recs],
        "presets": list(presets.values()),
    }


def test_no_duplicates_within_held_out_sets(prompt_sets):
    for name in ("val", "val-sharegpt", "eval", "bench", "presets"):
        keys = [norm(p) for p in prompt_sets[name]]
        assert len(set(keys)) == len(keys), name


def test_sets_pairwise_disjoint(prompt_sets):
    for a, b in itertools.combinations(prompt_sets, 2):
        exact = set(prompt_sets[a]) & set(prompt_sets[b])
        assert not exact, (a, b, sorted(exact)[:5])
        normed = {norm(p) for p in prompt_sets[a]} & {norm(p) for p in prompt_sets[b]}
        assert not normed, (a, b, sorted(normed)[:5])


def test_held_out_prompts_not_embedded_in_train(prompt_sets):
    """A held-out prompt must not appear inside a (decorated) training prompt, nor vice versa."""
    train_keys = [norm(p) for p in prompt_sets["train"]]
    blob = "\n".join(train_keys)
    by_window = {}  # every 40-character window of a held-out prompt -> the prompts holding it
    for name in ("val", "val-sharegpt", "eval", "bench", "presets"):
        for prompt in prompt_sets[name]:
            key = norm(prompt)
            assert key not in blob, (name, prompt)
            for i in range(len(key) - 39):
                by_window.setdefault(key[i : i + 40], set()).add((name, prompt, key))
    for t in train_keys:  # a training prompt inside a held-out one starts with one of its windows
        if len(t) >= 40:
            for name, prompt, key in by_window.get(t[:40], ()):
                assert t not in key, (name, prompt)
