"""The prompts collect.py, recall.py and replay.py share: the first `per_category` of each
category of a prompts file (one JSON object a line), after skipping the first `skip`."""
import json
from pathlib import Path


def pick(path, per_category: int, skip: int = 0) -> list[dict]:
    seen, picked = {}, []
    for line in Path(path).read_text().splitlines():
        if not line.strip():
            continue
        r = json.loads(line)
        i = seen[r["category"]] = seen.get(r["category"], -1) + 1
        if skip <= i < skip + per_category:
            picked.append(r)
    return picked
