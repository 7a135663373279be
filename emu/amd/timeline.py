"""Timelines: what the emulated GPUs did, as a Perfetto trace (open it at ui.perfetto.dev).

On with HWEMU_TIMELINE=FILE (any process that uses the mock devices or the runner API; `hwemu trace -- CMD` sets
it) or `start(path)` in process. Events are written by the `perfetto` package's streaming trace builder as they
happen, each TracePacket its own Trace message, so the file is a valid trace after every packet; it is flushed after
every queue packet and runner dispatch and closed at exit (normal, by an exception or SystemExit). When another live
process already writes FILE (pytest -n workers, a forked child), this one writes FILE's stem + `.PID` + its suffix.

Tracks, one tree per GPU ("gfx1100 (node 1, gpu_id ...)" for a MOCKKFD GPU, "runner gfx1100 #N" for a runner GPU):
- "PM4 queue Q" / "AQL queue Q" / "SDMA queue Q" (host wall time): a slice per packet (name, dwords); a dispatch
  nests in its packet as a slice named after its kernel (grid, block, waves, wave-instructions); SDMA copies, fills
  and writes carry their bytes. A waiting packet (WAIT_REG_MEM, POLL_REGMEM, barriers) spans its wait.
- "runner" (host wall time): the dispatches of GPU.launch.
- GPU faults and CP errors: instant events on the track of the packet or dispatch they stopped (kind, address, PC,
  instruction, dispatch, workgroup, wave).
- "compute units (emulated time)": "dispatches", then per CU used "workgroups" and "SIMD s" (one slice per wave).
- "thread trace (1 cycle = 1 ns)", with HWEMU_THREAD_TRACE=FILTER (`hwemu trace --thread-trace FILTER`) or for a
  dispatch a driver traces through the GPU's thread-trace unit (emu.amd.sqtt): "wave slot n" tracks, a slice per
  traced wave and in it one per instruction it issued (its disassembly, PC, token), timed by the thread trace's
  cycle model (emu.amd.sqtt: one instruction after another, each its class's cycles) from the dispatch's start,
  a cycle drawn as a nanosecond (an instruction takes a fraction of one at the chip's clock).
  FILTER is HWEMU_TRACE's (emu.amd.debug.wavetrace: kernel=, dispatch=, wg=, wave=; 1 for every wave): only the
  waves it selects run on the interpreter, the others keep their tier. At most MAX_ISSUES instructions of a
  dispatch are drawn.

The emulated-time model (from the engine's instruction counts; no latencies, stalls, dual issue or barriers):
- a wave-instruction takes lanes / SIMD width cycles (RDNA: 32-lane SIMDs, so 1 for wave32 and 2 for wave64; CDNA:
  16-lane SIMDs, 4 for wave64) at the chip's engine clock (emu.amd.target, max_engine_clk_fcompute);
- workgroup n (linear index, x fastest) runs on CU n % CUs once the workgroup before it there has ended; its waves
  are dealt to that CU's SIMDs (wave w on SIMD w % SIMDs per CU), one after another on each SIMD;
- a dispatch starts when it starts in host time or when the GPU's previous dispatch ends in emulated time, whichever
  is later, and ends with its last workgroup. So the emulated work of a dispatch sits under its host-time slice.
With a timeline on, the native launcher runs one workgroup per call so that every wave's count is known. At most
MAX_SLICES workgroups and waves of a dispatch are drawn; its slice's `not_drawn` says how many were left out.
"""
from __future__ import annotations

import atexit
import collections
import fcntl
import os
import sys
import threading
import time
import weakref
from collections.abc import Callable

from emu.amd import target
from emu.amd.debug import wavetrace
from emu.amd.memory import GPUFault
from emu.amd.queue import CPError, Wait
from emu.amd.sqtt import Recording
from emu.amd.symbols import dispatch_name

ENV = "HWEMU_TIMELINE"
SEQUENCE = 1  # trusted_packet_sequence_id of every packet
MAX_SLICES = 4096  # workgroups and waves drawn per dispatch
THREAD_TRACE = "HWEMU_THREAD_TRACE"
MAX_ISSUES = 65536  # instructions of the thread trace drawn per dispatch


class _Noop:
    """The packet context while no timeline is on."""

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> bool:
        return False

    def set(self, **args) -> None:
        pass


NOOP = _Noop()


class _Local(threading.local):
    def __init__(self):
        self.packets: list[_Packet] = []  # the packets being run on this thread, innermost last


