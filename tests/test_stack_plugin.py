"""The pytest plugin (entry point hwemu): `DEV=MOCKKFD+AMD pytest` in a fresh project gives tests a `device`, a GPU
fault fails the test that caused it with the VA in its text, and `-n 2` works (a device per worker)."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

from stack.codegen import opencl

pytestmark = [pytest.mark.llvm,
              pytest.mark.skipif(not opencl.available(), reason="clang-19 and ld.lld-19 are needed to build kernels")]

USER_TESTS = '''
import numpy as np
from stack.codegen import opencl

SRC = "kernel void fill(global int *p, int v) { p[get_global_id(0)] = v; }"


def test_copy(device):
    buf = device.alloc(64)
    device.copyin(buf, np.arange(16, dtype=np.int32))
    assert np.frombuffer(device.copyout(buf), np.int32).tolist() == list(range(16))


def test_kernel(device):
    buf = device.alloc(128)
    device.program(opencl.compile_cl(SRC, device.arch, "-O3"), "fill")(buf, np.int32(9), global_size=(1,),
                                                                       local_size=(32,))
    assert np.frombuffer(device.copyout(buf), np.int32).tolist() == [9] * 32
'''
FAULTY_TEST = '''

def test_zz_fault(device):
    prog = device.program(opencl.compile_cl(SRC, device.arch, "-O3"), "fill")
    prog(0x7e0000005000, np.int32(1), global_size=(1,), local_size=(4,))
'''


def run_pytest(tmp_path, source: str, *args: str) -> subprocess.CompletedProcess:
    (tmp_path / "test_user.py").write_text(source)
    env = dict(os.environ, DEV="MOCKKFD+AMD:gfx1100")
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *args, "test_user.py"],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)


def test_device_fixture_and_fault_report(tmp_path):
    r = run_pytest(tmp_path, USER_TESTS + FAULTY_TEST)
    assert "3 passed, 1 error" in r.stdout, r.stdout + r.stderr
    assert "GPU fault left behind by the test" in r.stdout and "VA 0x7e0000005000: NotPresent" in r.stdout
    assert "GPU faults" in r.stdout  # the report section
    # the fault report (emu.amd.debug.fault) reaches the test's report through the driver's event data
    assert "faulting lanes (4):" in r.stdout and "workgroup (0, 0, 0), wave 0" in r.stdout, r.stdout


def test_xdist_workers(tmp_path):
    r = run_pytest(tmp_path, USER_TESTS, "-n", "2")
    assert r.returncode == 0 and "2 passed" in r.stdout, r.stdout + r.stderr
