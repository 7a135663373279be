"""The adapter tinygrad 0.14 imports for `DEV=MOCK...+AMD`: `test.mockgpu.mockgpu.MockFileIOInterface`.

tinygrad's HCQ runtime (`tinygrad/runtime/support/hcq.py`) replaces its file-I/O interface with that class when
DEV's interface starts with MOCK, and then drives /dev/kfd, sysfs and the render nodes through it exactly as it
drives the real ones. The class here is hwemu's mock interface (emu.os) for the system DEV describes: MOCKKFD
(MOCK is the same), the arch of DEV (default gfx1100) and max(indices)+1 GPUs (default HWEMU_GPUS, else 6, as
many as tinygrad's own mock gives; a GPU nobody opens costs a few empty memory files).
It is only a calling-convention adapter: the driver, queues and GPUs are emu.os's, shared with hwemu's own stack.

Under MOCKPCI (tinygrad's AM driver, which binds the GPU's PCI function itself), the class is emu.os.pci's (one GPU
by default, as tinygrad's own mock has). tinygrad reads and writes the MMIO registers through a memoryview of its
mapping of resource5 (`MMIOInterface`, built by `to_mv` in its hcq module); on hardware each of those loads and stores
is a bus transaction the GPU answers, and plain memory cannot answer. So the adapter makes hcq's `to_mv`, for an
address range inside a register window the mock mapped, give emu.os.pci's RegisterView instead of a memoryview: the
same item loads and stores, made register reads and writes with their models' side effects. Every other range is
tinygrad's own `to_mv`.

tinygrad's fault-injection hook, `MOCKGPU_EMU_FAULTADDR=0xADDR` (set while the process runs; its test_hcq's
test_on_device_hang), maps onto hwemu's fault injection (emu.os.system.MockSystem.inject_fault): when the process waits
on KFD events with it set to a new value, the first GPU raises a VM fault at that address through the real fault
path. The driver reports the faulting page, as Linux does; tinygrad's mock reports the address as given, so for
that report the adapter puts the address's low bits back into the event data tinygrad reads. tinygrad's mock
reports the fault only while the variable is set: at the first wait without it, the adapter resets the memory
events that carry that report and clears it from the event data tinygrad passes (which tinygrad never clears).

tinygrad gives up on a device after waiting 30 s of wall time for a signal that does not move (then every later
wait fails: the device keeps the error), a figure for hardware; its mock never reaches it, as it runs the work
inside the client's doorbell store. An emulated GPU can take longer on a large kernel while making progress, and
hwemu's own watchdog stops a runaway dispatch (an instruction budget per wave, and HWEMU_TIMEOUT seconds of the
engine's CPU time, compile time not counted) with a fault tinygrad is told of. tinygrad's wall-time wait would make
a test's verdict depend on the machine's load (gfx1201's test_linearizer: a 1,024-wave dispatch of scalar float
code outlived it on a loaded machine), so unless set, the adapter sets HCQDEV_WAIT_TIMEOUT_MS to
WAIT_TIMEOUT_MS and HWEMU_TIMEOUT to DISPATCH_TIMEOUT, below it: a runaway dispatch still ends in hwemu's watchdog
fault (with its wave dump), and the instruction budget stops a looping wave well before. HCQ2 (tinygrad's
extra/hcq2 runtime, HCQ2=1) reads no variable but a class attribute (HCQ2Compiled.wait_timeout_ms), which the adapter
sets to the same figure when the interface is first opened.

tinygrad waits for a signal by reading it in a loop, calling the signal's `_sleep` between reads (which sleeps on
KFD events only after 200 ms): on hardware the spin costs nothing the GPU needs. An emulated GPU is hwemu's engine in
the same process, and on a machine with few cores the spin takes the CPU and the GIL it needs (15% of a test run's
samples on two cores). So when the interface is first opened the adapter makes tinygrad's AMD signals, between
reads, also wait for the engine's progress (emu.amd.queue.Engine.wait_progress, at most POLL_SLEEP seconds): the
loop, its timeouts and its sleep on events are tinygrad's own. The waiting thread runs the queues' pending work
itself when no other thread is running them; otherwise it sleeps until the store that brings the signal's word to the
value its wait wants (the poll names both: each wakeup takes the GIL from the engine, and a test run's waits were
woken four times per signal otherwise). Likewise a doorbell is a plain memory store here, which the engine would
notice only by looking again and again (each look a wakeup, on a loaded machine a wait for a core): the adapter makes
tinygrad's doorbell store also ring the engine, as the MMIO store reaches the hardware's command processor, and tells
the engine so (emu.amd.doorbell: it then needs no looks). A ring does not wake the engine's thread: tinygrad soon waits
for most work it submits, and then runs it on its own thread (no switch to the engine's thread and back); work nobody
waits for starts at the idle engine's next look, within emu.amd.queue.IDLE_WAIT.

Python's garbage collector runs wherever objects are allocated, the device's work included (on the engine's thread
or on a waiting client's), and with it the finalizers of the client's objects that died in a cycle. tinygrad's Buffer
finalizer frees device memory, and HCQ2's free waits for the device first (so does a compute queue's, for the page a
graph bound it to, and a graph's, for its last submissions, imported only at a JIT's first graph): run by the
device's work, the device waiting for itself (a deadlock until tinygrad's wait gives up). So the adapter keeps such an
object that dies there alive until the client's next such finalizer (or its next signal poll), which finalizes it
outside the device's work, as it would have been.

`install()` makes the module importable under that name before tinygrad asks for it, as an entry of
sys.modules, so it wins over CPython's own `test` package and over a tinygrad checkout's `test/mockgpu`; it is
a small module whose class is built on first use, so tinygrad may import it while its own hcq module is still
half-initialized. HWEMU=0 turns it off (a checkout's own mock is used again). It also sets CC to clang-19 when the
process has neither CC nor a `clang`: tinygrad's CPU device runs `CC` (default `clang`), and Debian's LLVM 19
packages, which also serve the AMD:LLVM renderer, name the compiler clang-19.
"""
from __future__ import annotations

