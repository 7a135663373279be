"""The unmodified tinygrad 0.14 runtime on hwemu's MOCKKFD: each case runs a tinygrad program in its own process
(DEV is read once, at import), through `hwemu run` or the pytest plugin, with tinygrad's renderer choice on a
machine without ROCm (LLVM through Debian's libLLVM-19), and checks results against numpy."""
from __future__ import annotations

import ctypes.util
import json
import os
import subprocess
import sys
import textwrap

import pytest

pytestmark = pytest.mark.skipif(ctypes.util.find_library("LLVM-19") is None,
                                reason="tinygrad's AMD:LLVM renderer needs libLLVM-19 (Debian llvm-19)")
TIMEOUT = 600


def run_tinygrad(code: str, dev: str, env: dict | None = None, hwemu_run: bool = True,
                 unset: tuple[str, ...] = ()) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-c", textwrap.dedent(code)]
    if hwemu_run:
        cmd = [sys.executable, "-m", "emu.cli", "run", "--", *cmd]
    e = {**{k: v for k, v in os.environ.items() if k != "HWEMU" and k not in unset}, "DEV": dev, **(env or {})}
    return subprocess.run(cmd, capture_output=True, text=True, timeout=TIMEOUT, env=e, cwd="/")


def check(p: subprocess.CompletedProcess) -> str:
    assert p.returncode == 0, f"exit {p.returncode}\n{p.stdout[-3000:]}\n{p.stderr[-5000:]}"
    return p.stdout


def profiled(code: str, marker: str, env: dict) -> tuple[object, str]:
    """Run tinygrad `code`, which prints `marker` and JSON, under PROFILE=1 and HWEMU_STATS on gfx1100 (LLVM
    renderer): (the JSON, the first kernel's HWEMU_STATS line)."""
    p = run_tinygrad(code, "MOCKKFD+AMD:LLVM:gfx1100", {"PROFILE": "1", "HWEMU_STATS": "1", **env})
    out = json.loads(check(p).split(f"{marker} ", 1)[1].splitlines()[0])
    return out, next(ln for ln in p.stderr.splitlines() if ln.startswith("kernel@"))


OPS = """
import numpy as np
from tinygrad import Tensor, TinyJit, dtypes
rng = np.random.default_rng(0)
a, b = rng.standard_normal((8, 16)).astype(np.float32), rng.standard_normal((16, 8)).astype(np.float32)
def close(name, got, want, tol):
    assert np.allclose(got, want, rtol=tol, atol=tol), (name, got, want)
close("add", (Tensor(a) + 1.5).numpy(), a + 1.5, 1e-6)
close("broadcast", (Tensor(a) * Tensor(a[0])).numpy(), a * a[0], 1e-6)
close("sum", Tensor(a).sum(axis=1).numpy(), a.sum(axis=1), 1e-5)
close("max", Tensor(a).max(axis=0).numpy(), a.max(axis=0), 0)
close("matmul", (Tensor(a) @ Tensor(b)).numpy(), a @ b, 1e-4)
close("f16", (Tensor(a).half() * 3).numpy(), a.astype(np.float16) * np.float16(3), 1e-3)
i = rng.integers(-1000, 1000, (64,), dtype=np.int32)
assert ((Tensor(i) * 3 - 7).numpy() == i * 3 - 7).all()
assert ((Tensor(i) // 7).numpy() == i // 7).all() and ((Tensor(i) % 7).numpy() == i % 7).all()
c = np.arange(-64, 64, dtype=np.int8)
assert ((Tensor(c) + 100).numpy() == c + np.int8(100)).all()
assert ((Tensor(a) > 0).numpy() == (a > 0)).all() and (Tensor(a > 0).sum().numpy() == (a > 0).sum())
x, w = rng.standard_normal((1, 2, 6, 6)).astype(np.float32), rng.standard_normal((3, 2, 3, 3)).astype(np.float32)
ref = np.array([[[[(x[0, :, r:r + 3, s:s + 3] * w[o]).sum() for s in range(4)] for r in range(4)] for o in range(3)]])
close("conv2d", Tensor(x).conv2d(Tensor(w)).numpy(), ref, 1e-4)
t = np.linspace(-20, 20, 101, dtype=np.float32)
close("exp", Tensor(t / 4).exp().numpy(), np.exp(t / 4), 1e-5)
close("log", Tensor(np.abs(t) + 1).log().numpy(), np.log(np.abs(t) + 1), 1e-5)
close("sqrt", Tensor(np.abs(t)).sqrt().numpy(), np.sqrt(np.abs(t)), 1e-6)
close("sin", Tensor(t).sin().numpy(), np.sin(t), 1e-5)
close("cos", Tensor(t).cos().numpy(), np.cos(t), 1e-5)
r = Tensor.rand(4096).numpy()
assert 0 <= r.min() and r.max() < 1 and abs(r.mean() - 0.5) < 0.02 and len(np.unique(r)) > 4000
@TinyJit
def f(x): return (x * 2 + 1).realize()
for k in range(4):
    y = f(Tensor(a + k))
close("jit", y.numpy(), (a + 3) * 2 + 1, 1e-6)
print("ALL OK")
"""


