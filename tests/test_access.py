"""The per-lane access functions native code shares (emu.amd.exec.access): compiled once per wave size, and loaded
before any region or handler that calls them, also in a process that takes everything from the disk cache."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from llvmlite import ir

from emu import cache
from emu.amd import hw, isa
from emu.amd.exec import access
from stack.codegen import opencl

SOURCE = r"""
// every access width the tiers share a function for, through global memory and LDS
kernel void widths(global const uchar *b, global const ushort *h, global const uint *w, global const ulong *d,
                   global const uint4 *q, global ulong *out) {
  __local uint4 s[64];
  uint i = get_global_id(0), l = get_local_id(0);
  s[l] = q[i];
  barrier(CLK_LOCAL_MEM_FENCE);
  uint4 v = s[63 - l];
  out[i] = b[i] + 3ul * h[i] + 5ul * w[i] + 7ul * d[i] + 11ul * (v.x + v.y + v.z + v.w);
}
"""

_PROBE = r"""
import sys
import numpy as np
from emu.amd import GPU
from emu.pcode.llvmjit import engine
rng = np.random.default_rng(1)
n = 128
ins = [rng.integers(0, 1 << k, n * m, dtype=t) for k, m, t in ((8, 1, np.uint8), (16, 1, np.uint16),
       (32, 1, np.uint32), (63, 1, np.uint64), (32, 4, np.uint32))]
gpu = GPU(sys.argv[1])
prog = gpu.load(open(sys.argv[2], "rb").read())
bufs = [gpu.alloc(a.nbytes) for a in ins] + [gpu.alloc(8 * n)]
for b, a in zip(bufs, ins):
    gpu.write(b, a)
gpu.launch(prog, "widths", grid=(n // 64, 1, 1), block=(64, 1, 1), args=bufs)
out = np.frombuffer(gpu.read(bufs[-1]), np.uint64)
q = (ins[4].reshape(n, 4).astype(np.uint64).sum(1) & 0xFFFFFFFF).reshape(-1, 64)[:, ::-1].reshape(-1)  # uint sum
want = ins[0] + 3 * ins[1].astype(np.uint64) + 5 * ins[2].astype(np.uint64) + 7 * ins[3] + 11 * q
print(sum(engine(e).stats["compiled"] for e in ("main", "threaded", "access")), bool((out == want).all()))
"""


def _tables_only(folder: Path, arch: str) -> Path:
    """A cache `folder` holding only the converted vendor tables (hardware, ISA) of this process's cache, linked:
    no compiled code, and no process converting the tables again (seconds each)."""
    hw.tables(), isa.load(arch)  # converted into this process's cache, if they were not yet
    folder.mkdir()
    for p in [*cache.root().glob("hw-*.pickle"), *cache.root().glob("isa-*.pickle")]:
        (folder / p.name).symlink_to(p)
    return folder


@pytest.mark.skipif(not opencl.available(), reason="clang-19 and ld.lld-19 are needed to build kernels")
@pytest.mark.parametrize("tier", ["jit", "threaded"])
@pytest.mark.parametrize("arch", ["gfx1100", "gfx942"])
def test_a_second_process_loads_everything_from_disk(tmp_path, arch, tier):
    """The first process compiles the kernel's code and the access functions; the second loads all of it from the
    cache (the access functions before the code that calls them) and computes the same."""
    obj = tmp_path / "widths.co"
    obj.write_bytes(opencl.compile_cl(SOURCE, arch))
    env = {**os.environ, "HWEMU_CACHE": str(_tables_only(tmp_path / "cache", arch)), "HWEMU_TIER": tier}
    runs = [subprocess.run([sys.executable, "-c", _PROBE, arch, str(obj)], env=env, capture_output=True, text=True)
            for _ in range(2)]
    for r in runs:
        assert r.returncode == 0, r.stderr[-2000:]
    (first, ok1), (second, ok2) = (r.stdout.split() for r in runs)
    assert ok1 == ok2 == "True"
    assert int(first) > 1 and int(second) == 0


def test_a_width_without_a_shared_function_is_built_into_the_module():
    m = ir.Module("m")
    shared = access.function(m, "hwemu_vm_load", 32, 32)
    own = access.function(m, "hwemu_vm_load", 32, 24)
    assert shared.is_declaration and shared.name == "hwemu_vm_load32.w32"
    assert not own.is_declaration and own.linkage == "internal"
    assert access.function(m, "hwemu_vm_load", 32, 32) is shared


_COMPILED = r"""
import sys
from emu.amd.exec import access, jit
from emu.pcode.llvmjit import engine
if sys.argv[1] == "prebuild":
    from emu.amd.exec.prebuild import prebuild
    prebuild()
else:
    for lanes in (32, 64):
        access.ensure(lanes, jit.sources())
print(engine(access.ENGINE).stats["compiled"])
"""


def test_prebuild_leaves_the_access_functions_of_both_wave_sizes_in_the_cache(tmp_path):
    """The prebuild (./dev) compiles them into an empty cache: a later process that needs them compiles none."""
    env = {**os.environ, "HWEMU_CACHE": str(_tables_only(tmp_path / "cache", "gfx1100"))}
    runs = [subprocess.run([sys.executable, "-c", _COMPILED, step], env=env, capture_output=True, text=True)
            for step in ("prebuild", "ensure")]
    for r in runs:
        assert r.returncode == 0, r.stderr[-2000:]
    assert [r.stdout.strip() for r in runs] == ["2", "0"]
