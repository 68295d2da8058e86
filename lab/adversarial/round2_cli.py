"""Adversarial round, part D: the CLI and loading, as a new user types them."""
import json, shutil, subprocess, sys, tempfile, time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))
from tests.tiny import save_tiny_model, tiny_drafter
from dflash.drafter import save_drafter

root = Path(tempfile.mkdtemp(prefix="dflash-adv-"))
model = save_tiny_model(root / "model", "qwen3")
drafter = save_drafter(tiny_drafter(), root / "drafter")
EMB = str(REPO / "assets" / "smollm2-135m-instruct-dflash")


def edited(name, **changes):
    d = root / name
    shutil.copytree(drafter, d)
    cfg = json.loads((d / "config.json").read_text())
    cfg.update(changes)
    (d / "config.json").write_text(json.dumps(cfg))
    return d


(root / "config-only").mkdir()
shutil.copy(model / "config.json", root / "config-only")
trunc = root / "truncated"
shutil.copytree(drafter, trunc)
w = (trunc / "model.safetensors").read_bytes()
(trunc / "model.safetensors").write_bytes(w[: len(w) // 2])
badjson = root / "badjson"
shutil.copytree(model, badjson)
(badjson / "config.json").write_text("{not json")
notok = root / "no-tokenizer"
shutil.copytree(model, notok)
(notok / "tokenizer.json").unlink()

M, D = ["--model", str(model)], ["--draft", str(drafter)]
cases = [
    ("generate --prompt ''", ["generate", *M, *D, "--prompt", ""], 2),
    ("generate --prompt '   '", ["generate", *M, *D, "--prompt", "   "], 2),
    ("--model dir with only config.json", ["generate", "--model", str(root / "config-only"), *D, "--prompt", "t5"], 2),
    ("--model = the embedded drafter", ["generate", "--model", EMB, "--draft", EMB, "--prompt", "hi"], 2),
    ("--model = the tiny drafter", ["generate", "--model", str(drafter), *D, "--prompt", "t5"], 2),
    ("drafter hidden_size 'abc'", ["generate", *M, "--draft", str(edited("abc", hidden_size="abc")), "--prompt", "t5"], 2),
    ("drafter block_size 1", ["generate", *M, "--draft", str(edited("b1", block_size=1)), "--prompt", "t5"], 2),
    ("drafter block_size 0", ["generate", *M, "--draft", str(edited("b0", block_size=0)), "--prompt", "t5"], 2),
    ("drafter block_size 65", ["generate", *M, "--draft", str(edited("b65", block_size=65)), "--prompt", "t5"], 2),
    ("drafter vocab 100 (target 64)", ["generate", *M, "--draft", str(edited("v100", vocab_size=100)), "--prompt", "t5"], 2),
    ("drafter num_target_layers 'x'", ["generate", *M, "--draft", str(edited("ntl", num_target_layers="x")), "--prompt", "t5"], 2),
    ("drafter weights truncated", ["generate", *M, "--draft", str(trunc), "--prompt", "t5"], 2),
    ("target config.json not JSON", ["generate", "--model", str(badjson), *D, "--prompt", "t5"], 2),
    ("target without tokenizer.json", ["generate", "--model", str(notok), *D, "--prompt", "t5"], 2),
    ("--model /nonexistent", ["generate", "--model", "/nonexistent/m", *D, "--prompt", "t5"], 2),
    ("--draft /nonexistent", ["generate", *M, "--draft", "/nonexistent/d", "--prompt", "t5"], 2),
    ("unpaired target, no --draft", ["generate", *M, "--prompt", "t5"], 2),
    ("--block-size 99", ["generate", *M, *D, "--prompt", "t5", "--block-size", "99"], 2),
    ("--block-size abc (argparse)", ["generate", *M, *D, "--prompt", "t5", "--block-size", "abc"], 2),
    ("--max-tokens -1", ["generate", *M, *D, "--prompt", "t5", "--max-tokens", "-1"], 2),
    ("--temperature nan", ["generate", *M, *D, "--prompt", "t5", "--temperature", "nan"], 2),
    ("--seed 2**63", ["generate", *M, *D, "--prompt", "t5", "--seed", str(2**63)], 2),
    ("prompt past the context (tiny: 512)", ["generate", *M, *D, "--prompt", "t5 " * 600, "--no-chat-template"], 2),
    ("Hub pair offline", ["generate", "--model", "mlx-community/Qwen3-8B-4bit", "--prompt", "hi"], 2),
    ("serve --model /nonexistent", ["serve", "--model", "/nonexistent/m", "--port", "8799"], 2),
    ("verb missing", [], 2),
    ("unknown verb", ["fly"], 2),
    ("embedded pair generates", ["generate", "--prompt", "Name a color.", "--max-tokens", "8"], 0),
]
for name, args, want in cases:
    t = time.perf_counter()
    try:
        r = subprocess.run([sys.executable, "-m", "dflash", *args], capture_output=True, text=True, timeout=300, cwd=REPO)
        rc, err = r.returncode, r.stderr
    except subprocess.TimeoutExpired:
        rc, err = None, "timed out after 300 s"
    lines = err.strip().splitlines()
    errs = [l for l in lines if l.startswith("error")]
    if want == 2:
        ok = rc == 2 and "Traceback" not in err and (len(errs) == 1 and lines[-1] == errs[0] or "usage:" in err)
        note = lines[-1][:150] if lines else ""
    else:
        ok = rc == 0
        note = lines[-1][:150] if lines else ""
    print(f"| {name} | {'held' if ok else 'FAILED'} | exit {rc}, {len(lines)} stderr lines, {time.perf_counter() - t:.0f}s: {note.replace('|', '/')} |", flush=True)
