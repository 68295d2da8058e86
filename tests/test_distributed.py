"""A target sharded over 2 processes (mlx.launch, ring backend on 127.0.0.1, CPU): DFlash output
== target-only output on the same sharded target; a rank that disagrees stops the run; a server
on rank 0 feeds rank 1 its requests, cancellations and shutdown."""

import http.client
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from dflash import distributed
from dflash.drafter import save_drafter
from tests.tiny import tiny_drafter, tiny_pair, save_tiny_model

ROOT = Path(__file__).resolve().parent.parent
LAUNCH = shutil.which("mlx.launch", path=str(Path(sys.executable).parent))
pytestmark = [pytest.mark.slow, pytest.mark.skipif(LAUNCH is None, reason="mlx.launch is not installed")]


def launch(*args: str, timeout: int = 120) -> subprocess.CompletedProcess:
    cmd = [LAUNCH, "--backend", "ring", "-n", "2", "--python", sys.executable, "--", *args]
    return subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=timeout)


def json_lines(text: str) -> list[dict]:
    return [json.loads(line) for line in text.splitlines() if line.startswith("{")]


def test_sharded_dflash_is_target_only():
    r = launch("-m", "tests.distributed_worker", "llama,qwen3_moe,qwen3_5")
    assert r.returncode == 0, r.stdout + r.stderr
    [doc] = json_lines(r.stdout)  # rank 0 only
    lead = doc.pop("lead")  # rank 0 led a prefill, a refused request and a generation
    assert lead["margin"] > 0 and "exceeds the target's context" in lead["refused"]
    assert "rank 1: request 2: prompt (8 tokens) + max_tokens (600)" in r.stdout
    assert "rank 1: request 3: length after" in r.stdout and "rank 1: followed 3 requests" in r.stdout
    assert lead["ids"] == doc["llama"]["target"]["ids"][:12]  # the same llama, target-only
    for family, out in doc.items():
        ref = out["target"]["ids"][:24]
        runs = [k for k in out if k.startswith(("random_", "oracle_"))]
        assert runs == (["random_chain", "random_tree", "random_auto", "random_adaptive", "oracle_chain",
                         "oracle_tree"] if family != "qwen3_5" else
                        ["random_chain", "random_auto", "random_adaptive", "oracle_chain"])
        assert out["auto_verify"] == {"random_auto": "tree auto" if family != "qwen3_5" else "chain 5",
                                      "random_adaptive": "chain auto"}, family
        for k in runs:
            assert out[k]["ids"] == ref, (family, k)
        assert 1 < out["oracle_chain"]["tau"] < 4, family  # accepted runs and rejections
        eos = out["eos"]
        assert eos["dflash"]["ids"] == eos["target"]["ids"] and eos["dflash"]["finish"] == "stop"
        assert len(eos["dflash"]["ids"]) > 4 and eos["dflash"]["cut"], family  # inside a block
        assert out["max7"]["ids"] == ref[:7] and out["max7"]["cut"], family


def test_rank_disagreement_stops_every_rank():
    r = launch("-m", "tests.distributed_worker", "llama", "--drafter-seed-per-rank")
    assert "exited with code 3" in r.stdout + r.stderr  # mlx.launch itself exits 0
    for rank in (0, 1):
        assert (f"rank {rank}: ranks disagree on the accept decision of cycle 0 (ranks 0 vs ranks 1)"
                in r.stdout), r.stdout + r.stderr


def test_cli_generate_distributed(tmp_path):
    """Rank 0 alone prints; target-only vs DFlash through the CLI: the bench test below."""
    model = save_tiny_model(tmp_path / "model", "qwen3")
    draft = save_drafter(tiny_drafter(), tmp_path / "drafter")
    r = launch("-m", "dflash", "generate", "--model", str(model), "--draft", str(draft), "--json",
               "--prompt", "t5 t9 t17 t23", "--no-chat-template", "--max-tokens", "12", "--distributed")
    assert "exited with code" not in r.stdout + r.stderr, r.stdout + r.stderr
    [summary] = [e for e in json_lines(r.stdout) if e["kind"] == "summary"]
    assert summary["tokens"] == 12 and summary["verify"] == "tree auto"  # the planner, on rank 0's costs
    assert r.stderr.count("target sharded over 2 processes (any)") == 1
    r = launch("-m", "dflash", "generate", "--model", str(model), "--draft", str(draft), "--tree", "4",
               "--prompt", "t5 t9 t17 t23", "--no-chat-template", "--max-tokens", "12", "--distributed")
    assert r.stderr.count("[dflash] 12 tokens") == 1, r.stdout + r.stderr  # text mode: rank 0's summary


def test_refusals(tmp_path):
    pair = tiny_pair("qwen3_next")
    with pytest.raises(ValueError, match="cannot be sharded"):
        distributed.shard_pair(pair, group=None)
    with pytest.raises(ValueError, match="run under mlx.launch"):
        distributed.init("ring")
    three = type("Group", (), {"size": lambda self: 3})()  # refused before any collective
    with pytest.raises(ValueError, match=r"over 3 ranks: attention_heads 4, kv_heads 2 not divisible "
                                         r"by 3; rank counts that divide them all: 2$"):
        distributed.shard_pair(tiny_pair("llama"), three)
    assert distributed._rank_counts_that_split({"attention_heads": 9, "kv_heads": 3}).endswith(": 3")
    assert "cannot be sharded" in distributed._rank_counts_that_split({"heads": 8, "vocab_size": 151937})


