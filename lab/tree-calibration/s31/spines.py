"""Spine rows per tree pass under the planner and fixed 15 / 31 nodes (4 held-out prompts x 64; run from the repo root)."""
import sys, json, collections
sys.path.insert(0, str(__import__('pathlib').Path(__file__).resolve().parents[3]))
from dflash import backend; backend.setup()
import numpy as np
from dflash.load import load_pair, encode_prompt
from dflash.config import GenerationConfig
from dflash import engine
from dflash.events import Cycle
pair = load_pair(progress=lambda s: None)
rows = [json.loads(l) for l in open('assets/prompts/eval.jsonl')][::10][:4]
for tree_n in (None, 15, 31):
    sp, n, dep = [], [], []
    for r in rows:
        cfg = GenerationConfig(mode='dflash', max_tokens=64, tree=tree_n)
        for ev in engine.stream(pair, encode_prompt(pair.tokenizer, r['prompt']), cfg):
            if isinstance(ev, Cycle) and len(ev.drafted) > 0 and ev.parents:
                par = (-1, *ev.parents); s = 1
                while s < len(par) and par[s] == s - 1: s += 1
                sp.append(s); n.append(len(par))
    print(tree_n, 'cycles', len(sp), 'rows mean', np.mean(n), 'spine rows mean', np.mean(sp), 'share', np.sum(sp)/np.sum(n), flush=True)
