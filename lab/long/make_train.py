"""Long-context training prompts (issue 54): documents and source files of this machine's Python
with a question after them, 0.8k-4k prompt tokens, none of them a text the bench's long suite,
the dev set or the playground preset uses (make_suite.py). `train` answers them with the target
(self-distillation) like any other prompt file.

    python lab/long/make_train.py [N] [OUT]      (default 400, lab/long/train-long.jsonl.xz)
"""

import json
import lzma
import random
import sys
from pathlib import Path

import pydoc_data.topics
from mlx_lm.tokenizer_utils import load as load_tokenizer

from dflash.builtin import ensure_builtin_target

sys.path.insert(0, str(Path(__file__).parent))
from make_suite import BENCH, DEV, LIB, PRESET, ROOT, fit, length, text_of  # noqa: E402

DOC_QUESTIONS = [
    "Summarize the text above for a busy reader.",
    "What is the most important idea in the text above? Explain why.",
    "Write three quiz questions about the text above, with their answers.",
    "Rewrite the first part of the text above in plain language.",
    "What would a beginner find confusing in the text above? Clarify it.",
    "Give an example that illustrates the text above.",
    "Which parts of the text above are rules, and which are advice?",
    "Explain the text above in a short paragraph, then list its key points.",
]
CODE_QUESTIONS = [
    "Summarize what this module is for.",
    "Find a possible bug or edge case in the code above and explain it.",
    "Add type hints to the first function above and explain your choices.",
    "How would you test the code above? Give two pytest tests.",
    "Explain the code above line by line, briefly, for its first function.",
    "Rewrite the first function above to be easier to read.",
    "What are the inputs and outputs of the main functions above?",
    "Document the code above: write docstrings for its public functions.",
]


CUTS = 3


def used() -> set[str]:
    names = {PRESET[0]}
    for plan in (BENCH, DEV):
        for doc, code in plan.values():
            names.add(doc)
            names.update(code.split("+"))
    return names


def sources(rng) -> list[tuple[str, str]]:
    """(kind, source) for every long-enough text not in a held-out set, shuffled."""
    skip = used()
    topics = [f"topic:{t}" for t, text in pydoc_data.topics.topics.items() if len(text) > 3000]
    code = [p.name for p in LIB.glob("*.py") if 6000 < p.stat().st_size < 120_000 and not p.name.startswith("_")]
    out = [("document", s) for s in topics if s not in skip] + [("code", s) for s in code if s not in skip]
    rng.shuffle(out)
    return out


def main(n="400", out=str(ROOT / "lab/long/train-long.jsonl.xz")):
    rng = random.Random(54)
    tok = load_tokenizer(ensure_builtin_target())
    rows = []
    for kind, source in sources(rng) * CUTS:  # each text cut up to CUTS times, from other lines
        if len(rows) >= int(n):
            break
        lines = text_of(source).splitlines(keepends=True)
        start = rng.randrange(len(lines) // 2) if any(r["source"] == source for r in rows) else 0
        q = rng.choice(DOC_QUESTIONS if kind == "document" else CODE_QUESTIONS)
        fence = "```python\n{}\n```" if kind == "code" else "{}"
        make = lambda t, q=q, fence=fence: [{"role": "user", "content": fence.format(t) + "\n\n" + q}]
        m = fit(tok, make, "".join(lines[start:]), rng.randint(800, 4000))
        if length(tok, m) >= 600:  # a short text: not what this set is for
            rows.append({"category": f"long-{kind}", "source": source, "prompt": m[0]["content"]})
    with lzma.open(out, "wt") as f:
        f.writelines(json.dumps(r) + "\n" for r in rows)
    print(out, len(rows), "prompts", {k: sum(r["category"] == k for r in rows) for k in ("long-document", "long-code")})


if __name__ == "__main__":
    main(*sys.argv[1:])