def test_tensor_ops_gfx1100_default_renderer():
    assert "ALL OK" in check(run_tinygrad(OPS, "MOCKKFD+AMD", {"HWEMU_STATS": "1"}))


@pytest.mark.parametrize("arch", ["gfx1201", "gfx942"])
def test_tensor_ops_other_archs(arch):
    assert "ALL OK" in check(run_tinygrad(OPS, f"MOCKKFD+AMD:LLVM:{arch}"))


def test_hwemu_served_the_run():
    p = run_tinygrad("from tinygrad import Tensor; print(Tensor([1, 2, 3]).add(1).numpy().tolist())", "MOCKKFD+AMD",
                     {"HWEMU_STATS": "1"})
    assert "[2, 3, 4]" in check(p)
    assert "hwemu: MOCKKFD with 6 emulated gfx1100" in p.stderr and "1 dispatches" in p.stderr


def test_six_gpus_by_default_and_fault_injection_hook():
    """As tinygrad's own mock: six GPUs when DEV names none, copies between them, and MOCKGPU_EMU_FAULTADDR (its
    test_hcq's test_on_device_hang) raising a VM fault that tinygrad reports with the address as set, while set."""
    code = """
    import os
    import numpy as np
    from tinygrad import Device, Tensor
    a = np.arange(3000, dtype=np.float32)
    t = Tensor(a, device="AMD:0").to("AMD:5")
    assert ((t * 2).to("AMD:1").numpy() == a * 2).all()
    dev = Device["AMD"]
    os.environ["MOCKGPU_EMU_FAULTADDR"] = "0xDEADBEE1"
    try:
        dev.on_device_hang()
    except RuntimeError as e:
        print("RuntimeError", e)
    os.environ["MOCKGPU_EMU_FAULTADDR"] = "zz"
    try:
        dev.iface.sleep(1)
    except OSError as e:
        print("OSError", e)
    del os.environ["MOCKGPU_EMU_FAULTADDR"]  # withdrawn: later waits (they sleep after 200 ms) report no fault
    dev.iface.sleep(1)
    assert dev.iface.queue_event_arr[1].memory_exception_data.gpu_id == 0
    assert (Tensor(a).sum().numpy() == a.sum())
    print("OK")
    """
    out = check(run_tinygrad(code, "MOCKKFD+AMD"))
    assert "RuntimeError MMU fault: 0xDEADBEE1 | NotPresent=1" in out and "not a hexadecimal address" in out, out
    assert out.endswith("OK\n"), out


def test_wall_time_limits_sized_for_the_emulator():
    """Unless set: tinygrad's 30 s wait for a signal (sized for hardware) becomes 300 s, hwemu's 10 s per dispatch
    240 s (below it), so verdicts do not depend on the machine's load."""
    code = "import os; from tinygrad import Device; Device['AMD']; print(os.environ['HCQDEV_WAIT_TIMEOUT_MS'], " \
           "os.environ['HWEMU_TIMEOUT'])"
    unset = ("HCQDEV_WAIT_TIMEOUT_MS", "HWEMU_TIMEOUT")
    assert check(run_tinygrad(code, "MOCKKFD+AMD", unset=unset)).split() == ["300000", "240"]
    p = run_tinygrad(code, "MOCKKFD+AMD", {"HCQDEV_WAIT_TIMEOUT_MS": "1234", "HWEMU_TIMEOUT": "5"})
    assert check(p).split() == ["1234", "5"]


