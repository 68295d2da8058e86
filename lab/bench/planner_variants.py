"""Per prompt, interleaved on one loaded pair: target-only and DFlash settings, decode tok/s,
outputs asserted identical; the geometric mean ratio of each setting to target-only. The settings
run in the given order on odd prompts and reversed on even ones.

    python lab/bench/planner_variants.py target,auto,0,16 2 96     # settings, prompts a suite, tokens
    python lab/bench/planner_variants.py target,auto,auto- 2 128 assets/prompts/eval.jsonl   # its first 2 a category

DTYPE=float32 in the environment loads the target dequantized (as `--target-dtype float32`);
MAX_TREE=N lets fixed trees go up to N nodes (the product's limit is config.MAX_TREE).
Settings: target; auto (tree sized per cycle); N (a tree of N nodes; 0 = the chain at the default
length); bK (a chain of K); a trailing "-" turns the context lookup off (auto-, 32-); "NwK"
(96w16): a tree of N from K candidates a block position (tree.draft's width; the engine's is
tree.WIDTH); "+" (64+, auto+): the same with the drafter in directory $DRAFT_B instead of the
shipped one; "*" (auto*, 15*): the drafter's block pass all in MLX on a CPU (backend field host_draft
off; its own cost table); "#" (target#, auto#): the target's SwiGLU and softmax in MLX on a CPU
(backend field host_ops off; its own cost table; outputs are compared within each arithmetic, and "#"
settings' ratios are to target#); "=N" (auto=256, target=256): the attention's p @ v in N-key
chunks (cpu_attention.KEY_CHUNK and TILED_KEY_CHUNK; outputs may then differ at near-ties); "~" (auto~):
the planner's tree sizes before the twenty-ninth session (2, 4, .. 64, timed at 2, 8, 16, 32, 64;
its own cost tables). Writes $OUT (default /tmp)/planner-variants-<settings>-<prompts>-<N>x<tokens>.json
(tok/s, tau, auto's cycles, the cost tables).

The harness as it was up to the fortieth session (async evaluation every L layers, the device
tree, older tree attentions, MLP variants, a pipelined target-only) used the product's private
functions: `git show 653a394:lab/bench/planner_variants.py` (lab/HISTORY.md).
"""
import dataclasses
import json
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from dflash import backend  # noqa: E402

backend.setup()
import mlx.core as mx  # noqa: E402
import numpy as np  # noqa: E402

import dflash.config  # noqa: E402
from dflash import engine, policy, tree  # noqa: E402
from dflash.backends import cpu_attention  # noqa: E402
from dflash.config import GenerationConfig  # noqa: E402
from dflash.events import Cycle, Summary  # noqa: E402
from dflash.load import encode_prompt, load_pair  # noqa: E402

NEW_SIZES = (policy.TREE_SIZES, policy.TIMED_SIZES)
OLD_SIZES = ((2, 4, 6, 8, 12, 16, 24, 32, 48, 64), (2, 8, 16, 32, 64))
KEY_CHUNKS = cpu_attention.KEY_CHUNK, cpu_attention.TILED_KEY_CHUNK
FLAGS = "~*#+"  # settings' one-character switches, taken off before the name is read


def read_prompts(n_prompts: int, path: str | None) -> list[dict]:
    """A prompts file's first n_prompts of each category, or the bench suites' first n each."""
    prompts = []
    if path:
        seen = {}
        for row in map(json.loads, open(path)):
            seen[row["category"]] = seen.get(row["category"], 0) + 1
            if seen[row["category"]] <= n_prompts:
                prompts.append(dict(row, id=f"{row['category']}-{seen[row['category']]}"))
        return prompts
    for suite in ("chat", "code", "math"):
        rows = [json.loads(line) for line in
                open(Path(__file__).resolve().parents[2] / "assets" / "bench" / f"{suite}.jsonl")]
        prompts += rows[:n_prompts]
    return prompts


def config_of(name: str, max_tokens: int, lookup: bool) -> GenerationConfig:
    if name == "target":
        return GenerationConfig(mode="target", max_tokens=max_tokens)
    if name.startswith("b"):
        return GenerationConfig(mode="dflash", max_tokens=max_tokens, block_size=int(name[1:]), tree=0)
    return GenerationConfig(mode="dflash", max_tokens=max_tokens,
                            tree=None if name == "auto" else int(name), lookup=lookup)


