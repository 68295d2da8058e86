"""Attention on MLX's CUDA backend: a tree pass's (a kernel; past its range a kernel split over
the cache's whole buffer) and a verify block's in calls of a few rows (`row_chunks`).

MLX's fused attention on CUDA takes one query row and no mask array; a tree pass has R rows,
each seeing the committed keys plus its own ancestors, so mx.fast's call falls back to unfused
matmul + mask + softmax + matmul, several launches a layer. This kernel does a layer's tree
attention in one launch: a block per (row, query head), its warps splitting the keys, each
warp an online softmax, merged through shared memory. Rows are not bitwise equal to the path fed
alone (the CPU's, cpu_attention.py, is the bitwise one); `available()` checks the kernel against
mx.fast's masked attention once per process before any tree uses it.
"""

from __future__ import annotations

import warnings
from functools import lru_cache, partial

import mlx.core as mx
import numpy as np

from ..backend import on_cuda
from ..layout import Layout

MAX_CHUNKED_ROWS = 64  # a longer pass is a prefill: one call (a 512-token chunk would be 171)
WARPS = 4  # warps per (row, head) block, splitting the keys
# Above this many scores (rows x keys) mx.fast's masked call is faster than the kernel: one block
# per (row, head) walks every committed key, and past ~1k keys at 65 rows (~2k at 33, ~4k at 17)
# the unfused matmuls win (measured on an H100, docs/performance.md).
KERNEL_MAX_SCORES = 80_000

_SOURCE = """
    constexpr int PER = D / 32;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int h = blockIdx.x % HQ, r = blockIdx.x / HQ, kvh = h / (HQ / HKV);
    const int R = mask_shape[0], S = k_shape[2], C = S - R;
    const float sc = scale[0];
    float qv[PER], o[PER];
    for (int i = 0; i < PER; ++i) {
        qv[i] = static_cast<float>(q[h * q_strides[1] + r * q_strides[2] + (lane * PER + i) * q_strides[3]]) * sc;
        o[i] = 0.f;
    }
    const float neg_inf = -__int_as_float(0x7f800000);
    float m = neg_inf, l = 0.f;
    for (int j = warp; j < S; j += WARPS) {
        if (j >= C && !mask[r * R + (j - C)]) continue;  // the same for the whole warp
        const auto kj = kvh * k_strides[1] + j * k_strides[2];
        float s = 0.f;
        for (int i = 0; i < PER; ++i) s += qv[i] * static_cast<float>(k[kj + (lane * PER + i) * k_strides[3]]);
        for (int off = 16; off > 0; off >>= 1) s += __shfl_xor_sync(0xffffffff, s, off);
        const float mn = fmaxf(m, s), c = __expf(m - mn), p = __expf(s - mn);
        const auto vj = kvh * v_strides[1] + j * v_strides[2];
        for (int i = 0; i < PER; ++i) o[i] = o[i] * c + p * static_cast<float>(v[vj + (lane * PER + i) * v_strides[3]]);
        l = l * c + p;
        m = mn;
    }
    __shared__ float sm[WARPS], sl[WARPS], so[WARPS][D];
    if (lane == 0) { sm[warp] = m; sl[warp] = l; }
    for (int i = 0; i < PER; ++i) so[warp][lane * PER + i] = o[i];
    __syncthreads();
    if (warp != 0) return;
    float M = neg_inf;
    for (int w = 0; w < WARPS; ++w) M = fmaxf(M, sm[w]);
    float L = 0.f;
    for (int w = 0; w < WARPS; ++w) L += sl[w] * __expf(sm[w] - M);
    for (int i = 0; i < PER; ++i) {
        const int d = lane * PER + i;
        float acc = 0.f;
        for (int w = 0; w < WARPS; ++w) acc += so[w][d] * __expf(sm[w] - M);
        out[(h * R + r) * D + d] = static_cast<T>(acc / L);
    }
"""