def test_cpu_device_beside_the_emulated_gpu_without_cc():
    # tinygrad's CPU device runs CC (default `clang`); where only Debian's clang-19 is installed (as ./dev does), the
    # adapter points CC at it, so a program that also uses the CPU device runs unchanged
    code = """
    import numpy as np
    from tinygrad import Tensor
    x = np.arange(12, dtype=np.float32)
    assert np.allclose((Tensor(x, device="CPU") * 3).sum().item(), (x * 3).sum())
    assert np.allclose((Tensor(x) * 3).to("CPU").numpy(), x * 3)
    print("ALL OK")
    """
    assert "ALL OK" in check(run_tinygrad(code, "MOCKKFD+AMD", unset=("CC",)))


def test_hwemu_off_gives_other_mock_back():
    p = run_tinygrad("from tinygrad import Device; Device['AMD']", "MOCKKFD+AMD", {"HWEMU": "0"})
    assert p.returncode != 0 and "test.mockgpu" in p.stderr  # CPython's own `test` has no mockgpu: ours is off


def test_copies_between_two_gpus():
    code = """
    import numpy as np
    from tinygrad import Tensor
    a = np.arange(3000, dtype=np.float32)
    t1 = Tensor(a, device="AMD:0").to("AMD:1")
    assert t1.device == "AMD:1" and (t1.numpy() == a).all()
    assert ((t1 * 2).to("AMD:0").numpy() == a * 2).all()
    print("OK")
    """
    assert "OK" in check(run_tinygrad(code, "MOCKKFD:0,1+AMD"))


PROGRAM = """
import numpy as np, types
from tinygrad import Tensor, dtypes
from tinygrad.device import Device, Buffer
from stack.codegen.opencl import compile_cl
dev = Device["AMD"]
def program(src, name, nvals=0):
    obj = types.SimpleNamespace(name=name, lib=compile_cl(src, dev.arch), profile_key=None,
                                signature=tuple(("v", j, dtypes.int32, ()) for j in range(nvals)))
    return dev.runtime(obj)
"""


def test_kernel_needing_scratch_grows_tmpring():
    code = """
    src = '''__kernel void priv(__global float *out, __global const float *in, int n) {
      float tmp[600];
      int i = get_global_id(0);
      for (int j = 0; j < 600; j++) tmp[j] = in[(i + j) % n] * j;
      float s = 0; for (int j = 0; j < 600; j += 3) s += tmp[(j * 7 + i) % 600];
      out[i] = s;
    }'''
    n = 64
    x = np.arange(n, dtype=np.float32)
    bi, bo = Buffer("AMD", n, dtypes.float32).allocate(), Buffer("AMD", n, dtypes.float32).allocate()
    dev.allocator._copyin(bi._buf, memoryview(x.tobytes()))
    before = dev.tmpring_size
    prg = program(src, "priv", 1)
    assert dev.tmpring_size != before  # _ensure_has_local_memory grew the scratch and re-issued TMPRING_SIZE
    prg(bo._buf, bi._buf, vals=(n,), global_size=(1, 1, 1), local_size=(n, 1, 1), wait=True)
    got = np.frombuffer(bo.as_memoryview(), np.float32)
    tmp = np.array([[x[(i + j) % n] * j for j in range(600)] for i in range(n)], np.float32)
    want = np.array([sum(tmp[i][(j * 7 + i) % 600] for j in range(0, 600, 3)) for i in range(n)], np.float32)
    assert np.allclose(got, want, rtol=1e-5), (got, want)
    print("OK")
    """
    assert "OK" in check(run_tinygrad(PROGRAM + textwrap.dedent(code), "MOCKKFD+AMD"))


