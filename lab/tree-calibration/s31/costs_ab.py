"""The planner's cost table (policy.measure_costs) with the shipped tree attention and the one before, twice."""
import sys; sys.path.insert(0, str(__import__('pathlib').Path(__file__).resolve().parents[3])); sys.path.insert(0, str(__import__('pathlib').Path(__file__).resolve().parent))
from dflash import backend; backend.setup()
from dflash.load import load_pair
from dflash import target as T
from dflash.policy import measure_costs
from dflash.config import MAX_TREE
import old_tree_attention
pair = load_pair(progress=lambda s: None)
new = T._tree_attention_invariant
for rep in range(2):
    for name, fn in (("new", new), ("old", old_tree_attention._tree_attention_invariant)):
        T._tree_attention_invariant = fn
        c = measure_costs(pair, 16, tree_nodes=MAX_TREE)
        print(name, "step %.1f" % c["step_ms"], "draft %.1f" % c["draft_ms"], "tree", {k: round(v) for k, v in c["verify_ms"].items()}, "chain", {k: round(v) for k, v in c["chain_ms"].items()}, flush=True)
