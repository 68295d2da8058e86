"""The target's own answers (the token files the shipped drafter trained on) as one corpus:
answers only, each ended by -1, int32. Writes corpus.npy.

    python lab/corpus/build.py OUT_DIR FILE.npz ...
"""
import sys
from pathlib import Path

import numpy as np

out, files = Path(sys.argv[1]), sys.argv[2:]
parts = []
for f in files:
    d = np.load(f)
    tok, off, plen = d["tokens"], d["offsets"], d["prompt_lens"]
    for i in range(len(plen)):
        parts.append(tok[off[i] + plen[i]: off[i + 1]])
        parts.append(np.array([-1], np.int32))
    print(f, len(plen), "answers")
corpus = np.concatenate(parts).astype(np.int32)
np.save(out / "corpus.npy", corpus)
print(len(corpus), "tokens")
