"""Step 1, data: the target's own greedy answers to a prompt set, generated in lockstep batches
and kept as token files (`Dataset`) that later runs reuse."""

from __future__ import annotations

import json
import lzma
import os
import re
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterable, Optional

import mlx.core as mx
import numpy as np

from .progress import progress_bar

DATA_FILE = "data.npz"


def read_prompts(path: str | Path) -> list[tuple[str, str | list[dict]]]:
    """(category, prompt) pairs from a JSONL file (or .jsonl.xz) of {"category", "prompt"} objects;
    instead of "prompt", "messages" holds a conversation ending with a user turn."""
    out = []
    raw = Path(path).read_bytes()
    text = (lzma.decompress(raw) if str(path).endswith(".xz") else raw).decode("utf-8")
    for i, line in enumerate(text.split("\n")):  # not splitlines(): U+2028 may sit inside a string
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
            prompt = obj["messages"] if "messages" in obj else obj["prompt"]
            if isinstance(prompt, list) and not (
                    prompt and prompt[-1].get("role") == "user"
                    and all(isinstance(m.get("content"), str) and m.get("role") in ("system", "user", "assistant")
                            for m in prompt)):
                raise TypeError
            out.append((str(obj.get("category", "default")), prompt))
        except (json.JSONDecodeError, KeyError, TypeError, AttributeError):
            raise ValueError(f"{path}:{i + 1}: expected a JSON object with a 'prompt' (or 'messages' "
                             "ending with a user turn)") from None
    if not out:
        raise ValueError(f"no prompts in {path}")
    return out


@dataclass
class Dataset:
    """Prompt + response token ids, one sequence per prompt, stored flat."""

    tokens: np.ndarray  # int32 [total]
    offsets: np.ndarray  # int64 [n + 1]
    prompt_lens: np.ndarray  # int32 [n]
    prompt_index: np.ndarray  # int32 [n]: line of the prompt file
    categories: np.ndarray  # str [n]
    meta: dict

    def __len__(self) -> int:
        return len(self.prompt_lens)

    def seq(self, i: int) -> np.ndarray:
        return self.tokens[self.offsets[i] : self.offsets[i + 1]]

    @property
    def lengths(self) -> np.ndarray:
        return np.diff(self.offsets)

    def save(self, path: Path) -> None:
        # a name of this process's own: two trainers that read one partial file must not share it
        tmp = path.with_name(f"{path.stem}.{os.getpid()}.tmp.npz")
        np.savez(tmp, tokens=self.tokens, offsets=self.offsets, prompt_lens=self.prompt_lens,
                 prompt_index=self.prompt_index, categories=self.categories,
                 meta=np.array(json.dumps(self.meta)))
        tmp.replace(path)

    @classmethod
    def load(cls, path: Path) -> "Dataset":
        z = np.load(path)
        return cls(z["tokens"], z["offsets"], z["prompt_lens"], z["prompt_index"],
                   z["categories"], json.loads(str(z["meta"])))

    @classmethod
    def concat(cls, parts: list["Dataset"]) -> "Dataset":
        """Several token files as one training set (prompt_index then only names a line of the
        part's own prompt file)."""
        if len(parts) == 1:
            return parts[0]
        offsets = np.concatenate([[0]] + [p.offsets[1:] + sum(len(q.tokens) for q in parts[:k])
                                          for k, p in enumerate(parts)])
        return cls(np.concatenate([p.tokens for p in parts]), offsets.astype(np.int64),
                   np.concatenate([p.prompt_lens for p in parts]),
                   np.concatenate([p.prompt_index for p in parts]),
                   np.concatenate([p.categories for p in parts]),
                   {"parts": [p.meta for p in parts], "complete": all(p.meta.get("complete") for p in parts)})

    @classmethod
    def from_lists(cls, seqs: list[list[int]], prompt_lens, prompt_index, categories, meta) -> "Dataset":
        offsets = np.zeros(len(seqs) + 1, dtype=np.int64)
        offsets[1:] = np.cumsum([len(s) for s in seqs])
        tokens = np.fromiter((t for s in seqs for t in s), dtype=np.int32, count=int(offsets[-1]))
        return cls(tokens, offsets, np.asarray(prompt_lens, np.int32),
                   np.asarray(prompt_index, np.int32), np.asarray(categories, dtype=str), meta)


