"""`python -m dflash generate` end to end on a tiny model saved to disk."""

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time

import pytest
import requests

from dflash.drafter import save_drafter
from tests.tiny import save_tiny_model, tiny_drafter


@pytest.fixture(scope="module")
def dirs(tmp_path_factory):
    root = tmp_path_factory.mktemp("cli")
    return save_tiny_model(root / "model", "qwen3"), save_drafter(tiny_drafter(), root / "drafter")


def generate(*args):
    return subprocess.run([sys.executable, "-m", "dflash", "generate", *args],
                          capture_output=True, text=True, timeout=120)


def test_json_stream_ends_with_summary(dirs):
    model, drafter = dirs
    common = ["--model", str(model), "--prompt", "t7 t9 t11 t20", "--no-chat-template",
              "--max-tokens", "12", "--json"]
    fast = generate(*common, "--draft", str(drafter), "--block-size", "4")
    plain = generate(*common, "--mode", "target")
    assert fast.returncode == 0 and plain.returncode == 0, fast.stderr + plain.stderr
    lines = [json.loads(l) for l in fast.stdout.splitlines()]
    assert lines[0]["kind"] == "prefill" and {l["kind"] for l in lines[1:-1]} == {"cycle"}
    s = lines[-1]
    assert s["kind"] == "summary" and s["mode"] == "dflash" and s["block_size"] == 4
    assert {"token_ids", "text", "tau", "acceptance_lengths", "decode_tok_s"} <= set(s)
    assert len(s["acceptance_lengths"]) == s["cycles"] == len(lines) - 2
    assert s["token_ids"] == json.loads(plain.stdout.splitlines()[-1])["token_ids"]


def test_text_mode_and_errors(dirs):
    model, drafter = dirs
    ok = generate("--model", str(model), "--draft", str(drafter), "--prompt", "t5 t6", "--max-tokens", "5")
    assert ok.returncode == 0 and "[dflash]" in ok.stderr and "tau" in ok.stderr
    assert ok.stdout.endswith("\n") and "\n\n[dflash]" not in ok.stderr  # the text ends its own line
    bad = generate("--model", str(model), "--draft", str(drafter), "--prompt", "t5", "--block-size", "99")
    assert bad.returncode == 2 and "block_size must be in 2..8" in bad.stderr
    missing = generate("--model", str(model), "--draft", "/nonexistent/drafter", "--prompt", "t5")
    assert missing.returncode == 2 and "neither a directory nor a Hub repo id" in missing.stderr
    unpaired = generate("--model", str(model), "--prompt", "t5")
    assert unpaired.returncode == 2 and "no known DFlash drafter" in unpaired.stderr


@pytest.mark.slow
def test_tree_flag_and_the_hybrid_note(dirs, tmp_path):
    model, drafter = dirs
    common = ["--prompt", "t7 t9 t11 t20", "--no-chat-template", "--max-tokens", "12", "--json"]
    fast = generate("--model", str(model), "--draft", str(drafter), "--tree", "4", *common)
    plain = generate("--model", str(model), "--mode", "target", *common)
    s = json.loads(fast.stdout.splitlines()[-1])
    assert s["verify"] == "tree 4" and s["token_ids"] == json.loads(plain.stdout.splitlines()[-1])["token_ids"]
    assert any(json.loads(l).get("parents") for l in fast.stdout.splitlines()[1:-1])
    hybrid = save_tiny_model(tmp_path / "hybrid", "qwen3_next")
    text = generate("--model", str(hybrid), "--draft", str(drafter), "--tree", "4", "--prompt", "t5 t6 t7",
                    "--no-chat-template",
                    "--max-tokens", "5")
    assert text.returncode == 0, text.stderr
    assert "note: this target verifies the chain" in text.stderr and "verified as chain" in text.stderr
    bad = generate("--model", str(model), "--draft", str(drafter), "--tree", "65", "--prompt", "t5")
    assert bad.returncode == 2 and "tree must be an integer in 0..64" in bad.stderr
    loop = ["--prompt", "t7 t9 t3 " * 4, "--no-chat-template", "--max-tokens", "12", "--json", "--tree", "4"]
    copied = {}
    for flag in ([], ["--no-lookup"]):
        r = generate("--model", str(model), "--draft", str(drafter), *loop, *flag)
        lines = [json.loads(line) for line in r.stdout.splitlines()]
        copied[bool(flag)] = sum(len(c.get("copied", ())) for c in lines[1:-1])
        assert lines[-1]["token_ids"] == json.loads(generate("--model", str(model), "--mode", "target",
                                                              *loop).stdout.splitlines()[-1])["token_ids"]
    assert copied[False] > 0 and copied[True] == 0, copied