def main() -> None:
    dflash.config.MAX_TREE = int(os.environ.get("MAX_TREE", dflash.config.MAX_TREE))
    variants = sys.argv[1].split(",")  # e.g. target,auto,0,8
    n_prompts, max_tokens = int(sys.argv[2]), int(sys.argv[3])
    pair = load_pair(progress=lambda s: None, target_dtype=os.environ.get("DTYPE", "auto"))
    width, draft = {"now": None}, tree.draft  # the running setting's "wK"
    tree.draft = lambda drafter, target, logits, width_=None: draft(
        drafter, target, logits, width_ or width["now"] or tree.WIDTH)
    pair_b = None  # "+": DRAFT_B's drafter on the same loaded target
    if os.environ.get("DRAFT_B"):
        from dflash.drafter import load_drafter
        from dflash.load import check_pair
        d_b = load_drafter(os.environ["DRAFT_B"], pair.drafter.fc.weight.dtype)
        check_pair(pair.target, d_b)
        pair_b = dataclasses.replace(pair, drafter=d_b, draft_id=os.environ["DRAFT_B"])
    prompts = read_prompts(n_prompts, sys.argv[4] if len(sys.argv) > 4 else None)
    costs_by_key = {}  # the cost tables each setting's arithmetic measured (pair.costs holds one)
    res, taus = {v: [] for v in variants}, {v: [] for v in variants}
    trace = {}  # per auto setting: each prompt's cycles (verified, accepted, ms)
    # the first prompt runs once first, unmeasured: kernels compile, costs are timed
    for i, p in enumerate([dict(prompts[0], warmup=True)] + prompts):
        ids = encode_prompt(pair.tokenizer, p["prompt"])
        outs = {}
        for v in (variants if i % 2 else variants[::-1]):  # order alternates: drift hits all alike
            setting, _, chunk = v.partition("=")  # "=N": attention's p @ v in N-key chunks
            cpu_attention.KEY_CHUNK, cpu_attention.TILED_KEY_CHUNK = (int(chunk),) * 2 if chunk else KEY_CHUNKS
            sizes = OLD_SIZES if "~" in setting else NEW_SIZES
            policy.TREE_SIZES, policy.TIMED_SIZES = sizes
            arithmetic = backend.overridden(host_draft="*" not in setting, host_ops="#" not in setting)
            cost_key = sizes, pair.target.key_chunk, "*" in setting, "#" in setting
            pair.costs = costs_by_key.get(cost_key)
            use_b = "+" in setting
            assert not use_b or pair_b is not None, f"{v}: set DRAFT_B to a drafter directory"
            base = setting.translate({ord(c): None for c in FLAGS})
            base, _, w = base.partition("w")
            width["now"] = int(w) if w else None
            cfg = config_of(base.rstrip("-"), max_tokens, lookup=not base.endswith("-"))
            cycles, s = [], None
            with arithmetic:
                for ev in engine.stream(pair_b if use_b else pair, ids, cfg):
                    if isinstance(ev, Cycle):
                        cycles.append((len(ev.drafted) + 1, ev.accepted,
                                       round(1000 * (ev.draft_s + ev.verify_s + ev.rollback_s), 1)))
                    if isinstance(ev, Summary):
                        s = ev
            costs_by_key[cost_key] = pair.costs
            if p.get("warmup"):
                continue
            outs[v] = s.token_ids
            res[v].append(s.decode_tok_s)
            taus[v].append(s.tau)
            if base.rstrip("-") == "auto":
                trace.setdefault(v, []).append(cycles)
            print(p["id"], v, f"{s.decode_tok_s:.2f} tok/s tau {s.tau:.2f}", flush=True)
        for group in ([o for v, o in outs.items() if "#" in v], [o for v, o in outs.items() if "#" not in v]):
            if len(set(group)) > 1:  # bitwise on a CPU; a near-tie may differ on a GPU
                assert mx.default_device() != mx.cpu, "outputs differ"
                print(p["id"], "outputs differ", flush=True)
    for v in variants:
        b = res.get("target#" if "#" in v else "target")
        r = np.array(res[v])
        ratio = "ratio vs target: geo %.3f" % np.exp(np.log(r / np.array(b)).mean()) if b is not None else ""
        print(v, "mean tok/s %.2f" % r.mean(), "mean tau %.2f" % np.mean(taus[v]), ratio)
    tag = sys.argv[1].replace(",", "_").replace("~", "old").replace("=", "k").replace("+", "B") \
        .replace("*", "mlxdraft").replace("#", "mlxops")
    dtype = "-" + os.environ["DTYPE"] if os.environ.get("DTYPE") else ""
    suite = Path(sys.argv[4]).stem if len(sys.argv) > 4 else "bench"
    out = Path(os.environ.get("OUT", "/tmp")) / f"planner-variants-{tag}{dtype}-{suite}-{len(prompts)}x{max_tokens}.json"
    costs = {str(k): c for k, c in costs_by_key.items() if c}  # the planners' cost tables, as probed here
    for k, c in costs.items():
        print("costs", k, json.dumps({n: v if not isinstance(v, dict) else {m: round(t, 1) for m, t in v.items()}
                                      for n, v in c.items()}), flush=True)
    json.dump({"env": {k: v for k, v in os.environ.items() if k.startswith("MLX_")}, "res": res, "tau": taus,
               "trace": trace, "costs": costs, "prompts": [p["id"] for p in prompts],
               "device": str(mx.default_device())}, open(out, "w"))


if __name__ == "__main__":
    main()
