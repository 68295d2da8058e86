"""Does the last cycle's acceptance predict this one's beyond the drafter's own probabilities?
Fixed 15-node trees replayed on collect.py's file of the 24 held-out prompts (/tmp/eval24.npz:
`python collect.py assets/prompts/eval.jsonl 4 /tmp/eval24.npz`). Run from lab/tree-calibration/:
python s38/autocorr.py"""
import sys, numpy as np
sys.path.insert(0, '.'); sys.path.insert(0, '../..')
import planner_replay as pr
from replay import STAGED, load, with_prompts
from dflash import tree
prompts = with_prompts(load('/tmp/eval24.npz'), '../../assets/prompts/eval.jsonl', 4, 0)
R, P, A = [], [], []
for p in prompts:
    ts = pr.staged_trees(p)
    end = next((i for i, t in enumerate(p["g"][:STAGED]) if t in pr.EOS), STAGED)
    s, prev = 0, None
    rows = []
    while s < end:
        tr, _ = ts[s]
        t15 = tr.prefix(15)
        e = tree.expected_accepts(tr)[15]
        a = pr.accepted(t15, p["g"], s)
        rows.append((e, a))
        s += a + 1
    rows = np.array(rows)
    R.append(rows)
allr = np.concatenate(R)
e, a = allr[:, 0], allr[:, 1]
print("cycles", len(a), "mean pred", e.mean().round(3), "mean acc", a.mean().round(3))
s = a.sum() / e.sum(); print("global scale", round(s, 3))
res = [r[:, 1] - s * r[:, 0] for r in R]
x = np.concatenate([q[1:] for q in res]); y = np.concatenate([q[:-1] for q in res])
print("corr(res_t, res_t-1)", np.corrcoef(x, y)[0, 1].round(3))
x2 = np.concatenate([q[2:] for q in res]); y2 = np.concatenate([q[:-2] + q[1:-1] for q in res])
print("corr(res_t, res_t-1 + res_t-2)", np.corrcoef(x2, y2)[0, 1].round(3))
print("corr(pred, acc)", np.corrcoef(e, a)[0, 1].round(3))
# does the previous acc predict this acc beyond pred? regression acc ~ pred + prev_acc
X = np.concatenate([np.stack([r[1:, 0], r[:-1, 1], np.ones(len(r) - 1)], 1) for r in R]); Y = np.concatenate([r[1:, 1] for r in R])
coef, *_ = np.linalg.lstsq(X, Y, rcond=None); print("acc ~ pred, prev_acc, 1:", coef.round(3))
r2a = 1 - ((Y - X @ coef) ** 2).sum() / ((Y - Y.mean()) ** 2).sum()
c1, *_ = np.linalg.lstsq(X[:, [0, 2]], Y, rcond=None); r2b = 1 - ((Y - X[:, [0, 2]] @ c1) ** 2).sum() / ((Y - Y.mean()) ** 2).sum()
print("R2 with prev", round(r2a, 3), "without", round(r2b, 3))