def one_error_line(r) -> str:
    """Bad input: exit 2, no traceback, and the error is one line, the last one on stderr."""
    lines = r.stderr.strip().splitlines()
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr[-2000:]
    assert lines[-1].startswith("error: ") and sum(l.startswith("error") for l in lines) == 1, r.stderr[-2000:]
    return lines[-1]


def test_prompt_as_an_argument_or_a_flag_but_once(dirs):
    model, drafter = dirs
    common = ["--model", str(model), "--draft", str(drafter), "--no-chat-template", "--max-tokens", "6", "--json"]
    flag, arg = generate(*common, "--prompt", "t5 t6"), generate(*common, "t5 t6")
    assert flag.returncode == arg.returncode == 0, flag.stderr + arg.stderr
    last = lambda r: json.loads(r.stdout.splitlines()[-1])["token_ids"]  # noqa: E731
    assert last(flag) == last(arg)
    for args in ([], ["t5", "--prompt", "t6"]):
        r = generate("--model", str(model), *args)
        assert r.returncode == 2 and "give the prompt once" in r.stderr


def test_empty_prompt_is_refused_before_loading(dirs):
    model, drafter = dirs
    for prompt in ("", "  \n"):
        r = generate("--model", str(model), "--draft", str(drafter), "--prompt", prompt)
        assert "prompt is empty" in one_error_line(r) and len(r.stderr.strip().splitlines()) == 1


def edited_drafter(drafter, path, **changes):
    """A copy of `drafter` with its config.json changed (None removes a key)."""
    shutil.copytree(drafter, path)
    cfg = json.loads((path / "config.json").read_text())
    for k, v in changes.items():
        cfg.pop(k) if v is None else cfg.__setitem__(k, v)
    (path / "config.json").write_text(json.dumps(cfg))
    return path


def test_unusable_model_or_drafter_exits_2_with_one_line(dirs, tmp_path):
    model, drafter = dirs
    config_only = tmp_path / "config-only"
    config_only.mkdir()
    shutil.copy(model / "config.json", config_only)
    cases = [  # (--model, --draft, what the error says)
        (config_only, drafter, "no *.safetensors"),
        (drafter, drafter, "is a DFlash drafter, not a target"),
        (model, edited_drafter(drafter, tmp_path / "abc", hidden_size="abc"), "hidden_size must be a positive integer"),
        (model, edited_drafter(drafter, tmp_path / "b1", block_size=1), "block_size must be an integer in 2..64"),
    ]
    for m, d, says in cases:
        r = generate("--model", str(m), "--draft", str(d), "--prompt", "t5", "--max-tokens", "2")
        assert says in one_error_line(r), (m, d, r.stderr[-500:])


@pytest.mark.parametrize("changes, says", [
    ({"block_size": 0}, "block_size must be an integer in 2..64"),
    ({"block_size": 65}, "block_size must be an integer in 2..64"),
    ({"block_size": "8"}, "block_size must be an integer in 2..64"),
    ({"hidden_size": 0}, "hidden_size must be a positive integer"),
    ({"num_hidden_layers": 2.5}, "num_hidden_layers must be a positive integer"),
    ({"num_key_value_heads": 3}, "num_attention_heads (4) must be a multiple of num_key_value_heads (3)"),
    ({"rms_norm_eps": "tiny"}, "rms_norm_eps must be a positive number"),
    ({"dflash_config": {"mask_token_id": 63, "target_layer_ids": [0, 4]}}, "target_layer_ids"),
    ({"dflash_config": {"mask_token_id": 64, "target_layer_ids": [0, 2]}}, "mask_token_id"),
    ({"dflash_config": [1]}, "dflash_config must be an object"),
])
def test_drafter_config_is_checked(dirs, tmp_path, changes, says):
    from dflash.drafter import load_drafter

    with pytest.raises(ValueError) as e:
        load_drafter(edited_drafter(dirs[1], tmp_path / "d", **changes))
    assert says in str(e.value) and "\n" not in str(e.value)


