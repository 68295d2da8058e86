"""With the shipped head: 6 held-out prompts (one a category), 64 tokens; chain of 16, tree of 15, chain of 5: (tau, identical to target-only)."""
import dflash
from dflash.config import GenerationConfig
from dflash.engine import stream
from dflash.load import encode_prompt, load_pair
from dflash.train import read_prompts
pair = load_pair("builtin:smollm2-135m-instruct", "assets/smollm2-135m-instruct-dflash", progress=lambda s: None)
ps = read_prompts("assets/prompts/eval.jsonl")
picked = [ps[i][1] for i in (0, 10, 20, 30, 40, 50)]
for text in picked:
    ids = encode_prompt(pair.tokenizer, text)
    *_, t = stream(pair, ids, GenerationConfig(mode="target", max_tokens=64))
    out = []
    for kw in (dict(block_size=16, tree=0), dict(block_size=16, tree=15), dict(block_size=5, tree=0)):
        *_, s = stream(pair, ids, GenerationConfig(max_tokens=64, **kw))
        out.append((round(s.tau, 2), s.token_ids == t.token_ids))
    print(out, flush=True)
