"""Kernel corpus (tests/kernels/run/*.cl) compiled by clang-19 and run on the emulated GPUs, checked against numpy.

Each case states its reference from the header comment of its .cl file. Sizes are small: the emulator is Python.
"""
from __future__ import annotations

import functools
from pathlib import Path

import numpy as np
import pytest

from stack.codegen import opencl

pytestmark = pytest.mark.skipif(not opencl.available(), reason="clang-19 and ld.lld-19 are needed to build kernels")

RUN = Path(__file__).parent / "kernels" / "run"
TARGETS = [("gfx1100", "-O3"), ("gfx1100", "-O0"), ("gfx1201", "-O3"), ("gfx942", "-O3"), ("gfx1201", "-O0"),
           ("gfx942", "-O0"), ("gfx90a", "-O3"), ("gfx90a", "-O0")]


@functools.cache
def build(name: str, arch: str, opt: str, extra: tuple[str, ...] = ()) -> bytes:
    return opencl.compile_cl((RUN / name).read_text(), arch, opt, extra)


def launch(arch: str, code: bytes, kernel: str, grid, block, *args):
    """Run a kernel; numpy-array args become buffers. Returns (gpu, [buffer or scalar per arg])."""
    from emu.amd import GPU
    gpu = GPU(arch)
    prog = gpu.load(code)
    bufs = to_buffers(args, gpu.alloc, gpu.write)
    gpu.launch(prog, kernel, grid=grid, block=block, args=bufs)
    return gpu, bufs


def to_buffers(args, alloc, write) -> list:
    """Each numpy-array argument in a buffer of its own (`alloc(nbytes)`, `write(buf, array)`); scalars as given."""
    bufs = []
    for a in args:
        if isinstance(a, np.ndarray):
            b = alloc(max(a.nbytes, 4))
            write(b, a)
            bufs.append(b)
        else:
            bufs.append(a)
    return bufs


def result(gpu, buf, like: np.ndarray) -> np.ndarray:
    return np.frombuffer(gpu.read(buf, like.nbytes), like.dtype)


def rng(seed: int = 0):
    return np.random.default_rng(seed)


def floats(n, seed=0, dtype=np.float32, scale=100.0):
    return (rng(seed).standard_normal(n) * scale).astype(dtype)


# -- the cases: (file, kernel, runner(arch, code)) ---------------------------------------------------------------------

def case_ew_f32(arch, code):
    n = 70
    a, b = floats(n, 1), floats(n, 2)
    out = np.zeros(n, np.float32)
    gpu, bufs = launch(arch, code, "ew_f32", (3,), (32,), a, b, out, np.int32(n))
    ref = ((a + b) * (a - b)) - np.fmin(a, b) * np.float32(0.25)
    np.testing.assert_array_equal(result(gpu, bufs[2], out), ref)


def case_ew_f16(arch, code):
    n = 70
    a, b = floats(n, 3, np.float16, 4.0), floats(n, 4, np.float16, 4.0)
    out = np.zeros(n, np.float16)
    gpu, bufs = launch(arch, code, "ew_f16", (2,), (64,), a, b, out, np.int32(n))
    ref = (a * b) + (a - b) * np.float16(0.5)
    np.testing.assert_array_equal(result(gpu, bufs[2], out).view(np.uint16), ref.view(np.uint16))


def case_ew_i8(arch, code):
    n = 100
    a = rng(5).integers(-128, 128, n).astype(np.int8)
    b = rng(6).integers(-128, 128, n).astype(np.int8)
    out = np.zeros(n, np.int8)
    gpu, bufs = launch(arch, code, "ew_i8", (4,), (32,), a, b, out, np.int32(n))
    a32, b32 = a.astype(np.int32), b.astype(np.int32)
    np.testing.assert_array_equal(result(gpu, bufs[2], out), (a32 * b32 + (a32 >> 1) - (b32 ^ 0x5A)).astype(np.int8))