def test_serve_ctrl_c_exits_without_a_traceback(dirs):
    model, drafter = dirs
    with socket.socket() as s:  # a free port
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    p = subprocess.Popen([sys.executable, "-m", "dflash", "serve", "--model", str(model), "--draft", str(drafter),
                          "--port", str(port)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        for _ in range(1200):
            try:
                requests.get(f"http://127.0.0.1:{port}/v1/models", timeout=2)
                break
            except requests.ConnectionError:
                time.sleep(0.1)
        p.send_signal(signal.SIGINT)
        out, _ = p.communicate(timeout=60)
    finally:
        p.kill()
    assert p.returncode == 130 and "Traceback" not in out, out[-2000:]


def test_serve_on_a_taken_port_says_so_before_loading(dirs, tmp_path):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        r = subprocess.run([sys.executable, "-m", "dflash", "serve", "--model", str(tmp_path / "never-loaded"),
                            "--port", str(taken.getsockname()[1])], capture_output=True, text=True, timeout=120)
    assert "cannot listen on 127.0.0.1" in one_error_line(r) and len(r.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize("verb, args, says", [
    ("generate", ["--bogus", "hi"], "unrecognized arguments: --bogus"),
    ("generate", ["--max-tokens", "ten", "hi"], "argument --max-tokens: invalid int value: 'ten'"),
    ("serve", ["--port", "99999"], "invalid port (0..65535) value: '99999'"),
    ("serve", ["--port", "-1"], "invalid port (0..65535) value: '-1'"),
    ("serve", ["--host", "256.1.1.1", "--model", "/never/loaded"], "cannot listen on 256.1.1.1:8000"),
])
def test_bad_flags_are_one_line(verb, args, says):
    """argparse's usage block, an OverflowError traceback, or a load first and uvicorn's lines, before."""
    r = subprocess.run([sys.executable, "-m", "dflash", verb, *args], capture_output=True, text=True, timeout=120)
    assert says in one_error_line(r) and len(r.stderr.strip().splitlines()) == 1, r.stderr


@pytest.mark.parametrize("argv0, usage", [("/venv/bin/dflash", "dflash bench"),
                                           ("/repo/dflash/__main__.py", "python -m dflash bench")])
def test_usage_names_the_command_the_user_ran(monkeypatch, capsys, argv0, usage):
    """The installed `dflash` script is not `python -m dflash` (issue 55, item 8)."""
    from dflash.bench import main

    monkeypatch.setattr(sys, "argv", [argv0, "bench", "--repeat", "x"])
    with pytest.raises(SystemExit):
        main(["--repeat", "x"])
    assert f"usage: {usage} " in capsys.readouterr().err


def test_undecodable_prompt_bytes_are_one_line(dirs):
    model, drafter = dirs
    r = subprocess.run([sys.executable, "-m", "dflash", "generate", "--model", str(model), "--draft", str(drafter),
                        b"hi \xff\xfe"], capture_output=True, text=True, timeout=120)
    assert "the prompt is not valid UTF-8 text" in one_error_line(r)


def test_a_tiny_temperature_is_the_greedy_answer(dirs):
    """1e-300 is 0 in float32: the sampler divided by it and answered nothing."""
    model, drafter = dirs
    common = ["--model", str(model), "--draft", str(drafter), "--prompt", "t7 t9", "--no-chat-template",
              "--max-tokens", "12", "--json"]
    runs = [generate(*common, *extra) for extra in ([], ["--temperature", "1e-300"], ["--top-p", "1e-300",
                                                                                      "--temperature", "1"])]
    greedy, *tiny = [json.loads(r.stdout.splitlines()[-1]) for r in runs]
    assert len(greedy["token_ids"]) == 12 and all(t["token_ids"] == greedy["token_ids"] for t in tiny)


def interrupted(cmd: list, stream: str) -> str:
    """Run cmd, send Ctrl-C once it has written to `stream` ("stdout" or "stderr"); all it wrote."""
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        first = os.read(getattr(p, stream).fileno(), 1)
        p.send_signal(signal.SIGINT)
        try:
            out, err = p.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            p.kill()
            out, err = p.communicate()
            raise AssertionError(f"still running 60 s after Ctrl-C; it wrote {first + out[-500:]!r} / {err[-1500:]!r}")
    finally:
        p.kill()
    assert p.returncode == 130, (p.returncode, err[-2000:])
    return (first + out + err).decode(errors="replace")


def test_ctrl_c_during_generate_or_while_serve_loads_exits_130_quietly():
    """The embedded pair: a load and a generation long enough to interrupt."""
    gen = interrupted([sys.executable, "-m", "dflash", "generate", "--mode", "target", "--no-chat-template",
                       "--max-tokens", "2000", "1, 2, 3, 4, 5,"], "stdout")  # its first token
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    serve = interrupted([sys.executable, "-m", "dflash", "serve", "--port", str(port)], "stderr")  # loading...
    for out in (gen, serve):
        assert "Traceback" not in out and "terminate" not in out, out[-2000:]
    assert "Uvicorn running" not in serve and "Application startup" not in serve  # it was loading