def greedy_batch(model, prompts: list[list[int]], max_new_tokens: int, stop_ids: list[int],
                 opening: Optional[np.ndarray] = None, temperature: float = 1.0,
                 seed: int = 0, sample_stops: bool = False) -> list[list[int]]:
    """Greedy answers to a batch of prompts in lockstep: left-padded (mlx-lm's BatchKVCache keeps
    each row's positions and masks its padding), one fixed-shape forward per token for the whole
    batch, no per-row work on the host. An answer ends with its stop token (kept: it is the
    target's own next token) or at max_new_tokens.

    `opening[r]` > 0: row r's first opening[r] tokens are sampled at `temperature` (never a stop
    token unless `sample_stops`) and the rest is greedy: another greedy answer to the same prompt,
    from another start."""
    from mlx_lm.models.cache import BatchKVCache

    width = max(map(len, prompts))
    pad = [width - len(p) for p in prompts]
    ids = mx.array([[0] * k + p for k, p in zip(pad, prompts)])
    cache = [BatchKVCache(pad) for _ in model.layers]
    stops = mx.array(stop_ids)
    longest = 0 if opening is None else int(opening.max())
    n_open = mx.array(np.zeros(len(prompts)) if opening is None else opening)
    keys = mx.random.split(mx.random.key(seed), max(1, longest))

    def pick(logits, i):  # the token at answer position i
        y = mx.argmax(logits, -1)
        if i >= longest:
            return y
        if not sample_stops:
            logits = logits.at[:, stops].add(-mx.inf)
        s = mx.random.categorical(logits / temperature, key=keys[i])
        return mx.where(i < n_open, s, y)

    y = pick(model(ids, cache=cache)[:, -1], 0)
    out, done = [], mx.zeros(len(prompts), dtype=mx.bool_)
    for i in range(max_new_tokens):
        out.append(y)
        done = done | (y[:, None] == stops).any(-1)
        if i + 1 == max_new_tokens:
            break
        nxt = pick(model(y[:, None], cache=cache)[:, -1], i + 1)
        mx.async_eval(nxt, done)  # the device runs ahead while the host checks, now and then,
        if i % 16 == 15 and done.all().item():  # whether every row has stopped
            break
        y = nxt
    tokens = np.array(mx.stack(out, 1))  # a row's tokens past its stop are dropped below
    answers = []
    for row in tokens:
        hit = np.flatnonzero(np.isin(row, stop_ids))
        answers.append(row[: hit[0] + 1 if len(hit) else len(row)].tolist())
    return answers


def generate_data(model, tokenizer, prompts: list[tuple[str, str]], path: Path,
                  max_new_tokens: int, batch_size: int, time_limit: Optional[float] = None,
                  progress: Callable[[str], None] = print, opening: int = 0,
                  temperature: float = 1.0, seed: int = 0) -> Dataset:
    """Greedy answers of `model` to every prompt, in batches of similar prompt length; saved to
    `path` after each batch (a partial file resumes). After `time_limit` seconds it stops and
    returns the answers finished so far.

    opening > 0: each answer opens with 1..opening sampled tokens (`greedy_batch`), which the token
    file counts as prompt, so that training anchors and labels only ever see greedy tokens."""
    from ..load import encode_prompt

    meta = {"max_new_tokens": max_new_tokens, "n_prompts": len(prompts), "complete": False}
    if opening:
        meta.update(opening=opening, temperature=temperature, seed=seed)
    done: dict[int, tuple[list[int], int]] = {}
    old, n_new = None, 0
    if path.exists():
        old = Dataset.load(path)
        for j, i in enumerate(old.prompt_index):
            done[int(i)] = (old.seq(j).tolist(), int(old.prompt_lens[j]))
        progress(f"resuming data generation: {len(done)}/{len(prompts)} answers in {path}")

    def save(complete: bool) -> Dataset:
        idx = sorted(done)
        ds = Dataset.from_lists([done[i][0] for i in idx], [done[i][1] for i in idx], idx,
                                [prompts[i][0] for i in idx], dict(meta, complete=complete))
        if n_new or old is None or complete != old.meta.get("complete", False):  # else it is on disk
            ds.save(path)
        return ds

    encoded = {i: encode_prompt(tokenizer, prompts[i][1]) for i in range(len(prompts)) if i not in done}
    todo = sorted(encoded, key=lambda i: len(encoded[i]))  # little padding inside a batch
    stop_ids = sorted(tokenizer.eos_token_ids)
    bar = progress_bar(len(todo), "generating")
    n_tok, t0 = 0, time.perf_counter()
    for s in range(0, len(todo), batch_size):
        if time_limit is not None and time.perf_counter() - t0 >= time_limit:
            progress(f"\ngeneration stopped at its time limit: {len(done)}/{len(prompts)} answers")
            break
        batch = todo[s : s + batch_size]
        n_open = None
        if opening:  # seeded by the batch's first prompt: a resumed file draws the same openings
            n_open = np.random.default_rng([seed, batch[0]]).integers(1, opening + 1, len(batch))
        answers = greedy_batch(model, [encoded[i] for i in batch], max_new_tokens, stop_ids,
                               n_open, temperature, seed=seed * 1_000_003 + batch[0])
        for r, (i, answer) in enumerate(zip(batch, answers)):
            k = 0 if n_open is None else min(int(n_open[r]), len(answer))
            done[i] = (encoded[i] + answer, len(encoded[i]) + k)
            n_tok += len(answer)
        n_new += len(batch)
        save(False)
        bar.update(len(batch))
        bar.set_postfix_str(f"{n_tok / (time.perf_counter() - t0):.0f} tok/s", refresh=False)
    bar.close()
    return save(len(done) == len(prompts))


