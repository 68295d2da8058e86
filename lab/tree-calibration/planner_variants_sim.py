"""TreePlanner variants for planner_replay.py (registered in its VARIANTS)."""
import numpy as np

from dflash import policy, tree
from planner_replay import VARIANTS, Planned

EDGES = np.array([-6.0, -4.0, -3.0, -2.0, -1.5, -1.0, -0.5, -0.25])  # bins of a node's path log-prob


class Binned(policy.TreePlanner):
    """Each node's path probability mapped through an online calibration: per bin of log-prob,
    accepted / predicted over the verified nodes (fading counts), instead of one scale for all."""

    def __init__(self, costs, prior=2.0, decay=0.97, edges=EDGES, residual=True):
        super().__init__(costs)
        self.edges, self.bdecay, self.residual = edges, decay, residual
        k = len(edges) + 1
        self.bpred, self.bacc = np.full(k, prior), np.full(k, prior)

    def calibrated(self, logp):
        p = np.exp(logp)
        return p * (self.bacc / self.bpred)[np.searchsorted(self.edges, logp)]

    @property
    def scale(self):
        return super().scale if self.residual else 1.0

    def choose(self, tr):
        draft_ms = self.costs["draft_ms"]
        lp = np.array(tr.logp)
        cal = self.calibrated(lp)
        tree_exp = np.concatenate([[0.0], np.cumsum(cal[1:])])
        spine = tr.spine()
        chain_exp = np.concatenate([[0.0], np.cumsum(cal[spine[1:]])])
        shapes = [(n, False, tree_exp[n], ms) for n, ms in self.costs["verify_ms"].items() if n < len(tr)]
        shapes += [(n, True, chain_exp[n], ms) for n, ms in self.costs.get("chain_ms", {}).items()
                   if n < len(spine)]
        rate = [(1 + self.scale * e) / (ms + draft_ms) for _, _, e, ms in shapes]
        n, is_chain, self._expected, ms = shapes[int(np.argmax(rate))]
        self._cycle_ms = ms + draft_ms
        return tr.path(spine[: n + 1]) if is_chain else tr.prefix(n)

    def saw(self, chosen, path):
        lp = np.array(chosen.logp[1:])
        on = np.zeros(len(lp))
        on[np.array(path, int) - 1] = 1.0
        b = np.searchsorted(self.edges, lp)
        k = len(self.edges) + 1
        self.bpred = self.bdecay * self.bpred + np.bincount(b, np.exp(lp), k)
        self.bacc = self.bdecay * self.bacc + np.bincount(b, on, k)


VARIANTS["bins"] = lambda c: Planned(c, Binned)
VARIANTS["bins-nores"] = lambda c: Planned(c, lambda c: Binned(c, residual=False))
VARIANTS["bins-slow"] = lambda c: Planned(c, lambda c: Binned(c, decay=0.995))


def _parsed(name):
    """auto:d0.9:p2 = TreePlanner(decay=0.9, prior=2)."""
    kw = {}
    for part in name.split(":")[1:]:
        kw[{"d": "decay", "p": "prior"}[part[0]]] = float(part[1:])
    return lambda c: Planned(c, lambda c: policy.TreePlanner(c, **kw))


for d in (0.97, 0.9, 0.8, 0.6):
    for p in (4, 1):
        VARIANTS[f"auto:d{d}:p{p}"] = _parsed(f"auto:d{d}:p{p}")


class Ties(policy.TreePlanner):
    """Among the shapes whose predicted tokens per ms are within `eps` of the best, the one
    with the most expected tokens (thirty-second session): the cost table's draws move by a few
    per cent between processes, so near-ties are noise and the larger pass commits more."""

    def __init__(self, costs, eps=0.02):
        super().__init__(costs)
        self.eps = eps

    def choose(self, tr):
        draft_ms = self.costs["draft_ms"]
        tree_exp, spine = tree.expected_accepts(tr), tr.spine()
        chain_exp = np.concatenate([[0.0], np.cumsum(np.exp([tr.logp[i] for i in spine[1:]]))])
        shapes = [(n, False, tree_exp[n], ms) for n, ms in self.costs["verify_ms"].items() if n < len(tr)]
        shapes += [(n, True, chain_exp[n], ms) for n, ms in self.costs.get("chain_ms", {}).items()
                   if n < len(spine)]
        rate = np.array([(1 + self.scale * e) / (ms + draft_ms) for _, _, e, ms in shapes])
        near = [i for i in range(len(shapes)) if rate[i] >= (1 - self.eps) * rate.max()]
        i = max(near, key=lambda i: shapes[i][2])
        n, is_chain, self._expected, ms = shapes[i]
        self._cycle_ms = ms + draft_ms
        return tr.path(spine[: n + 1]) if is_chain else tr.prefix(n)


for eps in (0.01, 0.02, 0.03, 0.05):
    VARIANTS[f"ties{eps}"] = (lambda e: lambda c: Planned(c, lambda c: Ties(c, eps=e)))(eps)