import ctypes
import errno
import importlib.abc
import importlib.machinery
import os
import shutil
import sys
import threading
import types
from collections.abc import Callable

MODULE, USB_MODULE, EMU_MODULE = "test.mockgpu.mockgpu", "test.mockgpu.usb", "test.mockgpu.amd.emu"
HCQ_MODULE = "tinygrad.runtime.support.hcq"
SUPPORTED = ("MOCKKFD", "MOCK", "MOCKPCI")
DEFAULT_GPUS = 6  # tinygrad's own mock has six
PCI_DEFAULT_GPUS = 1  # and one PCI function
FAULT_ENV = "MOCKGPU_EMU_FAULTADDR"
POLL_SLEEP = 0.002  # seconds a signal poll waits for the engine's next packet at most (the signal may be the CPU's)
WAIT_TIMEOUT_MS = 300_000  # tinygrad's wait for a signal that does not move (its default: 30,000)
DISPATCH_TIMEOUT = 240  # seconds a dispatch may run before hwemu's watchdog stops it (hwemu's default: 60 s of CPU)


def enabled(env=os.environ) -> bool:
    """Whether hwemu should serve tinygrad in this process: DEV names a mock KFD interface and HWEMU is not 0."""
    dev = env.get("DEV", "")
    return env.get("HWEMU", "1") != "0" and any(t.strip().startswith(SUPPORTED) for t in dev.split(";"))


def mock_interface():
    """hwemu's file-I/O interface class for the mock system DEV describes, with tinygrad's fault-injection hook."""
    from emu.os import interface
    from stack.device import parse_dev
    dev = os.environ.get("DEV", "MOCKKFD+AMD")
    pci = any(t.strip().startswith("MOCKPCI") for t in dev.split(";"))
    # stack's grammar serves KFD interfaces only; MOCKPCI's DEV has the same arch and indices
    spec = parse_dev(dev.replace("MOCKPCI", "MOCKKFD"))
    default = PCI_DEFAULT_GPUS if pci else DEFAULT_GPUS
    gpus = max(spec.indices) + 1 if spec.indices else int(os.environ.get("HWEMU_GPUS", default))
    if pci:
        return _with_register_views(spec.arch, gpus)
    cls = interface(spec.arch, gpus)
    cls.system.default_performance_level("profile_standard")  # what tinygrad's PMC/SQTT check wants
    return _with_fault_hook(cls)


