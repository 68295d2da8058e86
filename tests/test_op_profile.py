"""The per-op-kind profile (dflash/op_profile.py): every kind timed, the pass it times computes
the same logits as a plain one, and the target is left as it was."""

import mlx.core as mx
import pytest

from dflash import op_profile
from dflash import target as target_module
from dflash.target import Target
from tests.tiny import tiny_model


@pytest.mark.parametrize("family, tied", [("llama", False), ("qwen3", True)])
def test_op_kinds_time_every_kind_and_leave_the_target_unchanged(family, tied):
    t = Target(tiny_model(family, tied=tied), family)
    if t._attend is None:
        pytest.skip("attention by mlx-lm's own layer on this device")
    cache = t.make_cache()
    ids = mx.array([[5, 9, 12, 7, 30, 31]])
    t.forward(ids, cache)
    seen = []

    def forward(k):
        logits, feats, _ = t.forward(mx.array([[8] * k]), cache)
        mx.eval(logits)
        seen.append(logits)
        return k, feats, {}

    def drop(out):
        t.rollback(cache, {}, out[0], 0)

    plain = forward(3) and seen.pop()
    drop((3,))
    layer = t.layers[0]
    owners = (t, t.backbone, layer, layer.self_attn, layer.mlp, cache[0], target_module)
    before = [dict(vars(o)) for o in owners]
    o = op_profile.op_kinds(t, cache, forward, drop, 3, reps=2)
    assert set(o["ms"]) == set(op_profile.KINDS)
    for kind in ("norm", "matmul", "rope", "attention", "kv_cache", "logits"):
        assert o["ms"][kind] > 0, kind
    assert o["barriered_ms"] == pytest.approx(sum(o["ms"].values()))
    assert sum(o["share"].values()) == pytest.approx(1.0)
    assert all(mx.array_equal(s, plain).item() for s in seen)  # barriers change no bit
    assert cache[0].offset == ids.shape[1]
    assert [dict(vars(o)) for o in owners] == before
    assert mx.array_equal(t.forward(mx.array([[8] * 3]), cache)[0], plain).item()
