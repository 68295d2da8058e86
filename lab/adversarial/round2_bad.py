"""Adversarial round, part A: bad input against a started `python -m dflash serve`."""
import json, sys, time
import requests

B = sys.argv[1] if len(sys.argv) > 1 else "http://127.0.0.1:8765"
C, P = "/v1/chat/completions", "/v1/completions"
U = {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 2}
rows = []


def case(name, path, body, status, param=..., says=None, raw=False, headers=None):
    t = time.perf_counter()
    kw = {"data": body} if raw else {"json": body}
    try:
        r = requests.post(B + path, timeout=300, headers=headers, **kw)
        dt = time.perf_counter() - t
        err = r.json().get("error") if r.headers.get("content-type", "").startswith("application/json") else None
        ok = r.status_code == status
        if ok and status >= 400:
            ok = err is not None and set(err) == {"message", "type", "param", "code"}
            if param is not ...:
                ok = ok and err["param"] == param
            if says:
                ok = ok and says in err["message"]
        note = f"{r.status_code} in {dt:.1f}s: " + (err["message"][:90] if err else r.text[:60].replace("\n", " "))
    except Exception as e:
        ok, note = False, f"{type(e).__name__}: {e}"[:120]
    rows.append((name, ok, note))


case("invalid JSON", C, "{not json", 400, raw=True)
case("body is an array", C, "[1, 2]", 400, raw=True)
case("no messages", C, {}, 400, "messages")
case("empty messages", C, {"messages": []}, 400, "messages")
case("role 'wizard'", C, {"messages": [{"role": "wizard", "content": "x"}]}, 400, "messages[0]")
case("content is a number", C, {"messages": [{"role": "user", "content": 5}]}, 400, "messages[0].content")
case("image content part", C, {"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "x"}}]}]}, 400, "messages[0].content")
case("text content parts", C, {"messages": [{"role": "user", "content": [{"type": "text", "text": "hi"}]}], "max_tokens": 2}, 200)
case("no prompt", P, {}, 400, "prompt")
case("two prompts", P, {"prompt": ["a", "b"]}, 400, "prompt")
case("empty prompt", P, {"prompt": "", "max_tokens": 2}, 400, "prompt")
case("max_tokens 'ten' (grammar)", P, {"prompt": "x", "max_tokens": "ten"}, 400, "max_tokens", "must be an integer")
case("max_tokens -1", P, {"prompt": "x", "max_tokens": -1}, 400, "max_tokens")
case("max_tokens 10**6", P, {"prompt": "x", "max_tokens": 10**6}, 400, "max_tokens")
case("max_tokens true", P, {"prompt": "x", "max_tokens": True}, 400, "max_tokens")
case("temperature 11", P, {"prompt": "x", "temperature": 11}, 400, "temperature")
case("temperature NaN", P, '{"prompt": "x", "temperature": NaN}', 400, "temperature", raw=True)
case("top_p 0", P, {"prompt": "x", "top_p": 0}, 400, "top_p")
case("seed -1", P, {"prompt": "x", "seed": -1}, 400, "seed", "0..2**63-1")
case("seed 2**63", P, {"prompt": "x", "seed": 2**63}, 400, "seed", "0..2**63-1")
case("seed 2**64", P, {"prompt": "x", "seed": 2**64}, 400, "seed", "0..2**63-1")
case("stream 'yes'", P, {"prompt": "x", "stream": "yes"}, 400, "stream")
case("stop ['']", P, {"prompt": "x", "stop": [""]}, 400, "stop")
case("5 stop strings", P, {"prompt": "x", "stop": list("abcde")}, 400, "stop")
case("mode 'fast'", P, {"prompt": "x", "mode": "fast"}, 400, "mode")
case("n 2", P, {"prompt": "x", "n": 2}, 400, "n")
case("model gpt-4", P, {"prompt": "x", "model": "gpt-4"}, 404, "model")
case("model by base name", P, {"prompt": "x", "model": "smollm2-135m-instruct", "max_tokens": 2}, 200)
case("block_size 1", P, {"prompt": "x", "block_size": 1}, 400, "block_size")
case("block_size 99", P, {"prompt": "x", "block_size": 99}, 400, "block_size")
case("block_size 'x'", P, {"prompt": "x", "block_size": "x"}, 400, "block_size")
case("token id -1", P, {"prompt": [-1]}, 400, "prompt")
case("token id 10**9", P, {"prompt": [10**9]}, 400, "prompt")
case("token ids ok", P, {"prompt": [1, 2, 3], "max_tokens": 2}, 200)
case("prompt past the context", P, {"prompt": "word " * 9000, "max_tokens": 8}, 400, None, "exceeds the target's context")
case("prompt past the context, streamed", P, {"prompt": "word " * 9000, "max_tokens": 8, "stream": True}, 400, None)
case("lone surrogate in content", C, '{"messages": [{"role": "user", "content": "hi \\ud800 there"}]}', 400, "messages[0].content", raw=True)
case("lone surrogate in prompt, streamed", P, '{"prompt": "hi \\udc00", "stream": true}', 400, "prompt", raw=True)
case("lone surrogate in stop", P, '{"prompt": "hi", "stop": ["\\ud800"]}', 400, "stop[0]", raw=True)
case("lone surrogate in model", P, '{"prompt": "hi", "model": "\\ud800"}', 400, "model", raw=True)
case("lone surrogate in a key", P, '{"prompt": "hi", "\\ud800": 1}', 400, raw=True)
case("emoji as a surrogate pair", C, '{"messages": [{"role": "user", "content": "hi \\ud83d\\ude00"}], "max_tokens": 2}', 200, raw=True)
case("invalid UTF-8 bytes", P, b'{"prompt": "\xff\xfe"}', 400, raw=True)
case("[ x 100000", P, "[" * 100000, 400, raw=True)
case("nested 100000 in a field", P, '{"prompt": ' + "[" * 100000 + "]" * 100000 + "}", 400, raw=True)
case("nested 40 in metadata", P, '{"prompt": "x", "metadata": ' + "[" * 40 + "]" * 40 + "}", 400, raw=True)
case("3 MB body", P, json.dumps({"prompt": "x" * 3_000_000}), 413, raw=True)
case("12 MB chat body", C, json.dumps({"messages": [{"role": "user", "content": "word " * 2_400_000}]}), 413, raw=True)
case("3 MB body, chunked (no length)", P, (json.dumps({"prompt": "x" * 3_000_000})[i:i + 65536].encode() for i in range(0, 3_000_020, 65536)), 413, raw=True)
for f, v in [("logprobs", True), ("top_logprobs", 3), ("tools", [{"type": "function", "function": {"name": "f"}}]),
             ("tool_choice", "auto"), ("response_format", {"type": "json_object"}), ("functions", [{"name": "f"}]),
             ("logit_bias", {"1": 5}), ("presence_penalty", 1), ("frequency_penalty", 0.5)]:
    case(f"chat {f}={json.dumps(v)[:20]}", C, {**U, f: v}, 400, f)
for f, v in [("echo", True), ("suffix", "x"), ("best_of", 2), ("logprobs", 0)]:
    case(f"completions {f}={json.dumps(v)}", P, {"prompt": "x", f: v}, 400, f)
case("unknown top_k", P, {"prompt": "x", "top_k": 5}, 400, "top_k")
case("typo max_token", P, {"prompt": "x", "max_token": 5}, 400, "max_token")
case("neutral values accepted", C, {**U, "logprobs": False, "n": 1, "presence_penalty": 0, "frequency_penalty": 0.0,
                                    "logit_bias": {}, "tools": [], "tool_choice": "none", "response_format": {"type": "text"}}, 200)
case("ignored fields accepted", C, {**U, "user": "u", "metadata": {"a": "b"}, "store": False,
                                    "stream_options": {"include_usage": True}, "seed": None}, 200)
case("text/plain content type", P, json.dumps({"prompt": "x", "max_tokens": 2}), 200, raw=True, headers={"content-type": "text/plain"})

t = time.perf_counter()
r = requests.post(B + P, json={"prompt": "Once upon a time", "max_tokens": 0}, timeout=60).json()
rows.append(("max_tokens 0", r["choices"][0]["text"] == "" and r["usage"]["completion_tokens"] == 0 and r["dflash"]["cycles"] == 0
             and r["dflash"]["ttft_s"] == 0, f"{time.perf_counter() - t:.2f}s, usage {r['usage']}"))
g = requests.get(B + C, timeout=10)
rows.append(("GET on a POST route", g.status_code == 405 and "error" in g.json(), f"{g.status_code} {g.text[:70]}"))
g = requests.get(B + "/v1/nothing", timeout=10)
rows.append(("unknown route", g.status_code == 404 and "error" in g.json(), f"{g.status_code} {g.text[:70]}"))
m = requests.get(B + "/v1/models", timeout=10).text
rows.append(("/v1/models shows no paths", "/work" not in m and "/root" not in m and "/tmp" not in m, m[:120]))
ok = requests.post(B + P, json={"prompt": "x", "max_tokens": 4}, timeout=300)
rows.append(("next request works", ok.status_code == 200 and ok.json()["usage"]["completion_tokens"] == 4, str(ok.status_code)))

for name, ok, note in rows:
    print(f"| {name} | {'held' if ok else 'FAILED'} | {note.replace('|', '/')} |")
print(f"held {sum(o for _, o, _ in rows)} of {len(rows)}", file=sys.stderr)