class _Gpu:
    """One GPU's tracks and its emulated clock."""

    def __init__(self, tl: Timeline, name: str, chip: target.Target):
        self.tl, self.chip = tl, chip
        self.root = tl.track(name)
        self.units = tl.track("compute units (emulated time)", self.root, rank=1 << 20)
        self.dispatches = tl.track("dispatches", self.units, rank=-1)
        self.cus: dict[int, tuple[int, list[int]]] = {}  # CU -> (workgroups track, SIMD tracks)
        self.issue = 0  # the thread trace's group track, once drawn
        self.slots: dict[int, int] = {}  # wave slot -> its thread-trace track
        self.queues: dict[tuple[str, int], int] = {}  # (kind, queue id) -> track
        self.runner = 0
        self.busy_until = 0  # ns: the end of the last dispatch in emulated time

    def cu(self, n: int) -> tuple[int, list[int]]:
        t = self.cus.get(n)
        if t is None:
            cu = self.tl.track(f"CU {n}", self.units, rank=n)
            t = self.cus[n] = (self.tl.track("workgroups", cu, rank=-1),
                               [self.tl.track(f"SIMD {s}", cu, rank=s) for s in range(self.chip.simd_per_cu)])
        return t

    def slot(self, n: int) -> int:
        if not self.issue:
            self.issue = self.tl.track("thread trace (1 cycle = 1 ns)", self.root, rank=1 << 21)
        t = self.slots.get(n)
        if t is None:
            t = self.slots[n] = self.tl.track(f"wave slot {n}", self.issue, rank=n)
        return t


class _Packet:
    """A queue packet being run: its slice begins when something nests in it or it ends."""

    def __init__(self, tl: Timeline, queue, name: str, dwords: int):
        self.tl, self.queue, self.name = tl, queue, name
        self.args = {"dwords": dwords}
        self.gpu = tl.device(queue.gpu)
        self.track = tl.queue_track(self.gpu, queue)
        self.begun = False

    def set(self, **args) -> None:
        self.args.update(args)

    def begin(self) -> None:
        if not self.begun:
            self.begun = True
            if self.parent is not None:
                self.parent.begin()
            self.tl.event("B", self.track, self.t0, self.name, self.args)

    def __enter__(self) -> _Packet:
        self.t0 = self.tl.waiting.pop(self.queue, None) or time.monotonic_ns()
        packets = self.tl.local.packets
        self.parent = packets[-1] if packets and packets[-1].track == self.track else None  # an AQL packet's PM4
        packets.append(self)
        return self

    def __exit__(self, kind, exc, tb) -> bool:
        tl = self.tl
        tl.local.packets.pop()
        if kind is Wait and not self.begun:
            tl.waiting[self.queue] = self.t0  # the packet runs again: its slice spans the wait
            return False
        with tl.lock:  # its events are written together, or none once the timeline is closed
            self.begin()
            if isinstance(exc, GPUFault):
                tl.fault(self.track, exc.record)
            elif isinstance(exc, CPError):
                tl.event("i", self.track, time.monotonic_ns(), "CP error", {"error": str(exc)})
            tl.event("E", self.track, time.monotonic_ns())
        tl.flush()
        return False


