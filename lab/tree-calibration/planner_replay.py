"""The engine's TreePlanner (or a variant) replayed on collect.py's files with a measured cost
table: which shapes it verifies, what they accept, and tokens per modelled second, against fixed
shapes and against an oracle that knows each cycle's acceptance.

    python lab/tree-calibration/planner_replay.py EVAL.npz PROMPTS.jsonl PER_CATEGORY COSTS.json \
        [--skip N] [--variants auto 7 15 oracle ...]

COSTS.json: `policy.measure_costs(pair, 16, tree_nodes=63)` (measure_costs.py writes it). At every
staged index the tree is the engine's: `tree.build` of 63 nodes from the collected candidates,
the context's copy grafted in (`lookup.Index`), then the planner's choice (a best-first prefix or
the spine's chain); what it accepts is read off along the target's greedy answer. A cycle costs
its measured pass plus the draft, a plain step the measured step: the real loop pays more
(TreePlanner's moving ratios), the same for every policy here. Accepting past an EOS goes on
(collect.py), so tau here runs above the engine's on short answers.
"""
import argparse
import json
import sys
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
sys.path.insert(0, str(Path(__file__).resolve().parent))
import numpy as np  # noqa: E402

from dflash import lookup, policy, tree  # noqa: E402
from replay import STAGED, load, with_prompts  # noqa: E402


EOS = (0, 2)  # SmolLM2's end-of-text ids (the embedded pair's tokenizer)


def staged_trees(p, nodes=63):
    """Per staged index: (the engine's tree of `nodes`, the copy's log-probs)."""
    g = p["g"]
    seen = lookup.Index([*p["prompt"], int(g[0])])
    out = []
    for s in range(STAGED):
        copy = seen.propose()
        tr = tree.build(int(g[s]), p["cand"][s], p["logp"][s], nodes, p["bias"][s])
        out.append((tree.graft(tr, *copy, nodes), copy[1]))
        seen.extend([int(g[s + 1])])
    return out


def accepted(tr, g, s):
    return len(tr.follow(g[s + 1:].tolist()))


class Fixed:
    """Verify the first n nodes every cycle (n = 0: plain target steps)."""

    def __init__(self, costs, n):
        self.costs, self.n = costs, n

    def cycle(self, tr, copy_logp, g, s):
        if self.n == 0:
            return 1, 0, self.costs["step_ms"]
        return self.n + 1, accepted(tr.prefix(self.n), g, s), self.costs["verify_ms"][self.n] + self.costs["draft_ms"]


class Oracle:
    """Each cycle the shape (prefix or spine chain, or a plain step) of the most tokens per ms
    in hindsight: greedy per cycle, a bound on what any planner picks from these costs."""

    def __init__(self, costs):
        self.costs = costs

    def cycle(self, tr, copy_logp, g, s):
        c, spine = self.costs, tr.spine()
        best = (1 / c["step_ms"], 1, 0, c["step_ms"])
        for n, ms in c["verify_ms"].items():
            a = accepted(tr.prefix(n), g, s)
            ms = ms + c["draft_ms"]
            best = max(best, ((1 + a) / ms, n + 1, a, ms))
        for n, ms in c.get("chain_ms", {}).items():
            if n < len(spine):
                a = accepted(tr.path(spine[: n + 1]), g, s)
                ms = ms + c["draft_ms"]
                best = max(best, ((1 + a) / ms, n + 1, a, ms))
        return best[1:]


class Planned:
    """A TreePlanner (class `cls`) as the engine drives it."""

    truth = None  # planner_replay's PLAN:TRUTH: the cost table cycles really pay

    def __init__(self, costs, cls=policy.TreePlanner):
        self.costs, self.p = costs, cls(costs)

    def cycle(self, tr, copy_logp, g, s):
        k = self.p.next_k(copy_logp)
        if k == 1:
            ms = self.costs["step_ms"]
            self.p.observe(1, 0, ms)
            return 1, 0, ms
        chosen = self.p.choose(tr)
        path = chosen.follow(g[s + 1:].tolist())
        ms = self.p._cycle_ms
        if self.truth is not None:  # what the cycle really costs, where the planner's table errs
            n = len(chosen) - 1
            table = self.truth["chain_ms"] if chosen.is_chain and n in self.truth["chain_ms"] else self.truth["verify_ms"]
            ms = table[n] + self.truth["draft_ms"]
        if hasattr(self.p, "saw"):  # a variant that learns from every verified node
            self.p.saw(chosen, path)
        self.p.observe(len(chosen), len(path), ms)
        return len(chosen), len(path), ms


