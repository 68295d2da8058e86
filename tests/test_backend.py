"""The backend is one explicit choice (dflash/backend.py): importing dflash does nothing, the
kernels follow the CPU, and Intel's kernels (SkylakeX, rows padded) keep a token's logits
bitwise equal alone and inside a block or tree."""

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from dflash import backend
from dflash.backends import blas

ROOT = Path(__file__).resolve().parents[1]


def _python(code: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code, *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=900)


def test_importing_dflash_loads_no_library_and_sets_no_variable():
    code = """if True:
        import os, sys
        env = dict(os.environ)
        import dflash, dflash.backend, dflash.backends.blas, dflash.cli, dflash.backends.cuda_env
        print("mlx.core" in sys.modules, dict(os.environ) == env)
        from dflash import engine, load  # these import mlx (and mlx-lm sets its own variables)
        ours = {k: v for k, v in os.environ.items() if k.startswith(("OPENBLAS", "MLX_"))}
        print(ours == {k: v for k, v in env.items() if k.startswith(("OPENBLAS", "MLX_"))},
              "openblas-pthread" in open("/proc/self/maps").read())
    """
    out = _python(code)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["False", "True", "True", "False"]


DEVICE_CHECK = re.compile(r"default_device\(\)\s*[!=]=|\.type\s*[!=]=\s*mx\.|cuda\.is_available|"
                          r"metal\.is_available|mlx_is_cuda_build\(")


def test_every_device_check_is_in_backend():
    """Where MLX computes is asked in one place (backend.device / on_cpu / on_cuda; the host code
    in backends/), not decided again module by module (issue 56)."""
    files = [*(ROOT / "dflash").rglob("*.py"), ROOT / "app.py"]
    found = [f"{p.relative_to(ROOT)}:{i}" for p in files if "backends" not in p.parts and p.name != "backend.py"
             for i, line in enumerate(p.read_text().splitlines(), 1) if DEVICE_CHECK.search(line)]
    assert not found, found
    assert backend.device() == "cpu" and backend.on_cpu() and not backend.on_cuda()  # this test host


def test_kernels_follow_the_cpu():
    avx512 = blas.AVX512 | {"avx", "avx2", "fma"}
    assert blas.choose("GenuineIntel", avx512) == "SkylakeX"
    assert blas.choose("AuthenticAMD", avx512) == "Sandybridge"  # little penalty, padding costs more
    assert blas.choose("GenuineIntel", {"avx", "avx2", "fma"}) == "Sandybridge"
    assert blas.choose("GenuineIntel", {"sse4_2"}) is None
    assert blas.KERNELS == {"Sandybridge": 0, "SkylakeX": blas.ROW_TILE}


def test_setup_is_one_choice_per_process():
    first = backend.setup()  # the conftest's
    assert backend.setup("reference") is first and backend.active() is first
    with pytest.raises(ValueError, match="cpu_blas"):
        backend.setup("fastest")


def test_gpu_attention_rows_only_on_cuda_builds(monkeypatch):
    monkeypatch.setattr(backend, "_active", None)
    monkeypatch.setattr(backend.cuda_env, "mlx_is_cuda_build", lambda: True)
    assert backend.active().attention_rows == backend.CUDA_VERIFY_ROWS == 3
    monkeypatch.setattr(backend.cuda_env, "mlx_is_cuda_build", lambda: False)
    assert backend.active().attention_rows == 0  # Metal: not measured, mlx-lm's one call


# A 16-token block and a 12-node tree after a 450-token context (past the 384-key point where
# BLAS kernels split a reduction), each row against its tokens fed one by one.
ROWS_EXACT = """if True:
    import json, sys
    from dflash import backend
    b = backend.setup(sys.argv[1] if len(sys.argv) > 1 else "SkylakeX")
    import mlx.core as mx
    import numpy as np
    from mlx_lm.models.cache import trim_prompt_cache
    from dflash import tree
    from dflash.load import load_target
    from dflash.registry import BUILTIN_TARGET
    from dflash.target import Target

    lm, tok, model_type = load_target(BUILTIN_TARGET, progress=lambda m: None)
    t = Target(lm, model_type, row_tile=b.row_tile)
    ids = tok.encode("The tide mill stood at the mouth of the river for three hundred years. " * 40)[:450]
    cand = tok.encode(" It ground corn for the village and timber for the boats, and it never stopped.")
    cache = t.make_cache()
    t.forward(mx.array([ids]), cache)
    together = t.forward(mx.array([cand[:16]]), cache)[0]
    trim_prompt_cache(cache, 16)
    differ = {"block": 0, "tree": 0}
    for i, x in enumerate(cand[:16]):
        differ["block"] += not mx.array_equal(t.forward(mx.array([[x]]), cache)[0][0, -1], together[0, i]).item()
    trim_prompt_cache(cache, 17)
    tr = tree.build(ids[-1], np.array(cand[:12]).reshape(4, 3), -np.arange(12.0).reshape(4, 3) / 4, 11)
    together = t.forward(mx.array([tr.tokens]), cache, tree=tree.Layout.of(tr))[0]
    for r in range(len(tr)):
        trim_prompt_cache(cache, cache[0].offset - 449)
        path, n = [], r
        while n >= 0:
            path.append(tr.tokens[n])
            n = tr.parents[n]
        for x in reversed(path):
            alone = t.forward(mx.array([[x]]), cache)[0][0, -1]
        differ["tree"] += not mx.array_equal(alone, together[0, r]).item()
    print(json.dumps({"coretype": b.coretype, "row_tile": b.row_tile, "rows_differ": differ}))
"""


@pytest.mark.slow
@pytest.mark.skipif(not (blas.AVX512 <= blas.cpu_flags() and any(Path(p).exists() for p in blas.CANDIDATES)),
                    reason="needs an AVX-512 CPU and libopenblas0-pthread")
def test_skylakex_kernels_with_padded_rows_keep_rows_exact():
    """Intel's default (blas.choose), run here in its own process on any AVX-512 CPU: the same
    kernels compute the same bits on either vendor."""
    out = _python(ROWS_EXACT, "SkylakeX")
    assert out.returncode == 0, out.stderr
    res = json.loads(out.stdout.splitlines()[-1])
    assert res["coretype"] == "SkylakeX" and res["row_tile"] == blas.ROW_TILE
    assert res["rows_differ"] == {"block": 0, "tree": 0}