# Past KERNEL_MAX_SCORES: split over keys. A block per (KV head, TK keys of the cache's buffer)
# stages its keys and values in shared memory once for all the rows of the head's query heads,
# each warp one (query head, row) at a time: lanes own keys for the scores, dims for the values.
# Each writes (o, m, l) of its split; the merge kernel combines the splits by log-sum-exp.
# No cuBLAS call, and shapes that change once per 256 keys (the buffer), for MLX's CUDA graphs.
_SPLIT_SOURCE = """
    constexpr int G = HQ / HKV, KPL = TK / 32;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int NS = (k_shape[2] + TK - 1) / TK, kvh = blockIdx.x / NS, s = blockIdx.x % NS;
    const int R = mask_shape[0], C = committed[0], S = C + R, j0 = s * TK;
    if (j0 >= S) return;  // past the tree: the merge reads only the splits below S
    __shared__ float ks[TK][D + 1], vs[TK][D], qs[WARPS][D], ps[WARPS][TK];
    for (int i = threadIdx.x; i < TK * D; i += 32 * WARPS) {
        const int j = i / D, d = i % D;
        const bool in = j0 + j < S;
        ks[j][d] = in ? static_cast<float>(k[kvh * k_strides[1] + (j0 + j) * k_strides[2] + d * k_strides[3]]) : 0.f;
        vs[j][d] = in ? static_cast<float>(v[kvh * v_strides[1] + (j0 + j) * v_strides[2] + d * v_strides[3]]) : 0.f;
    }
    __syncthreads();
    const float sc = scale[0], neg_inf = -__int_as_float(0x7f800000);
    for (int qi = warp; qi < G * R; qi += WARPS) {
        const int h = kvh * G + qi / R, r = qi % R;
        for (int d = lane; d < D; d += 32)
            qs[warp][d] = static_cast<float>(q[h * q_strides[1] + r * q_strides[2] + d * q_strides[3]]) * sc;
        __syncwarp();
        float sv[KPL], m = neg_inf;
        for (int t = 0; t < KPL; ++t) {
            const int j = lane + 32 * t, jj = j0 + j;
            const bool seen = jj < C || (jj < S && mask[r * R + (jj - C)]);
            float acc = 0.f;
            if (seen)
                for (int d = 0; d < D; ++d) acc += qs[warp][d] * ks[j][d];
            sv[t] = seen ? acc : neg_inf;
            m = fmaxf(m, sv[t]);
        }
        for (int off = 16; off > 0; off >>= 1) m = fmaxf(m, __shfl_xor_sync(0xffffffff, m, off));
        float l = 0.f;
        for (int t = 0; t < KPL; ++t) {
            const float p = m == neg_inf ? 0.f : __expf(sv[t] - m);
            ps[warp][lane + 32 * t] = p;
            l += p;
        }
        for (int off = 16; off > 0; off >>= 1) l += __shfl_xor_sync(0xffffffff, l, off);
        __syncwarp();
        float* o = part + ((size_t)(h * R + r) * NS + s) * (D + 2);
        for (int d = lane; d < D; d += 32) {
            float acc = 0.f;
            for (int j = 0; j < TK; ++j) acc += ps[warp][j] * vs[j][d];
            o[d] = acc;
        }
        if (lane == 0) { o[D] = m; o[D + 1] = l; }
        __syncwarp();
    }
"""

_MERGE_SOURCE = """
    const int R = part_shape[1], NS = part_shape[2], used = (committed[0] + R + TK - 1) / TK;
    const float* p = part + (size_t)blockIdx.x * NS * (D + 2);
    const float neg_inf = -__int_as_float(0x7f800000);
    float M = neg_inf, L = 0.f;
    for (int s = 0; s < used; ++s) M = fmaxf(M, p[s * (D + 2) + D]);
    for (int d = threadIdx.x; d < D; d += 32) {
        float acc = 0.f;
        L = 0.f;
        for (int s = 0; s < used; ++s) {
            const float m = p[s * (D + 2) + D], w = m == neg_inf ? 0.f : __expf(m - M);
            acc += w * p[s * (D + 2) + d];
            L += w * p[s * (D + 2) + D + 1];
        }
        out[(size_t)blockIdx.x * D + d] = static_cast<T>(acc / L);
    }
"""


@lru_cache(maxsize=None)
def _split_kernels():
    split = mx.fast.cuda_kernel(name="dflash_tree_split", input_names=["q", "k", "v", "mask", "committed", "scale"],
                                output_names=["part"], source=_SPLIT_SOURCE, ensure_row_contiguous=False)
    merge = mx.fast.cuda_kernel(name="dflash_tree_merge", input_names=["part", "committed"],
                                output_names=["out"], source=_MERGE_SOURCE)
    return split, merge


