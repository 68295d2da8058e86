"""`python -m dflash bench`: target-only vs DFlash on the same prompt token ids, in one process.

After one warm-up generation per mode, each prompt runs target-only, DFlash (with `--baseline
mlx-lm` mlx-lm's own `stream_generate`, with `--peer zlab` z-lab's reference implementation)
`--repeat` times; a prompt's numbers are the medians over repeats, a suite's the medians over its
prompts. Metrics as docs/algorithm.md defines them: speedup = DFlash decode tok/s / target-only
decode tok/s (ratio of the two medians); with the baseline also DFlash / mlx-lm.
`--profile` adds a one-cycle cost breakdown measured on the first prompt. Output: a table on
stdout, and with `--out FILE.json` the JSON document plus a plot next to it (FILE.html).
"""

from __future__ import annotations

import argparse
from dataclasses import replace
from functools import partial
import hashlib
import json
import os
import platform
import re
import shlex
import subprocess
import sys
from datetime import datetime, timezone
from pathlib import Path
from statistics import median
from time import perf_counter
from typing import Callable, Optional

import mlx.core as mx

from . import distributed, op_profile, peer_mlx_lm, peer_zlab
from .backends import cpu_rows
from .cli import add_distributed_arg, add_generation_args, add_model_args, command, config_from_args
from .config import GenerationConfig
from .events import Summary
from .load import TARGET_DTYPES
from .metrics import pass_stats
from .registry import ASSETS
from .guard import has_surrogate
from .verdict import first_divergence

SUITES = ("chat", "code", "math")  # "all"
LONG_SUITE = "long"  # documents, code and chats of ~0.5k-7k tokens: one suite per length, not in "all"
SUITE_DIR = ASSETS / "bench"
SCHEMA = "dflash-bench/1"
DEFAULT_BENCH_TOKENS = 128
DEFAULT_REPEAT = 3
WARMUP_TOKENS = 32
PROFILE_KS = (1, 2, 4, 8, 16)
PROFILE_REPS = 10


# ---------------------------------------------------------------- prompts


