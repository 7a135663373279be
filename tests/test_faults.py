"""Wave faults: a read past a buffer into an unmapped page, a jump to garbage, s_trap. Each raises GPUFault
with a record of where; nothing outside the GPU's mappings changes and the next launch on the same GPU works."""
from __future__ import annotations

import numpy as np
import pytest

from stack.codegen import opencl

pytestmark = pytest.mark.skipif(not opencl.available(), reason="clang-19 and ld.lld-19 are needed to build kernels")

SRC = """
kernel void copy(global const uint *in, global uint *out, int skip) {
  int i = get_global_id(0);
  out[i] = in[i + skip];
}
kernel void jump(global uint *out, ulong target) {
  out[get_global_id(0)] = 1;
  __asm__ volatile("s_setpc_b64 %0" :: "s"(target));
}
kernel void trap(global uint *out) {
  out[get_global_id(0)] = 1;
  if (get_global_id(0) == 5) __builtin_trap();
}
"""
ARCHES = ["gfx1100", "gfx942"]


@pytest.fixture(params=ARCHES)
def setup(request):
    from emu.amd import GPU
    arch = request.param
    gpu = GPU(arch)
    prog = gpu.load(opencl.compile_cl(SRC, arch, "-O3"))
    src, out = gpu.alloc(4096), gpu.alloc(4096)
    gpu.write(src, np.arange(1024, dtype=np.uint32))
    return gpu, prog, src, out


def check_next_launch_works(gpu, prog, src, out):
    gpu.write(out, bytes(4096))
    gpu.launch(prog, "copy", grid=(1,), block=(64,), args=[src, out, np.int32(3)])
    np.testing.assert_array_equal(np.frombuffer(gpu.read(out, 256), np.uint32), np.arange(3, 67))


def test_read_past_buffer(setup):
    from emu.amd import GPUFault
    gpu, prog, src, out = setup
    host = np.frombuffer(gpu.read(out), np.uint32).copy()
    with pytest.raises(GPUFault) as e:  # items 32.. read past the 4096-byte buffer into its unmapped guard page
        gpu.launch(prog, "copy", grid=(1,), block=(64,), args=[src, out, np.int32(1024 - 32)])
    r = e.value.record
    assert r.kind == "unmapped" and not r.write and r.bits == 32
    assert r.wave is not None and r.workgroup == (0, 0, 0) and r.pc is not None
    assert "load" in r.instruction
    assert set(r.lanes) == set(range(32, 64)) if gpu.family == "cdna" else set(r.lanes) == set(range(32))
    assert all(src.addr + 4096 <= a < src.addr + 8192 for a in r.addresses)
    assert r.active_lanes
    # the faulting wave stored nothing; the buffers are as before
    np.testing.assert_array_equal(np.frombuffer(gpu.read(src), np.uint32), np.arange(1024))
    assert np.frombuffer(gpu.read(out), np.uint32)[32:64].tolist() == host[32:64].tolist()
    check_next_launch_works(gpu, prog, src, out)


def test_jump_to_garbage(setup):
    from emu.amd import GPUFault
    gpu, prog, src, out = setup
    junk = gpu.alloc(4096)
    gpu.write(junk, np.full(1024, 0xFFFFFFFF, np.uint32))
    with pytest.raises(GPUFault) as e:
        gpu.launch(prog, "jump", grid=(1,), block=(32,), args=[out, np.uint64(junk.addr)])
    r = e.value.record
    assert r.kind == "illegal-instruction" and r.pc == junk.addr
    with pytest.raises(GPUFault) as e:  # into unmapped memory: the instruction fetch faults
        gpu.launch(prog, "jump", grid=(1,), block=(32,), args=[out, np.uint64(0xDEAD0000)])
    assert e.value.record.kind == "unmapped" and e.value.record.pc == 0xDEAD0000
    check_next_launch_works(gpu, prog, src, out)


def test_trap(setup):
    from emu.amd import GPUFault
    gpu, prog, src, out = setup
    with pytest.raises(GPUFault) as e:
        gpu.launch(prog, "trap", grid=(1,), block=(32,), args=[out])
    r = e.value.record
    assert r.kind == "trap" and "s_trap" in r.instruction
    assert r.active_lanes == (5,)
    check_next_launch_works(gpu, prog, src, out)


def test_bad_launches_are_refused(setup):
    gpu, prog, src, out = setup
    for grid, block, args, what in (((1,), (2048,), [src, out, np.int32(0)], "work-items"),
                                    ((0,), (64,), [src, out, np.int32(0)], "positive"),
                                    ((1,), (64,), [src, out], "explicit arguments"),
                                    ((1,), (64,), [src, out, np.int32(0)], "LDS")):
        with pytest.raises(ValueError, match=what):
            gpu.launch(prog, "copy", grid=grid, block=block, args=args,
                       dynamic_lds=1 << 20 if what == "LDS" else 0)
    with pytest.raises(ValueError, match="no kernel"):
        gpu.launch(prog, "nope", args=[])
    check_next_launch_works(gpu, prog, src, out)
