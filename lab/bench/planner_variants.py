"""Per prompt, interleaved on one loaded pair: target-only and DFlash settings, decode tok/s,
outputs asserted identical; the geometric mean ratio of each setting to target-only. The settings run in the given order on
odd prompts and reversed on even ones.

    python lab/bench/planner_variants.py target,auto,0,16 2 96     # settings, prompts a suite, tokens
    python lab/bench/planner_variants.py target,auto,auto- 2 128 assets/prompts/eval.jsonl   # its first 2 a category

DTYPE=float32 in the environment loads the target dequantized (as `--target-dtype float32`);
MAX_TREE=N lets fixed trees go up to N nodes (the product's limit is config.MAX_TREE); MLP=fused runs
the target's gate and up as one quantized matmul, MLP=densedown its down projection as a dense
matmul in passes of several rows (both modes), MLP=dense all three, densedown1 / dense1 in
1-row steps too; SPLIT=1 syncs the tree's candidates
and Markov transitions apart (as before tree.draft).
Settings: target; auto (tree sized per cycle); N (a tree of N nodes; 0 = the chain at the default
length); bK (a chain of K); a trailing "-" turns the context lookup off (auto-, 32-); "@L" after
any of them (target@5, 64@10) queues the target's pass for evaluation (mx.async_eval) after every
L layers, so the device computes early layers while the host builds the later ones; "auto!":
the planner without its copy trigger (drafting between probes when a copy from the context pays);
"Nd" (64d): a tree of N chosen on the device (device_tree.py), "Ndc" (64dc) the same by mx.compile; "NwK" (96w16): a tree of N from K
candidates a block position (tree.draft's width; the engine's is tree.WIDTH); "+" (64+, auto+):
the same with the drafter in directory $DRAFT_B instead of the shipped one; "^" (auto^, 15^): tree attention
as before the thirty-first session (lab/tree-calibration/s31/old_tree_attention.py: no row in
place on Intel, each row's tail by broadcast + concatenate; its own cost table); "." (auto., 15.): the CPU
tree attention before the thirty-second session (lab/cpu/s32/tree_attention_before.py: on AMD's path
ancestors gathered by depth, not the chain's attention with the tree's mask; its own cost table); "*" (auto*, 15*):
the drafter's block pass all in MLX on a CPU, as before the thirty-fifth session (host_draft.ENABLED off; its own cost table); "#" (target#, auto#):
the target's SwiGLU and softmax in MLX on a CPU, as before the thirty-sixth session (host_ops.ENABLED off; its own cost table; outputs
are compared within each arithmetic, and "#" settings' ratios are to target#); "=N" (auto=256, target=256): the
attention's p @ v in N-key chunks (target.KEY_CHUNK and, on Intel's padded path, TILED_KEY_CHUNK; outputs may then differ at near-ties); "~" (auto~): the planner's
tree sizes before the twenty-ninth session (2, 4, .. 64, timed at 2, 8, 16, 32, 64; its own cost tables); "target|": target-only pipelined as mlx-lm's generate_step is (the next step queued on the
device's token before this one's is read back); "%name" last (target%dense1, 64%densedown): that run's MLP as lab/bench/mlp_variants.py's name. Writes $OUT (default /tmp)/planner-variants-<settings>-<prompts>-<N>x<tokens>.json (tok/s, tau, auto's cycles).
"""
import os, sys, json, time
from pathlib import Path
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from dflash import backend; backend.setup()
import mlx.core as mx, numpy as np
from dflash.load import load_pair, encode_prompt
from dflash.config import GenerationConfig
import dflash.config
dflash.config.MAX_TREE = int(os.environ.get("MAX_TREE", dflash.config.MAX_TREE))  # MAX_TREE=256: larger trees
from dflash import engine, host_draft, host_ops
from dflash.events import Cycle, Summary
from dflash import target as target_mod
from dflash.policy import TreePlanner
from dflash import policy
NEW_SIZES, OLD_SIZES = (policy.TREE_SIZES, policy.TIMED_SIZES), ((2, 4, 6, 8, 12, 16, 24, 32, 48, 64), (2, 8, 16, 32, 64))
KEY_CHUNKS = target_mod.KEY_CHUNK, target_mod.TILED_KEY_CHUNK
costs_by_sizes = {}  # the cost tables each set of sizes (and key chunk) measured (pair.costs holds one)

variants = sys.argv[1].split(",")  # e.g. target,auto,0,8
n_prompts, max_tokens = int(sys.argv[2]), int(sys.argv[3])
pair = load_pair(progress=lambda s: None, target_dtype=os.environ.get("DTYPE", "auto"))  # DTYPE=float32: the dequantized target
ASYNC = {"every": 0}  # the running setting's "@L"
_layer_index = {id(l): i for i, l in enumerate(pair.target.layers)}
_layer = target_mod._decoder_layer_with