def _with_fault_hook(base: type) -> type:
    """`base` (emu.os's interface class) that also honours MOCKGPU_EMU_FAULTADDR (see the module docstring)."""
    from emu.amd.hw import kfd as k
    from emu.amd.memory import PAGE

    class TinygradMockFileIO(base):
        injected: int | None = None  # the last address injected

        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            _on_engine(self.system.engine)

        def ioctl(self, request: int, arg) -> int:
            cls, want = type(self), os.environ.get(FAULT_ENV)
            if (want is None and cls.injected is None) or self._node() != "kfd" or \
                    k.IOCTLS.get(k.ioc_nr(request), ("",))[0] != "WAIT_EVENTS":
                return super().ioctl(request, arg)
            if want is None:  # withdrawn: that report leaves the memory events and the data tinygrad passes
                for d in self._reports(arg, cls.injected):
                    d.memory_exception_data = type(d.memory_exception_data)()
                    super().ioctl(k.REQUEST["RESET_EVENT"], k.EventId(d.event_id))
                cls.injected = None
                return super().ioctl(request, arg)
            try:
                addr = int(want, 16)
            except ValueError:
                raise OSError(errno.EINVAL, f"{FAULT_ENV}={want!r}: not a hexadecimal address") from None
            if cls.injected != addr:
                cls.injected = addr
                self.system.inject_fault(addr)
            ret = super().ioctl(request, arg)
            for d in self._reports(arg, addr):
                d.memory_exception_data.va = addr
            return ret

        def _reports(self, arg, addr: int) -> list:
            """The entries of a WAIT_EVENTS argument's event array that report the injected fault at `addr`."""
            w = k.WaitEvents.from_buffer_copy(bytes(memoryview(arg).cast("B"))[:ctypes.sizeof(k.WaitEvents)])
            gpu_id, vas = self.system.gpus[0].gpu_id, (addr, addr & ~(PAGE - 1))
            return [d for d in (k.EventData * w.num_events).from_address(w.events_ptr)
                    if d.memory_exception_data.gpu_id == gpu_id and d.memory_exception_data.va in vas]
    return TinygradMockFileIO


def _with_register_views(arch: str | None, gpus: int) -> type:
    """emu.os.pci's interface class, with tinygrad's views of register BARs made register accesses (the module
    docstring)."""
    from emu.os import pci
    cls = pci.interface(arch, gpus)
    hcq = sys.modules.get(HCQ_MODULE)
    to_mv = getattr(hcq, "to_mv", None)
    if to_mv is not None and not getattr(to_mv, "__hwemu__", False):
        def registers_or_memory(ptr: int, sz: int):
            view = cls.system.register_view(ptr, sz)
            return to_mv(ptr, sz) if view is None else view
        registers_or_memory.__hwemu__ = True
        hcq.to_mv = registers_or_memory

    class TinygradPCIFileIO(cls):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            _on_engine(self.system.engine)
    return TinygradPCIFileIO


_deferred: list = []  # (tinygrad's finalizer, the object) that died running the device's work: run by the client
_deferring = False  # an engine runs: the finalizers of modules imported later are deferred too
# tinygrad's finalizers that wait for the device: freeing device memory (HCQ's free synchronizes first), or a graph's
# waiting for its last submissions
WAITING_FINALIZERS = (("tinygrad.device", "Buffer"), ("tinygrad.runtime.ops_amd", "AMDComputeQueue"),
                      ("tinygrad.runtime.graph.hcq", "HCQGraph"))
_WAITING_MODULES = frozenset(m for m, _ in WAITING_FINALIZERS)


def _free_deferred() -> None:
    while _deferred:
        finalize, obj = _deferred.pop()
        finalize(obj)


def _defer_waiting_finalizers() -> None:
    """Make the tinygrad objects whose finalizers wait for the device, when they die running the device's work, wait
    for the client (the module docstring); those of modules imported later, as they are imported."""
    global _deferring
    _deferring = True
    for module, name in WAITING_FINALIZERS:
        cls = getattr(sys.modules.get(module), name, None)
        if cls is not None and "__del__" in vars(cls) and not getattr(cls.__del__, "__hwemu__", False):
            _defer(cls, cls.__del__)


def _defer(cls: type, tinygrads: Callable) -> None:
    from emu.amd.queue import serving

    def __del__(self) -> None:
        if serving():
            _deferred.append((tinygrads, self))  # alive again; CPython will not finalize it twice
            return
        _free_deferred()
        tinygrads(self)
    __del__.__hwemu__ = True
    cls.__del__ = __del__


