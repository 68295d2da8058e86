"""Context lookup: a draft copied from earlier in the context (prompt lookup decoding).

Greedy text repeats itself: names and identifiers from the prompt, list and code scaffolding,
a small model's own loops. When the context's last k tokens occurred before, what followed
them then is a guess for what follows now that costs nothing to make and can run far past the
drafter's block. `Index.propose` finds the latest earlier occurrence of the context's longest
suffix (up to MAX_MATCH tokens) and copies what followed it; `tree.graft` adds the copy to the
drafted tree, where the target verifies it like any other path. Lossless like the rest: a
copied token is committed only where it is the target's own greedy choice.
"""

from __future__ import annotations

import numpy as np

MAX_MATCH = 8  # longest suffix looked up
MIN_MATCH = 1  # shortest
MAX_COPY = 32  # tokens copied per cycle
# P(a copied token is the target's | the tokens copied before it were), by the length of the
# match behind it (the suffix plus the tokens copied so far: a copy that keeps matching grows
# surer), 1..MAX_MATCH. Measured on the target's greedy answers to 30 validation prompts
# (docs/tree.md); what the tree ranks copied paths by, against the drafter's probabilities.
P_NEXT = (0.20, 0.58, 0.60, 0.67, 0.67, 0.81, 0.84, 0.95)


class Index:
    """The context so far (prompt and committed tokens), with every k-gram's latest
    continuation (k <= MAX_MATCH), kept up to date as tokens are committed."""

    def __init__(self, tokens=()):
        self.tokens: list[int] = []
        self._starts: list[dict[tuple, int]] = [{} for _ in range(MAX_MATCH)]
        self.extend(tokens)

    def extend(self, tokens) -> None:
        for t in tokens:
            i = len(self.tokens)  # the k-grams ending at i - 1 are now followed by position i
            for k in range(1, min(MAX_MATCH, i) + 1):
                self._starts[k - 1][tuple(self.tokens[i - k : i])] = i
            self.tokens.append(int(t))

    def propose(self, max_len: int = MAX_COPY) -> tuple[list[int], list[float]]:
        """(copy, logp): the tokens that followed the latest earlier occurrence of the context's
        longest suffix, and each one's path log-probability by P_NEXT; ([], []) when no suffix
        occurred before. A copy reaching the context's end repeats (a loop's period)."""
        n = len(self.tokens)
        for k in range(min(MAX_MATCH, n - 1), MIN_MATCH - 1, -1):
            start = self._starts[k - 1].get(tuple(self.tokens[n - k :]))
            if start is None:
                continue
            period = n - start
            copy = [self.tokens[start + j % period] for j in range(max_len)]
            p = np.array([P_NEXT[min(k + j, MAX_MATCH) - 1] for j in range(max_len)])
            return copy, np.cumsum(np.log(p)).tolist()
        return [], []
