"""Training a drafter's Markov head (`MarkovHead`, drafter.py), its base frozen or (joint) not.

Teacher forcing: slot j >= 2's previous token is x_{a+j-1}, the target's own greedy token, which
is what an accepted tree path holds there (slot 1 takes no bias: it sees the staged token). The
loss is the trainer's weighted cross-entropy on base + bias over the drafter's vocabulary (its
draft vocabulary if it has one: the engine never proposes another token, so those labels do not
count).
"""

from __future__ import annotations

import dataclasses

import mlx.core as mx
import numpy as np

from ..drafter import Drafter, MarkovHead


def with_head(drafter: Drafter, rank: int, joint: bool = False) -> Drafter:
    """`drafter` with a Markov head of `rank` (a new one leaves every proposal unchanged) and
    every other weight frozen, unless `joint`: then the base trains with the head, learning to
    leave to the head what the previous token tells."""
    if drafter.has_markov and drafter.args.markov_rank != rank:
        raise ValueError(f"--markov-rank {rank}: the drafter already has a head of rank "
                         f"{drafter.args.markov_rank}")
    if not drafter.has_markov:
        drafter.args = dataclasses.replace(drafter.args, markov_rank=rank)
        rows = drafter.args.vocab_size if drafter.vocab is None else len(drafter.vocab.ids)
        drafter.markov = MarkovHead(drafter.args.hidden_size, rows, rank)
        drafter.markov.set_dtype(drafter.fc.weight.dtype)
    if not joint:
        freeze_base(drafter)
    return drafter


def freeze_base(drafter: Drafter) -> None:
    drafter.freeze()
    drafter.markov.unfreeze()


def balance(head: MarkovHead) -> MarkovHead:
    """Rescale each rank component so that its in_proj row and out_proj column have the same norm:
    the bias is unchanged, but a closed-form fit (fit.py: in_proj rows ~100x the norm of
    out_proj columns) would otherwise give Adam, whose steps are the same size for every weight,
    a step far too large for out_proj and far too small for in_proj."""
    w_in, w_out = head.in_proj.weight, head.out_proj.weight
    n_in, n_out = mx.linalg.norm(w_in, axis=1), mx.linalg.norm(w_out, axis=0)
    s = mx.sqrt(mx.maximum(n_in, 1e-12) / mx.maximum(n_out, 1e-12))
    s = mx.where((n_in > 0) & (n_out > 0), s, 1.0)  # a zero factor (a new head) stays as it is
    head.in_proj.weight = w_in / s[:, None]
    head.out_proj.weight = w_out * s[None, :]
    return head


def masked(drafter: Drafter, logits: mx.array, labels: mx.array, valid: mx.array):
    """Logits outside the drafter's vocabulary at -1e9 (-inf in the engine; finite here so that
    a label outside it, made invalid, costs 0 x finite), and those slots made invalid."""
    if drafter.vocab is None:
        return logits, valid
    keep = np.zeros(logits.shape[-1], dtype=bool)
    keep[drafter.vocab.ids] = True
    keep = mx.array(keep)
    return mx.where(keep, logits, -1e9), valid * keep[labels]


def _bias(drafter: Drafter, io, labels, vocab_size: int) -> mx.array:
    """[R, B-1, V]: zero at slot 1, then the bias of the target's token before each slot."""
    b = drafter.markov_bias(io.embed(labels[:, :-1]), vocab_size).astype(mx.float32)
    return mx.concatenate([mx.zeros_like(b[:, :1]), b], axis=1)


def head_logits(drafter: Drafter, io, logits: mx.array, labels, valid):
    """(base + bias from the true previous tokens, valid), over the drafter's vocabulary."""
    logits, valid = masked(drafter, logits, labels, valid)
    return logits + _bias(drafter, io, labels, logits.shape[-1]), valid


def sibling_sums(drafter: Drafter, io, feats, block, labels, valid, anchors, rows) -> mx.array:
    """Per slot [6, B-1] of a batch of blocks, the previous token the true one: the slots whose
    previous slot's base argmax was wrong (a sibling was taken there), how many of them the base
    and the head get right, then all slots' right base / head / count."""
    from .blocks import drafter_forward

    h = drafter_forward(drafter, io, feats, block, anchors, rows)
    base, valid = masked(drafter, io.logits(h[:, 1:]).astype(mx.float32), labels, valid)
    head = base + _bias(drafter, io, labels, base.shape[-1])
    ok_base = (mx.argmax(base, -1) == labels) * valid
    ok_head = (mx.argmax(head, -1) == labels) * valid
    missed = (1 - ok_base[:, :-1]) * valid[:, :-1]  # slot j-1's argmax was not the target's token
    sib = mx.concatenate([mx.zeros_like(valid[:, :1]), missed], axis=1) * valid
    return mx.stack([sib.sum(0), (sib * ok_base).sum(0), (sib * ok_head).sum(0),
                     ok_base.sum(0), ok_head.sum(0), valid.sum(0)])


def sibling_metrics(sums) -> dict:
    """The validation log's numbers from summed `sibling_sums`."""
    sib, sib_base, sib_head, ok_base, ok_head, n = np.asarray(sums)
    rate = lambda a, b: float(a.sum() / max(b.sum(), 1))
    return {"after_sibling_base": rate(sib_base, sib), "after_sibling_head": rate(sib_head, sib),
            "after_sibling_n": int(sib.sum()), "acc_base": rate(ok_base, n),
            "acc_head": rate(ok_head, n)}