def _on_engine(engine) -> None:
    """Make tinygrad's AMD signal poll wait for `engine`'s progress between reads (running its work when nobody
    else does), its doorbell stores ring the engine, and its objects whose finalizers wait for the device, when they
    die running the device's work, be finalized by the client (see the module docstring)."""
    _defer_waiting_finalizers()
    hcq2 = getattr(sys.modules.get("tinygrad.runtime.support.hcq2"), "HCQ2Compiled", None)
    if hcq2 is not None:  # HCQ2 takes its wall-time wait from a class attribute, not HCQDEV_WAIT_TIMEOUT_MS
        hcq2.wait_timeout_ms = float(os.environ.get("HCQDEV_WAIT_TIMEOUT_MS", WAIT_TIMEOUT_MS))
    amd = sys.modules.get("tinygrad.runtime.ops_amd")
    signal, desc = getattr(amd, "AMDSignal", None), getattr(amd, "AMDQueueDesc", None)
    if signal is None or getattr(signal._sleep, "__hwemu__", False):
        return
    tinygrads_sleep, tinygrads_wait, seen = signal._sleep, signal.wait, threading.local()

    def wait(self, value: int, timeout: int | None = None):
        outer = getattr(seen, "until", None)
        view = getattr(self.base_buf, "cpu_view", None) if isinstance(self.base_buf.va_addr, int) else None
        seen.until = (view().addr, value) if view is not None else None
        try:
            return tinygrads_wait(self, value, timeout)
        finally:
            seen.until = outer

    def _sleep(self, time_spent_since_last_sleep_ms: int) -> None:
        _free_deferred()
        tinygrads_sleep(self, time_spent_since_last_sleep_ms)
        seen.count = engine.wait_progress(getattr(seen, "count", -1), POLL_SLEEP, getattr(seen, "until", None))
    _sleep.__hwemu__ = True
    signal._sleep, signal.wait = _sleep, wait
    tinygrads_store = getattr(desc, "signal_doorbell", None)
    if tinygrads_store is None:  # HCQ2 (extra/hcq2) rings its doorbells from a program's stores: the engine looks
        return

    def signal_doorbell(self, dev, doorbell_value: int | None = None) -> None:
        tinygrads_store(self, dev, doorbell_value)
        engine.ring()
    desc.signal_doorbell = signal_doorbell
    engine.doorbells.announced = True


def _getattr(name: str):
    if name == "MockFileIOInterface":
        cls = mock_interface()
        setattr(sys.modules[MODULE], name, cls)
        return cls
    raise AttributeError(f"module {MODULE!r} has no attribute {name!r}")


class MockUSB3:
    """tinygrad imports a USB bridge model next to the KFD mock; hwemu emulates no USB-attached GPU."""

    def __init__(self, *args, **kwargs):
        raise RuntimeError("hwemu emulates GPUs behind the KFD interface (DEV=MOCKKFD+AMD); "
                           "USB-attached GPUs (MOCKUSB) are not emulated")


class _FinalizerFinder(importlib.abc.MetaPathFinder):
    """Defers the waiting finalizers of a module of WAITING_FINALIZERS imported after the device was opened (tinygrad
    imports its graph module at a JIT's first graph): its module is loaded as usual, then its class patched."""

    def find_spec(self, name, path=None, target=None):
        if name not in _WAITING_MODULES or not _deferring:
            return None
        spec = importlib.machinery.PathFinder.find_spec(name, path, target)
        if spec is not None and spec.loader is not None:
            load = spec.loader.exec_module

            def exec_module(module) -> None:
                load(module)  # (already in sys.modules, where _defer_waiting_finalizers looks)
                _defer_waiting_finalizers()
            spec.loader.exec_module = exec_module
        return spec


class _EmuFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Serves `import test.mockgpu.amd.emu` (tinygrad's test/amd run their ISA snippets through its run_asm) with
    hwemu's emu.os.tinygrad_emu, imported only then: most processes never ask for it."""

    def find_spec(self, name, path=None, target=None):
        return importlib.machinery.ModuleSpec(name, self) if name == EMU_MODULE else None

    def create_module(self, spec):
        from emu.os import tinygrad_emu
        return tinygrad_emu

    def exec_module(self, module) -> None:
        pass


def install() -> bool:
    """Register the adapter modules (once); returns whether hwemu now serves tinygrad's mock interface."""
    if not enabled():
        return False
    if getattr(sys.modules.get(MODULE), "__hwemu__", False):
        return True
    mod = types.ModuleType(MODULE, __doc__)
    mod.__hwemu__ = True
    mod.__getattr__ = _getattr
    usb = types.ModuleType(USB_MODULE, MockUSB3.__doc__)
    usb.MockUSB3 = MockUSB3
    sys.modules[MODULE], sys.modules[USB_MODULE] = mod, usb
    sys.meta_path[:0] = [_EmuFinder(), _FinalizerFinder()]
    if "CC" not in os.environ and shutil.which("clang") is None and shutil.which("clang-19") is not None:
        os.environ["CC"] = "clang-19"
    os.environ.setdefault("HCQDEV_WAIT_TIMEOUT_MS", str(WAIT_TIMEOUT_MS))
    os.environ.setdefault("HWEMU_TIMEOUT", str(DISPATCH_TIMEOUT))
    return True