def test_bench_distributed_records_the_sharding(tmp_path):
    model = save_tiny_model(tmp_path / "model", "llama")
    draft = save_drafter(tiny_drafter(), tmp_path / "drafter")
    prompts = tmp_path / "p.jsonl"
    prompts.write_text('{"id": "a", "prompt": "t5 t9 t17"}\n')
    out = tmp_path / "bench.json"
    r = launch("-m", "dflash", "bench", "--model", str(model), "--draft", str(draft),
               "--prompts", str(prompts), "--repeat", "1", "--max-tokens", "10", "--block-size", "4",
               "--out", str(out), "--distributed", "ring")
    assert "exited with code" not in r.stdout + r.stderr, r.stdout + r.stderr
    doc = json.loads(out.read_text())
    d = doc["distributed"]
    assert (d["world_size"], d["backend"], d["all_sums_per_pass"]) == (2, "ring", 8)
    assert set(d["pass_comm_ms"]) == {"1", "4"} and all(v > 0 for v in d["pass_comm_ms"].values())
    assert doc["prompts"][0]["identical"]  # target-only == DFlash, both on the sharded target
    assert r.stdout.count("speedup") <= 1  # the table: rank 0 only


def _post(port: int, body: dict) -> dict:
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    c.request("POST", "/v1/completions", json.dumps(body), {"content-type": "application/json"})
    r = c.getresponse()
    assert r.status == 200, r.read()
    return json.loads(r.read())


def _metrics(port: int) -> dict:
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    c.request("GET", "/metrics")
    return json.loads(c.getresponse().read())


def _disconnect_after_first_chunk(port: int, body: dict) -> None:
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    c.request("POST", "/v1/completions", json.dumps({**body, "stream": True}),
              {"content-type": "application/json"})
    r = c.getresponse()
    assert r.status == 200 and r.fp.readline()  # the stream has started
    c.close()


def _until(check, timeout: float, what: str):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        try:
            if (v := check()):
                return v
        except OSError:
            pass
        time.sleep(0.3)
    raise AssertionError(f"timed out waiting for {what}")


def test_serve_on_rank0_feeds_rank1(tmp_path):
    """Rank 0 answers over HTTP; rank 1 runs each request in step (its log lines say so): DFlash
    == target-only on the sharded target, a client that leaves stops both ranks at the same
    cycle, the next request still works, and SIGTERM to rank 0 stops rank 1."""
    model = save_tiny_model(tmp_path / "model", "qwen3")
    draft = save_drafter(tiny_drafter(), tmp_path / "drafter")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    cmd = [LAUNCH, "--backend", "ring", "-n", "2", "--python", sys.executable, "--", "-m", "dflash",
           "serve", "--model", str(model), "--draft", str(draft), "--port", str(port), "--distributed", "ring"]
    proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True)
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(proc.stdout), daemon=True)
    reader.start()
    try:
        rank0 = int(_until(lambda: re.search(r"Started server process \[(\d+)\]", "".join(lines)),
                           120, "the server").group(1))
        _until(lambda: _metrics(port), 60, "/metrics")
        ask = {"prompt": "t5 t9 t17 t23", "max_tokens": 24}
        ref = _post(port, {**ask, "mode": "target"})["choices"][0]["text"]
        assert len(ref.split()) == 24
        assert _post(port, {**ask, "block_size": 4})["choices"][0]["text"] == ref
        assert _post(port, {**ask, "tree": 4})["choices"][0]["text"] == ref
        _disconnect_after_first_chunk(port, {**ask, "max_tokens": 480, "mode": "target"})
        _until(lambda: len(_metrics(port)["requests"]) == 4, 60, "the cancelled request's end")
        assert _post(port, ask)["choices"][0]["text"] == ref  # the ranks are still in step
        m = _metrics(port)
        os.kill(rank0, signal.SIGTERM)
        proc.wait(timeout=60)
    finally:
        if proc.poll() is None:  # a hung rank: end the launch and everything it started
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        reader.join(timeout=10)
    out = "".join(lines)
    assert [r["finish_reason"] for r in m["requests"]] == ["length"] * 3 + ["cancelled", "length"], m
    cancelled = m["requests"][3]
    assert cancelled["tokens"] < 480
    for n, r in enumerate(m["requests"], 1):  # rank 1 ran each request to the same cycle
        assert f"rank 1: request {n}: {r['finish_reason']} after {r['cycles']} cycles" in out, out
    assert "rank 1: stopped by rank 0 after 5 requests" in out, out
    d = m["distributed"]
    assert (d["world_size"], d["backend"], d["all_sums_per_pass"]) == (2, "ring", 8)
    assert all(v > 0 for v in d["pass_comm_ms"].values()) and d["comm_measured"]

