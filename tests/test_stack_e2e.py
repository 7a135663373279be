"""stack.Device on MOCKKFD, the whole hardware path: SDMA copies, PM4 dispatches, signals, events, faults.

The kernel corpus (tests/kernels/run, compiled by clang-19) runs through stack.Device on gfx1100, gfx1201 and
gfx942; every output buffer must be bit-identical to the direct runner's (emu.amd.GPU) and each case keeps its
numpy check."""
from __future__ import annotations

import functools

import numpy as np
import pytest
import test_kernels as corpus

from objfile.codeobj import CodeObject
from stack import Device, GPUError
from stack.codegen import opencl

pytestmark = [pytest.mark.llvm,
              pytest.mark.skipif(not opencl.available(), reason="clang-19 and ld.lld-19 are needed to build kernels")]

ARCHS = ["gfx1100", "gfx1201", "gfx942", "gfx90a"]
WAIT = 120.0  # seconds a wait may take here before GPUError (a bound against hangs, not a timing check)
RESUME_WAIT = 30.0  # the same for a two-workgroup kernel after a fault


@functools.cache
def device(arch: str) -> Device:
    dev = Device(f"MOCKKFD+AMD:{arch}")
    dev.timeout = WAIT
    return dev


def through_stack(arch, code, kernel, grid, block, *args):
    """test_kernels.launch's contract, run twice: the direct runner, then stack.Device; outputs must agree bit for
    bit. Returns (device, [buffer or scalar per arg]) for the case's numpy check."""
    gpu, direct = direct_launch(arch, code, kernel, grid, block, *args)
    dev = device(arch)
    bufs = corpus.to_buffers(args, dev.alloc, dev.copyin)
    dev.program(code, kernel)(*bufs, global_size=grid, local_size=block)
    dev.synchronize()
    for i, (a, d, s) in enumerate(zip(args, direct, bufs, strict=True)):
        if isinstance(a, np.ndarray):
            assert dev.copyout(s, a.nbytes) == gpu.read(d, a.nbytes), f"argument {i} differs from the direct runner"
    return dev, bufs


def stack_result(dev, buf, like: np.ndarray) -> np.ndarray:
    return np.frombuffer(dev.copyout(buf, like.nbytes), like.dtype)


direct_launch = corpus.launch


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("case", list(corpus.CASES))
def test_corpus_through_stack(case, arch, monkeypatch):
    name, fn = corpus.CASES[case]
    monkeypatch.setattr(corpus, "launch", through_stack)
    monkeypatch.setattr(corpus, "result", stack_result)
    fn(arch, corpus.build(name, arch, "-O3"))


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("case", ["private_index", "spill"])
def test_scratch_through_stack(case, arch, monkeypatch):
    """Private arrays and spills at -O0: scratch sized by the stack from the descriptor (TMPRING_SIZE, base)."""
    name, fn = corpus.CASES[case]
    code = corpus.build(name, arch, "-O0")
    kernel = {"private_index": "private_index", "spill": "spill"}[case]
    assert CodeObject.parse(code).kernels[kernel].descriptor.private_segment_fixed_size > 0
    monkeypatch.setattr(corpus, "launch", through_stack)
    monkeypatch.setattr(corpus, "result", stack_result)
    fn(arch, code)
    assert device(arch).scratch is not None and device(arch).scratch_layout.tmpring_size


STORE = "kernel void store(global int *p, int v) { p[get_global_id(0)] = v + (int)get_global_id(0); }"


@pytest.mark.parametrize("arch", ARCHS)
def test_fault_names_va_and_next_program_works(arch):
    """A store to an unmapped address: synchronize() raises GPUError naming the VA; the device stays usable (the
    device model resumes the queue after the faulting dispatch once WAIT_EVENTS has reported the fault)."""
    dev = Device(f"MOCKKFD:0-4+AMD::{arch}", index=4)  # a system of its own: its faults are nobody else's
    dev.timeout = WAIT
    prog = dev.program(opencl.compile_cl(STORE, arch, "-O3"), "store")
    bad = 0x7E00_0000_3000
    prog(bad, np.int32(1), global_size=(1,), local_size=(8,))
    with pytest.raises(GPUError, match=f"VA {bad:#x}: NotPresent"):
        dev.synchronize()
    buf = dev.alloc(64 * 4)
    prog(buf, np.int32(100), global_size=(2,), local_size=(32,))
    dev.timeout = RESUME_WAIT
    try:
        dev.synchronize()
    except GPUError as e:
        pytest.fail(f"the queue did not resume after the fault was reported: {e}")
    finally:
        dev.timeout = WAIT
    np.testing.assert_array_equal(np.frombuffer(dev.copyout(buf), np.int32), 100 + np.arange(64))


