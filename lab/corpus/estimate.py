"""Copies from the corpus of the target's own answers, replayed on recorded answers
(lab/lookup/cycles.py output), first order like lab/lookup/estimate.py gain.

    python lab/corpus/estimate.py DIR CYCLES.json [max_k]
"""
import json
import sys
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from dflash import lookup  # noqa: E402
import sa as sa_mod  # noqa: E402


def matched(copy, ans, c):
    m = 0
    while m < len(copy) and c + m < len(ans) and copy[m] == ans[c + m]:
        m += 1
    return m


def main(d, path, max_k=16):
    corpus = sa_mod.load(d)
    data = json.load(open(path))
    cycles = acc_sum = ctx_extra = cor_extra = both_extra = 0
    calib = defaultdict(lambda: [0, 0])  # (k bucket, ratio bucket) -> [tried, right]
    for r in data:
        ans, c = r["answer"], 1
        for a in r["acc"]:
            mc = matched(lookup.Index(r["prompt"] + ans[:c]).propose(32)[0], ans, c)
            k, cp = corpus.copy([-1] + ans[:c], 32, max_k)
            mk = matched([t for t, _, _ in cp], ans, c)
            for j, (t, n, of) in enumerate(cp[: mk + 1]):
                if c + j >= len(ans):
                    break
                key = (min(k + j, 12), min(int(10 * n / of), 9))
                calib[key][0] += 1
                calib[key][1] += t == ans[c + j]
            ctx_extra += max(0, mc - a)
            cor_extra += max(0, mk - a)
            both_extra += max(0, max(mc, mk) - a)
            acc_sum += a
            c += a + 1
        cycles += len(r["acc"])
    t = 1 + acc_sum / cycles
    print(f"{path}: {cycles} cycles, tau {t:.3f}; first order: + context copy {t + ctx_extra / cycles:.3f}, "
          f"+ corpus copy {t + cor_extra / cycles:.3f}, + both {t + both_extra / cycles:.3f}")
    print("P(right | right so far) by (match k+j, count share decile): tried right p")
    for key in sorted(calib):
        n, r_ = calib[key]
        if n >= 20:
            print(key, n, r_, f"{r_ / n:.2f}")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], *(int(a) for a in sys.argv[3:]))
