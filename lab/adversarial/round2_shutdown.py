"""Adversarial round, part C: SIGTERM / Ctrl-C / kill -9 against `python -m dflash serve`."""
import json, signal, socket, subprocess, sys, time
from pathlib import Path

import requests

REPO = Path(__file__).resolve().parents[2]

PORT = 8766
B = f"http://127.0.0.1:{PORT}"
P = "/v1/completions"


def start():
    p = subprocess.Popen([sys.executable, "-m", "dflash", "serve", "--port", str(PORT)],
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=REPO)
    for _ in range(3000):
        try:
            requests.get(B + "/v1/models", timeout=2)
            return p
        except requests.ConnectionError:
            time.sleep(0.1)
    raise RuntimeError("server did not start")


def row(name, ok, note):
    print(f"| {name} | {'held' if ok else 'FAILED'} | {note} |", flush=True)


def answer_of(s):
    s.settimeout(120)
    data = b""
    try:
        while chunk := s.recv(65536):
            data += chunk
    except OSError as e:
        return f"{type(e).__name__}"
    head, _, body = data.partition(b"\r\n\r\n")
    return (head.split(b"\r\n")[0].decode() + " " + body[:160].decode(errors="replace")) if data else "closed, no answer"


def raw_post(body):
    s = socket.create_connection(("127.0.0.1", PORT))
    data = json.dumps(body).encode()
    s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s" % (len(data), data))
    return s


for sig in (signal.SIGTERM, signal.SIGINT):
    p = start()
    running = raw_post({"prompt": "Write a long essay about the sea.", "max_tokens": 400})
    time.sleep(4)
    queued = raw_post({"prompt": "Write a long essay about rivers.", "max_tokens": 400, "stream": True})
    time.sleep(1)
    t = time.perf_counter()
    p.send_signal(sig)
    a, b = answer_of(running), answer_of(queued)
    try:
        rc = p.wait(60)
    except subprocess.TimeoutExpired:
        rc = None
        p.kill()
    dt = time.perf_counter() - t
    row(f"{sig.name} during the first generation (in the engine's cost probe), one queued: exits promptly",
        rc == {signal.SIGTERM: -15, signal.SIGINT: 130}[sig] and dt < 10 and "503" in a and "shutting_down" in b,
        f"exit {rc} after {dt:.1f}s; running: {a[:110]!r}; queued stream: {b[-120:]!r}")

p = start()
s = raw_post({"prompt": "Write a long essay about the sea.", "max_tokens": 400})
time.sleep(3)
p.kill()
p.wait()
p = start()
r = requests.post(B + P, json={"prompt": "x", "max_tokens": 4}, timeout=300)
row("kill -9 mid-generation, restart: serves", r.status_code == 200, f"{r.status_code}, usage {r.json().get('usage')}")
other = subprocess.run([sys.executable, "-m", "dflash", "serve", "--port", str(PORT)], capture_output=True, text=True, cwd=REPO, timeout=600)
lines = other.stderr.strip().splitlines()
row("serve on a port in use", other.returncode == 2 and len(lines) == 1 and "Traceback" not in other.stderr,
    f"exit {other.returncode}; last line: {lines[-1][:120] if lines else ''}")
p.send_signal(signal.SIGTERM)
p.wait(60)