FOLLOW_UPS = (
    "Can you explain that in simpler terms?", "Can you give me an example?",
    "Thanks! Can you summarize the key points in a short list?", "What else should I know about this?",
    "Could you make it shorter?", "Why is that?", "Can you go into more detail on the first point?",
    "What would you suggest as a next step?",
)


def follow_ups(ds: Dataset, prompts: list[tuple], tokenizer, seed: int = 0) -> list[dict]:
    """A second user turn after each answer that ended on its own (stop token, not the length
    cap): {"category", "messages": [..., the answer, a follow-up]} records, whose greedy answers
    are new data with a longer context. `prompts` is the list the answers were generated from
    (ds.prompt_index indexes it)."""
    rng, stops, out = np.random.default_rng(seed), set(tokenizer.eos_token_ids), []
    for j in range(len(ds)):
        answer = ds.seq(j)[ds.prompt_lens[j]:].tolist()
        if not answer or answer[-1] not in stops:
            continue
        cat, prompt = prompts[int(ds.prompt_index[j])]
        turns = prompt if isinstance(prompt, list) else [{"role": "user", "content": prompt}]
        out.append({"category": cat, "messages": turns + [
            {"role": "assistant", "content": tokenizer.decode(answer[:-1])},
            {"role": "user", "content": FOLLOW_UPS[int(rng.integers(len(FOLLOW_UPS)))]}]})
    return out


# How a sampled user turn starts, per category ("" lets the target choose freely): steers the mix
# of prompts towards the playground's six categories without writing the prompts ourselves.
STARTERS = {
    "chat": ("", "", "Can you", "I", "My", "How can I", "What should I", "Is it"),
    "explanation": ("Explain", "Why", "How does", "What is", "What are the differences between"),
    "code": ("Write a Python function", "Write a program", "How do I", "Write a SQL query",
             "In JavaScript,", "Fix this code"),
    "math": ("Solve", "Calculate", "If", "What is the sum of", "A store", "Find"),
    "lists": ("List", "Give me", "What are some", "Name", "Suggest"),
    "creative": ("Write a short poem", "Write a story", "Describe", "Imagine", "Write a letter"),
}


def self_prompts(model, tokenizer, n: int, batch_size: int = 256, temperature: float = 0.8,
                 max_tokens: int = 64, seed: int = 0, exclude: Iterable[str] = (),
                 progress: Callable[[str], None] = print) -> list[dict]:
    """n user turns written by the target itself: the chat template up to a user turn, a starter
    from STARTERS, then tokens sampled at `temperature` up to the end-of-turn token. Prompts that
    no person wrote, on whatever the model knows about: data that is not tied to our templates.
    Turns that do not end within max_tokens, are too short, repeat, or contain or sit inside an
    `exclude` prompt (the held-out set) are dropped, so fewer than n may come back."""
    rendered = tokenizer.apply_chat_template([{"role": "user", "content": "\x00"}], tokenize=False,
                                             add_generation_prompt=False)
    head = rendered[: rendered.index("\x00")]
    end = tokenizer.encode(rendered[rendered.index("\x00") + 1 :], add_special_tokens=False)[:1]
    held = [norm_prompt(p) for p in exclude]
    cats = [(c, s) for c, starters in STARTERS.items() for s in starters]
    rng = np.random.default_rng(seed)
    out, seen = [], set()
    bar = progress_bar(n, "writing prompts")
    for b in range(0, n, batch_size):
        picks = [cats[i] for i in rng.integers(len(cats), size=min(batch_size, n - b))]
        ids = [tokenizer.encode(head + s, add_special_tokens=False) for _, s in picks]
        turns = greedy_batch(model, ids, max_tokens, end, opening=np.full(len(ids), max_tokens),
                             temperature=temperature, seed=seed * 1_000_003 + b, sample_stops=True)
        for (cat, starter), t in zip(picks, turns):
            text = (starter + tokenizer.decode(t[:-1])).strip()
            key = norm_prompt(text)
            if (t[-1:] == end and len(key.split()) >= 3 and key not in seen and "<|" not in text
                    and not any(h in key or key in h for h in held)):
                seen.add(key)
                out.append({"category": cat, "prompt": text})
        bar.update(len(picks))
    bar.close()
    progress(f"{len(out)} of {n} sampled user turns kept")
    return out


def norm_prompt(text: str) -> str:
    """How prompts are compared: lower case, letters and digits, single spaces."""
    return " ".join(re.sub(r"[^0-9a-z]+", " ", text.lower()).split())