def test_padded_conv3d_gradient_keeps_vcc_hi_across_carry_chains():
    """tinygrad's test_padded_conv3d, its input gradient: LLVM's wave32 code for it keeps a flag in VCC_HI (an
    SGPR in wave32) across v_add_co_ci_u32_e32 carry chains, which write VCC_LO alone; writing the whole VCC lost the
    flag and with it one input's share of 40 sums. Checked against numpy."""
    code = """
    import numpy as np
    from tinygrad import Tensor
    rng = np.random.default_rng(0)
    x = rng.uniform(-1, 1, (1, 4, 5, 5, 5)).astype(np.float32)
    w = rng.uniform(-1, 1, (4, 4, 3, 3, 3)).astype(np.float32)
    tx, tw = Tensor(x), Tensor(w)
    gx, gw = Tensor.conv2d(tx, tw, padding=[1, 1, 1, 1, 1, 1]).sum().gradient(tx, tw)
    Tensor.realize(gx, gw)  # as tinygrad's test does: both gradients scheduled together
    want = np.zeros_like(x)  # d sum(conv) / dx[c, p] = sum of w[o, c, d] over the outputs p - d + 1 in range
    for d in np.ndindex(3, 3, 3):
        lo = [max(0, k - 1) for k in d]
        hi = [min(5, 5 + k - 1) for k in d]
        want[0, :, lo[0]:hi[0], lo[1]:hi[1], lo[2]:hi[2]] += w[:, :, d[0], d[1], d[2]].sum(axis=0)[:, None, None, None]
    assert np.allclose(gx.numpy(), want, rtol=1e-5, atol=1e-5), np.argwhere(~np.isclose(gx.numpy(), want))[:5]
    print("OK")
    """
    assert "OK" in check(run_tinygrad(code, "MOCKKFD+AMD:LLVM"))


def test_fault_raises_mmu_error_with_address_and_device_goes_on():
    code = """
    buf = Buffer("AMD", 64, dtypes.float32).allocate()
    prg = program("__kernel void oob(__global float *o) { o[get_global_id(0) + (1 << 28)] = 1.0f; }", "oob")
    bad = buf._buf.va_addr + (1 << 30)  # where lane 0 stores
    try:
        prg(buf._buf, global_size=(1, 1, 1), local_size=(32, 1, 1), wait=True)
        raise SystemExit("no fault raised")
    except RuntimeError as e:
        assert f"MMU fault: 0x{bad & ~0xFFF:X}" in str(e) and "NotPresent=1" in str(e), e
    # tinygrad latches the error: in error_state, in the memory event (created without auto-reset, so as with the real
    # driver it stays signalled and every later wait that sleeps, > 200 ms, e.g. while a kernel compiles, reports it
    # again) and in its copy of the event's data; the emulated GPU itself went on
    from tinygrad.runtime.autogen import kfd
    from tinygrad.runtime.ops_amd import KFDIface
    kfd.AMDKFD_IOC_RESET_EVENT(KFDIface.kfd, event_id=dev.iface.mem_fault_event.event_id)
    dev.iface.queue_event_arr[1].memory_exception_data.gpu_id = 0
    dev.error_state = None
    assert Tensor([1, 2, 3]).add(1).numpy().tolist() == [2, 3, 4]
    print("OK")
    """
    assert "OK" in check(run_tinygrad(PROGRAM + textwrap.dedent(code), "MOCKKFD+AMD"))


def test_exit_with_a_kernel_in_flight_under_jit():
    """A program that ends by an exception while the mock GPU's engine thread (a daemon) still compiles and runs its
    last kernel exits with Python's status 1 and its error: native code is closed off before the interpreter and
    LLVM are torn down (before, LLVM aborted in an assertion or the process crashed in about one run of three)."""
    code = """
    buf = Buffer("AMD", 128, dtypes.float32).allocate()
    src = "__kernel void spin(__global float *o) { float x = 0.0f; for (int j = 0; j < 1000000; j++) " \\
          "x = x * 0.5f + (float)j; o[get_global_id(0)] = x; }"
    program(src, "spin")(buf._buf, global_size=(4, 1, 1), local_size=(32, 1, 1))  # not waited for
    raise RuntimeError("the program ends with the kernel in flight")
    """
    p = run_tinygrad(PROGRAM + textwrap.dedent(code), "MOCKKFD+AMD", env={"HWEMU_TIER": "jit"})
    assert p.returncode == 1 and "RuntimeError: the program ends with the kernel in flight" in p.stderr, \
        f"exit {p.returncode}\n{p.stderr[-3000:]}"


