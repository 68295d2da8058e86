"""`python -m dflash generate | bench | serve | train` — each verb's main() is imported lazily."""

from __future__ import annotations

import argparse
import importlib
import json
import sys
import zipfile

from .config import DEFAULT_MAX_TOKENS, MAX_TREE, GenerationConfig
from .events import Cycle, Prefill, Summary, to_dict

VERBS = {
    "generate": "dflash.cli:generate_main",
    "bench": "dflash.bench:main",
    "serve": "dflash.server:main",
    "train": "dflash.train:main",
}


def command(verb: str = "") -> str:
    """How the user ran us, for usage lines: `dflash bench` from the installed script, else
    `python -m dflash bench`."""
    from pathlib import Path

    base = "dflash" if Path(sys.argv[0]).name == "dflash" else "python -m dflash"
    return f"{base} {verb}".strip()


class ArgumentParser(argparse.ArgumentParser):
    """argparse's, with a usage mistake on one line rather than the usage block."""

    def error(self, message):
        self.exit(2, f"error: {message} ({self.prog} --help shows the usage)\n")


def add_generation_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--max-tokens", type=int, default=DEFAULT_MAX_TOKENS)
    p.add_argument("--block-size", type=_block_size, default=None,
                   help="2..drafter block size (default: the drafter's on a GPU, up to 5 on a CPU), "
                        "or 'auto': each cycle's verify length from measured costs and the acceptance so far")
    p.add_argument("--tree", type=_tree, default=None, metavar="N",
                   help="drafted nodes verified per target pass, as a tree of the most probable "
                        f"paths (1..{MAX_TREE}); 0 = the argmax chain; 'auto' (the default unless "
                        "--block-size is given): this host's best, each cycle's tree size from "
                        f"measured costs; {MAX_TREE} nodes on a CUDA GPU")
    p.add_argument("--no-lookup", dest="lookup", action="store_false",
                   help="trees verify the drafter's paths only, no copy from earlier in the context")
    p.add_argument("--temperature", type=float, default=0.0, help="0 = greedy")
    p.add_argument("--top-p", type=float, default=1.0)
    p.add_argument("--seed", type=int, default=0)


def _block_size(text: str):
    return "auto" if text == "auto" else int(text)


def _tree(text: str):
    return None if text == "auto" else int(text)


def config_from_args(a, mode: str = "dflash") -> GenerationConfig:
    auto = a.block_size == "auto"
    return GenerationConfig(mode, a.max_tokens, None if auto else a.block_size, a.temperature,
                            a.top_p, a.seed, adaptive=auto, tree=getattr(a, "tree", None),
                            lookup=getattr(a, "lookup", True))


def add_model_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--model", default=None, help="mlx-lm model directory or Hub id (default: embedded SmolLM2-135M-Instruct)")
    p.add_argument("--draft", default=None, help="drafter directory (HF layout) or Hub id (default: from the registry)")


def add_distributed_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument("--distributed", nargs="?", const="any", default=None, metavar="BACKEND",
                   help="shard the target over the processes started by mlx.launch (backend: "
                        "any, ring, mpi, nccl, jaccl; default any); docs/distributed.md")


def generate_main(argv=None) -> int:
    from .server import exit_on_ctrl_c

    exit_on_ctrl_c()  # the text so far, then out: no unwinding through the engine's cleanup
    return _generate(argv)


def _generate(argv=None) -> int:
    p = ArgumentParser(prog=command("generate"), description="Generate with DFlash or the target alone.")
    add_model_args(p)
    p.add_argument("text", nargs="?", metavar="PROMPT", help="the prompt (or --prompt)")
    p.add_argument("--prompt", help="the prompt, as a flag")
    p.add_argument("--mode", choices=["dflash", "target"], default="dflash")
    p.add_argument("--no-chat-template", action="store_true")
    p.add_argument("--json", action="store_true", help="one JSON object per event per line; the last is the summary")
    add_generation_args(p)
    add_distributed_arg(p)
    a = p.parse_args(argv)
    if (a.text is None) == (a.prompt is None):
        p.error("give the prompt once: as an argument or with --prompt")
    a.prompt = a.prompt if a.text is None else a.text

    from . import distributed
    from .engine import stream, warm
    from .guard import has_surrogate
    from .load import encode_prompt, load_pair

    log = (lambda m: print(m, file=sys.stderr))
    try:
        if not a.prompt.strip():
            raise ValueError("the prompt is empty")
        if has_surrogate(a.prompt):  # bytes that argv could not decode
            raise ValueError("the prompt is not valid UTF-8 text")
        cfg = config_from_args(a, a.mode).validate()
        group = distributed.init(a.distributed) if a.distributed else None
        if group is not None:
            log = distributed.rank0_only(group, log)
        pair = load_pair(a.model, a.draft, a.mode, progress=log)
        if group is not None:
            distributed.shard_pair(pair, group)
            log(f"target sharded over {group.size()} processes ({a.distributed})")
        warm(pair, log)  # a GPU's kernels compiled, the planner's costs timed: not in the first cycles
        ids = encode_prompt(pair.tokenizer, a.prompt, not a.no_chat_template)
        for ev in stream(pair, ids, cfg):
            if a.json:
                print(json.dumps(to_dict(ev)), flush=True)
            elif isinstance(ev, (Prefill, Cycle)):
                if isinstance(ev, Prefill) and ev.note:
                    log(f"note: {ev.note}")
                toks = (ev.first,) if isinstance(ev, Prefill) and ev.first else getattr(ev, "committed", ())
                print("".join(t.text for t in toks), end="", flush=True)
            elif isinstance(ev, Summary):
                print(flush=True)  # the text's own last line, whatever the terminal does with stderr
                log(f"[{ev.mode}] {ev.tokens} tokens, {ev.cycles} cycles, tau {ev.tau:.2f}, "
                    f"acceptance {ev.acceptance_rate:.0%}, decode {ev.decode_tok_s:.1f} tok/s, "
                    f"TTFT {ev.ttft_s * 1000:.0f} ms, finish {ev.finish_reason}"
                    + (f", verified as {ev.verify}" if ev.verify else ""))  # rank 0's only
    except distributed.RankMismatch as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    except (ValueError, RuntimeError, zipfile.BadZipFile) as e:  # bad input, a file that cannot load
        return fail(e)
    return 0


def fail(e: Exception) -> int:
    """Bad input: one line on stderr (the first of the message), exit status 2."""
    lines = str(e).strip().splitlines() or [type(e).__name__]
    more = f" (+{len(lines) - 1} more lines)" if len(lines) > 1 else ""
    print(f"error: {lines[0]}{more}", file=sys.stderr)
    return 2


def main(argv=None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    if not argv or argv[0] not in VERBS:
        print(f"usage: {command()} {{{'|'.join(VERBS)}}} [options]  (--help after a verb)", file=sys.stderr)
        sys.exit(2)
    from . import backend

    backend.setup()  # before any verb imports mlx
    module, fn = VERBS[argv[0]].split(":")
    sys.exit(getattr(importlib.import_module(module), fn)(argv[1:]) or 0)