def _layer_then_queue(layer, *args, **kw):
    h = _layer(layer, *args, **kw)
    if ASYNC["every"] and _layer_index[id(layer)] % ASYNC["every"] == ASYNC["every"] - 1:
        mx.async_eval(h)
    return h


target_mod._decoder_layer_with = _layer_then_queue
if os.environ.get("SPLIT"):  # SPLIT=1: candidates and transitions in two device round trips (as before tree.draft)
    from dflash import tree as _tree

    def _split_draft(drafter, target, logits, width=_tree.WIDTH):
        ids, logp = _tree.candidates(logits, width, drafter.token_ids)
        return ids, logp, (_tree.transitions(drafter, target, ids) if drafter.has_markov else None)

    _tree.draft = _split_draft
from dflash import tree as _tree
WIDTH, _draft = {"now": None}, _tree.draft  # the running setting's "wK"
_tree.draft = lambda drafter, target, logits, width=None: _draft(drafter, target, logits, width or WIDTH["now"] or _tree.WIDTH)
sys.path.insert(0, str(Path(__file__).resolve().parent))
import mlp_variants; mlp_variants.apply()  # MLP=<name>: the MLP another way (mlp_variants.py)
import device_tree; device_tree.apply()  # "64d": a tree of 64 chosen on the device (device_tree.py)
PIPE = {"on": False, "next": None}  # "target|"
_target_cycle = engine._target_cycle


def _target_cycle_piped(target, cache, sampler, out, staged, extend=None):
    if not PIPE["on"]:
        return _target_cycle(target, cache, sampler, out, staged, extend)
    t = time.perf_counter()
    if PIPE["next"] is None:
        logits, _, _ = target.forward(mx.array([[staged]]), cache)
        y = mx.argmax(logits[0, -1])
    else:
        y = PIPE["next"]
    logits, _, _ = target.forward(y.reshape(1, 1), cache)  # the next step, on the device's token
    PIPE["next"] = mx.argmax(logits[0, -1])
    mx.async_eval(PIPE["next"])
    committed = out.emit([(y.item(), "target", None)])
    return (), 0, committed, (0.0, time.perf_counter() - t, 0.0)


engine._target_cycle = _target_cycle_piped
_copy_pays, _no_copy = TreePlanner._copy_pays, lambda self, copy_logp: False
import dataclasses
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tree-calibration" / "s31"))
import old_tree_attention  # "^": tree attention as before the thirty-first session
_tree_attention = target_mod._tree_attention_invariant
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "cpu" / "s32"))
import tree_attention_before  # ".": the CPU tree attention before the thirty-second session
_cpu_tree_attention = target_mod._cpu_tree_attention
pair_b = None  # "+": DRAFT_B's drafter on the same loaded target
if os.environ.get("DRAFT_B"):
    from dflash.drafter import load_drafter
    from dflash.load import check_pair, _float_dtype
    d_b = load_drafter(os.environ["DRAFT_B"])
    check_pair(pair.target, d_b)
    d_b.set_dtype(_float_dtype(pair.target))
    pair_b = dataclasses.replace(pair, drafter=d_b, draft_id=os.environ["DRAFT_B"])
prompts = []
if len(sys.argv) > 4:  # a prompts file: its first n_prompts of each category
    seen = {}
    for row in map(json.loads, open(sys.argv[4])):
        seen[row["category"]] = seen.get(row["category"], 0) + 1
        if seen[row["category"]] <= n_prompts:
            prompts.append(dict(row, id=f"{row['category']}-{seen[row['category']]}"))
for suite in ("chat", "code", "math") if len(sys.argv) <= 4 else ():
    rows = [json.loads(l) for l in open(Path(__file__).resolve().parents[2] / "assets" / "bench" / f"{suite}.jsonl")]
    prompts += rows[:n_prompts]
