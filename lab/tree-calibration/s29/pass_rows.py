"""Tree and chain verify passes of the embedded target at n = 3..64 nodes, in target steps, on this
host (128-token cache, fastest of 5): where rows spill into a new tile of 8. Twenty-ninth session.

    python lab/tree-calibration/s29/pass_rows.py
"""
import sys, time; sys.path.insert(0,'.')
from dflash import backend; backend.setup()
import mlx.core as mx
from dflash.load import load_pair
from dflash import tree as tree_mod
from dflash.policy import _sample_tree
pair = load_pair(None, None); target = pair.target
ids = mx.array([[(7 * i + 10) % target.vocab_size for i in range(128)]])
cache = target.make_cache(); target.forward(ids, cache); mx.eval([c.state for c in cache])
def timed(k, tree=None, reps=5):
    ts=[]
    for _ in range(reps+1):
        t=time.perf_counter()
        layout = None if tree is None else tree_mod.Layout.of(tree)
        logits, _, tapes = target.forward(ids[:, :k], cache, tree=layout); mx.eval(mx.argmax(logits,-1))
        target.rollback(cache, tapes, k, 0); ts.append(time.perf_counter()-t)
    return min(ts[1:])*1000
s = timed(1)
print("step", round(s,1))
for n in [3,4,7,8,11,12,15,16,23,24,31,32,47,48,63,64]:
    print(n, "tree %.2f" % (timed(n+1, _sample_tree(n, 15))/s), "chain %.2f" % (timed(n+1)/s) if n < 16 else "")
