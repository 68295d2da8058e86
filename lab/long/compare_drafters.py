"""Two or more drafters' chain tau on the same answers, teacher-forced as window_tau.py walks it
(`--tree 0 --block-size 16`): per prompt the target's greedy answer is decoded and prefilled
once, then each drafter walks it with its own context (its config's window). Paired, so a
candidate's gain or loss is per prompt, not across runs.

    python lab/long/compare_drafters.py PROMPTS.jsonl OUT.json TOKENS DRAFTER_DIR [DRAFTER_DIR ...]
"""

import json
import statistics
import sys
import time

from dflash import backend

backend.setup()

from dflash.drafter import load_drafter  # noqa: E402
from dflash.load import check_pair, load_pair  # noqa: E402

sys.path.insert(0, __file__.rsplit("/", 1)[0])
from window_tau import answered, walk  # noqa: E402


def main(src, dst, tokens, *drafters):
    pair = load_pair(draft=drafters[0])
    others = [pair.drafter]
    for d in drafters[1:]:
        others.append(load_drafter(d))
        check_pair(pair.target, others[-1])
        others[-1].set_dtype(pair.target.backbone.norm.weight.dtype)
    rows = [json.loads(l) for l in open(src) if l.strip()]
    out = []
    for row in rows:
        t0 = time.time()
        ids, full, feats = answered(pair, row, tokens)
        res = {"id": row.get("id"), "category": row.get("category"), "context": len(ids), "tokens": len(full) - len(ids)}
        for name, drafter in zip(drafters, others):
            pair.drafter = drafter
            dcache = drafter.make_cache()
            drafter.extend_context(feats, dcache)
            cycles, lengths = walk(pair, full, len(ids), dcache)
            res[name] = round(sum(a + 1 for a in lengths) / cycles, 3) if cycles else 0.0
        out.append(res)
        print(json.dumps(res), f"{time.time() - t0:.0f}s", flush=True)
        json.dump(out, open(dst, "w"), indent=1)
    for name in drafters:
        print(f"{name}: mean tau {statistics.mean(r[name] for r in out):.3f}")


if __name__ == "__main__":
    main(*sys.argv[1:])
