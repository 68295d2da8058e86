"""A Markov head for the shipped drafter without a GPU: fitted in closed form to the answers'
bigram statistics, its scale chosen on cached drafter outputs, evaluated on others.

The target: bias(prev)[v] = alpha * PMI(prev, v) = alpha * log P(v | prev) / P(v) (additively
smoothed towards P(v), each row centred, clipped), the naive-Bayes correction of a position's
distribution once the token before it is known. The head's form is linear in the target's
embedding of prev, so the fit is a reduced-rank regression: G = argmin sum_prev n_prev
||E[prev] G - PMI[prev]||^2, then rank R by an SVD of the fitted rows; in_proj = (G V_R)^T,
out_proj = V_R. alpha is the one number chosen on the calibration cache (cache_base.py): the
lowest log-loss among those whose chain tau is no lower than the base drafter's.

    python lab/markov-head/fit.py --data /tmp/markov/*.npz --calib /tmp/markov/calib.npz \
        --eval /tmp/markov/eval.npz --rank 64 --out /tmp/markov/head
"""

from __future__ import annotations

import argparse
import json
import shutil
from pathlib import Path

from dflash import backend  # noqa: E402

backend.setup()  # before mlx loads: the CPU BLAS
import mlx.core as mx
import numpy as np

from dflash.drafter import MarkovHead, load_drafter, save_drafter
from dflash.load import load_target
from dflash.target import Target
from dflash.train import Dataset, FrozenIO

ALPHAS = (0.0, 0.25, 0.5, 0.75, 1.0, 1.25, 1.5, 2.0)


def bigrams(paths, vocab_ids: np.ndarray, n_prev: int):
    """(prev ids [P], counts [P, V'] of the next answer token by draft-vocabulary row)."""
    row = np.full(int(vocab_ids.max()) + 1 if len(vocab_ids) else 1, -1, np.int64)
    row[vocab_ids] = np.arange(len(vocab_ids))
    pairs = []
    for p in paths:
        ds = Dataset.load(p)
        for i in range(len(ds)):
            s = ds.seq(i)
            nxt = s[max(int(ds.prompt_lens[i]), 1):]
            prv = s[max(int(ds.prompt_lens[i]), 1) - 1 : -1]
            r = np.where(nxt < len(row), row[np.minimum(nxt, len(row) - 1)], -1)
            pairs.append(np.stack([prv[r >= 0], r[r >= 0]], 1))
    pairs = np.concatenate(pairs)
    prev_ids = np.argsort(-np.bincount(pairs[:, 0]), kind="stable")[:n_prev]
    prev_row = np.full(pairs[:, 0].max() + 1, -1, np.int64)
    prev_row[prev_ids] = np.arange(len(prev_ids))
    pr = prev_row[pairs[:, 0]]
    keep = pr >= 0
    flat = pr[keep] * len(vocab_ids) + pairs[keep, 1]
    counts = np.bincount(flat, minlength=len(prev_ids) * len(vocab_ids))
    print(f"{len(pairs)} answer bigrams, {keep.mean():.3f} with one of the {n_prev} prevs", flush=True)
    return prev_ids, counts.reshape(len(prev_ids), len(vocab_ids)).astype(np.float32)


def pmi(counts: np.ndarray, beta: float, clip: float) -> np.ndarray:
    p = counts.sum(0) + 1.0
    p /= p.sum()
    n = counts.sum(1, keepdims=True)
    m = np.clip(np.log((counts + beta * p) / (n + beta)) - np.log(p), -clip, clip)
    return m - m.mean(1, keepdims=True)  # a row's constant does not move a softmax


def fit(embeds: np.ndarray, target: np.ndarray, weights: np.ndarray, rank: int):
    """(in_proj [R, H], out_proj [V', R]) of the rank-R weighted least-squares fit."""
    w = np.sqrt(weights / weights.mean())[:, None]
    q, r = np.linalg.qr(embeds * w)
    g = np.linalg.solve(r, q.T @ (target * w))  # [H, V']
    _, _, vt = np.linalg.svd(r @ g, full_matrices=False)  # the fitted rows are q @ (r @ g)
    v = vt[:rank].T  # [V', R]
    return (g @ v).T, v


class Cache:
    """cache_base.py's arrays with the base logits over the draft vocabulary."""

    def __init__(self, path, head_w_rows: np.ndarray):
        z = np.load(path)
        self.labels, self.valid, self.prev = z["labels"], z["valid"] > 0, z["prev"]
        self.seq, self.anchor = z["seq"], z["anchor"]
        h = z["h"]
        self.base = (h.reshape(-1, h.shape[-1]) @ head_w_rows.T).reshape(*h.shape[:2], -1)
        self.data = Dataset.load(Path(path).with_suffix(".data.npz"))