def tree_attention_split(q: mx.array, k: mx.array, v: mx.array, scale: float, visible: mx.array,
                         committed: mx.array) -> mx.array:
    """Tree attention over a KV buffer: k, v [1, Hkv, N, D] hold the committed keys, then the
    tree's R, then anything (masked out); committed: int32 [1], the C before the tree. Each query
    head and row attends to keys 0..C-1 and to the nodes visible[r] marks, as `tree_attention`."""
    _, Hq, R, D = q.shape
    Hkv, N = k.shape[1], k.shape[2]
    tk = 64 if D <= 64 else 32  # keys and values of a split in 48 KB of shared memory
    ns = -(-N // tk)
    split, merge = _split_kernels()
    (part,) = split(
        inputs=[q, k, v, visible, committed, mx.array([scale], dtype=mx.float32)],
        template=[("T", q.dtype), ("D", D), ("HQ", Hq), ("HKV", Hkv), ("TK", tk), ("WARPS", WARPS)],
        grid=(32 * WARPS * Hkv * ns, 1, 1), threadgroup=(32 * WARPS, 1, 1),
        output_shapes=[(Hq, R, ns, D + 2)], output_dtypes=[mx.float32])
    (out,) = merge(inputs=[part, committed], template=[("T", q.dtype), ("D", D), ("TK", tk)],
                   grid=(32 * Hq * R, 1, 1), threadgroup=(32, 1, 1),
                   output_shapes=[(1, Hq, R, D)], output_dtypes=[q.dtype])
    return out


@lru_cache(maxsize=None)
def _kernel():
    return mx.fast.cuda_kernel(name="dflash_tree_attention", input_names=["q", "k", "v", "mask", "scale"],
                               output_names=["out"], source=_SOURCE, ensure_row_contiguous=False)


def tree_attention(q: mx.array, k: mx.array, v: mx.array, scale: float, visible: mx.array) -> mx.array:
    """q [1, Hq, R, D]; k, v [1, Hkv, C+R, D] (committed keys, then the tree's); visible [R, R]
    bool: row r attends to every committed key and to the nodes visible[r] marks."""
    _, Hq, R, D = q.shape
    Hkv = k.shape[1]
    (out,) = _kernel()(
        inputs=[q, k, v, visible, mx.array([scale], dtype=mx.float32)],
        template=[("T", q.dtype), ("D", D), ("HQ", Hq), ("HKV", Hkv), ("WARPS", WARPS)],
        grid=(32 * WARPS * Hq * R, 1, 1), threadgroup=(32 * WARPS, 1, 1),
        output_shapes=[(1, Hq, R, D)], output_dtypes=[q.dtype])
    return out


class TreeAttention:
    """A tree pass's attention on a GPU, shared by its layers (`over(cache)` gives one layer's
    attend): the kernel for short contexts where `available`, else the split kernel (or, where
    it cannot run, mx.fast's masked call) over the KV cache's whole allocated buffer, the keys
    past the tree masked out. mlx-lm's KVCache grows in steps of 256, so the call keeps one shape
    for ~256 tokens instead of taking a new one every cycle, which MLX's CUDA graphs pay for
    with 60-290 ms stalls (docs/performance.md, "Speed against context length")."""

    def __init__(self, tree: Layout, committed: int, tile: int = 0):
        self.visible, self.committed = tree.visible, committed
        self._committed = mx.array([committed], dtype=mx.int32)
        self._mask = None  # [R, buffer]: every committed key, the tree's visible nodes, no more

    def over(self, cache):
        return partial(self, cache)

    def __call__(self, cache, q, k, v, scale):
        buf_k, buf_v = getattr(cache, "keys", None), getattr(cache, "values", None)
        if (_kernel_pays(q, k) or not isinstance(buf_k, mx.array)  # not mlx-lm's KVCache
                or buf_k.shape[2] < k.shape[2]):
            return tree_attention_gpu(q, k, v, scale, self.visible)
        whole_tree = q.shape[0] == 1 and k.shape[2] == self.committed + q.shape[2]
        if whole_tree and split_available(q.dtype, q.shape[-1], _heads(q, k)):
            return tree_attention_split(q, buf_k, buf_v, scale, self.visible, self._committed)
        return mx.fast.scaled_dot_product_attention(q, buf_k, buf_v, scale=scale, mask=self._mask_for(buf_k.shape[2]))

    def _mask_for(self, size: int) -> mx.array:
        if self._mask is None or self._mask.shape[1] != size:
            R, C = self.visible.shape[0], self.committed
            m = np.zeros((R, size), bool)
            m[:, :C] = True
            m[:, C : C + R] = np.array(self.visible)
            self._mask = mx.array(m)
        return self._mask


def tree_attention_gpu(q, k, v, scale, visible):
    """Tree attention over the fetched keys (no cache): the kernel where it pays, else mx.fast's
    masked call."""
    return tree_attention(q, k, v, scale, visible) if _kernel_pays(q, k) else masked_attention(q, k, v, scale, visible)


def _kernel_pays(q, k) -> bool:
    return q.shape[2] * k.shape[2] <= KERNEL_MAX_SCORES and available(q.dtype, q.shape[-1], _heads(q, k))


def _heads(q, k) -> tuple[int, int]:
    return q.shape[1], k.shape[1]


def masked_attention(q, k, v, scale, visible):
    R, C = q.shape[2], k.shape[2] - q.shape[2]
    mask = mx.concatenate([mx.ones((R, C), dtype=mx.bool_), visible], axis=1)
    return mx.fast.scaled_dot_product_attention(q, k, v, scale=scale, mask=mask)


@lru_cache(maxsize=None)
def available(dtype=mx.float16, head_dim: int = 64, heads: tuple[int, int] = (6, 2)) -> bool:
    """Whether the kernel runs here and agrees with mx.fast's masked attention (CUDA only), for
    (query, KV) heads: the check compiles the very kernel a pass of those heads launches."""
    return on_cuda() and not head_dim % 32 and _agrees(
        "tree attention kernel", dtype, head_dim, heads,
        lambda q, k, v, scale, vis, C: tree_attention(q, *(x[:, :, : C + q.shape[2]] for x in (k, v)), scale, vis))


@lru_cache(maxsize=None)
def split_available(dtype=mx.float16, head_dim: int = 64, heads: tuple[int, int] = (6, 2)) -> bool:
    """Whether the split kernel runs here and agrees with mx.fast's masked attention over a
    buffer whose keys past the tree are garbage (CUDA only), as `available`."""
    return on_cuda() and not head_dim % 32 and head_dim <= 128 and _agrees(  # past 128 a split outgrows 48 KB
        "split tree attention kernel", dtype, head_dim, heads,
        lambda q, k, v, scale, vis, C: tree_attention_split(q, k, v, scale, vis, mx.array([C], dtype=mx.int32)))


def _agrees(what: str, dtype, head_dim: int, heads: tuple[int, int], attend) -> bool:
    """attend(q, k, v, scale, visible, C) over a 512-key buffer (C committed keys, a 7-node tree,
    random keys past it) against mx.fast's masked call over the fetched keys; a kernel that does
    not compile (no NVRTC, an unsupported type) warns and leaves the masked call."""
    try:
        (R, C, N), (Hq, Hkv) = (7, 300, 512), heads
        q, k, v = (mx.random.normal(shape, key=mx.random.key(i)).astype(dtype)  # not the global
                   for i, shape in enumerate([(1, Hq, R, head_dim), *[(1, Hkv, N, head_dim)] * 2]))
        parents = [-1, 0, 0, 1, 1, 2, 5]
        vis = np.zeros((R, R), bool)
        for r in range(R):
            n = r
            while n >= 0:
                vis[r, n], n = True, parents[n]
        vis = mx.array(vis)
        got = attend(q, k, v, head_dim ** -0.5, vis, C).astype(mx.float32)
        want = masked_attention(q, k[:, :, : C + R], v[:, :, : C + R], head_dim ** -0.5, vis).astype(mx.float32)
        return bool(mx.allclose(got, want, atol=2e-2, rtol=2e-2).item())
    except (RuntimeError, ValueError) as e:
        warnings.warn(f"dflash's {what} cannot run here ({e}); using mx.fast's masked attention")
        return False


def row_chunks(q, k, v, scale, rows: int):
    """Causal attention of L query rows as ceil(L / rows) calls of `rows` rows, each given the
    keys up to its last row (passes longer than MAX_CHUNKED_ROWS, i.e. prefill, in one call).

    For MLX's CUDA backend: its fused attention kernel takes fewer than 4 query rows (a longer
    block runs unfused matmul + softmax, 113 us a layer against 7 on an H200 for 16 float32
    rows) and computes each row on its own over keys 0..its position, as a 1-token step does.
    On an H200 (lab/bench/results/h200-smollm2.md) chunks of 3 rows were 4 % faster than one
    call, prompt by prompt, with the same outputs.
    """
    L, S = q.shape[2], k.shape[2]
    if L > MAX_CHUNKED_ROWS:
        return mx.fast.scaled_dot_product_attention(q, k, v, scale=scale, mask="causal")
    outs = []
    for s in range(0, L, rows):
        e = min(s + rows, L)
        end = S - L + e  # keys visible to the chunk's last row
        outs.append(mx.fast.scaled_dot_product_attention(
            q[:, :, s:e], k[:, :, :end], v[:, :, :end], scale=scale, mask="causal" if e - s > 1 else None))
    return outs[0] if len(outs) == 1 else mx.concatenate(outs, axis=2)
