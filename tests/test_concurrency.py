"""Several host threads on one emulated GPU: the VM's mappings change while other threads translate through
it, and launches from different threads each see their own buffers (the device model's engine thread and its
clients do the same)."""
from __future__ import annotations

import os
import threading

import numpy as np
import pytest

from stack.codegen import opencl

pytestmark = pytest.mark.skipif(not opencl.available(), reason="clang-19 and ld.lld-19 are needed to build kernels")

SAXPY = """__kernel void saxpy(__global float *y, __global const float *x, float a, uint n) {
  uint i = get_global_id(0);
  if (i < n) y[i] = a * x[i] + y[i];
}"""


def test_threads_alloc_load_launch_on_one_gpu():
    from emu.amd import GPU
    gpu = GPU("gfx1100")
    code = opencl.compile_cl(SAXPY, "gfx1100")
    errors: list[BaseException] = []

    def worker(seed: int) -> None:
        try:
            rng = np.random.default_rng(seed)
            prog = gpu.load(code)
            for _ in range(3):
                n = int(rng.integers(1, 300))
                x, y = rng.standard_normal(n).astype(np.float32), rng.standard_normal(n).astype(np.float32)
                xb, yb = gpu.alloc(x.nbytes), gpu.alloc(y.nbytes)
                gpu.write(xb, x)
                gpu.write(yb, y)
                a = np.float32(rng.standard_normal())
                gpu.launch(prog, "saxpy", grid=(-(-n // 64),), block=(64,), args=[yb, xb, a, np.uint32(n)])
                got = np.frombuffer(gpu.read(yb), np.float32)
                assert np.allclose(got, a * x + y, rtol=1e-6, atol=1e-6)
        except BaseException as e:  # reported by the main thread
            errors.append(e)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors


def test_vm_maps_and_translates_from_threads():
    from emu.amd.memory import VM, GPUFault
    vm = VM()
    stop = threading.Event()
    errors: list[BaseException] = []
    keep = vm.alloc(4096, name="kept")
    vm.write(keep, np.arange(1024, dtype=np.uint32))

    def churn() -> None:
        while not stop.is_set():
            vm.unmap(vm.alloc(8192, name="churn"))

    def read() -> None:
        try:
            for _ in range(300):
                got = vm.load(np.array([keep + 4 * i for i in range(0, 1024, 37)], np.uint64), 32)
                assert (got == np.arange(0, 1024, 37)).all()
                with pytest.raises(GPUFault):
                    vm.load(np.array([keep + 4096 + 8], np.uint64), 32)  # the guard page after it
        except BaseException as e:
            errors.append(e)
    t = [threading.Thread(target=churn), threading.Thread(target=read), threading.Thread(target=read)]
    for x in t:
        x.start()
    t[1].join()
    t[2].join()
    stop.set()
    t[0].join()
    assert not errors, errors


def test_native_gate_closes_once_calls_in_flight_return():
    """emu.pcode.llvmjit's gate: closing waits for the call in flight, then admits no more (process exit)."""
    from emu.pcode.llvmjit import Gate
    gate = Gate()
    assert gate.enter()
    closer = threading.Thread(target=gate.close, args=(30.0,))
    closer.start()
    closer.join(0.2)
    assert closer.is_alive()  # waiting for the call in flight
    gate.leave()
    closer.join(5)
    assert not closer.is_alive() and not gate.enter()


def test_a_waiter_wakes_at_the_engines_next_packet():
    """Engine.wait_progress: at once when the engine reported progress since the count the waiter saw, else until
    its next report (which kicks nothing: the waiter's own kick wakes the idle engine), else until its timeout."""
    from emu.amd.queue import Engine
    e = Engine([])
    assert e.wait_progress(-1, 60) == 0  # a packet count it had not seen: no wait
    assert e.wait_progress(0, 0.01) == 0  # nothing ran: the timeout
    assert e.doorbells.kicked[0] == 1  # a waiter kicks the engine out of its nap between doorbell looks
    got: list[int] = []
    t = threading.Thread(target=lambda: got.append(e.wait_progress(0, 600)))
    t.start()
    while not e._waiters:
        threading.Event().wait(0.001)
    e.progress()
    t.join(300)
    assert not t.is_alive() and got == [1]


def test_a_waiter_for_a_word_wakes_only_when_it_reaches_its_value():
    """Engine.wait_progress with `until`, while another thread runs the queues: the stores that leave the word below
    the value wake nobody (each wakeup would take the GIL from the engine); the one that brings it there does, and so
    does the running thread's running out of work (the word may be a CPU's to store). A word already there is no
    wait."""
    from emu.amd.queue import Engine
    e = Engine([])
    word = np.zeros(1, np.uint64)
    until = (word.ctypes.data, 5)
    notified: list[int] = []
    notify_all = e._moved.notify_all
    e._moved.notify_all = lambda: notified.append(e.served) or notify_all()

    def waiter() -> threading.Thread:
        t = threading.Thread(target=lambda: got.append(e.wait_progress(-1, 600, until)))
        t.start()
        while not e._waiters:
            threading.Event().wait(0.001)
        return t
    got: list[int] = []
    e._running.acquire()  # another thread runs the queues
    t = waiter()
    word[0] = 4
    e.progress()
    assert notified == [] and t.is_alive()
    word[0] = 2**64 - 1  # unsigned, as tinygrad compares
    e.progress()
    t.join(300)
    assert notified == [2] and got == [2]
    word[0] = 0
    t = waiter()
    e._running.release()
    assert not e.serve()  # the running thread, out of work: the waiter looks again
    t.join(300)
    assert notified == [2, 2] and got == [2, 2]
    word[0] = 5
    assert e.wait_progress(-1, 600, until) == 2 and notified == [2, 2]


def test_a_waiter_runs_the_pending_work_when_no_thread_does():
    """Engine.wait_progress runs the queues' pending work on the waiting thread (no engine thread to wake, no GIL to
    hand over), up to the packet that brings its word to the value; finalizers there know they run the device's
    work (emu.amd.queue.serving). Work left behind that store waits for the next wait (no wakeup of the engine); a
    queue left waiting on memory kicks the engine, which polls it. While another thread runs the queues, the waiter
    sleeps instead."""
    from types import SimpleNamespace

    from emu.amd.queue import Engine, serving
    word = np.zeros(1, np.uint64)
    ran: list[tuple[int, bool]] = []

    def service() -> bool:  # a queue whose every packet stores the word's next value, up to 3
        if word[0] == 3:
            return False
        word[0] += 1
        ran.append((threading.get_ident(), serving()))
        e.progress()
        return True
    queue = SimpleNamespace(service=service, polls=False)
    e = Engine([SimpleNamespace(queues={0: queue})])
    kicks: list[int] = []
    e.kick = lambda: kicks.append(int(word[0]))
    assert e.wait_progress(-1, 600, (word.ctypes.data, 2)) == 2 and word[0] == 2
    assert ran == [(threading.get_ident(), True)] * 2 and not serving() and kicks == []
    e._running.acquire()
    assert e.wait_progress(2, 0.01, (word.ctypes.data, 3)) == 2 and word[0] == 2  # another thread runs them
    e._running.release()
    queue.polls = True  # its packet at 3 waits for memory
    assert e.wait_progress(2, 600, (word.ctypes.data, 4)) == 3 and kicks == [3]


def test_waiters_wake_for_packets_that_store_and_at_each_turns_end():
    """A queue's turn reports progress after each packet that stores to memory and once at its end: a waiting
    client is not woken for the state packets (registers, cache actions) between two signals."""
    from types import SimpleNamespace

    from emu.amd.queue import Engine, Queue

    class Stream(Queue):
        def step(self):
            self.count(names[self.rptr])
            self.rptr += 1
            return True
    names = ["SET_SH_REG", "SET_SH_REG", "DISPATCH_DIRECT", "EVENT_WRITE", "RELEASE_MEM", "ACQUIRE_MEM",
             "SDMA_POLL_REGMEM", "SDMA_FENCE"]
    e = Engine([])
    gpu = SimpleNamespace(doorbells=np.array([len(names)], np.uint64), engine=e, stats={}, revalidate=lambda: False,
                          vm=SimpleNamespace(check_range=lambda *a: None, write=lambda *a: None))
    q = Stream(gpu, 0, 0, 0, 4096, 0, 0)
    assert q.service() and q.rptr == len(names)
    assert e.served == 3 + 1  # DISPATCH_DIRECT, RELEASE_MEM, SDMA_FENCE, and the turn's end


def test_a_queue_that_made_its_effects_visible_lets_the_others_go_on():
    """The engine runs one queue at a time: after a packet whose effects other queues may act on (a dispatch, a
    signal), a queue's turn ends while another has work, so work lands about in the order it was submitted. tinygrad
    rings an SDMA copy that signals 11 before a compute stream that dispatches and signals 12: the copy's signal
    must not land last (tinygrad's SQTT readout waited forever for 12 on a loaded machine)."""
    from types import SimpleNamespace

    from emu.amd.queue import Engine, Queue

    ran: list[str] = []

    class Stream(Queue):
        def step(self):
            name = self.names[self.rptr]
            ran.append(name)
            self.count(name)
            self.rptr += 1
            return True
    e = Engine([])
    gpu = SimpleNamespace(doorbells=np.array([3, 1], np.uint64), engine=e, stats={}, revalidate=lambda: False,
                          vm=SimpleNamespace(check_range=lambda *a: None, write=lambda *a: None), queues={})
    e.gpus.append(gpu)
    compute, sdma = Stream(gpu, 0, 0, 0, 4096, 0, 0), Stream(gpu, 1, 1, 0, 4096, 0, 0)
    compute.names, sdma.names = ["SET_SH_REG", "DISPATCH_DIRECT", "RELEASE_MEM"], ["SDMA_FENCE"]
    gpu.queues.update({0: compute, 1: sdma})
    while e.run_pending():
        pass
    assert ran == ["SET_SH_REG", "DISPATCH_DIRECT", "SDMA_FENCE", "RELEASE_MEM"]


def test_tinygrad_signal_polls_wait_for_the_engine_and_its_doorbells_kick_it():
    pytest.importorskip("tinygrad")
    import subprocess
    import sys
    code = ("from tinygrad import Tensor\nfrom tinygrad.runtime.ops_amd import AMDSignal, AMDQueueDesc, KFDIface\n"
            "print((Tensor([1, 2]) + 1).numpy().tolist(), AMDSignal._sleep.__hwemu__, "
            "AMDQueueDesc.signal_doorbell.__module__, KFDIface.kfd.system.engine.doorbells.announced)")
    p = subprocess.run([sys.executable, "-m", "emu.cli", "run", "--", sys.executable, "-c", code],
                       capture_output=True, text=True, timeout=600, env={**os.environ, "DEV": "MOCKKFD+AMD"})
    assert p.returncode == 0, p.stderr[-3000:]
    assert p.stdout.split() == ["[2,", "3]", "True", "emu.os.tinygrad", "True"]
