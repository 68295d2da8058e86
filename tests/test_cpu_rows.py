"""cpu_rows: each projection's row tile found by trying, and fused projections."""

import mlx.core as mx
import mlx.nn as nn
import pytest

from dflash.backends import cpu_rows


def test_exact_tile_is_the_smallest_tile_that_keeps_rows_exact():
    """A matmul whose rows depend on the call's row count unless it is a multiple of 4."""
    row_count_dependent = lambda x: x + (x.shape[1] % 4)  # noqa: E731
    assert cpu_rows.exact_tile(row_count_dependent, 8, ("test", 4)) == 4
    assert cpu_rows.exact_tile(lambda x: x * 2, 8, ("test", 1)) == 1


def test_exact_tile_refuses_a_matmul_no_tile_makes_exact():
    with pytest.raises(RuntimeError, match="no row tile"):
        cpu_rows.exact_tile(lambda x: x + x.shape[1], 8, ("test", None))


def test_padded_call_pads_to_its_tile_and_returns_the_real_rows():
    seen = []
    p = cpu_rows.Padded(lambda x: seen.append(x.shape[1]) or x * 3, 8, None, tile=4)
    x = mx.arange(5 * 8, dtype=mx.float32).reshape(1, 5, 8)
    out = p(x)
    assert seen == [8] and out.shape == (1, 5, 8) and mx.array_equal(out, x * 3).item()


@pytest.mark.parametrize("bias", [False, True])
def test_fused_projections_compute_each_layer_and_share_its_weights(bias):
    mx.random.seed(0)
    layers = [nn.Linear(16, n, bias=bias) for n in (16, 8, 8)]
    x = mx.random.normal((1, 3, 16))
    want = [l(x) for l in layers]
    before = [mx.array(l.weight) for l in layers]
    proj = cpu_rows.Projections(layers)
    assert proj.splits == [16, 24] and len(proj.calls) == 1
    for got, w, l, b in zip(proj(x), want, layers, before):
        assert got.shape == w.shape and mx.allclose(got, w, atol=1e-5).item()
        assert mx.array_equal(l.weight, b).item()  # the layer still computes what it did
        assert mx.allclose(l(x), w, atol=1e-5).item()


def test_quantized_or_mixed_projections_stay_separate():
    mx.random.seed(0)
    mixed = [nn.Linear(16, 8, bias=True), nn.Linear(16, 8, bias=False)]
    quantized = [nn.QuantizedLinear.from_linear(nn.Linear(64, 32)) for _ in range(2)]
    for layers, in_dim in ((mixed, 16), (quantized, 64)):
        proj = cpu_rows.Projections(layers)
        assert proj.splits is None and len(proj.calls) == 2
        x = mx.random.normal((1, 2, in_dim))
        for got, l in zip(proj(x), layers):
            assert mx.array_equal(got, l(x)).item()