def evaluate(c: Cache, bias_of, vocab_ids: np.ndarray) -> dict:
    """Chain tau (walk) and accuracies with the bias rows bias_of(prev ids [N, S]) [N, S, V'] added
    from block position 2 on."""
    row = np.full(int(vocab_ids.max()) + 1, -1)
    row[vocab_ids] = np.arange(len(vocab_ids))
    lab = np.where(c.labels <= vocab_ids.max(), row[np.minimum(c.labels, vocab_ids.max())], -1)
    valid = c.valid & (lab >= 0)
    base_ok = (c.base.argmax(-1) == lab) & valid
    head, nll = [], []
    for s in range(0, len(lab), 128):
        logits = c.base[s : s + 128].copy()
        logits[:, 1:] += bias_of(c.prev[s : s + 128, 1:])  # position 1 saw the staged token
        head.append(logits.argmax(-1))
        nll.append(nll_of(logits, lab[s : s + 128]))
    head_ok = (np.concatenate(head) == lab) & valid
    nll_base = nll_of(c.base, lab)
    sib = np.concatenate([np.zeros_like(valid[:, :1]), ~base_ok[:, :-1] & valid[:, :-1]], 1) & valid
    on = np.concatenate([np.zeros_like(valid[:, :1]), base_ok[:, :-1]], 1) & valid
    rate = lambda a, b: float(a.sum() / max(b.sum(), 1))
    return {"tau_base": walk(c, base_ok), "tau_head": walk(c, head_ok),
            "acc_base": rate(base_ok, valid), "acc_head": rate(head_ok, valid),
            "after_sibling_base": rate(base_ok & sib, sib), "after_sibling_head": rate(head_ok & sib, sib),
            "after_argmax_base": rate(base_ok & on, on), "after_argmax_head": rate(head_ok & on, on),
            "after_sibling_n": int(sib.sum()),
            "slot_acc_base": (base_ok.sum(0) / valid.sum(0)).round(4).tolist(),
            "slot_acc_head": (head_ok.sum(0) / valid.sum(0)).round(4).tolist(),
            "nll_base": float(nll_base[valid].mean()), "nll_head": float(np.concatenate(nll)[valid].mean())}


def nll_of(logits: np.ndarray, lab: np.ndarray) -> np.ndarray:
    """-log p(label) under softmax(logits) (labels outside the vocabulary: 0, not counted)."""
    m = logits.max(-1, keepdims=True)
    lse = m[..., 0] + np.log(np.exp(logits - m).sum(-1))
    return lse - np.take_along_axis(logits, np.maximum(lab, 0)[..., None], -1)[..., 0]


def walk(c: Cache, ok: np.ndarray) -> float:
    """tau of the engine's chain cycles over each answer (blocks at every answer position)."""
    run = np.cumprod(ok, 1).sum(1)
    acc = {(int(s), int(a)): int(n) for s, a, n in zip(c.seq, c.anchor, run)}
    cycles = []
    for i in range(len(c.data)):
        a, end = int(c.data.prompt_lens[i]), len(c.data.seq(i)) - 1
        while a < end:
            cycles.append(min(acc[(i, a)], end - a))
            a += cycles[-1] + 1
    return 1 + sum(cycles) / max(len(cycles), 1)


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--data", nargs="+", required=True, help="token files to count bigrams in")
    p.add_argument("--calib", required=True)
    p.add_argument("--eval", required=True)
    p.add_argument("--draft", default="assets/smollm2-135m-instruct-dflash")
    p.add_argument("--rank", type=int, default=64)
    p.add_argument("--prevs", type=int, default=8192)
    p.add_argument("--beta", type=float, default=20.0)
    p.add_argument("--clip", type=float, default=4.0)
    p.add_argument("--out", required=True)
    args = p.parse_args()
    drafter = load_drafter(args.draft)
    ids = drafter.vocab.ids
    lm, _, model_type = load_target("builtin:smollm2-135m-instruct", progress=lambda s: None)
    io = FrozenIO(Target(lm, model_type, []))
    embed, head = np.array(io.embed_w), np.array(io.head_w)
    prev_ids, counts = bigrams(args.data, ids, args.prevs)
    w_in, w_out = fit(embed[prev_ids], pmi(counts, args.beta, args.clip), counts.sum(1), args.rank)
    z = embed @ w_in.T  # [V, R]: every token's head input, for the bias of any prev

    caches = {k: Cache(getattr(args, k), head[ids]) for k in ("calib", "eval")}
    report = {"args": vars(args), "calib": {}, "eval": {}}
    for a in ALPHAS:
        report["calib"][a] = evaluate(caches["calib"], lambda prev: a * (z[prev] @ w_out.T), ids)
        print("calib", a, json.dumps(report["calib"][a]), flush=True)
    base_tau = report["calib"][0.0]["tau_base"]
    ok = [a for a in ALPHAS if a and report["calib"][a]["tau_head"] >= base_tau] or [0.0]
    alpha = min(ok, key=lambda a: report["calib"][a]["nll_head"])  # a tree scores by probability
    report["alpha"] = alpha
    report["eval"] = evaluate(caches["eval"], lambda prev: alpha * (z[prev] @ w_out.T), ids)
    print("alpha", alpha, "eval", json.dumps(report["eval"]), flush=True)

    out = Path(args.out)
    shutil.copytree(args.draft, out, dirs_exist_ok=True)
    drafter.args.markov_rank = args.rank
    drafter.markov = MarkovHead(drafter.args.hidden_size, len(ids), args.rank)
    drafter.markov.in_proj.weight = mx.array(w_in.astype(np.float32))
    drafter.markov.out_proj.weight = mx.array((alpha * w_out).astype(np.float32))
    save_drafter(drafter, out, dtype=mx.float16)
    (out / "fit.json").write_text(json.dumps(report, indent=1) + "\n")


if __name__ == "__main__":
    main()