def run(prompts, trees, make):
    """Per prompt (tokens, cycles, ms, Counter of k) of policy `make()` walked along the answer."""
    out = []
    for p, ts in zip(prompts, trees):
        pol, s, cycles, ms, shapes, acc_by_k = make(), 0, 0, 0.0, Counter(), Counter()
        end = next((i for i, t in enumerate(p["g"][:STAGED]) if t in EOS), STAGED)  # the engine stops there
        while s < end:
            tr, copy_logp = ts[s]
            k, a, t = pol.cycle(tr, copy_logp, p["g"], s)
            s, cycles, ms = s + a + 1, cycles + 1, ms + t
            shapes[k] += 1
            acc_by_k[k] += a
        out.append((s, cycles, ms, shapes, acc_by_k))
    return out


def report(name, runs, step_ms):
    tok = sum(r[0] for r in runs)
    cyc = sum(r[1] for r in runs)
    # speed: mean over prompts of each one's tokens/s against plain steps (as bench reports)
    speed = np.mean([(r[0] / r[2]) * step_ms for r in runs])
    shapes, accs = Counter(), Counter()
    for r in runs:
        shapes.update(r[3]), accs.update(r[4])
    mix = " ".join(f"{k - 1}:{shapes[k]}/{accs[k] / shapes[k]:.1f}" for k in sorted(shapes))
    mean_tau = np.mean([r[0] / r[1] for r in runs])
    print(f"{name:>12}: speed {speed:.3f}x  tau {tok / cyc:.3f} pooled, {mean_tau:.3f} mean  (nodes:cycles/accepted {mix})", flush=True)
    return speed


VARIANTS = {}  # name -> (costs -> policy); planner variants register here


def policy_for(name, costs):
    if name == "oracle":
        return lambda: Oracle(costs)
    if name in VARIANTS:
        return lambda: VARIANTS[name](costs)
    if name == "auto":
        return lambda: Planned(costs)
    return lambda: Fixed(costs, int(name))


def main():

    ap = argparse.ArgumentParser()
    ap.add_argument("eval"), ap.add_argument("prompts"), ap.add_argument("per_category", type=int)
    ap.add_argument("costs", nargs="+")
    ap.add_argument("--skip", type=int, default=0)
    ap.add_argument("--only", type=int, default=None, help="the first N of each category")
    ap.add_argument("--variants", nargs="+", default=["0", "7", "15", "31", "auto", "oracle"])
    a = ap.parse_args()
    prompts = with_prompts(load(a.eval), a.prompts, a.per_category, a.skip)
    if a.only:
        prompts = [p for i, p in enumerate(prompts) if i % a.per_category < a.only]
    trees = [staged_trees(p) for p in prompts]
    def read(path):
        costs = json.loads(Path(path).read_text())
        for key in ("verify_ms", "chain_ms"):
            costs[key] = {int(k): v for k, v in costs[key].items()}
        return costs

    for path in a.costs:  # PLAN or PLAN:TRUTH (the planner weighs PLAN; cycles pay TRUTH)
        plan, _, truth = path.partition(":")
        costs = read(plan)
        Planned.truth = read(truth) if truth else None
        if truth:  # fixed shapes and the oracle pay (and weigh) the truth
            costs_truth = Planned.truth
        print(f"{path}: step {costs['step_ms']:.1f} ms, draft {costs['draft_ms']:.1f} ms, trees "
              + " ".join(f"{n}:{v / costs['step_ms']:.2f}" for n, v in costs["verify_ms"].items())
              + " chains " + " ".join(f"{n}:{v / costs['step_ms']:.2f}" for n, v in costs["chain_ms"].items()))
        for v in a.variants:
            own = costs if v.startswith(("auto", "bins")) or not truth else costs_truth
            report(v, run(prompts, trees, policy_for(v, own)), (costs_truth if truth else costs)["step_ms"])


if __name__ == "__main__":  # run as the module the variants register in
    import planner_replay
    import planner_variants_sim  # noqa: F401

    planner_replay.main()