def load_suites(names: list[str], files: Optional[list[str]] = None,
                limit: Optional[int] = None) -> dict[str, list[dict]]:
    """{suite: [{"id", "prompt"}, ...]} from `assets/bench/<name>.jsonl`, or from JSONL files
    given explicitly: a file is one suite named after its stem, or, where its rows carry a
    "category", one suite per category (ids "<category>-<k>"), `limit` prompts each. A row's
    prompt is a string (one user turn) or, as "messages", a conversation ([{"role", "content"}])."""
    paths = [Path(f) for f in files] if files else [SUITE_DIR / f"{n}.jsonl" for n in names]
    suites = {}
    for path in paths:
        if not path.is_file():
            raise ValueError(f"no prompt suite at {path}")
        empty = True
        for n, line in enumerate(path.read_text().splitlines(), 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as e:
                raise ValueError(f"{path}:{n} is not JSON ({e})") from None
            if isinstance(row, dict) and "prompt" not in row and _is_chat(row.get("messages")):
                row = {**row, "prompt": row["messages"]}
            if not isinstance(row, dict) or not isinstance(row.get("prompt"), str) and not _is_chat(row.get("prompt")):
                raise ValueError(f"{path}:{n} needs a string 'prompt' or a list of 'messages'")
            if has_surrogate(json.dumps(row, ensure_ascii=False)):
                raise ValueError(f"{path}:{n} holds a lone UTF-16 surrogate (\\ud800-\\udfff), which is not text")
            suite = row.get("category", path.stem)
            if not isinstance(suite, str) or not suite:
                raise ValueError(f"{path}:{n}: 'category' must be a non-empty string")
            group = suites.setdefault(suite, [])
            if not limit or len(group) < limit:
                default_id = f"{suite}-{len(group) + 1}" if "category" in row else f"{path.stem}-{n}"
                group.append({"id": str(row.get("id", default_id)), "prompt": row["prompt"]})
            empty = False
        if empty:
            raise ValueError(f"prompt suite {path} is empty")
    return suites


def read_record(path: str) -> dict:
    """A JSON file `bench --out` wrote; ValueError saying what is wrong with it otherwise."""
    try:
        doc = json.loads(Path(path).read_text())
    except OSError as e:
        raise ValueError(f"cannot read {path}: {e.strerror or e}") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise ValueError(f"{path} is not JSON ({e})") from None
    if not isinstance(doc, dict) or doc.get("schema") != SCHEMA:
        raise ValueError(f"{path} is not a bench record (no \"schema\": \"{SCHEMA}\")")
    return doc


def _is_chat(messages) -> bool:
    return (isinstance(messages, list) and bool(messages)
            and all(isinstance(m, dict) and isinstance(m.get("content"), str) for m in messages))


# ---------------------------------------------------------------- one prompt


def _generate(pair, ids: list[int], cfg: GenerationConfig) -> tuple[Summary, dict]:
    from .engine import stream

    *events, s = list(stream(pair, ids, cfg))
    n = max(s.cycles, 1)
    per_cycle = {k: getattr(s, f"{k}_s") / n * 1e3 for k in ("draft", "verify", "rollback")}
    cycle_ms = s.decode_s / n * 1e3
    stats = {
        "decode_tok_s": s.decode_tok_s, "ttft_s": s.ttft_s, "tokens": s.tokens, "cycles": s.cycles,
        "tau": s.tau, "acceptance_rate": s.acceptance_rate, **pass_stats(events),
        **{f"{k}_ms": v for k, v in per_cycle.items()},
        "cycle_ms": cycle_ms,
        # time inside a cycle that none of the engine's draft/verify/rollback timers saw
        "untimed_ms": cycle_ms - sum(per_cycle.values()),
    }
    return s, stats


def _peer_stats(r) -> dict:
    return {"decode_tok_s": r.decode_tok_s, "ttft_s": r.ttft_s, "tokens": len(r.token_ids),
            "cycles": r.cycles, "tau": r.tau, "reported_tok_s": r.reported_tok_s}


def _medians(runs: list[dict]) -> dict:
    """Numbers: the median over repeats; anything else (`passes`): the last run's."""
    return {k: median(r[k] for r in runs) if isinstance(v, (int, float)) else runs[-1][k]
            for k, v in runs[0].items()}


def _first_divergence(ref: tuple, outputs: list[tuple]) -> Optional[int]:
    """Index of the first token where any output differs from `ref` (None when all equal)."""
    at = [i for o in outputs if (i := first_divergence(ref, o)) is not None]
    return min(at) if at else None


def bench_prompt(pair, ids: list[int], cfg: GenerationConfig, repeat: int, peer=None,
                 mlx_lm: bool = False) -> dict:
    """Medians over `repeat` rounds of target-only, DFlash (mlx-lm's decoding, the peer) on the
    same ids."""
    tcfg = GenerationConfig("target", cfg.max_tokens, None, cfg.temperature, cfg.top_p, cfg.seed)
    runs: dict[str, list] = {"target": [], "dflash": [], "peer": [], "mlx_lm": []}
    outputs: dict[str, list] = {"target": [], "dflash": [], "peer": [], "mlx_lm": []}
    peer_error = None
    for _ in range(repeat):
        for mode, mode_cfg in (("target", tcfg), ("dflash", cfg)):
            summary, stats = _generate(pair, ids, mode_cfg)
            outputs[mode].append(summary.token_ids)
            runs[mode].append(stats)
        if mlx_lm:
            r = peer_mlx_lm.generate(pair, ids, cfg.max_tokens, cfg.temperature, cfg.top_p, cfg.seed)
            outputs["mlx_lm"].append(r.token_ids)
            runs["mlx_lm"].append({"decode_tok_s": r.decode_tok_s, "ttft_s": r.ttft_s, "tokens": len(r.token_ids)})
        if peer is not None and peer_error is None:
            try:
                r = peer.generate(ids, cfg.max_tokens, cfg.block_size, cfg.temperature, cfg.top_p)
                outputs["peer"].append(r.token_ids)
                runs["peer"].append(_peer_stats(r))
            except Exception as e:  # a foreign implementation: record why, keep benchmarking
                peer_error = f"{type(e).__name__}: {e}"
    ref = outputs["target"][0]
    target, dflash = _medians(runs["target"]), _medians(runs["dflash"])
    for mode, med in (("target", target), ("dflash", dflash)):
        med["decode_tok_s_runs"] = [r["decode_tok_s"] for r in runs[mode]]
    dflash["per_position_acceptance"] = list(summary.per_position_acceptance)  # the last run is DFlash
    ours = outputs["target"] + outputs["dflash"]
    row = {
        "prompt_tokens": len(ids),
        "target": target,
        "dflash": dflash,
        "speedup": dflash["decode_tok_s"] / target["decode_tok_s"] if target["decode_tok_s"] else None,
        "identical": all(o == ref for o in ours),
        "first_divergence": _first_divergence(ref, ours),
        "peer": None,
        "mlx_lm": None,
    }
    if mlx_lm:
        m = _medians(runs["mlx_lm"])
        m["decode_tok_s_runs"] = [r["decode_tok_s"] for r in runs["mlx_lm"]]
        m["speedup"] = dflash["decode_tok_s"] / m["decode_tok_s"] if m["decode_tok_s"] else None  # DFlash's
        m["target_ratio"] = target["decode_tok_s"] / m["decode_tok_s"] if m["decode_tok_s"] else None
        m["identical"] = all(o == ref for o in outputs["mlx_lm"])
        m["first_divergence"] = _first_divergence(ref, outputs["mlx_lm"])
        row["mlx_lm"] = m
    if peer is not None:
        if peer_error is not None:
            row["peer"] = {"error": peer_error}
        else:
            p = _medians(runs["peer"])
            p["decode_tok_s_runs"] = [r["decode_tok_s"] for r in runs["peer"]]
            p["speedup"] = p["decode_tok_s"] / target["decode_tok_s"] if target["decode_tok_s"] else None
            p["identical"] = all(o == ref for o in outputs["peer"])
            p["first_divergence"] = _first_divergence(ref, outputs["peer"])
            row["peer"] = p
    return row


# ---------------------------------------------------------------- aggregation

AGGREGATES: dict[str, Callable[[dict], Optional[float]]] = {
    "speedup": lambda r: r["speedup"],
    "tau": lambda r: r["dflash"]["tau"],
    "acceptance_rate": lambda r: r["dflash"]["acceptance_rate"],
    "target_tok_s": lambda r: r["target"]["decode_tok_s"],
    "dflash_tok_s": lambda r: r["dflash"]["decode_tok_s"],
    "target_ttft_s": lambda r: r["target"]["ttft_s"],
    "dflash_ttft_s": lambda r: r["dflash"]["ttft_s"],
    "target_step_ms": lambda r: r["target"]["cycle_ms"],
    "draft_ms": lambda r: r["dflash"]["draft_ms"],
    "verify_ms": lambda r: r["dflash"]["verify_ms"],
    "rollback_ms": lambda r: r["dflash"]["rollback_ms"],
    "cycle_ms": lambda r: r["dflash"]["cycle_ms"],
    "peer_tok_s": lambda r: (r["peer"] or {}).get("decode_tok_s"),
    "peer_speedup": lambda r: (r["peer"] or {}).get("speedup"),
    "peer_tau": lambda r: (r["peer"] or {}).get("tau"),
    "mlx_lm_tok_s": lambda r: (r.get("mlx_lm") or {}).get("decode_tok_s"),
    "speedup_vs_mlx_lm": lambda r: (r.get("mlx_lm") or {}).get("speedup"),
    "target_vs_mlx_lm": lambda r: (r.get("mlx_lm") or {}).get("target_ratio"),
}


def aggregate(rows: list[dict]) -> dict:
    """Medians over prompts of each AGGREGATES metric (None where no prompt has it) + counts."""
    out: dict = {"prompts": len(rows), "identical": sum(r["identical"] for r in rows)}
    out["all_identical"] = out["identical"] == len(rows)
    for key, get in AGGREGATES.items():
        vals = [v for r in rows if (v := get(r)) is not None]
        out[key] = median(vals) if vals else None
    speedups = [r["speedup"] for r in rows if r["speedup"] is not None]
    out["speedup_min"] = min(speedups) if speedups else None  # "never slower" is about this one
    out["prompt_tokens"] = median(r["prompt_tokens"] for r in rows) if rows else None
    peer_rows = [r["peer"] for r in rows if r["peer"] and "identical" in r["peer"]]
    if peer_rows:
        out["peer_identical"] = sum(p["identical"] for p in peer_rows)
    if any(r.get("mlx_lm") for r in rows):
        out["mlx_lm_identical"] = sum(r["mlx_lm"]["identical"] for r in rows if r.get("mlx_lm"))
    return out


# ---------------------------------------------------------------- one-cycle profile


def _median_ms(fn, undo=lambda out: None, reps: int = PROFILE_REPS) -> float:
    """Median ms of `reps` runs of fn after one warm-up; undo(fn's result) after each, untimed."""
    times = []
    for _ in range(reps + 1):
        t = perf_counter()
        out = fn()
        times.append(perf_counter() - t)
        undo(out)
    return median(times[1:]) * 1e3


def profile(pair, ids: list[int], block_size: int, tau: float, reps: int = PROFILE_REPS) -> dict:
    """Model work of one cycle measured in isolation (ms, medians of `reps` after one warm-up).

    target_step: a 1-token target forward; verify[k]: a k-token forward with taps; draft: one
    drafter pass + argmax; rollback: after a B-token verify, keep round(tau) positions (cache
    trim / tape replay) and append their features to the drafter's context. Caches are put back
    after each measurement where the cache allows it (hybrid 1-token steps grow it a little).
    """
    target, drafter = pair.target, pair.drafter
    cache, dcache = target.make_cache(), drafter.make_cache()
    logits = target.prefill(ids, cache, on_chunk=lambda f: drafter.extend_context(f, dcache))
    staged = mx.argmax(logits).item()
    mx.eval([c.state for c in dcache])
    keep = min(max(round(tau), 1), block_size)
    rollbacks: list[float] = []
    timed = partial(_median_ms, reps=reps)

    def forward(k: int, record: bool):
        logits, feats, tapes = target.forward(mx.array([[staged] * k]), cache, record=record)
        mx.eval(logits, feats if feats is not None else logits)
        return k, feats, tapes

    def undo(out):
        n_fed, feats, tapes = out
        if n_fed == block_size:  # time the rollback of a real cycle, then remove what it kept
            t = perf_counter()
            target.rollback(cache, tapes, n_fed, keep)
            drafter.extend_context(feats[:, :keep], dcache)
            mx.eval([c.state for c in cache], [c.state for c in dcache])
            rollbacks.append(perf_counter() - t)
            for c in dcache:
                c.trim(keep)
            n_fed, tapes = keep, {}
        if tapes or not target.is_hybrid:
            target.rollback(cache, tapes, n_fed, 0)
            mx.eval([c.state for c in cache])

    def build_draft():  # the draft pass's graph only
        return mx.argmax(drafter.propose(target, staged, block_size, dcache), axis=-1)

    def build_verify():  # the pass's graph only: host work a device could overlap
        _, feats, tapes = target.forward(mx.array([[staged] * block_size]), cache, record=target.is_hybrid)
        return block_size, feats, tapes

    def drop(out):  # put the cache back (an unevaluated pass: compute it once), no rollback timed
        target.rollback(cache, out[2], out[0], 0)
        mx.eval([c.state for c in cache])

    ks = sorted(set(PROFILE_KS) | {block_size})
    step = timed(lambda: forward(1, False), undo)
    verify = {k: timed(lambda k=k: forward(k, target.is_hybrid), undo) for k in ks}
    draft_ms = timed(lambda: mx.eval(build_draft()))
    build = {"draft": timed(build_draft), "verify": timed(build_verify, drop)}
    rollback_ms = median(rollbacks[1:]) * 1e3
    model_cycle = draft_ms + verify[block_size] + rollback_ms
    ops = None
    if target._attend is not None:  # llama-family attention done by target.py (CPU, CUDA)
        ops = {f"{k}": op_profile.op_kinds(target, cache, lambda k: forward(k, False), drop, k, reps)
               for k in (1, block_size)}
    return {
        "prompt_tokens": len(ids),
        "block_size": block_size,
        "reps": reps,
        "target_step_ms": step,
        "verify_ms": {str(k): v for k, v in verify.items()},
        "draft_ms": draft_ms,
        "rollback_ms": rollback_ms,
        "rollback_keep": keep,
        # host time to build each pass's graph, nothing evaluated (inside draft_ms / verify_ms)
        "graph_build_ms": build,
        "model_cycle_ms": model_cycle,
        "verify_cost_ratio": verify[block_size] / step,
        # DFlash beats target-only only if tau exceeds this, even with zero host overhead
        "break_even_tau": model_cycle / step,
        # ms per op kind of a 1-token step and a block_size-token verify, barriered (op_profile.py)
        "op_kinds": ops,
    }


def _add_overheads(prof: dict, row: dict) -> dict:
    """Host overhead = wall time per cycle of a generation run right after - isolated model work;
    None where that run's passes were not the profiled chain (a tree or plain steps: the planner's)."""
    d, t = row["dflash"], row["target"]
    per_pass = d.get("tokens_verified")
    chain = per_pass is None or abs(per_pass - prof["block_size"]) < 0.5
    prof.update({
        "dflash_cycle_ms": d["cycle_ms"],
        "dflash_tokens_per_pass": per_pass,
        "host_overhead_ms": d["cycle_ms"] - prof["model_cycle_ms"] if chain else None,
        "target_cycle_ms": t["cycle_ms"],
        "target_host_overhead_ms": t["cycle_ms"] - prof["target_step_ms"],
        # the loop's own work outside the two passes (commit, rollback, events), by its timers
        "engine_share": (d["rollback_ms"] + d["untimed_ms"]) / d["cycle_ms"],
        "tau": d["tau"],
        # speedup if the cycle cost only its model work: tau x step / model cycle
        "model_bound_speedup": d["tau"] * prof["target_step_ms"] / prof["model_cycle_ms"],
    })
    return prof


# ---------------------------------------------------------------- the benchmark


def run(pair, suites: dict[str, list[dict]], cfg: GenerationConfig, repeat: int = DEFAULT_REPEAT,
        peer=None, with_profile: bool = False, log: Callable[[str], None] = print,
        profile_reps: int = PROFILE_REPS, mlx_lm: bool = False) -> dict:
    """Benchmark `pair` on `suites`; returns the JSON document's results part. mlx_lm: also
    decode with mlx-lm's own `stream_generate` (peer_mlx_lm.py)."""
    from .engine import warm as warm_pair
    from .load import encode_prompt

    if cfg.mode != "dflash":
        raise ValueError(f"bench compares DFlash with target-only; cfg.mode must be 'dflash' (got {cfg.mode!r})")
    B = cfg.verify_length(pair.drafter.block_size)
    if not cfg.wants_tree():  # a chain: its length fixed for every prompt (trees size themselves)
        cfg = replace(cfg, block_size=B).validate(pair.drafter.block_size)
    encoded = {s: [(p["id"], encode_prompt(pair.tokenizer, p["prompt"])) for p in ps] for s, ps in suites.items()}
    first = next(iter(encoded.values()))[0][1]

    log(f"warm-up ({min(cfg.max_tokens, WARMUP_TOKENS)} tokens per mode)")
    warm_pair(pair, log)  # as the server and the playground do after a load: kernels, planner costs
    warm = replace(cfg, max_tokens=min(cfg.max_tokens, WARMUP_TOKENS))
    bench_prompt(pair, first, warm, 1, peer, mlx_lm)

    rows = []
    for suite, prompts in encoded.items():
        for i, (pid, ids) in enumerate(prompts, 1):
            row = {"suite": suite, "id": pid, **bench_prompt(pair, ids, cfg, repeat, peer, mlx_lm)}
            rows.append(row)
            log(f"[{suite} {i}/{len(prompts)}] {pid}: " + _row_line(row))
    doc = {
        "prompts": rows,
        "suites": {s: aggregate([r for r in rows if r["suite"] == s]) for s in encoded},
        "overall": aggregate(rows),
        "profile": None,
        "step_prior": getattr(pair, "step_prior", None),  # a GPU's warm steps (policy.Fallback)
    }
    if with_profile:
        log("profiling one cycle on the first prompt")
        prof = profile(pair, first, B, rows[0]["dflash"]["tau"], profile_reps)
        # the loop's wall times are re-measured right away: on a shared machine the load drifts
        doc["profile"] = _add_overheads(prof, bench_prompt(pair, first, cfg, 1))
        doc["profile"]["prompt"] = {"suite": rows[0]["suite"], "id": rows[0]["id"]}
    return doc


def _row_line(r: dict) -> str:
    line = (f"target {r['target']['decode_tok_s']:.1f} tok/s, dflash {r['dflash']['decode_tok_s']:.1f} tok/s "
            f"({_x(r['speedup'])}), tau {r['dflash']['tau']:.2f}, "
            f"{'identical' if r['identical'] else 'DIFFERENT at ' + str(r['first_divergence'])}")
    if r.get("mlx_lm"):
        m = r["mlx_lm"]
        line += (f"; mlx-lm {m['decode_tok_s']:.1f} tok/s (dflash {_x(m['speedup'])} of it), "
                 f"{'same' if m['identical'] else 'different at ' + str(m['first_divergence'])}")
    if r["peer"]:
        p = r["peer"]
        line += (f"; peer error: {p['error']}" if "error" in p else
                 f"; zlab {p['decode_tok_s']:.1f} tok/s ({_x(p['speedup'])}), tau {p['tau']:.2f}")
    return line


def _x(v: Optional[float]) -> str:
    return "-" if v is None else f"{v:.2f}x"


# ---------------------------------------------------------------- environment


def environment(pair, argv: list[str]) -> dict:
    """Where and on what the numbers were measured."""
    from .backend import device

    dev, backend = mx.default_device(), device()  # the default device recorded, not decided on
    try:
        info = {k: v if isinstance(v, (int, float, str, bool)) else str(v) for k, v in mx.device_info().items()}
    except Exception:
        info = {}
    name = info.get("device_name")
    if backend == "cuda":
        name = _run(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"]) or name
    elif backend == "cpu":
        name = _cpu_name() or name
    quant = next(({"bits": m.bits, "group_size": m.group_size, "scales_dtype": _dtype_name(m.scales.dtype)}
                  for _, m in pair.target.model.named_modules() if hasattr(m, "bits")), None)
    import mlx_lm

    repo = Path(__file__).resolve().parent.parent
    commit = _run(["git", "-C", str(repo), "rev-parse", "HEAD"])
    return {
        "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "command": command("bench") + " " + shlex.join(argv),
        "mlx": mx.__version__,
        "mlx_lm": mlx_lm.__version__,
        "python": platform.python_version(),
        "platform": platform.platform(),
        "backend": backend,
        "default_device": str(dev),
        "device_name": name,
        "device_info": info,
        "cpu_count": os.cpu_count(),
        "cpu_affinity": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None,
        # other processes compete for the cores: the 1/5/15-minute load averages, at start and end
        "load_avg_start": _load_avg(),
        "blas": _blas(pair.backend),
        "attention_rows": pair.backend.attention_rows,
        "mlx_env": {k: v for k, v in os.environ.items() if k.startswith("MLX_")},
        "target_dtype": _dtype_name(pair.target.backbone.norm.weight.dtype),  # as load.py defines it
        "target_quantization": quant,
        "drafter_dtype": _dtype_name(pair.drafter.fc.weight.dtype),
        "git_commit": commit,
        "git_dirty": bool(_run(["git", "-C", str(repo), "status", "--porcelain", "--untracked-files=no"]))
        if commit else None,
    }


def _run(cmd: list[str]) -> Optional[str]:
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip().splitlines()[0] if out.returncode == 0 and out.stdout.strip() else None


def _load_avg() -> Optional[list[float]]:
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:
        return None


def _cpu_name() -> Optional[str]:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or None


def _blas(backend) -> dict:
    """The BLAS behind float32 matmuls: the in-process OpenBLAS backend.setup() loaded (its core
    type, the target's row padding, the CPU vendor), else the libraries MLX brought (Linux: its
    wheel's reference BLAS, or cuBLAS; macOS: Accelerate)."""
    libs = ["Accelerate"] if sys.platform == "darwin" else []
    try:
        paths = {l.split()[-1] for l in Path("/proc/self/maps").read_text().splitlines() if "/" in l}
    except OSError:
        paths = set()
    libs += sorted({Path(f).name for f in paths if re.search(r"blas|lapack|mkl", Path(f).name.lower())
                    and ("mlx" in f.lower() or "cublas" in f or f == backend.blas)})
    return {"openblas": backend.blas, "coretype": backend.coretype, "row_tile": backend.row_tile,
            "row_tiles": cpu_rows.found_tiles(), "cpu": backend.cpu, "libraries": libs}


def _dtype_name(dtype) -> str:
    return str(dtype).removeprefix("mlx.core.")


# ---------------------------------------------------------------- output


def print_table(doc: dict, file=None) -> None:
    """Per-prompt rows, then per-suite and overall medians."""
    file = file or sys.stdout
    peer = any(r["peer"] for r in doc["prompts"])
    base = any(r.get("mlx_lm") for r in doc["prompts"])
    w = max(6, min(12, max(len(name) for name in doc["suites"])))  # the suite column
    head = (f"{'suite':<{w}} {'id':<14} {'ptok':>5} {'tgt t/s':>8} {'dfl t/s':>8} {'speedup':>7} {'tau':>5} "
            f"{'acc':>4} {'same':>4} {'draft/verify/rollback ms':>24}")
    if base:
        head += f" {'mlx t/s':>8} {'vs mlx':>6} {'same':>4}"
    if peer:
        head += f" {'zlab t/s':>8} {'zlab x':>6} {'z tau':>5} {'same':>4}"
    print(head, file=file)
    print("-" * len(head), file=file)
    for r in doc["prompts"]:
        d, t = r["dflash"], r["target"]
        line = (f"{r['suite'][:w]:<{w}} {r['id'][:14]:<14} {r['prompt_tokens']:>5} {t['decode_tok_s']:>8.1f} "
                f"{d['decode_tok_s']:>8.1f} {_x(r['speedup']):>7} {d['tau']:>5.2f} {d['acceptance_rate']:>4.0%} "
                f"{'yes' if r['identical'] else 'NO':>4} "
                f"{d['draft_ms']:>7.1f}/{d['verify_ms']:>7.1f}/{d['rollback_ms']:>6.1f}")
        if base:
            m = r.get("mlx_lm") or {}
            line += (f" {m.get('decode_tok_s', 0.0):>8.1f} {_x(m.get('speedup')):>6} "
                     f"{'yes' if m.get('identical') else 'NO':>4}")
        if peer:
            p = r["peer"] or {}
            line += ("  peer error" if "error" in p else
                     f" {p['decode_tok_s']:>8.1f} {_x(p['speedup']):>6} {p['tau']:>5.2f} "
                     f"{'yes' if p['identical'] else 'NO':>4}")
        print(line, file=file)
    print("-" * len(head), file=file)
    for name, a in [*doc["suites"].items(), ("all", doc["overall"])]:
        line = (f"{name[:w]:<{w}} {'(median)':<14} {'':>5} {a['target_tok_s']:>8.1f} {a['dflash_tok_s']:>8.1f} "
                f"{_x(a['speedup']):>7} {a['tau']:>5.2f} {a['acceptance_rate']:>4.0%} "
                f"{a['identical']:>2}/{a['prompts']:<1} "
                f"{a['draft_ms']:>7.1f}/{a['verify_ms']:>7.1f}/{a['rollback_ms']:>6.1f}")
        if base and a.get("mlx_lm_tok_s") is not None:
            line += (f" {a['mlx_lm_tok_s']:>8.1f} {_x(a['speedup_vs_mlx_lm']):>6} "
                     f"{a.get('mlx_lm_identical', 0):>2}/{a['prompts']}")
        if peer and a.get("peer_tok_s") is not None:
            line += (f" {a['peer_tok_s']:>8.1f} {_x(a['peer_speedup']):>6} {a['peer_tau']:>5.2f} "
                     f"{a.get('peer_identical', 0):>2}/{a['prompts']}")
        if a.get("speedup_min") is not None:  # older JSON files lack it
            line += f"  slowest {_x(a['speedup_min'])}"
        print(line, file=file)
    prof = doc.get("profile")
    if prof:
        v = ", ".join(f"{k}: {ms:.1f}" for k, ms in prof["verify_ms"].items())
        print(f"\nprofile ({prof['prompt_tokens']}-token prompt, ms): target step {prof['target_step_ms']:.2f}; "
              f"verify by k {{{v}}}; draft {prof['draft_ms']:.2f}; rollback {prof['rollback_ms']:.2f}\n"
              f"  model work per cycle {prof['model_cycle_ms']:.1f} = {prof['break_even_tau']:.2f} target steps "
              f"(break-even tau); measured cycle {prof['dflash_cycle_ms']:.1f} -> host overhead "
              f"{_overhead(prof)} per cycle, {prof['target_host_overhead_ms']:.2f} per target step",
              file=file)
        if "graph_build_ms" in prof:  # older JSON files lack these
            b = prof["graph_build_ms"]
            print(f"  graph building on the host (inside the passes): draft {b['draft']:.2f}, verify "
                  f"{b['verify']:.2f} ms; the loop outside the passes: {prof['engine_share']:.1%} of its cycle",
                  file=file)
        _print_ops(prof, file)
        _print_host(doc, prof, file)
    env = doc.get("environment") or {}
    if env:
        q = env["target_quantization"]
        print(f"\n{env['device_name']} ({env['backend']}, {env['default_device']}), MLX {env['mlx']}, "
              f"target {env['target_dtype']}{' q%d' % q['bits'] if q else ''}, "
              f"drafter {env['drafter_dtype']}, {env['cpu_count']} CPUs, BLAS {_blas_line(env)}, "
              f"load avg {env.get('load_avg_start')} -> {env.get('load_avg_end')}",
              file=file)


def _print_ops(prof: dict, file) -> None:
    """The per-op-kind table: ms and share of a barriered step and verify pass (op_profile.py)."""
    ops = prof.get("op_kinds")
    if not ops:
        return
    plain = {**prof["verify_ms"], "1": prof["target_step_ms"]}
    print("  per op kind of a k-token pass, mx.eval barriers between kinds (ms, share):", file=file)
    for k, o in ops.items():
        cells = "  ".join(f"{kind} {ms:.1f} {o['share'][kind]:.0%}" for kind, ms in o["ms"].items())
        print(f"    k={k:>2}: {cells}; barriered {o['barriered_ms']:.1f} vs plain "
              f"{plain.get(k, float('nan')):.1f}", file=file)


def _overhead(prof: dict) -> str:
    if prof["host_overhead_ms"] is not None:
        return f"{prof['host_overhead_ms']:.1f}"
    return (f"n/a (its passes verified {prof['dflash_tokens_per_pass']:.2f} tokens on average, "
            f"not the profiled {prof['block_size']})")


def _print_host(doc: dict, prof: dict, file) -> None:
    """Where the profile ran, and a warning when its costs leave DFlash nothing to gain here."""
    env = doc.get("environment") or {}
    b = env.get("blas") or {}
    if env.get("backend") == "cpu":
        tiles = ", ".join(f"{k} {v}" for k, v in (b.get("row_tiles") or {}).items())
        pad = f", projection rows padded per shape ({tiles})" if tiles else ""
        print(f"  ran on {b.get('cpu') or env.get('device_name')}: BLAS {_blas_line(env)}{pad}", file=file)
    tau = doc["overall"]["tau"]
    if prof["break_even_tau"] >= tau:
        print(f"  warning: a cycle's model work costs {prof['break_even_tau']:.2f} target steps and commits "
              f"{tau:.2f} tokens: DFlash cannot pay on this host at this verify length "
              "(--block-size auto falls back to plain steps; docs/performance.md)", file=file)


def _blas_line(env: dict) -> str:
    b = env["blas"]
    gpu = [lib for lib in b["libraries"] if "cublas" in lib]
    if env["backend"] == "cuda" and gpu:
        return ", ".join(gpu)
    if b.get("openblas"):
        return f"OpenBLAS {b['coretype']} kernels ({b['openblas']})"
    return ", ".join(b["libraries"]) or "?"


def write_plot(doc: dict, path: Path) -> Optional[Path]:
    """Per-prompt speedup and tau as plotly HTML; None (and the JSON is enough) without plotly."""
    try:
        from plotly.subplots import make_subplots
    except ImportError:
        return None
    rows = doc["prompts"]
    x = [f"{r['suite']}/{r['id']}" for r in rows]
    fig = make_subplots(rows=2, cols=1, shared_xaxes=True, vertical_spacing=0.08, subplot_titles=(
        "speedup: decode tok/s / target-only decode tok/s (same process, same prompt ids)",
        "tau: tokens committed per verify cycle"))
    fig.add_bar(x=x, y=[r["speedup"] for r in rows], name="DFlash (ours)", marker_color="#1f77b4",
                text=["" if r["identical"] else "≠" for r in rows], row=1, col=1)
    fig.add_bar(x=x, y=[r["dflash"]["tau"] for r in rows], name="DFlash tau", marker_color="#1f77b4",
                showlegend=False, row=2, col=1)
    if any(r.get("mlx_lm") for r in rows):
        fig.add_bar(x=x, y=[(r.get("mlx_lm") or {}).get("speedup") for r in rows], name="DFlash vs mlx-lm's decoding",
                    marker_color="#9ecae1", row=1, col=1)
    if any(r["peer"] and "speedup" in r["peer"] for r in rows):
        peer = [r["peer"] if r["peer"] and "speedup" in r["peer"] else {} for r in rows]
        fig.add_bar(x=x, y=[p.get("speedup") for p in peer], name="z-lab dflash 0.1.0", marker_color="#ff7f0e",
                    row=1, col=1)
        fig.add_bar(x=x, y=[p.get("tau") for p in peer], name="z-lab tau", marker_color="#ff7f0e",
                    showlegend=False, row=2, col=1)
    fig.add_hline(y=1.0, line_dash="dash", line_color="gray", row=1, col=1)
    env = doc.get("environment") or {}
    s = doc.get("settings") or {}
    fig.update_layout(
        title=(f"DFlash bench: {s.get('model')} | {env.get('device_name')} ({env.get('backend')}) | "
               f"B={s.get('block_size')}, {s.get('max_tokens')} tokens, x{s.get('repeat')} | "
               f"median speedup {_x(doc['overall']['speedup'])}, tau {doc['overall']['tau']:.2f}"),
        barmode="group", height=720, legend=dict(orientation="h", y=-0.15))
    path = Path(path)
    fig.write_html(str(path), include_plotlyjs="cdn")
    return path


# ---------------------------------------------------------------- CLI


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog=command("bench"),
                                description="Target-only vs DFlash on the same prompts, in one process.")
    add_model_args(p)
    p.add_argument("--suite", choices=[*SUITES, "all", LONG_SUITE], default="all",
                   help=f"prompt suite(s) in assets/bench/: all = {', '.join(SUITES)}; {LONG_SUITE} = "
                        "documents, code and chats at ~0.5k, 1k, 2k, 4k and 7k tokens of context")
    p.add_argument("--prompts", nargs="+", metavar="FILE.jsonl",
                   help="benchmark these {id, prompt} JSONL files instead of --suite (rows with a "
                        "'category' form one suite per category)")
    p.add_argument("--prompts-limit", type=int, default=None, metavar="K", help="first K prompts of each suite")
    p.add_argument("--repeat", type=int, default=DEFAULT_REPEAT, help="runs per prompt and mode (medians)")
    p.add_argument("--baseline", choices=[peer_mlx_lm.NAME], default=None,
                   help="also decode with mlx-lm's own stream_generate on the same model (speedup vs it too)")
    p.add_argument("--peer", choices=["zlab"], default=None,
                   help="also run z-lab's reference MLX implementation (PyPI dflash==0.1.0)")
    p.add_argument("--profile", action="store_true", help="add a one-cycle cost breakdown (first prompt)")
    p.add_argument("--profile-reps", type=int, default=PROFILE_REPS, help="timed repetitions per profile item")
    p.add_argument("--target-dtype", choices=TARGET_DTYPES, default="auto",
                   help="target weights: as stored, dequantized to float32, or auto (load.py decides)")
    p.add_argument("--out", metavar="FILE.json", help="write the JSON here and the plot next to it (FILE.html)")
    p.add_argument("--replot", metavar="FILE.json", help="only print the table and write the plot of a saved JSON")
    add_generation_args(p)
    add_distributed_arg(p)
    p.set_defaults(max_tokens=DEFAULT_BENCH_TOKENS)
    return p


def main(argv: Optional[list[str]] = None, load: Optional[Callable] = None) -> int:
    """`python -m dflash bench ...`; `load(model, draft, mode, progress=, target_dtype=)` -> Pair
    (load_pair by default; tests pass their own)."""
    argv = sys.argv[1:] if argv is None else list(argv)
    a = build_parser().parse_args(argv)
    log = lambda m: print(m, file=sys.stderr, flush=True)  # noqa: E731

    if a.replot:
        try:
            doc = read_record(a.replot)
        except ValueError as e:
            print(f"error: {e}", file=sys.stderr)
            return 2
        print_table(doc)
        plot = write_plot(doc, Path(a.replot).with_suffix(".html"))
        log(f"plot: {plot}" if plot else "plotly is not installed: no plot written")
        return 0
    try:
        if a.repeat < 1:
            raise ValueError(f"--repeat must be >= 1 (got {a.repeat})")
        if a.profile_reps < 1:
            raise ValueError(f"--profile-reps must be >= 1 (got {a.profile_reps})")
        if a.prompts_limit is not None and a.prompts_limit < 1:
            raise ValueError(f"--prompts-limit must be >= 1 (got {a.prompts_limit})")
        cfg = config_from_args(a).validate()
        group = distributed.init(a.distributed) if a.distributed else None
        if group is not None:
            if a.peer or a.baseline:
                raise ValueError("--peer and --baseline do not run with --distributed")
            log = distributed.rank0_only(group, log)
        suites = load_suites(list(SUITES) if a.suite == "all" else [a.suite], a.prompts, a.prompts_limit)
        if load is None:
            from .load import load_pair as load
        if group is not None:
            load = distributed.sharded_load(load, group)
        pair = load(a.model, a.draft, "dflash", progress=log, target_dtype=a.target_dtype)
        peer, peer_info = None, None
        if a.peer:
            peer, peer_info = peer_zlab.load_recorded(pair, log)
        doc = {"schema": SCHEMA, "environment": environment(pair, argv)}
        doc["settings"] = {
            "model": pair.model_id, "draft": pair.draft_id, "suites": list(suites), "target_dtype": a.target_dtype,
            "max_tokens": cfg.max_tokens, "block_size": cfg.verify_length(pair.drafter.block_size),
            "adaptive": cfg.adaptive, "tree": "auto" if cfg.tree is None and cfg.wants_tree() else cfg.tree,
            "lookup": cfg.lookup, "repeat": a.repeat, "prompts_limit": a.prompts_limit, "temperature": cfg.temperature,
            "top_p": cfg.top_p, "seed": cfg.seed, "warmup_tokens": min(cfg.max_tokens, WARMUP_TOKENS),
            "speedup": "median dflash decode tok/s / median target-only decode tok/s, per prompt",
            "baseline": a.baseline,
        }
        doc["settings"]["draft_sha256"] = _digest(pair.draft_id)
        doc["peer"] = peer_info
        doc["distributed"] = None if group is None else distributed.describe(
            group, a.distributed, pair, rows=[1, doc["settings"]["block_size"]])
        if group is not None:
            log(f"target sharded over {group.size()} ranks ({a.distributed}): all_sums cost "
                + ", ".join(f"{v:.2f} ms per {k}-token pass" for k, v in doc["distributed"]["pass_comm_ms"].items()))
        doc.update(run(pair, suites, cfg, a.repeat, peer, a.profile, log, a.profile_reps, a.baseline is not None))
        doc["environment"]["load_avg_end"] = _load_avg()
    except (ValueError, distributed.RankMismatch) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2 if isinstance(e, ValueError) else 1
    doc["plot"] = None
    if a.out and (group is None or group.rank() == 0):  # one rank writes
        out = Path(a.out)
        out.parent.mkdir(parents=True, exist_ok=True)
        plot = write_plot(doc, out.with_suffix(".html"))
        doc["plot"] = plot.name if plot else None
        out.write_text(json.dumps(doc, indent=1) + "\n")
        log(f"wrote {out}" + (f" and {plot}" if plot else " (plotly is not installed: no plot)"))
    print_table(doc)
    return 0


def _digest(draft: Optional[str]) -> Optional[str]:
    """sha256 of a local drafter's weights (which checkpoint these numbers belong to)."""
    files = sorted(Path(draft).glob("*.safetensors")) if draft and Path(draft).is_dir() else []
    if not files:
        return None
    h = hashlib.sha256()
    for f in files:
        h.update(f.read_bytes())
    return h.hexdigest()
