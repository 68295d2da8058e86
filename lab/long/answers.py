"""The embedded target's own greedy answers to prompts, for building multi-turn chats.

    python lab/long/answers.py IN.jsonl OUT.jsonl [N] [MAX_TOKENS]

Each answer is the target's greedy continuation of its prompt alone, decoded by the engine
(lossless: the text is target-only's). Rows: {"prompt", "answer"}.
"""

import json
import sys

from dflash import backend

backend.setup()

from dflash.config import GenerationConfig  # noqa: E402
from dflash.engine import stream  # noqa: E402
from dflash.load import encode_prompt, load_pair  # noqa: E402


def main(src, dst, n=80, max_tokens=160):
    pair = load_pair()
    rows = [json.loads(l) for l in open(src) if l.strip()][: int(n)]
    with open(dst, "w") as f:
        for i, row in enumerate(rows):
            ids = encode_prompt(pair.tokenizer, row["prompt"])
            s = list(stream(pair, ids, GenerationConfig(max_tokens=int(max_tokens))))[-1]
            f.write(json.dumps({"prompt": row["prompt"], "answer": s.text.strip()}) + "\n")
            f.flush()
            print(i, s.tokens, f"tau {s.tau:.2f}", flush=True)


if __name__ == "__main__":
    main(*sys.argv[1:])
