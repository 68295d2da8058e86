"""A suffix array over the corpus (sorted by each suffix's first DEPTH tokens; prefix doubling
in numpy) and infini-gram style queries on it.

    python lab/corpus/sa.py build DIR        # DIR/corpus.npy -> DIR/sa.npy
"""
import sys
from pathlib import Path

import numpy as np

DEPTH = 32


def build(corpus: np.ndarray, depth: int = DEPTH) -> np.ndarray:
    n = len(corpus)
    rank = (corpus.astype(np.int64) + 2)  # -1 separators rank lowest
    sa = np.argsort(rank, kind="stable")
    h = 1
    while h < depth:
        nxt = np.zeros(n, np.int64)
        nxt[: n - h] = rank[h:]
        key = rank * (n + 3) + nxt
        sa = np.argsort(key, kind="stable")
        k = key[sa]
        new = np.empty(n, np.int64)
        new[sa] = np.concatenate([[1], 1 + np.cumsum(k[1:] != k[:-1])])
        rank = new
        h *= 2
        print("sorted to", h, "tokens; distinct", rank.max(), flush=True)
    return sa.astype(np.int32)


class Corpus:
    def __init__(self, corpus: np.ndarray, sa: np.ndarray):
        self.c, self.sa = corpus, sa

    def _bound(self, pat, lo, hi, upper):
        """First index in [lo, hi) whose suffix is > pat (upper) or >= pat, on len(pat) tokens."""
        c, sa, L = self.c, self.sa, len(pat)
        while lo < hi:
            mid = (lo + hi) // 2
            s = c[sa[mid]: sa[mid] + L].tolist()
            if len(s) < L:
                s = s + [-2] * (L - len(s))
            if s < pat or (upper and s == pat):
                lo = mid + 1
            else:
                hi = mid
        return lo

    def range(self, pat, lo=0, hi=None):
        hi = len(self.sa) if hi is None else hi
        return self._bound(pat, lo, hi, False), self._bound(pat, lo, hi, True)

    def longest(self, ctx, max_k=16):
        """(k, lo, hi): the longest suffix of ctx (<= max_k) that occurs."""
        best = (0, 0, len(self.sa))
        for k in range(1, min(max_k, len(ctx)) + 1):
            lo, hi = self.range(list(ctx[-k:]))
            if lo >= hi:
                break
            best = (k, lo, hi)
        return best

    def copy(self, ctx, max_len=32, max_k=16, sample=4096):
        """Greedy majority continuation after the longest matching suffix: [(token, count, of)]."""
        k, lo, hi = self.longest(ctx, max_k)
        if k == 0:
            return k, []
        pat, out = list(ctx[-k:]), []
        while len(out) < max_len and len(pat) < DEPTH:
            pos = self.sa[lo:hi]
            if len(pos) > sample:
                pos = pos[:: len(pos) // sample]
            nxt = self.c[np.minimum(pos + len(pat), len(self.c) - 1)]
            nxt = nxt[nxt >= 0]
            if len(nxt) == 0:
                break
            vals, counts = np.unique(nxt, return_counts=True)
            i = counts.argmax()
            out.append((int(vals[i]), int(counts[i]), int(counts.sum())))
            pat.append(int(vals[i]))
            lo, hi = self.range(pat, lo, hi)
        return k, out


def load(d):
    d = Path(d)
    return Corpus(np.load(d / "corpus.npy"), np.load(d / "sa.npy"))


if __name__ == "__main__":
    if sys.argv[1] == "build":
        d = Path(sys.argv[2])
        np.save(d / "sa.npy", build(np.load(d / "corpus.npy")))