def test_copies_and_counters():
    dev = device("gfx1100")
    data = np.random.default_rng(1).integers(0, 256, (5 << 20) + 3, dtype=np.uint8)  # more than the staging buffer
    buf = dev.alloc(data.nbytes)
    dev.copyin(buf, data)
    assert dev.copyout(buf) == data.tobytes()
    assert dev.copyout(buf, 10) == data[:10].tobytes()
    dev.copyin(buf, b"\x01\x02")
    dev.copyin(buf, memoryview(bytearray(b"\x05")))
    assert dev.copyout(buf, 3) == bytes([5, 2, data[2]])
    c = dev.counters()
    assert c["ioctls"]["CREATE_QUEUE"] >= 2 and c["sdma"]["COPY"] >= 4 and c["sdma"]["TRAP"] >= 4
    dev.free(buf)


def test_bad_arguments():
    dev = device("gfx1100")
    other = device("gfx942")
    buf = dev.alloc(16)
    for bad in (0, -1, 1.5, "8"):
        with pytest.raises(ValueError, match="alloc: size"):
            dev.alloc(bad)
    with pytest.raises(ValueError, match="do not fit"):
        dev.copyin(buf, bytes(17))
    with pytest.raises(TypeError, match="copyin takes"):
        dev.copyin(buf, 12)
    with pytest.raises(ValueError, match="belongs to"):
        other.copyout(buf)
    with pytest.raises(ValueError, match="code object is for gfx1100"):
        other.program(opencl.compile_cl(STORE, "gfx1100", "-O3"), "store")
    prog = dev.program(opencl.compile_cl(STORE, "gfx1100", "-O3"), "store")
    with pytest.raises(ValueError, match="no kernel 'nope'"):
        dev.program(opencl.compile_cl(STORE, "gfx1100", "-O3"), "nope")
    with pytest.raises(ValueError, match="takes 2 explicit arguments"):
        prog(buf, global_size=(1,), local_size=(4,))
    with pytest.raises(ValueError, match="allows at most"):
        prog(buf, np.int32(0), global_size=(1,), local_size=(2048,))
    with pytest.raises(TypeError, match="global_size"):
        prog(buf, np.int32(0), global_size="1", local_size=(4,))
    dev.free(buf)
    with pytest.raises(ValueError, match="was freed"):
        dev.copyin(buf, b"")


def test_device_from_env(monkeypatch):
    monkeypatch.setenv("DEV", "MOCKKFD+AMD:LLVM:gfx942")
    dev = Device()
    assert (dev.arch, dev.name, dev.spec.renderer) == ("gfx942", "AMD:0", "LLVM")


def test_devices_by_index():
    a, b = Device("MOCKKFD:0,1+AMD::gfx1100"), Device("MOCKKFD:0,1+AMD::gfx1100", index=1)
    assert (a.name, b.name) == ("AMD:0", "AMD:1") and a.node.gpu_id != b.node.gpu_id
    with pytest.raises(ValueError, match="selects 2 GPU"):
        Device("MOCKKFD:0,1+AMD::gfx1100", index=2)
    for dev, v in ((a, 1), (b, 2)):  # each GPU signals through the process's one event page
        buf = dev.alloc(32 * 4)
        dev.program(opencl.compile_cl(STORE, dev.arch, "-O3"), "store")(buf, np.int32(v), global_size=(1,),
                                                                        local_size=(32,))
        assert np.frombuffer(dev.copyout(buf), np.int32).tolist() == list(range(v, v + 32))



