"""A drafter's Markov head on cache_base.py's caches, as fit.py measures it (chain tau, top-1
accuracy, after a sibling, log-loss), read from the saved (float16) drafter.

    python lab/markov-head/eval_head.py assets/smollm2-135m-instruct-dflash /tmp/markov/eval.npz /tmp/markov/calib.npz
"""

import json
import sys

from dflash import backend  # noqa: E402

backend.setup()  # before mlx loads: the CPU BLAS
import numpy as np

import fit as F
from dflash.drafter import load_drafter
from dflash.load import load_target
from dflash.target import Target
from dflash.train import FrozenIO


def main() -> None:
    d = load_drafter(sys.argv[1])
    ids = d.vocab.ids
    lm, _, model_type = load_target("builtin:smollm2-135m-instruct", progress=lambda s: None)
    io = FrozenIO(Target(lm, model_type, []))
    embed, head = np.array(io.embed_w), np.array(io.head_w)
    w_in = np.array(d.markov.in_proj.weight).astype(np.float32)
    w_out = np.array(d.markov.out_proj.weight).astype(np.float32)
    z = embed @ w_in.T
    for name in sys.argv[2:]:
        r = F.evaluate(F.Cache(name, head[ids]), lambda prev: z[prev] @ w_out.T, ids)
        print(name, json.dumps(r), flush=True)


if __name__ == "__main__":
    main()