class _Dispatch:
    """A dispatch being run: host-time slice on its queue (or runner) track, workgroups and waves in emulated time."""

    def __init__(self, tl: Timeline, vm, d, arch: str):
        self.tl, self.d = tl, d
        packets = tl.local.packets
        self.packet = packets[-1] if packets and packets[-1].queue.gpu.vm is vm else None
        if self.packet is not None:
            self.gpu, self.track = self.packet.gpu, self.packet.track
            self.packet.begin()
        else:
            self.gpu = tl.runner(vm, arch)
            self.track = self.gpu.runner
        g = self.gpu
        self.ns = d.lanes // g.chip.gen.simd_width * 1e3 / g.chip.engine_clock  # ns per wave-instruction
        self.t0 = time.monotonic_ns()
        self.start = max(self.t0, g.busy_until)
        self.cu_free: dict[int, float] = {}  # CU -> ns after `start` when its last workgroup ends
        self.waves = self.instructions = self.workgroups = self.drawn = self.not_drawn = 0
        self.name = dispatch_name(vm, d)

    def workgroup(self, wg: int, ids: tuple[int, int, int], counts: list[int]) -> None:
        """Workgroup `wg` (linear index) with workgroup ids `ids` ran; its waves executed `counts` instructions."""
        g, tl = self.gpu, self.tl
        cu = wg % g.chip.cus
        start = self.cu_free.get(cu, 0.0)
        simds = [start] * g.chip.simd_per_cu
        at = self.start
        draw = self.drawn + 1 + len(counts) <= MAX_SLICES
        wg_track, simd_tracks = g.cu(cu) if draw else (0, [])
        for w, n in enumerate(counts):
            s = w % len(simds)
            t0, simds[s] = simds[s], simds[s] + n * self.ns
            if draw:
                tl.slice(simd_tracks[s], at + round(t0), at + round(simds[s]), f"wave {w} wg {ids}",
                         {"dispatch": self.d.dispatch_id, "instructions": n})
        end = max(simds)
        if draw:
            tl.slice(wg_track, at + round(start), at + round(end), f"wg {ids}",
                     {"kernel": self.name, "dispatch": self.d.dispatch_id, "waves": len(counts),
                      "instructions": sum(counts)})
            self.drawn += 1 + len(counts)
        else:
            self.not_drawn += 1 + len(counts)
        self.cu_free[cu] = end
        self.workgroups += 1
        self.waves += len(counts)
        self.instructions += sum(counts)

    def finish(self, fault) -> None:
        tl, g, d = self.tl, self.gpu, self.d
        end = self.start + round(max(self.cu_free.values(), default=0.0))
        g.busy_until = end
        args = {"kernel": self.name, "dispatch": d.dispatch_id, "grid": str(d.grid), "block": str(d.block),
                "wave_size": d.lanes, "workgroups": self.workgroups, "waves": self.waves,
                "wave_instructions": self.instructions, "entry": hex(d.entry)}
        if self.not_drawn:
            args["not_drawn"] = f"{self.not_drawn} workgroup and wave slices (more than {MAX_SLICES})"
        if isinstance(d.trace, Recording):
            args["thread_trace"] = self._issue(d.trace)
        with tl.lock:
            tl.slice(g.dispatches, self.start, end, self.name, args)
            tl.event("B", self.track, self.t0, self.name, args)
            if fault is not None:
                tl.fault(self.track, fault.record)
            tl.event("E", self.track, time.monotonic_ns())
        if self.packet is None:
            tl.flush()


    def _issue(self, rec: Recording) -> str:
        """Draw what the traced waves issued on the wave-slot tracks; what the dispatch's slice says of it."""
        tl, g = self.tl, self.gpu
        at = lambda cycle: self.start + cycle  # noqa: E731  (a cycle drawn as a nanosecond)
        prev, drawn, left, waves = 0, 0, 0, {}  # waves: slot -> its track, while its wave slice is open
        with tl.lock:
            for t, kind, op, slot, inst, wg in rec.timed():
                if kind == "WAVESTART":
                    track = waves[slot] = g.slot(slot)
                    tl.event("B", track, at(t), f"wave {slot} wg {wg}", {"dispatch": self.d.dispatch_id})
                elif kind == "WAVEEND":
                    tl.event("E", waves.pop(slot), at(t))
                elif drawn < MAX_ISSUES:
                    text = str(inst)
                    tl.slice(waves[slot], at(prev), at(t), text.split(" ", 1)[0],
                             {"pc": hex(inst.pc), "instruction": text, "token": kind if kind != "INST" else
                              f"INST {op:#x}", "cycles": t - prev})
                    drawn += 1
                else:
                    left += 1
                prev = t
            for track in waves.values():  # a wave that faulted ends with its last instruction
                tl.event("E", track, at(prev))
        return f"{drawn} instructions drawn" + (f", {left} more not (at most {MAX_ISSUES})" if left else "")