@pytest.mark.parametrize("queue_type", ["sdma", "pm4"])
def test_ring_wraps(queue_type):
    """A 4 KiB ring wrapped several times: PM4 packets straddle the end, SDMA packets never do (NOP padding); every
    write lands in order."""
    import time

    from stack.hcq import kfd_ioctl, pm4, sdma
    from stack.hcq.memory import GTT_PUBLIC
    from stack.hcq.queue import Doorbells, Queue
    dev = device("gfx1100")
    qtype = kfd_ioctl.QUEUE_TYPE_SDMA if queue_type == "sdma" else kfd_ioctl.QUEUE_TYPE_COMPUTE
    q = Queue(dev.kfd, dev.memory, dev.node, Doorbells(dev.kfd), qtype, ring_bytes=0x1000)
    out = dev.memory.alloc(0x1000, GTT_PUBLIC)
    words = out.view()
    n = 400  # 24-byte writes: more than twice around the ring, and 4096 is no multiple of 24
    for i in range(n):
        q.submit([sdma.write_untiled(out.va + 4 * (i % 64), [i, i]) if queue_type == "sdma" else
                  pm4.write_data(out.va + 4 * (i % 64), i, i)])
    start = time.monotonic()
    while words[(n - 1) % 64 + 1] != n - 1 and time.monotonic() - start < WAIT:
        time.sleep(0.01)
    expect = [max(i for i in range(n) if i % 64 == j or i % 64 == j - 1) for j in range(65)]
    assert list(words[:65]) == expect
    assert q.put * q.unit > 2 * 0x1000 and sum(q.packets.values()) == n


def test_malformed_packet_is_a_hardware_exception():
    """An unknown PM4 opcode stops the queue with a CP error, reported through the HW_EXCEPTION event."""
    from stack.hcq import pm4
    dev = Device("MOCKKFD:0-6+AMD::gfx1201", index=6)  # a system of its own: its queue stays stopped
    dev.timeout = WAIT
    dev._submit_compute([pm4.packet3(0xEE, [0, 0])])
    with pytest.raises(GPUError, match="hardware exception on AMD:6"):
        dev.synchronize()


def test_close_releases_everything():
    """close(): DESTROY_QUEUE, DESTROY_EVENT, every buffer freed; the GPU then serves a new Device."""
    text = "MOCKKFD:0-7+AMD::gfx1100"  # a system of its own
    with Device(text, index=7) as dev:
        buf = dev.alloc(32 * 4)
        dev.program(opencl.compile_cl(STORE, dev.arch, "-O3"), "store")(buf, np.int32(5), global_size=(1,),
                                                                        local_size=(32,))
        before = dict(dev.kfd.ioctls)
    after = dev.kfd.ioctls
    assert after["DESTROY_QUEUE"] - before.get("DESTROY_QUEUE", 0) == 2
    assert after["DESTROY_EVENT"] - before.get("DESTROY_EVENT", 0) == 3
    assert dev.memory.live == {dev.kfd.events} and buf.freed  # the first device allocated the event page
    assert after["FREE_MEMORY_OF_GPU"] == after["ALLOC_MEMORY_OF_GPU"] - 1  # all but the process's event page
    with pytest.raises(ValueError, match="closed"):
        dev.alloc(4)
    with Device(text, index=7) as again:
        b = again.alloc(8)
        again.copyin(b, b"abcdefgh")
        assert again.copyout(b) == b"abcdefgh"


PRIVATE = """kernel void priv(global int *o, int n) {
  int a[SIZE];
  for (int i = 0; i < SIZE; i++) a[i] = i * n;
  int g = get_global_id(0);
  o[g] = a[(g * 7) % SIZE] + a[(n + g) % SIZE];
}"""


def test_scratch_grows_and_kernargs_wrap():
    """A kernel needing more private memory than the scratch has grows it; the kernarg arena wraps around."""
    dev = Device("MOCKKFD:0-5+AMD::gfx1100", index=5)  # a system of its own
    dev.timeout = WAIT
    out = dev.alloc(64 * 4)
    g, scratches = np.arange(64), []
    for size in (16, 512):
        code = opencl.compile_cl(PRIVATE.replace("SIZE", str(size)), dev.arch, "-O0")
        prog = dev.program(code, "priv")
        assert prog.private_bytes >= 4 * size
        dev._kernarg_at = dev.kernargs.size - 64  # the next launch wraps
        prog(out, np.int32(3), global_size=(2,), local_size=(32,))
        assert dev.scratch_layout.lane_bytes >= prog.private_bytes and dev.scratch.size >= dev.scratch_layout.size
        scratches.append(dev.scratch)
        np.testing.assert_array_equal(np.frombuffer(dev.copyout(out), np.int32),
                                      (g * 7 % size) * 3 + (3 + g) % size * 3)
    assert scratches[0].freed and not scratches[1].freed