@pytest.mark.parametrize("checkout", [False, True])
def test_pytest_plugin_serves_tinygrad_tests(tmp_path, checkout):
    """`DEV=MOCKKFD+AMD pytest -n 2` in a user's project, and in a tinygrad-like checkout whose own test/mockgpu
    would otherwise be imported: hwemu's mock interface wins."""
    if checkout:
        (tmp_path / "test" / "mockgpu").mkdir(parents=True)
        (tmp_path / "test" / "__init__.py").write_text("")
        (tmp_path / "test" / "mockgpu" / "mockgpu.py").write_text("raise ImportError('the checkout mock was used')\n")
    (tmp_path / "test_user.py").write_text(textwrap.dedent("""
        import numpy as np
        from tinygrad import Tensor
        def test_add():
            assert (Tensor(np.arange(10, dtype=np.float32)) * 2).numpy().tolist() == list(range(0, 20, 2))
        def test_served():
            import sys
            assert sys.modules["test.mockgpu.mockgpu"].__hwemu__
    """))
    p = subprocess.run([sys.executable, "-m", "pytest", "-q", "-n", "2", "-p", "no:cacheprovider", "test_user.py"],
                       capture_output=True, text=True, timeout=TIMEOUT, cwd=tmp_path,
                       env={**os.environ, "DEV": "MOCKKFD+AMD", "HWEMU": "1"})
    assert "2 passed" in p.stdout, p.stdout + p.stderr


def test_aql_queue_path():
    """AMD_AQL=1: tinygrad's compute queue is an HSA queue (kernel dispatch packets, PM4 in vendor packets)."""
    code = """
    import numpy as np
    from tinygrad import Tensor
    a = np.arange(300, dtype=np.float32)
    assert ((Tensor(a) * 2 + 1).numpy() == a * 2 + 1).all() and Tensor(a).sum().numpy() == a.sum()
    print("OK")
    """
    p = run_tinygrad(code, "MOCKKFD+AMD", {"AMD_AQL": "1", "HWEMU_STATS": "1"})
    assert "OK" in check(p) and "dispatches" in p.stderr


@pytest.mark.parametrize("rings_from_a_program", [False, True])
def test_signal_polls_wait_for_the_engine_with_either_runtime(monkeypatch, rings_from_a_program):
    """tinygrad's runtime (ops_amd) rings doorbells from Python: each store kicks the engine, which then never looks
    at doorbell memory. HCQ2's (extra/hcq2/ops_amd2.py, loaded as ops_amd: its queue descriptor has no
    signal_doorbell) rings them from a program's stores: the engine keeps looking, and HCQ2's wall-time wait (a class
    attribute) is the one HCQDEV_WAIT_TIMEOUT_MS sets for the other. Both signal polls wait for the engine, for the
    word and value of the signal being waited for."""
    import types

    from emu.os import tinygrad as adapter

    class AMDSignal:  # tinygrad's HCQSignal: a 64-bit word its wait polls, calling _sleep between reads
        def __init__(self):
            self.word = ctypes.c_uint64(0)
            view = types.SimpleNamespace(addr=ctypes.addressof(self.word))
            self.base_buf = types.SimpleNamespace(va_addr=0x1000, cpu_view=lambda: view)

        def _sleep(self, ms):
            pass

        def wait(self, value, timeout=None):
            self._sleep(0)

    class AMDQueueDesc:
        if not rings_from_a_program:
            def signal_doorbell(self, dev, doorbell_value=None):
                rung.append(doorbell_value)

    rung, waits = [], []
    engine = types.SimpleNamespace(doorbells=types.SimpleNamespace(announced=False), ring=lambda: rung.append("ring"),
                                   wait_progress=lambda seen, timeout, until: waits.append((seen, until)) or seen + 1)
    module = types.ModuleType("tinygrad.runtime.ops_amd")
    module.AMDSignal, module.AMDQueueDesc = AMDSignal, AMDQueueDesc
    monkeypatch.setitem(sys.modules, "tinygrad.runtime.ops_amd", module)
    hcq2 = types.ModuleType("tinygrad.runtime.support.hcq2")
    hcq2.HCQ2Compiled = type("HCQ2Compiled", (), {"wait_timeout_ms": 30000.0})
    if rings_from_a_program:
        monkeypatch.setitem(sys.modules, "tinygrad.runtime.support.hcq2", hcq2)
    monkeypatch.setenv("HCQDEV_WAIT_TIMEOUT_MS", "123456")
    adapter._on_engine(engine)
    assert hcq2.HCQ2Compiled.wait_timeout_ms == (123456 if rings_from_a_program else 30000)  # HCQ2's own knob
    AMDSignal()._sleep(0)
    signal = AMDSignal()
    signal.wait(9)
    # each poll waits for progress past the last it saw; within a signal's wait, for its word to reach the value
    assert waits == [(-1, None), (0, (ctypes.addressof(signal.word), 9))]
    assert engine.doorbells.announced is not rings_from_a_program
    if not rings_from_a_program:
        AMDQueueDesc().signal_doorbell(None, 7)
        assert rung == [7, "ring"]


