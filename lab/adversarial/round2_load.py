"""Adversarial round, part B: concurrency, disconnects, the worker's queue, metrics."""
import json, socket, sys, threading, time
from concurrent.futures import ThreadPoolExecutor
import requests

B = sys.argv[1] if len(sys.argv) > 1 else "http://127.0.0.1:8765"
C, P = "/v1/chat/completions", "/v1/completions"
HOST, PORT = B.removeprefix("http://").split(":")
rows, usage_sum = [], [0]


def post(path, **body):
    r = requests.post(B + path, json=body, timeout=900)
    if r.status_code == 200:
        usage_sum[0] += r.json()["usage"]["completion_tokens"]
    return r


def sse(path, **body):
    with requests.post(B + path, json={**body, "stream": True}, stream=True, timeout=900) as r:
        chunks = [json.loads(l[6:]) for l in r.iter_lines() if l.startswith(b"data: ") and l != b"data: [DONE]"]
    usage_sum[0] += chunks[-1]["usage"]["completion_tokens"]
    return chunks


def text(r, chat):
    c = r.json()["choices"][0]
    return c["message"]["content"] if chat else c["text"]


def stext(chunks, chat):
    return "".join(c["choices"][0]["delta"].get("content", "") if chat else c["choices"][0]["text"] for c in chunks)


def metrics():
    return requests.get(B + "/metrics", timeout=30).json()


def row(name, ok, note):
    rows.append((name, bool(ok), note))
    print(f"| {name} | {'held' if ok else 'FAILED'} | {note} |", flush=True)


def raw_post(body: dict, path=P):
    s = socket.create_connection((HOST, int(PORT)))
    data = json.dumps(body).encode()
    s.sendall(b"POST %s HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s"
              % (path.encode(), len(data), data))
    return s


def new_records(before, n=1, wait=900):
    for _ in range(wait * 10):
        m = metrics()
        k = m["totals"]["requests"] - before
        if k >= n:
            return m["requests"][len(m["requests"]) - k:]
        time.sleep(0.1)
    return []


m0 = metrics()["totals"]
# 1. the same request alone, streamed, target-only, and under concurrency
prompts = ["Name a color.", "What is 2+2?", "Say hello in French.", "Name a planet.",
           "Write one word.", "Count to three.", "Name an animal.", "What is water?"]
alone = {p: text(post(C, messages=[{"role": "user", "content": p}], max_tokens=16), True) for p in prompts}
row("8 prompts alone all differ", len(set(alone.values())) == 8, "")
tgt = {p: text(post(C, messages=[{"role": "user", "content": p}], max_tokens=16, mode="target"), True) for p in prompts[:4]}
row("greedy DFlash == target-only (4 prompts)", all(tgt[p] == alone[p] for p in tgt), "")


def run(i):
    p = prompts[i % 8]
    if i % 2:
        return p, stext(sse(C, messages=[{"role": "user", "content": p}], max_tokens=16), True)
    return p, text(post(C, messages=[{"role": "user", "content": p}], max_tokens=16), True)


for n in (8, 20):
    t = time.perf_counter()
    with ThreadPoolExecutor(n) as pool:
        got = list(pool.map(run, range(n)))
    row(f"{n} concurrent (half streamed) == alone", all(alone[p] == s for p, s in got),
        f"{sum(alone[p] == s for p, s in got)}/{n} equal, {time.perf_counter() - t:.0f}s")

# 2. stop strings: usage == /metrics
full = text(post(P, prompt="The alphabet: A B C D E F G", max_tokens=24), False)
stop = full[8:12]
r = post(P, prompt="The alphabet: A B C D E F G", max_tokens=24, stop=[stop])
rec = next(x for x in metrics()["requests"] if x["id"] == r.json()["id"])
row("stop string: /metrics tokens == usage", rec["tokens"] == r.json()["usage"]["completion_tokens"],
    f"usage {r.json()['usage']['completion_tokens']}, metrics {rec['tokens']}, engine {r.json()['dflash']['tokens']}, text {text(r, False)!r}")

# 3. sampling: same seed twice, streamed == whole
a = post(C, messages=[{"role": "user", "content": "Tell a story."}], max_tokens=16, temperature=0.9, seed=7)
b = sse(C, messages=[{"role": "user", "content": "Tell a story."}], max_tokens=16, temperature=0.9, seed=7)
row("sampled, seed 7: whole == streamed", text(a, True) == stext(b, True), repr(text(a, True))[:60])