class Timeline:
    """A trace being written to `path` (opened at the first event)."""

    def __init__(self, path: str):
        self.path = path
        self.lock = threading.RLock()
        self.local = _Local()
        self.waiting: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # queue -> when its packet began waiting
        self.faults: collections.deque = collections.deque(maxlen=64)  # the fault records drawn last
        self._gpus: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # VM -> _Gpu
        self._runners = 0
        self._uuids = 0
        self._file = self._builder = None
        self._open_slices: collections.Counter = collections.Counter()  # track -> slices begun and not ended
        self._pid = os.getpid()
        self.written = ""  # the file written, once opened
        self.waves = _thread_trace_filter()  # the waves HWEMU_THREAD_TRACE selects, or None

    # -- the file ----------------------------------------------------------------------------------------------
    def _open(self) -> None:
        from perfetto.trace_builder.proto_builder import StreamingTraceProtoBuilder
        path = self.path
        fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:  # another live process writes it
            os.close(fd)
            stem, ext = os.path.splitext(path)
            path = f"{stem}.{os.getpid()}{ext}"
            fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o644)
        os.ftruncate(fd, 0)
        self._file = os.fdopen(fd, "wb")
        self._builder = StreamingTraceProtoBuilder(self._file)
        self.written = path

    def _write(self, fill) -> None:
        with self.lock:
            if self._builder is None:
                if self._pid != os.getpid() or self._file is not None:  # closed, or inherited through fork
                    return
                try:
                    self._open()
                except OSError as e:
                    self._failed(e)
                    return
            p = self._builder.create_packet()
            p.trusted_packet_sequence_id = SEQUENCE
            fill(p)
            try:
                self._builder.write_packet(p)
            except OSError as e:
                self._failed(e)

    def flush(self) -> None:
        with self.lock:
            if self._builder is not None:
                try:
                    self._file.flush()
                except OSError as e:
                    self._failed(e)

    def _failed(self, e: OSError) -> None:
        """The file cannot be written (the disk is full, say): the program goes on without its timeline."""
        print(f"hwemu: timeline {self.written or self.path}: {e}; no more events are written", file=sys.stderr)
        with self.lock:
            f, self._builder, self._file = self._file, None, True
        if f is not None and f is not True:
            try:
                f.close()
            except OSError:
                pass

    def close(self) -> None:
        """End the slices still open (a packet being run) and close the file; later events are dropped."""
        with self.lock:
            if self._builder is not None and self._pid == os.getpid():
                now = time.monotonic_ns()
                for track, n in list(self._open_slices.items()):
                    for _ in range(n):
                        self.event("E", track, now)
            f, self._builder, self._file = self._file, None, self._file or True
            if f is not None and f is not True and self._pid == os.getpid():
                try:
                    f.close()
                except OSError as e:
                    print(f"hwemu: timeline {self.written}: {e}", file=sys.stderr)

    # -- tracks and events -------------------------------------------------------------------------------------
    def track(self, name: str, parent: int = 0, rank: int | None = None) -> int:
        with self.lock:
            self._uuids += 1
            uuid = self._uuids

        def fill(p) -> None:
            t = p.track_descriptor
            t.uuid, t.name = uuid, name
            if parent:
                t.parent_uuid = parent
            if rank is not None:
                t.sibling_order_rank = rank
            t.child_ordering = t.EXPLICIT
        self._write(fill)
        return uuid

    def event(self, kind: str, track: int, ts: int, name: str = "", args: dict | None = None) -> None:
        """A slice begin ("B"), end ("E") or instant ("i") on `track` at `ts` ns."""
        def fill(p) -> None:
            self._open_slices[track] += {"B": 1, "E": -1}.get(kind, 0)
            p.timestamp = ts
            e = p.track_event
            e.track_uuid = track
            e.type = {"B": e.TYPE_SLICE_BEGIN, "E": e.TYPE_SLICE_END, "i": e.TYPE_INSTANT}[kind]
            if name:
                e.name = name
            for k, v in (args or {}).items():
                a = e.debug_annotations.add()
                a.name = k
                if isinstance(v, int):
                    a.int_value = v
                else:
                    a.string_value = str(v)
        self._write(fill)

    def slice(self, track: int, t0: int, t1: int, name: str, args: dict) -> None:
        with self.lock:
            self.event("B", track, t0, name, args)
            self.event("E", track, t1)

    def fault(self, track: int, rec) -> None:
        """An instant event for fault record `rec` (once per record)."""
        with self.lock:
            if any(r is rec for r in self.faults):
                return
            self.faults.append(rec)
        args = {"kind": rec.kind, "summary": str(rec)}
        if rec.addresses:
            args.update(address=hex(rec.addresses[0]), lanes=len(rec.lanes), write=int(rec.write), bits=rec.bits)
        for k in ("pc", "instruction", "dispatch", "workgroup", "wave", "detail"):
            v = getattr(rec, k)
            if v not in (None, ""):
                args[k] = hex(v) if k == "pc" else v
        self.event("i", track, time.monotonic_ns(), f"GPU fault: {rec.kind}", args)

    # -- GPUs and queues ---------------------------------------------------------------------------------------
    def device(self, gpu) -> _Gpu:
        """The tracks of a MOCKKFD GPU (emu.amd.device.GPUDevice)."""
        with self.lock:
            g = self._gpus.get(gpu.vm)
            if g is None:
                g = self._gpus[gpu.vm] = _Gpu(self, gpu.name, gpu.chip)
            return g

    def runner(self, vm, arch: str) -> _Gpu:
        """The tracks of a runner GPU (emu.amd.gpu.GPU), known by its VM."""
        with self.lock:
            g = self._gpus.get(vm)
            if g is None:
                self._runners += 1
                g = self._gpus[vm] = _Gpu(self, f"runner {arch} #{self._runners}", target.get(arch))
            if not g.runner:
                g.runner = self.track("runner", g.root, rank=0)
            return g

    def queue_track(self, g: _Gpu, queue) -> int:
        key = ({"SDMAQueue": "SDMA", "AQLQueue": "AQL"}.get(type(queue).__name__, "PM4"), queue.id)
        t = g.queues.get(key)
        if t is None:
            with self.lock:
                t = g.queues.get(key) or self.track(f"{key[0]} queue {queue.id}", g.root, rank=queue.id)
                g.queues[key] = t
        return t

    # -- hooks -------------------------------------------------------------------------------------------------
    def packet(self, queue, name: str, dwords: int) -> _Packet:
        return _Packet(self, queue, name, dwords)

    def dispatch(self, vm, d, arch: str) -> _Dispatch:
        return _Dispatch(self, vm, d, arch)