def case_ew_i64(arch, code):
    n = 40
    a = rng(7).integers(-2**63, 2**63 - 1, n, dtype=np.int64)
    b = rng(8).integers(-2**63, 2**63 - 1, n, dtype=np.int64)
    out = np.zeros(n, np.int64)
    gpu, bufs = launch(arch, code, "ew_i64", (2,), (32,), a, b, out, np.int32(n))
    x, y = a.view(np.uint64), b.view(np.uint64)
    with np.errstate(over="ignore"):
        ref = (x * y + (a >> 7).view(np.uint64) - (y << np.uint64(3)) + ((x ^ y) & np.uint64(0x0000FFFF0000FFFF)))
    np.testing.assert_array_equal(result(gpu, bufs[2], out), ref.view(np.int64))


def case_saxpy(arch, code):
    n = 50
    x, y = floats(n, 9), floats(n + 14, 10)
    y0 = y.copy()
    gpu, bufs = launch(arch, code, "saxpy", (2,), (32,), y, x, np.float32(2.5), np.int32(n))
    got = result(gpu, bufs[0], y)
    np.testing.assert_array_equal(got[:n], np.float32(2.5) * x + y0[:n])
    np.testing.assert_array_equal(got[n:], y0[n:])  # past the bound: untouched


def case_reduce_sum(arch, code):
    n, bs = 200, 64
    x = rng(11).integers(0, 2**32, n, dtype=np.uint64).astype(np.uint32)
    groups = -(-n // bs)
    part = np.zeros(groups, np.uint32)
    gpu, bufs = launch(arch, code, "reduce_sum_u32", (groups,), (bs,), x, part, np.int32(n))
    ref = np.add.reduceat(x.astype(np.uint64), np.arange(0, n, bs)).astype(np.uint32)
    np.testing.assert_array_equal(result(gpu, bufs[1], part), ref)


def case_reduce_max(arch, code):
    n, bs = 100, 32
    x = floats(n, 12)
    groups = -(-n // bs)
    part = np.zeros(groups, np.float32)
    gpu, bufs = launch(arch, code, "reduce_max_f32", (groups,), (bs,), x, part, np.int32(n))
    np.testing.assert_array_equal(result(gpu, bufs[1], part), np.maximum.reduceat(x, np.arange(0, n, bs)))


def case_matmul(arch, code):
    m, n, k = 20, 18, 19
    a = rng(13).integers(-8, 9, (m, k)).astype(np.float32)
    b = rng(14).integers(-8, 9, (k, n)).astype(np.float32)
    c = np.zeros((m, n), np.float32)
    gpu, bufs = launch(arch, code, "matmul_tiled", (2, 2), (16, 16), a, b, c, np.int32(m), np.int32(n), np.int32(k))
    np.testing.assert_array_equal(result(gpu, bufs[2], c).reshape(m, n), a @ b)


def case_transpose(arch, code):
    w, h = 13, 6
    x = rng(15).integers(-1000, 1000, (h, w)).astype(np.int32)
    out = np.zeros(w * h, np.int32)
    gpu, bufs = launch(arch, code, "transpose_add", (2, 2), (8, 4), x, out, np.int32(w), np.int32(h))
    xs, ys = np.meshgrid(np.arange(w), np.arange(h))
    ref = np.zeros(w * h, np.int32)
    ref[xs * h + ys] = x + xs * 1000 + ys
    np.testing.assert_array_equal(result(gpu, bufs[1], out), ref)


def case_ids3d(arch, code):
    grid, block = (2, 2, 2), (4, 2, 3)
    X, Y, Z = (g * b for g, b in zip(grid, block, strict=True))
    out = np.zeros(X * Y * Z, np.uint32)
    loc = np.zeros(X * Y * Z, np.uint32)
    gpu, bufs = launch(arch, code, "ids3d", grid, block, out, loc)
    z, y, x = np.meshgrid(np.arange(Z), np.arange(Y), np.arange(X), indexing="ij")
    np.testing.assert_array_equal(result(gpu, bufs[0], out), (x + 1000 * y + 1000000 * z).reshape(-1))
    lx, ly, lz, gx = x % block[0], y % block[1], z % block[2], x // block[0]
    np.testing.assert_array_equal(result(gpu, bufs[1], loc), (lx | ly << 8 | lz << 16 | gx << 24).reshape(-1))


def case_divergent(arch, code):
    n = 64
    x = rng(16).integers(-3000, 3000, n).astype(np.int32)
    out = np.zeros(n, np.int32)
    gpu, bufs = launch(arch, code, "divergent", (1,), (64,), x, out, np.int32(n))
    ref = []
    for v in x.tolist():
        r = 0
        if v & 1:
            r = v * 3 if v & 2 else -v
        elif v & 4:
            for k in range(v & 15):
                r += k * v
                if r > 1000:
                    break
        else:
            k = 0
            while k < 64:
                if ((v >> (k & 7)) & 8) == 0 and k > (v & 7):
                    break
                r ^= k << (k & 3)
                k += 1
            r += k
        ref.append(r)
    np.testing.assert_array_equal(result(gpu, bufs[1], out), np.array(ref, np.int32))


def case_collatz(arch, code):
    n = 40
    x = rng(17).integers(0, 200, n).astype(np.uint32)
    steps = np.zeros(n, np.uint32)
    gpu, bufs = launch(arch, code, "collatz", (2,), (32,), x, steps, np.int32(n))
    ref = []
    for v in x.tolist():
        s = 0
        while v not in (0, 1):
            v = (3 * v + 1) & 0xFFFFFFFF if v & 1 else v >> 1
            s += 1
            if s == 500:
                break
        ref.append(s)
    np.testing.assert_array_equal(result(gpu, bufs[1], steps), np.array(ref, np.uint32))


def case_atomics_global(arch, code):
    n = 70
    x = rng(18).integers(0, 2**32, n, dtype=np.uint64).astype(np.uint32)
    hist = np.zeros(16, np.uint32)
    stats = np.zeros(8, np.uint32)
    stats[1] = stats[4] = 0xFFFFFFFF
    tickets = np.zeros(n, np.uint32)
    gpu, bufs = launch(arch, code, "atomics_global", (3,), (32,), x, hist, stats, tickets, np.int32(n))
    np.testing.assert_array_equal(result(gpu, bufs[1], hist), np.bincount(x & 15, minlength=16))
    st = result(gpu, bufs[2], stats)
    ref = [x.max(), x.min(), np.bitwise_or.reduce(np.uint32(1) << (x & 31)), np.bitwise_xor.reduce(x),
           np.bitwise_and.reduce(x | np.uint32(0x80000000)), (-x.astype(np.int64).sum()) % 2**32, n]
    np.testing.assert_array_equal(st[:7], np.array(ref, np.uint64).astype(np.uint32))
    np.testing.assert_array_equal(np.sort(result(gpu, bufs[3], tickets)), np.arange(n))


def case_atomics_lds(arch, code):
    n, bs = 90, 32
    groups = -(-n // bs)
    x = rng(19).integers(0, 2**32, n, dtype=np.uint64).astype(np.uint32)
    hist = np.zeros(16, np.uint32)
    lt = np.zeros(groups * bs, np.uint32)
    gpu, bufs = launch(arch, code, "atomics_lds", (groups,), (bs,), x, hist, lt, np.int32(n))
    np.testing.assert_array_equal(result(gpu, bufs[1], hist), np.bincount(x & 15, minlength=16))
    got = result(gpu, bufs[2], lt)
    for g in range(groups):
        cnt = min(bs, n - g * bs)
        np.testing.assert_array_equal(np.sort(got[g * bs:g * bs + cnt]), np.arange(cnt))


def case_private_index(arch, code):
    n, items = 37, 64
    x = rng(20).integers(0, 2**32, n, dtype=np.uint64).astype(np.uint32)
    out = np.zeros(items, np.uint32)
    gpu, bufs = launch(arch, code, "private_index", (2,), (32,), x, out, np.int32(n))
    i = np.arange(items)
    p = np.stack([x[(i + k) % n] + np.uint32(k) for k in range(64)], axis=1).astype(np.uint32)
    a = x[i % n].astype(np.uint32)
    for k in range(8):
        j = (a + np.uint32(5 * k)) & 63
        p[i, j] ^= a >> np.uint32(k)
        a = p[i, (a * np.uint32(7) + np.uint32(k)) & 63]
    np.testing.assert_array_equal(result(gpu, bufs[1], out), a + p[i, i & 63])


def case_spill(arch, code):
    items, rounds = 32, 3
    x = rng(21).integers(0, 2**32, items * 48, dtype=np.uint64).astype(np.uint32)
    out = np.zeros_like(x)
    gpu, bufs = launch(arch, code, "spill", (1,), (32,), x, out, np.int32(rounds))
    v = x.reshape(items, 48).copy()
    for r in range(rounds):
        for k in range(48):
            v[:, k] = v[:, k] * np.uint32(3) + (v[:, (k + 7) % 48] ^ np.uint32(r))
    np.testing.assert_array_equal(result(gpu, bufs[1], out), v.reshape(-1))


def case_bitops(arch, code):
    n = 40
    x = rng(28).integers(0, 2**32, n, dtype=np.uint64).astype(np.uint32)
    x[:2] = [0, 1]
    y = rng(29).integers(0, 2**63, n, dtype=np.uint64) >> rng(30).integers(0, 63, n).astype(np.uint64)
    y[0] = 0
    out = np.zeros(10 * n, np.uint32)
    gpu, bufs = launch(arch, code, "bitops", (2,), (32,), x, y, out, np.int32(n))
    ref = []
    for xi, yi in zip(x.tolist(), y.tolist(), strict=True):
        r, rev = yi & 31, int(f"{yi:064b}"[::-1], 2)
        ref.append([bin(xi).count("1"), 32 - xi.bit_length(), int(f"{xi:032b}"[::-1], 2),
                    (xi & -xi).bit_length() - 1 if xi else 32, bin(yi).count("1"), 64 - yi.bit_length(),
                    ((xi << r) | (xi >> ((32 - r) & 31))) & 0xFFFFFFFF, (xi >> (yi & 15)) & 0x7F,
                    rev & 0xFFFFFFFF, rev >> 32])
    # clz(0ul) = 64 relies on integer clamp: v_add_nc_u32 v5, v5, 32 clamp saturates 0xffffffff + 32
    np.testing.assert_array_equal(result(gpu, bufs[2], out).reshape(n, 10), np.array(ref, np.uint64))


def case_int24(arch, code):
    n = 40
    a, b, c = (rng(s).integers(0, 2**32, n, dtype=np.uint64).astype(np.uint32) for s in (34, 35, 36))
    a[:3], b[:3] = [0xFFFFFF, 0x800000, 0xFF7FFFFF], [0xFFFFFF, 0x800000, 0x12FFFFFF]  # the extremes, high bits set
    out = np.zeros(6 * n, np.uint32)
    gpu, bufs = launch(arch, code, "int24", (2,), (32,), a, b, c, out, np.int32(n))
    ref = []
    for x, y, z in zip(a.tolist(), b.tolist(), c.tolist(), strict=True):
        ux, uy = x & 0xFFFFFF, y & 0xFFFFFF
        sx, sy = ux - (ux >> 23 << 24), uy - (uy >> 23 << 24)
        ref.append([ux * uy, sx * sy, ux * uy + z, sx * sy + z, ux * uy >> 32, sx * sy >> 32])
    np.testing.assert_array_equal(result(gpu, bufs[3], out).reshape(n, 6), np.array(ref, np.int64) & 0xFFFFFFFF)


def case_half2(arch, code):
    n = 40
    a, b, c = (floats(2 * n, s, np.float16, 4.0).reshape(n, 2) for s in (31, 32, 33))
    out = np.zeros((2 * n, 2), np.float16)
    gpu, bufs = launch(arch, code, "half2_math", (2,), (32,), a, b, c, out, np.int32(n))
    got = result(gpu, bufs[3], out).reshape(n, 2, 2)
    np.testing.assert_array_equal(got[:, 0].view(np.uint16), (a * b + c).view(np.uint16))
    np.testing.assert_array_equal(got[:, 1].view(np.uint16), ((a - b[:, ::-1]) * c[:, :1]).view(np.uint16))


def case_divmod64(arch, code):
    n = 32
    x = rng(34).integers(-2**63, 2**63 - 1, n, dtype=np.int64) >> rng(35).integers(0, 60, n)
    y = rng(36).integers(-2**63, 2**63 - 1, n, dtype=np.int64) >> rng(37).integers(0, 63, n)
    y[y == 0] = 7
    out = np.zeros(6 * n, np.int64)
    gpu, bufs = launch(arch, code, "divmod64", (1,), (32,), x, y, out, np.int32(n))
    ref = []
    for xi, yi in zip(x.tolist(), y.tolist(), strict=True):
        q = abs(xi) // abs(yi) * (1 if (xi < 0) == (yi < 0) else -1)
        ux, uy = xi % 2**64, yi % 2**64
        ref.append([q, xi - q * yi, ux // uy, ux % uy, (ux * uy) % 2**64, (ux % 2**32) // ((uy % 2**32) | 1)])
    ref = np.array([[v - 2**64 if v >= 2**63 else v for v in row] for row in ref], np.int64)
    np.testing.assert_array_equal(result(gpu, bufs[2], out).reshape(n, 6), ref)


def _rounding(kernel, dtype):
    def run(arch, code):
        n = 48
        v = (rng(38).standard_normal(n) * 20).astype(dtype)
        v[:8] = np.array([0.5, -0.5, 1.5, -2.5, 2.5, 0.0, -0.0, 7.0]).astype(dtype)
        out = np.zeros(5 * n, dtype)
        conv = np.zeros(n, np.int32)
        gpu, bufs = launch(arch, code, kernel, (2,), (32,), v, out, conv, np.int32(n))
        t = np.trunc(v)
        away = np.where(np.abs(v - t) >= 0.5, t + np.sign(v), t).astype(dtype)
        ref = np.stack([np.floor(v), np.ceil(v), t, np.rint(v), away], axis=1)
        np.testing.assert_array_equal(result(gpu, bufs[1], out).reshape(n, 5), ref)
        np.testing.assert_array_equal(result(gpu, bufs[2], conv), t.astype(np.int32))
    return run


def case_scalar_subdword(arch, code):
    data = rng(40).integers(0, 256, 64, dtype=np.uint8)
    data[:8] = [0x7F, 0x80, 0xFF, 0x01, 0xFE, 0x00, 0x81, 0x7E]  # sign bits set and clear at every byte lane
    for kernel, dtype in (("load_u8", np.uint8), ("load_i8", np.int8), ("load_u16", np.uint16),
                          ("load_i16", np.int16)):
        ref = data.view(dtype)
        for i in range(6):  # every byte and short offset in a dword, then the next dword
            out = np.zeros(32, np.int32)
            gpu, bufs = launch(arch, code, kernel, (1,), (32,), out, data, np.int32(i))
            got = result(gpu, bufs[0], out)
            assert (got == int(ref[i])).all(), f"{kernel} index {i}: {got[0]}, expected {ref[i]}"


CASES = {
    "ew_f32": ("elementwise_f32.cl", case_ew_f32), "ew_f16": ("elementwise_f16.cl", case_ew_f16),
    "ew_i8": ("elementwise_i8.cl", case_ew_i8), "ew_i64": ("elementwise_i64.cl", case_ew_i64),
    "saxpy": ("saxpy.cl", case_saxpy), "reduce_sum": ("reduce_lds.cl", case_reduce_sum),
    "reduce_max": ("reduce_lds.cl", case_reduce_max), "matmul": ("matmul_tiled.cl", case_matmul),
    "transpose": ("grid2d.cl", case_transpose), "ids3d": ("grid2d.cl", case_ids3d),
    "divergent": ("divergence.cl", case_divergent), "collatz": ("divergence.cl", case_collatz),
    "atomics_global": ("atomics.cl", case_atomics_global), "atomics_lds": ("atomics.cl", case_atomics_lds),
    "private_index": ("private_scratch.cl", case_private_index), "spill": ("private_scratch.cl", case_spill),
    "bitops": ("bitops.cl", case_bitops), "half2": ("half2.cl", case_half2), "int24": ("int24.cl", case_int24),
    "divmod64": ("int64_divmod.cl", case_divmod64),
    "round_f32": ("rounding.cl", _rounding("round_f32", np.float32)),
    "round_f64": ("rounding.cl", _rounding("round_f64", np.float64)),
    "round_f16": ("rounding.cl", _rounding("round_f16", np.float16)),
    "scalar_subdword": ("scalar_subdword.cl", case_scalar_subdword),
}


@pytest.mark.parametrize("arch,opt", TARGETS, ids=[f"{a}{o}" for a, o in TARGETS])
@pytest.mark.parametrize("case", list(CASES))
def test_corpus(case, arch, opt):
    name, fn = CASES[case]
    fn(arch, build(name, arch, opt))


@pytest.mark.parametrize("case", ["reduce_sum", "divergent", "matmul", "atomics_lds", "private_index", "half2"])
def test_wave64_agrees_with_wave32(case):
    """The same kernel built for wave32 and for wave64 on gfx1100 gives the numpy result both times."""
    from objfile.codeobj import CodeObject
    name, fn = CASES[case]
    for extra in ((), ("-mwavefrontsize64",)):
        code = build(name, "gfx1100", "-O3", extra)
        assert {k.wavefront_size for k in CodeObject.parse(code).kernels.values()} == {64 if extra else 32}
        fn("gfx1100", code)


IR = """
declare i32 @llvm.amdgcn.workitem.id.x()
declare i32 @llvm.amdgcn.workgroup.id.x()

define amdgpu_kernel void @poly_divmod(ptr addrspace(1) %out, ptr addrspace(1) %q, ptr addrspace(1) %in,
                                       ptr addrspace(1) %a, ptr addrspace(1) %b, i32 %n) {
entry:
  %tid = call i32 @llvm.amdgcn.workitem.id.x()
  %wg = call i32 @llvm.amdgcn.workgroup.id.x()
  %base = shl i32 %wg, 6
  %i = add i32 %base, %tid
  %ok = icmp slt i32 %i, %n
  br i1 %ok, label %body, label %done
body:
  %idx = sext i32 %i to i64
  %p = getelementptr float, ptr addrspace(1) %in, i64 %idx
  %x = load float, ptr addrspace(1) %p
  %x2 = fmul float %x, %x
  %y = fadd float %x2, 3.0
  %o = getelementptr float, ptr addrspace(1) %out, i64 %idx
  store float %y, ptr addrspace(1) %o
  %pa = getelementptr i64, ptr addrspace(1) %a, i64 %idx
  %pb = getelementptr i64, ptr addrspace(1) %b, i64 %idx
  %va = load i64, ptr addrspace(1) %pa
  %vb = load i64, ptr addrspace(1) %pb
  %d = udiv i64 %va, %vb
  %r = srem i64 %va, %vb
  %s = xor i64 %d, %r
  %pq = getelementptr i64, ptr addrspace(1) %q, i64 %idx
  store i64 %s, ptr addrspace(1) %pq
  br label %done
done:
  ret void
}
"""


@pytest.mark.parametrize("arch", ["gfx1100", "gfx942"])
def test_llvm_ir_kernel(arch):
    """A kernel written in LLVM IR, compiled by llvmlite: f32 math and 64-bit division/remainder."""
    from stack.codegen import llvm
    if not llvm.available():
        pytest.skip("llvmlite without the AMDGPU backend, or ld.lld-19 missing")
    n = 70
    x = floats(n, 22)
    a = rng(23).integers(-2**62, 2**62, n, dtype=np.int64)
    b = np.maximum(rng(24).integers(1, 2**40, n, dtype=np.int64) >> rng(25).integers(0, 40, n), 1)
    out, q = np.zeros(n, np.float32), np.zeros(n, np.int64)
    gpu, bufs = launch(arch, llvm.compile_ir(IR, arch), "poly_divmod", (2,), (64,), out, q, x, a, b, np.int32(n))
    np.testing.assert_array_equal(result(gpu, bufs[0], out), x * x + np.float32(3.0))
    ua, ub = a.view(np.uint64), b.view(np.uint64)
    rem = np.array([(abs(int(v)) % int(w)) * (1 if v >= 0 else -1) for v, w in zip(a, b, strict=True)], np.int64)
    np.testing.assert_array_equal(result(gpu, bufs[1], q), (ua // ub).view(np.int64) ^ rem)


def test_cli(tmp_path):
    """python -m emu.amd.run: inputs from .npy, outputs written as .npy; bad input exits with status 2."""
    from emu.amd.run import main
    co = tmp_path / "saxpy.hsaco"
    co.write_bytes(build("saxpy.cl", "gfx1100", "-O3"))
    x, y = floats(40, 26), floats(40, 27)
    np.save(tmp_path / "x.npy", x)
    np.save(tmp_path / "y.npy", y)
    args = [str(co), "--kernel", "saxpy", "--grid", "2", "--block", "32",
            "--arg", f"buf:inout:f32:{tmp_path / 'y.npy'}", "--arg", f"buf:in:f32:{tmp_path / 'x.npy'}",
            "--arg", "f32:1.5", "--arg", "i32:40", "--out", str(tmp_path)]
    assert main(args) == 0
    np.testing.assert_array_equal(np.load(tmp_path / "arg0.npy"), np.float32(1.5) * x + y)
    for bad in (["--grid", "0"], ["--arg", "f33:1"], ["--arg", "buf:in:f32:/nonexistent.npy"], ["--kernel", "nope"]):
        assert main(args + bad) == 2


@pytest.mark.parametrize("arch,extra", [("gfx942", ()), ("gfx1100", ("-mwavefrontsize64",))])
def test_wave64_upper_half_only(arch, extra):
    """Divergence where only lanes 32..63 of a wave64 stay active (s_cbranch_execz must see the high half)."""
    src = "kernel void k(global int *o) { int l = get_local_id(0); if (l >= 32) o[l] = l * 3; else o[l] = -1; }"
    o = np.zeros(64, np.int32)
    gpu, bufs = launch(arch, opencl.compile_cl(src, arch, "-O3", extra), "k", (1,), (64,), o)
    np.testing.assert_array_equal(result(gpu, bufs[0], o), np.where(np.arange(64) >= 32, np.arange(64) * 3, -1))


CROSS_LANE = """
kernel void k(global const int *in, global int *o) {
  int l = get_local_id(0);
  int x = in[l];
  o[4 * l + 0] = __builtin_amdgcn_update_dpp(-7, x, 0x111, 0xf, 0xf, false);  // row_shr:1, old value kept
  o[4 * l + 1] = __builtin_amdgcn_update_dpp(-7, x, 0x1b, 0xf, 0xf, true);    // quad_perm:[3,2,1,0]
  o[4 * l + 2] = __builtin_amdgcn_mov_dpp(x, 0x140, 0xf, 0xf, true);          // row_mirror
  o[4 * l + 3] = __builtin_amdgcn_readlane(x, 5) + __builtin_amdgcn_ds_bpermute((63 - l) * 4, x);
}
"""


@pytest.mark.parametrize("arch", ["gfx1100", "gfx942", "gfx1201"])
def test_cross_lane_builtins(arch):
    """DPP row_shr / quad_perm / row_mirror, v_readlane and ds_bpermute as clang emits them for builtins."""
    x = (np.arange(64) * 10 + 1).astype(np.int32)
    o = np.zeros(4 * 64, np.int32)
    gpu, bufs = launch(arch, opencl.compile_cl(CROSS_LANE, arch), "k", (1,), (64,), x, o)
    got = result(gpu, bufs[1], o).reshape(64, 4)
    ln, ws = np.arange(64), 64 if arch == "gfx942" else 32
    r, base = ln & 15, ln & ~(ws - 1)
    np.testing.assert_array_equal(got[:, 0], np.where(r >= 1, x[np.maximum(ln - 1, 0)], -7))
    np.testing.assert_array_equal(got[:, 1], x[(ln & ~3) | (3 - (ln & 3))])
    np.testing.assert_array_equal(got[:, 2], x[(ln & ~15) | (15 - r)])
    np.testing.assert_array_equal(got[:, 3], x[base + 5] + x[base + (63 - ln) % ws])


@pytest.mark.parametrize("tier", ["ref", "interp", "jit"])
def test_scalar_subdword_tiers(tier, monkeypatch):
    """RDNA4's sub-dword scalar loads (tinygrad's test_emulated_shl / shr reach them) in every tier."""
    monkeypatch.setenv("HWEMU_TIER", tier)
    case_scalar_subdword("gfx1201", build("scalar_subdword.cl", "gfx1201", "-O3"))


@pytest.mark.parametrize("arch", ["gfx1100", "gfx942"])
@pytest.mark.parametrize("tier", ["ref", "interp", "threaded", "jit"])
def test_int24_tiers(tier, arch, monkeypatch):
    """The 24-bit multiplies of tinygrad's index arithmetic in every tier (the native ones compile them)."""
    monkeypatch.setenv("HWEMU_TIER", tier)
    case_int24(arch, build("int24.cl", arch, "-O3"))
