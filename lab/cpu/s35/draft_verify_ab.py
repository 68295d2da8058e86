"""Draft alone, draft + a 16-row verify pass, and the verify alone, with the drafter's block pass
through host_draft.py and all in MLX (lab/cpu/README.md section 22), ms, two rounds; and how far
apart their logits are.

    python lab/cpu/s35/draft_verify_ab.py
"""
import sys; sys.path.insert(0,'.')
from dflash import backend; backend.setup()
import mlx.core as mx, numpy as np, statistics
from time import perf_counter
from dflash.load import load_pair
from dflash import host_draft as H
pair=load_pair(progress=lambda s:None); t=pair.target; d=pair.drafter
cache=t.make_cache(); feats=[]
t.prefill(list(range(100,300)),cache,on_chunk=feats.append)
f=mx.concatenate(feats,1)
dc=d.make_cache(); d.extend_context(f,dc); mx.eval([c.state for c in dc])
def tm(fn,n=30):
    xs=[]
    for _ in range(n):
        a=perf_counter(); mx.eval(fn()); xs.append(1e3*(perf_counter()-a))
    return round(statistics.median(xs[3:]),2)
c2=t.make_cache(); t.prefill(list(range(100,300)),c2)
ids=mx.array([[5]*16])
def ver():
    r=t.forward(ids,c2)[0]; mx.eval(r); [c.trim(16) for c in c2]; return r
for rep in range(2):
  for on in (True, False):
    H.ENABLED=on
    print("host" if on else "mlx ", "draft", tm(lambda: d.draft_logits(t,7,16,dc)), "draft+verify16", tm(lambda: (mx.eval(d.draft_logits(t,7,16,dc)), ver())[1],15), "verify", tm(ver,15))
H.ENABLED=True; a=np.array(d.draft_logits(t,7,16,dc)); H.ENABLED=False; b=np.array(d.draft_logits(t,7,16,dc))
print("diff", np.abs(a-b).max(), (a.argmax(-1)==b.argmax(-1)).mean())