res, taus = {v: [] for v in variants}, {v: [] for v in variants}  # the first prompt runs once first, unmeasured: kernels compile, costs are timed
trace = {}  # per auto setting: each prompt's cycles (verified, accepted, ms)
for i, p in enumerate([dict(prompts[0], warmup=True)] + prompts):
    ids = encode_prompt(pair.tokenizer, p["prompt"])
    outs = {}
    for v in (variants if i % 2 else variants[::-1]):  # order alternates: drift hits all alike
        v_mlp, _, mlp = v.partition("%")  # "%name": the MLP as mlp_variants.py's name, this run
        mlp_variants.CURRENT["name"] = mlp or os.environ.get("MLP")
        v_mlp, _, chunk = v_mlp.partition("=")  # "=N": attention's p @ v in N-key chunks, this run
        target_mod.KEY_CHUNK, target_mod.TILED_KEY_CHUNK = (int(chunk),) * 2 if chunk else KEY_CHUNKS
        sizes = OLD_SIZES if "~" in v_mlp else NEW_SIZES  # "~": the planner's earlier tree sizes
        policy.TREE_SIZES, policy.TIMED_SIZES = sizes
        target_mod._tree_attention_invariant = (old_tree_attention._tree_attention_invariant if "^" in v_mlp
                                                else _tree_attention)
        target_mod._cpu_tree_attention = (tree_attention_before.cpu_tree_attention if "." in v_mlp
                                           else _cpu_tree_attention)
        host_draft.ENABLED = "*" not in v_mlp  # "*": the drafter's block pass all in MLX
        host_ops.ENABLED = "#" not in v_mlp  # "#": the target's SwiGLU and softmax in MLX
        cost_key = sizes, pair.target.key_chunk, "^" in v_mlp, "." in v_mlp, "*" in v_mlp, "#" in v_mlp
        pair.costs = costs_by_sizes.get(cost_key)
        v_mlp = v_mlp.replace("~", "").replace("^", "").replace(".", "").replace("*", "").replace("#", "")
        use_b = "+" in v_mlp
        assert not use_b or pair_b is not None, f"{v}: set DRAFT_B to a drafter directory"
        v_mlp = v_mlp.replace("+", "")
        PIPE["on"], PIPE["next"] = "|" in v_mlp, None
        v_mlp = v_mlp.replace("|", "")
        base, _, every = v_mlp.partition("@")
        ASYNC["every"] = int(every or 0)
        TreePlanner._copy_pays = _no_copy if "!" in base else _copy_pays
        base = base.replace("!", "")
        base, _, width = base.partition("w")
        WIDTH["now"] = int(width) if width else None
        lookup, name = not base.endswith("-"), base.rstrip("-")
        device_tree.ON["compiled"] = name.endswith("dc") and name[:-2].isdigit()  # "64dc": compiled
        name = name[:-1] if device_tree.ON["compiled"] else name
        device_tree.ON["on"] = name.endswith("d") and name[:-1].isdigit()
        name = name[:-1] if device_tree.ON["on"] else name
        if name == "target":
            cfg = GenerationConfig(mode="target", max_tokens=max_tokens)
        elif name.startswith("b"):
            cfg = GenerationConfig(mode="dflash", max_tokens=max_tokens, block_size=int(name[1:]), tree=0)
        else:
            cfg = GenerationConfig(mode="dflash", max_tokens=max_tokens, tree=None if name == "auto" else int(name),
                                   lookup=lookup)
        cyc = []
        for ev in engine.stream(pair_b if use_b else pair, ids, cfg):
            if isinstance(ev, Cycle): cyc.append((len(ev.drafted) + 1, ev.accepted, round(1000*(ev.draft_s+ev.verify_s+ev.rollback_s),1)))
            if isinstance(ev, Summary): s = ev
        costs_by_sizes[cost_key] = pair.costs
        if p.get("warmup"):
            continue
        outs[v] = s.token_ids
        res[v].append(s.decode_tok_s)
        taus[v].append(s.tau)
        if name == "auto": trace.setdefault(v, []).append(cyc)
        print(p["id"], v, f"{s.decode_tok_s:.2f} tok/s tau {s.tau:.2f}", flush=True)
    for group in ([o for v, o in outs.items() if "#" in v], [o for v, o in outs.items() if "#" not in v]):
        if len(set(group)) > 1:  # bitwise on a CPU; a near-tie may differ on a GPU
            assert mx.default_device() != mx.cpu, "outputs differ"
            print(p["id"], "outputs differ", flush=True)
    if "target" in outs and "target#" in outs and outs["target"] != outs["target#"]:
        print(p["id"], "the two arithmetics' outputs differ", flush=True)
for v in variants:
    b = res.get("target#" if "#" in v else "target")
    r = np.array(res[v]); print(v, "mean tok/s %.2f" % r.mean(), "mean tau %.2f" % np.mean(taus[v]), "ratio vs target: geo %.3f" % np.exp(np.log(r / np.array(b)).mean()) if b is not None else "")
out = Path(os.environ.get("OUT", "/tmp")) / ("planner-variants-%s%s-%s-%dx%d.json" % (sys.argv[1].replace(",", "_").replace("~", "old").replace("^", "nospine").replace(".", "before").replace("=", "k").replace("@", "a").replace("%", "-").replace("+", "B").replace("|", "pipe").replace("*", "mlxdraft").replace("#", "mlxops"), "-" + os.environ["DTYPE"] if os.environ.get("DTYPE") else "", Path(sys.argv[4]).stem if len(sys.argv) > 4 else "bench", len(prompts), max_tokens))
costs = {str(k): c for k, c in costs_by_sizes.items() if c}  # the planners' cost tables, as probed here
for k, c in costs.items():
    print("costs", k, json.dumps({n: v if not isinstance(v, dict) else {m: round(t, 1) for m, t in v.items()}
                                  for n, v in c.items()}), flush=True)
json.dump({"env": {k: v for k, v in os.environ.items() if k.startswith(("MLX_", "MLP"))}, "res": res, "tau": taus, "trace": trace, "costs": costs, "prompts": [p["id"] for p in prompts], "device": str(mx.default_device())}, open(out, "w"))
