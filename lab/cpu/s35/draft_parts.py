"""Where a CPU draft's time goes (thirty-fifth session, lab/cpu/README.md section 22): the
shipped drafter at a 200-token context, ms (median of 13): its 5 layers, one layer, one MLP,
one attention and its parts, the head over the draft vocabulary, the candidates, the Markov
transitions, a context extension of 5 tokens.

    python lab/cpu/s35/draft_parts.py
"""
import sys; sys.path.insert(0,'.')
from dflash import backend; backend.setup()
import mlx.core as mx, mlx.nn as nn, numpy as np, statistics
from time import perf_counter
from dflash.load import load_pair
from dflash import tree
pair=load_pair(progress=lambda s:None); t=pair.target; d=pair.drafter
cache=t.make_cache(); feats=[]
t.prefill(list(range(100,300)),cache,on_chunk=feats.append)
dc=d.make_cache(); d.extend_context(mx.concatenate(feats,1),dc); mx.eval([c.state for c in dc])
print("dtype", d.fc.weight.dtype, "ctx", dc[0].offset)
def timeit(f,n=15):
    xs=[]
    for _ in range(n):
        a=perf_counter(); f(); xs.append(1e3*(perf_counter()-a))
    return round(statistics.median(xs[2:]),2)
block=mx.array([7]+[d.mask_token_id]*15)[None]
emb=t.embed(block)
def body(): mx.eval(d(emb,dc))
def full(): mx.eval(d.draft_logits(t,7,16,dc))
def drafted():
    lg=d.draft_logits(t,7,16,dc); ids,lp,b=tree.draft(d,t,lg)
h=d(emb,dc)[0,1:16]; mx.eval(h)
def head(): mx.eval(d.vocab.logits(t,h))
lg=d.draft_logits(t,7,16,dc); mx.eval(lg)
def top(): tree._host(*tree._top(lg,8))
cols,lp=tree._host(*tree._top(lg,8))
def trans(): mx.eval(tree._transitions(d,t,mx.array(cols)))
def ext(): 
    d.extend_context(mx.concatenate(feats,1)[:, :5],dc); mx.eval([c.state for c in dc])
    for c in dc: c.trim(5)
x=mx.random.normal((1,16,576)); 
for L in d.layers[:1]:
    ck,cv=dc[0].keys_and_values()
    def layer(): mx.eval(L(x,ck,cv,dc[0].offset))
    def mlp(): mx.eval(L.mlp(x))
    def attn(): mx.eval(L.self_attn(x,ck,cv,dc[0].offset))
for name,f in [("body 5 layers",body),("one layer",layer),("one mlp",mlp),("one attn",attn),("head",head),("draft_logits",full),("top8 host",top),("transitions",trans),("tree.draft total",drafted),("extend ctx 5 tok",ext)]:
    print(name, timeit(f))
A=d.layers[0].self_attn; off=dc[0].offset
xq=mx.random.normal((1,16,576)); mx.eval(xq)
def proj(): mx.eval(A.q_proj(xq),A.k_proj(xq),A.v_proj(xq))
q=A._heads(A.q_proj(xq),9); k=A._heads(A.k_proj(xq),3); v=A._heads(A.v_proj(xq),3); mx.eval(q,k,v)
def normrope(): mx.eval(A.rope(A.q_norm(q),offset=off), A.rope(A.k_norm(k),offset=off))
def cat(): mx.eval(mx.concatenate([ck,k],2), mx.concatenate([cv,v],2))
K=mx.concatenate([ck,k],2); V=mx.concatenate([cv,v],2); mx.eval(K,V)
def sdpa(): mx.eval(mx.fast.scaled_dot_product_attention(q,K,V,scale=A.scale))
o=mx.random.normal((1,16,576)); mx.eval(o)
def oproj(): mx.eval(A.o_proj(o))
for name,f in [("qkv proj",proj),("norm+rope",normrope),("concat",cat),("sdpa",sdpa),("o_proj",oproj)]:
    print(name, timeit(f,30))
