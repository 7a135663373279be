"""Kernarg preloading on every dispatch path (issue 13): a gfx942 kernel clang-19 built with
`-amdgpu-kernarg-preload-count` reads its first kernargs from user SGPRs (AMDGPUUsage, "Preloaded Kernel
Arguments": KERNARG_PRELOAD_SPEC_LENGTH / _OFFSET dwords after the enabled user SGPRs; the first 256 bytes of the
code are a prologue for firmware without the feature, s_trap 2 in LLVM 19).

- AQL: the CDNA3 packet processor reads the descriptor, preloads, and starts past the prologue.
- PM4: the command processor never reads the descriptor; the runtime (stack.Device) writes the dwords into
  COMPUTE_USER_DATA after the others and points COMPUTE_PGM past the prologue. Started at the prologue, as
  firmware without preloading would, the wave traps.
"""
from __future__ import annotations

import ctypes
import dataclasses
import struct

import numpy as np
import pytest

from objfile.codeobj import CodeObject, KernargPreload
from objfile.kernargs import hidden_args, pack_kernargs
from stack import Device
from stack.codegen import opencl
from stack.hcq import kfd_ioctl as k
from tools.kfd_client import HANG_MS, VRAM_FLAGS, RawClient, aql_packet, wait_for

pytestmark = pytest.mark.skipif(not opencl.available(), reason="clang-19 and ld.lld-19 are needed to build kernels")
SRC = """#pragma OPENCL FP_CONTRACT OFF
kernel void k(global float *y, global const float *x, float a, int b) {
  int i = get_global_id(0);
  y[i] = a * x[i] + (float)(b * i);
}"""
N, BLOCK = 256, 64


def _build(count: int) -> bytes:
    code = opencl.compile_cl(SRC, "gfx942", "-O3", ("-mllvm", f"-amdgpu-kernarg-preload-count={count}"))
    kd = CodeObject.parse(code).kernels["k"].descriptor
    assert kd.kernarg_preload.length == {1: 2, 4: 6}[count]  # dwords: two pointers, a float, an int
    return code


def _expected(x: np.ndarray, a: float, b: int) -> np.ndarray:
    return np.float32(a) * x + (np.int32(b) * np.arange(N, dtype=np.int32)).astype(np.float32)


@pytest.mark.parametrize("count", [1, 4])
def test_preloaded_kernel_through_pm4(count):
    """stack.Device on MOCKKFD: PM4 SET_SH_REG / DISPATCH_DIRECT with the preloaded dwords in USER_DATA."""
    code = _build(count)
    dev = Device("MOCKKFD+AMD:gfx942")
    x = np.linspace(-3, 5, N, dtype=np.float32)
    xb, yb = dev.alloc(4 * N), dev.alloc(4 * N)
    dev.copyin(xb, x.tobytes())
    dev.program(code, "k")(yb, xb, np.float32(1.5), np.int32(-3), global_size=(N // BLOCK,), local_size=(BLOCK,))
    dev.synchronize()
    np.testing.assert_array_equal(np.frombuffer(dev.copyout(yb, 4 * N), np.float32), _expected(x, 1.5, -3))


@pytest.mark.parametrize("count", [1, 4])
def test_preloaded_kernel_through_aql(count):
    """An AQL KERNEL_DISPATCH packet: the packet processor preloads from the packet's kernarg address."""
    c = RawClient("gfx942")
    co = CodeObject.parse(_build(count))
    kern = co.kernels["k"]
    code = c.alloc(co.image_size, VRAM_FLAGS)
    code.mem[:co.image_size] = np.frombuffer(bytes(co.image(code.va)), np.uint8)
    x = np.linspace(-3, 5, N, dtype=np.float32)
    xb, yb, args, sig = c.alloc(4 * N), c.alloc(4 * N), c.alloc(4096), c.alloc(4096)
    xb.mem[:4 * N] = x.view(np.uint8)
    ka = pack_kernargs(kern, [yb.va, xb.va, np.float32(-0.25), np.int32(7)], hidden_args((N,), (BLOCK,)))
    args.mem[:len(ka)] = np.frombuffer(ka, np.uint8)
    sig.mem.view(np.int64)[1] = 1
    q = c.queue(k.QUEUE_TYPE_COMPUTE_AQL, ring_size=4096)
    pkt = aql_packet(2, struct.pack("<HHHHHIIIIIQQ", 1, BLOCK, 1, 1, 0, N, 1, 1, 0, 0,
                                     code.va + kern.descriptor_address, args.va), sig.va)
    q.ring.mem[:64] = np.frombuffer(pkt, np.uint8)
    q.gart.mem[56:64].view(np.uint64)[0] = 1  # write_dispatch_id
    q.doorbell[0] = 0
    assert wait_for(lambda: sig.mem.view(np.int64)[1] == 0)
    np.testing.assert_array_equal(yb.mem[:4 * N].view(np.float32), _expected(x, -0.25, 7))


def test_without_preloading_firmware_the_prologue_traps():
    """PM4 with COMPUTE_PGM at the kernel's entry and only the enabled user SGPRs, as a runtime that ignores the
    descriptor's preload field programs it: the wave runs the prologue's s_trap 2."""
    from stack.hcq import pm4
    from stack.hcq.program import user_sgprs
    c = RawClient("gfx942")
    co = CodeObject.parse(_build(1))
    kern = co.kernels["k"]
    code = c.alloc(co.image_size, VRAM_FLAGS)
    code.mem[:co.image_size] = np.frombuffer(bytes(co.image(code.va)), np.uint8)
    kd = kern.descriptor
    args = c.alloc(4096)
    ev = c.ioctl("CREATE_EVENT", k.CreateEvent(event_type=k.EVENT_HW_EXCEPTION))
    plain = dataclasses.replace(kd, kernarg_preload=KernargPreload.decode(0))
    user = user_sgprs(plain, args.va, 0, 0, 0, (0, 0, 0, 0), 0, 0)
    entry = code.va + kern.entry
    q = c.queue()
    q.submit(pm4.set_regs(pm4.COMPUTE_PGM_LO, entry >> 8, entry >> 40)
             + pm4.set_regs(pm4.COMPUTE_PGM_RSRC1, kd.rsrc1.value, kd.rsrc2.value)
             + pm4.set_regs(pm4.COMPUTE_USER_DATA_0, *user)
             + pm4.set_regs(pm4.COMPUTE_START_X, 0, 0, 0, BLOCK, 1, 1)
             + pm4.dispatch_direct((1, 1, 1), pm4.dispatch_initiator(9, False)))
    data = (k.EventData * 1)(k.EventData(event_id=ev.event_id))
    w = c.ioctl("WAIT_EVENTS", k.WaitEvents(events_ptr=ctypes.addressof(data), num_events=1, timeout=HANG_MS))
    assert w.wait_result == k.WAIT_COMPLETE
    rec = c.system.gpus[0].faults[-1]
    assert rec.kind == "trap" and rec.pc == entry