def complete(path: str) -> int:
    """Cut a trace file after its last whole Trace message (a process killed while writing leaves part of one);
    returns the number of messages it holds."""
    with open(path, "r+b") as f:
        data = f.read()
        pos = count = 0
        while pos < len(data) and data[pos] == 0x0A:  # field 1 (packet), length-delimited
            n, shift, i = 0, 0, pos + 1
            while i < len(data):  # the length: a varint
                n |= (data[i] & 0x7F) << shift
                shift, i = shift + 7, i + 1
                if not data[i - 1] & 0x80:
                    break
            else:
                break
            if i + n > len(data):
                break
            pos, count = i + n, count + 1
        f.truncate(pos)
    return count


def written_since(path: str, began: float) -> list[str]:
    """The timeline files of HWEMU_TIMELINE=`path` (it and its per-process siblings) written since `began`."""
    stem, ext = os.path.splitext(path)
    folder = os.path.dirname(path) or "."
    names = [path] + sorted(os.path.join(folder, f) for f in os.listdir(folder)
                            if f.startswith(os.path.basename(stem) + ".") and f.endswith(ext)
                            and f[len(os.path.basename(stem)) + 1:len(f) - len(ext)].isdigit())
    return [f for f in names if os.path.exists(f) and os.path.getmtime(f) >= began]


_session: Timeline | None = None


def session() -> Timeline | None:
    """The timeline being written, or None."""
    return _session


def _thread_trace_filter() -> wavetrace.Filter | None:
    text = os.environ.get(THREAD_TRACE, "")
    if text in ("", "0"):
        return None
    try:
        return wavetrace.parse(text, THREAD_TRACE, thread_trace=True)
    except wavetrace.TraceFilterError as e:  # said once; the timeline goes on without the thread trace
        print(f"hwemu: {e}", file=sys.stderr)
        return None


def recording(chip: target.Target, prog, lanes: int, kernel: Callable[[], str], dispatch: int) -> Recording | None:
    """What records the issue of the waves HWEMU_THREAD_TRACE selects in a dispatch about to start (None: none);
    `kernel()` names its kernel (asked only when a thread trace is on)."""
    tl = _session
    if tl is None or tl.waves is None or not tl.waves.dispatch_wanted(kernel(), dispatch):
        return None
    return Recording(prog, lanes, chip.gen.sqtt_layout or 3, select=tl.waves.wave_wanted)


def packet(queue, name: str, dwords: int):
    """A context around running one queue packet (a no-op while no timeline is on); `.set(k=v)` adds arguments."""
    tl = _session
    return NOOP if tl is None else _Packet(tl, queue, name, dwords)


def start(path: str) -> Timeline:
    """Write a timeline to `path` from now on (closing one being written)."""
    global _session
    stop()
    _session = Timeline(os.path.abspath(path))
    return _session


def stop() -> None:
    """Close the timeline being written, if any."""
    global _session
    tl, _session = _session, None
    if tl is not None:
        tl.close()


def _at_exit() -> None:
    if _session is not None:
        _session.close()


def _after_fork_in_child() -> None:
    """A forked child writes its own file (the parent's file and lock stay the parent's)."""
    global _session
    if _session is not None:
        _session = Timeline(_session.path)


def _before_fork() -> None:
    if _session is not None:
        _session.flush()  # nothing buffered for the child to write again


atexit.register(_at_exit)
os.register_at_fork(before=_before_fork, after_in_child=_after_fork_in_child)
if os.environ.get(ENV):
    start(os.environ[ENV])
