"""The target's MLP computed another way, for A/B runs on a GPU (both modes, so outputs can
still match): MLP=<name> in the environment, then `apply()` before the first pass.

    fused       gate and up as one quantized matmul
    densedown   down as a dense matmul of its dequantized weight, in passes of several rows
    dense       gate, up and down so
    densedown1, dense1   the same in 1-row steps too (one arithmetic for every pass)

`python lab/bench/mlp_variants.py bench ARGS` runs `python -m dflash bench ARGS` with the
variant applied (MLX_ENABLE_TF32=0 alongside keeps dense float32 matmuls in float32), and with
DEVTREE=1 the fixed trees chosen on the device (lab/bench/device_tree.py).
"""
import os
import sys
from pathlib import Path

NAMES = ("fused", "densedown", "densedown1", "dense", "dense1")
CURRENT = {"name": None}  # the variant in use: set it between runs to switch in one process


def apply(name=None) -> bool:
    """Route the target's MLP through `mlp_variant`, starting with `name` (default: $MLP)."""
    CURRENT["name"] = name or os.environ.get("MLP")
    import mlx.core as mx  # here: on a CPU, dflash.backend.setup() must load the BLAS first

    from dflash import target as target_mod
    if not hasattr(target_mod, "_mlp"):  # the hook (mlp, x): code before 2026-12-03 or since 2026-12-05
        if CURRENT["name"]:
            raise SystemExit("MLP variants need dflash.target._mlp")
        return False
    shipped, weights = target_mod._mlp, {}

    def cached(key, make):
        if key not in weights:
            weights[key] = make()
            mx.eval(weights[key])
        return weights[key]

    def mlp_variant(mlp, x):
        name = CURRENT["name"]
        if name not in NAMES:
            return shipped(mlp, x)
        g, u, d = mlp.gate_proj, mlp.up_proj, mlp.down_proj
        if name == "fused":
            w = cached(id(mlp), lambda: [mx.concatenate([getattr(g, n), getattr(u, n)]) for n in ("weight", "scales", "biases")])
            gu = mx.quantized_matmul(x, *w, transpose=True, group_size=g.group_size, bits=g.bits)
            n = gu.shape[-1] // 2
            return d(target_mod.swiglu(gu[..., :n], gu[..., n:]))
        if x.shape[1] == 1 and not name.endswith("1"):
            return shipped(mlp, x)

        def dense(m):
            return cached(id(m), lambda: mx.dequantize(m.weight, m.scales, m.biases, m.group_size, m.bits).astype(x.dtype))
        if name.startswith("densedown"):
            return target_mod.swiglu(g(x), u(x)) @ dense(d).T
        return target_mod.swiglu(x @ dense(g).T, x @ dense(u).T) @ dense(d).T

    target_mod._mlp = mlp_variant
    return CURRENT["name"] in NAMES


if __name__ == "__main__" and sys.argv[1:2] == ["bench"]:
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
    from dflash import backend
    backend.setup()
    print("MLP variant:", os.environ.get("MLP", "as shipped"), "applied" if apply() else "")
    import device_tree  # DEVTREE=1: fixed trees chosen on the device (device_tree.py)
    device_tree.apply()
    device_tree.ON["on"] = bool(os.environ.get("DEVTREE"))
    print("device-side trees:", "on" if device_tree.ON["on"] else "off")
    from dflash import bench
    sys.exit(bench.main(sys.argv[2:]))