# 4. a non-streaming client that leaves after 3 s (max_tokens 300)
before = metrics()["totals"]["requests"]
s = raw_post({"prompt": "Write a long essay about the sea.", "max_tokens": 300})
time.sleep(3)
s.close()
t = time.perf_counter()
r4 = post(P, prompt="x", max_tokens=4)
wait = time.perf_counter() - t
recs = new_records(before, 2)
left = recs[0] if recs else {}
row("non-streaming client leaves after 3 s: cancelled", left.get("finish_reason") == "cancelled",
    f"its record: {left.get('finish_reason')}, {left.get('tokens')} tokens; the next 4-token request took {wait:.1f}s")

# 5. a streaming client that leaves
with requests.post(B + P, json={"prompt": "Write a long essay about trees.", "max_tokens": 300, "stream": True},
                   stream=True, timeout=60) as r:
    rid = json.loads(next(l for l in r.iter_lines() if l.startswith(b"data: "))[6:])["id"]
time.sleep(3)
rec = next((x for x in metrics()["requests"] if x["id"] == rid), {})
row("streaming client leaves: cancelled", rec.get("finish_reason") == "cancelled", f"{rec.get('tokens')} tokens")

# 6. while one generation holds the worker: refusals, max_tokens 0, and a queued client that leaves
before = metrics()["totals"]["requests"]
busy = raw_post({"prompt": "Write a long essay about mountains.", "max_tokens": 120})
time.sleep(2)
queued = raw_post({"prompt": "Write a long essay about rivers.", "max_tokens": 120})
time.sleep(1)
queued.close()  # leaves while waiting in line
for name, body, status in [("prompt past the context", {"prompt": "word " * 9000}, 400),
                           ("block_size 99", {"prompt": "x", "block_size": 99}, 400),
                           ("token id 10**9", {"prompt": [10**9]}, 400),
                           ("12 MB body", {"prompt": "w" * 12_000_000}, 413),
                           ("max_tokens 0", {"prompt": "x", "max_tokens": 0}, 200)]:
    t = time.perf_counter()
    rr = requests.post(B + P, json=body, timeout=900)
    dt = time.perf_counter() - t
    row(f"while busy: {name} answered at once", rr.status_code == status and dt < 2, f"{rr.status_code} in {dt:.2f}s")
busy.settimeout(900)
reply = b""
while b"\r\n\r\n" not in reply or not reply.rstrip().endswith(b"}"):
    chunk = busy.recv(65536)
    if not chunk:
        break
    reply += chunk
busy.close()
usage_sum[0] += json.loads(reply.split(b"\r\n\r\n", 1)[1])["usage"]["completion_tokens"]
time.sleep(1)
recs = new_records(before, 1)
m = metrics()
row("queued client that left never ran", m["totals"]["requests"] - before == 2,  # busy + max_tokens 0
    f"{m['totals']['requests'] - before} new records: {[(x['finish_reason'], x['tokens']) for x in m['requests'][-(m['totals']['requests'] - before):]]}")

# 7. connections that stall or drop mid-body
stall = socket.create_connection((HOST, int(PORT)))
stall.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n{\"prompt\": ")
drop = socket.create_connection((HOST, int(PORT)))
drop.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n{\"pro")
drop.close()
t = time.perf_counter()
r7 = post(P, prompt="x", max_tokens=4)
row("a stalled and a dropped upload do not block others", r7.status_code == 200, f"{time.perf_counter() - t:.1f}s")
stall.close()

# 8. /metrics counted exactly (cancelled requests count their tokens too)
m = metrics()
cancelled = sum(x["tokens"] for x in m["requests"] if x["finish_reason"] == "cancelled")
row("/metrics totals == usage of every answer (+ cancelled)", m["totals"]["tokens"] - m0["tokens"] == usage_sum[0] + cancelled,
    f"metrics {m['totals']['tokens'] - m0['tokens']}, usage {usage_sum[0]} + cancelled {cancelled}; errors {m['totals']['errors'] - m0['errors']}")

print(f"held {sum(o for _, o, _ in rows)} of {len(rows)}", file=sys.stderr)