def test_a_graph_module_imported_after_the_device_opened_defers_its_finalizer():
    """tinygrad imports its HCQ graph module at a JIT's first graph, after the device opened; a graph's finalizer
    waits for its last submissions, so dying on the engine thread it must wait for the client's thread too."""
    check(run_tinygrad("""
        import gc, threading
        from tinygrad import Tensor, TinyJit
        Tensor([1.0]).realize()  # the device is open: the adapter is in place

        @TinyJit
        def f(a):
            return ((a + 1) * 2).contiguous() + 3
        for _ in range(3):
            f(Tensor.ones(16).contiguous().realize()).realize()
        from tinygrad.runtime.graph.hcq import HCQGraph
        graph = next(o for o in gc.get_objects() if isinstance(o, HCQGraph))
        assert getattr(HCQGraph.__del__, "__hwemu__", False), "the graph's finalizer is not deferred"
        t = threading.Thread(target=graph.__del__, name="hwemu-engine")
        t.start()
        t.join(60)
        assert not t.is_alive(), "the finalizer waited on the engine thread"
        """, "MOCKKFD+AMD:LLVM"))


def test_objects_dying_in_the_devices_work_are_finalized_by_the_client():
    """A garbage collection while the device's work runs (on hwemu's engine thread, or on a client's thread that waits
    and runs it) may finalize a tinygrad Buffer, or a compute queue a graph bound to a page; their frees wait for the
    device (HCQ synchronizes first), inside the device's own work. The adapter keeps them until the client's next such
    finalizer runs theirs outside it."""
    check(run_tinygrad("""
        import sys, threading, types
        from tinygrad import Device, Tensor, dtypes
        from tinygrad.device import Buffer
        Tensor([1.0]).realize()  # the device is open: the adapter is in place
        dev = Device["AMD"]
        engine = sys.modules["test.mockgpu.mockgpu"].MockFileIOInterface.system.engine
        b = Buffer("AMD", 1024, dtypes.float32).allocate()
        q = dev.hw_compute_queue_t().memory_barrier()
        q.bind(dev)  # a graph's queue: its commands in a page of their own
        page = q.hw_page
        for obj in (b, q):  # a queue of the device whose work is the object's finalizer
            died = []
            engine.gpus[0].queues[-1] = types.SimpleNamespace(service=lambda: died.append(obj.__del__()) and False)
            t = threading.Thread(target=lambda: [engine.serve() for _ in range(1000) if not died])
            t.start()
            t.join(60)
            del engine.gpus[0].queues[-1]
            assert died and not t.is_alive(), "the finalizer waited in the device's work"
        assert b.is_allocated(), "freed in the device's work"
        freed = []
        free = dev.allocator.free
        dev.allocator.free = lambda opaque, *a, **k: (freed.append(opaque), free(opaque, *a, **k))
        other = Buffer("AMD", 16, dtypes.float32).allocate()
        del other  # the client's next such finalizer
        assert not b.is_allocated(), "the client did not free the buffer"
        assert any(f is page for f in freed), "the client did not free the queue's page"
        """, "MOCKKFD+AMD:LLVM"))
