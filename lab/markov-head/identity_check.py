"""A drafter with a Markov head (default: the shipped one) on 6 held-out prompts (one a
category), 64 tokens; chain of 16, tree of 15, chain of 5, tree of 32: (tau, identical to
target-only) per prompt. Exits 1 if any output differs.

    python lab/markov-head/identity_check.py [DRAFTER_DIR]
"""
import sys

import dflash  # noqa: F401  (the CPU BLAS before mlx loads)
from dflash.config import GenerationConfig
from dflash.engine import stream
from dflash.load import encode_prompt, load_pair
from dflash.train import read_prompts

RUNS = (dict(block_size=16, tree=0), dict(block_size=16, tree=15), dict(block_size=5, tree=0),
        dict(block_size=16, tree=32))

drafter = sys.argv[1] if len(sys.argv) > 1 else "assets/smollm2-135m-instruct-dflash"
pair = load_pair("builtin:smollm2-135m-instruct", drafter, progress=lambda s: None)
if not pair.drafter.has_markov:
    sys.exit(f"{drafter} has no Markov head")
ps = read_prompts("assets/prompts/eval.jsonl")
ok = True
for text in [ps[i][1] for i in (0, 10, 20, 30, 40, 50)]:
    ids = encode_prompt(pair.tokenizer, text)
    *_, t = stream(pair, ids, GenerationConfig(mode="target", max_tokens=64))
    out = []
    for kw in RUNS:
        *_, s = stream(pair, ids, GenerationConfig(max_tokens=64, **kw))
        out.append((round(s.tau, 2), s.token_ids == t.token_ids))
        ok &= s.token_ids == t.token_ids
    print(out, flush=True)
print("all identical" if ok else "OUTPUT DIFFERS from target-only decoding")
sys.exit(0 if ok else 1)
