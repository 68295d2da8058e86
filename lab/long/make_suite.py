"""Builds the long-context prompt sets from real text on this machine (Python's own reference
documentation, the Debian license texts, Python standard-library source) and multi-turn chats of
the embedded target's own answers (answers.py; chat-prompts.jsonl: validation prompts, never
trained on).

    python lab/long/answers.py lab/long/chat-prompts.jsonl /tmp/answers.jsonl 84 160
    python lab/long/make_suite.py /tmp/answers.jsonl

writes assets/bench/long.jsonl (`dflash bench --suite long`), lab/long/dev.jsonl (other documents,
other code, other chats: what settings were tuned on, so that the bench suite stays unseen by the
tuning) and the playground's "long" preset (assets/presets.json, a document neither set uses). Each set has one document with a question, one source file with a question
and one chat per context length (~0.5k, 1k, 2k, 4k, 7k prompt tokens); the row's category is the length.
"""

import json
import sys
import sysconfig
from pathlib import Path

import pydoc_data.topics
from mlx_lm.tokenizer_utils import load as load_tokenizer

from dflash.builtin import ensure_builtin_target

ROOT = Path(__file__).resolve().parents[2]
LIB = Path(sysconfig.get_paths()["stdlib"])
LICENSES = Path("/usr/share/common-licenses")
LENGTHS = {"0.5k": 500, "1k": 1000, "2k": 2000, "4k": 4000, "7k": 7000}

DOC_QUESTIONS = [
    "What does the text above say? Answer in three sentences.",
    "Summarize the text above in five bullet points.",
    "What are the main rules the text above describes? Explain them simply, with an example.",
    "Explain the text above to a beginner: what is it about, and what should they remember?",
    "List the key terms used in the text above and explain each one in a sentence.",
]
CODE_QUESTIONS = [
    "What does this code do? Explain it briefly.",
    "Explain what this code does, function by function.",
    "Write a short README for this module, with a usage example.",
    "Write three unit tests for the functions above.",
    "Explain the main class or function above and how a caller would use it.",
]
# (document source, code file) per length: the bench set's, then the dev set's
BENCH = {"0.5k": ("topic:try", "glob.py"), "1k": ("topic:import", "bisect.py+sched.py"), "2k": ("license:Apache-2.0", "heapq.py"),
         "4k": ("topic:types", "textwrap.py"), "7k": ("license:GPL-3", "fractions.py")}
DEV = {"0.5k": ("topic:calls", "fnmatch.py"), "1k": ("topic:execmodel", "reprlib.py+colorsys.py"), "2k": ("license:MPL-2.0", "shlex.py"),
       "4k": ("topic:formatstrings", "calendar.py"), "7k": ("topic:specialnames", "contextlib.py")}


def text_of(source: str) -> str:
    kind, name = source.split(":", 1) if ":" in source else ("code", source)
    if kind == "topic":
        return pydoc_data.topics.topics[name]
    if kind == "license":
        return (LICENSES / name).read_text()
    return "\n\n".join(f"# {f}\n" + (LIB / f).read_text() for f in name.split("+"))


def cut(tok, text: str, budget: int) -> str:
    """The longest run of whole lines from the start of `text` within `budget` tokens."""
    lines, out, n = text.splitlines(keepends=True), [], 0
    for line in lines:
        k = len(tok.encode(line, add_special_tokens=False))
        if n + k > budget:
            break
        out.append(line)
        n += k
    return "".join(out).rstrip()


def length(tok, messages) -> int:
    return len(tok.apply_chat_template(messages, tokenize=True, add_generation_prompt=True))


def fit(tok, make, text: str, budget: int) -> list:
    """messages = make(cut text): the longest cut whose chat-templated prompt fits `budget`."""
    lo, hi = 0, budget
    while lo < hi:  # the cut's own budget, so that the whole prompt lands at `budget`
        mid = (lo + hi + 1) // 2
        if length(tok, make(cut(tok, text, mid))) <= budget:
            lo = mid
        else:
            hi = mid - 1
    return make(cut(tok, text, lo))


def chat(tok, answers: list[dict], budget: int, question: str) -> list:
    """The conversation's earlier turns (prompt, the target's answer) until the next would pass
    `budget`, then a new question: each length's chat begins like the longer ones."""
    messages = []
    for a in answers:
        turn = [{"role": "user", "content": a["prompt"]}, {"role": "assistant", "content": a["answer"]}]
        if length(tok, messages + turn + [{"role": "user", "content": question}]) > budget:
            break
        messages += turn
    return messages + [{"role": "user", "content": question}]


def build(tok, plan: dict, answers: list[dict], questions: list[dict]) -> list[dict]:
    rows = []
    for i, (name, budget) in enumerate(LENGTHS.items()):
        doc, code = plan[name]
        for kind, source, q in (("document", doc, DOC_QUESTIONS[i]), ("code", code, CODE_QUESTIONS[i])):
            fence = "```python\n{}\n```" if kind == "code" else "{}"
            make = lambda t, q=q, fence=fence: [{"role": "user", "content": fence.format(t) + "\n\n" + q}]
            m = fit(tok, make, text_of(source), budget)
            rows.append({"category": name, "id": f"{name}-{kind}", "source": source,
                         "tokens": length(tok, m), "prompt": m[0]["content"]})
        m = chat(tok, answers, budget, questions[i]["prompt"])
        rows.append({"category": name, "id": f"{name}-chat", "source": "chat", "tokens": length(tok, m),
                     "messages": m})
    return rows


# the playground's "Long prompt" preset (assets/presets.json): a document no set above uses
PRESET = ("topic:typesseq", 3000, "Using the documentation above, explain the difference between "
          "lists and tuples, and give a short example of each.")


def preset(tok) -> str:
    source, budget, q = PRESET
    return fit(tok, lambda t: [{"role": "user", "content": t + "\n\n" + q}], text_of(source), budget)[0]["content"]


def main(answers_file: str):
    tok = load_tokenizer(ensure_builtin_target())
    answers = [json.loads(l) for l in open(answers_file) if l.strip()]
    questions = [json.loads(l) for l in open(ROOT / "lab/prompts/val-self-3.jsonl")][-10:]
    half = len(answers) // 2
    for plan, ans, qs, out in ((BENCH, answers[:half], questions[:5], ROOT / "assets/bench/long.jsonl"),
                               (DEV, answers[half:], questions[5:], ROOT / "lab/long/dev.jsonl")):
        rows = build(tok, plan, ans, qs)
        out.write_text("".join(json.dumps(r) + "\n" for r in rows))
        print(out, [(r["id"], r["tokens"]) for r in rows])
    presets = ROOT / "assets/presets.json"
    data = json.loads(presets.read_text())
    data["long"] = preset(tok)
    presets.write_text(json.dumps(data, indent=2) + "\n")
    print(presets, "long:", length(tok, [{"role": "user", "content": data["long"]}]), "tokens")


if __name__ == "__main__":
    main(*sys.argv[1:])
