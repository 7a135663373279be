"""A hostile raw client of MOCKKFD (issue 23): random and mutated ioctl structs, PM4, SDMA and AQL streams, each
input followed by the checks a test bench owes its clients: the engine serves a fresh queue, a host canary the GPU
was never given is unchanged, a saxpy on a fresh AQL queue is right, no queue stopped with an emulator error and
no fault is one, and an ioctl that failed did so with an errno that is not EIO and changed nothing.

`run(kind, seed)` draws one input of a kind from a seed and returns its outcome: `ok:...` or a bad class
(`internal`, `changed-on-error`, `dead-engine`, `canary`, `saxpy`, `stuck`). tools.fuzz runs it in worker
processes (which adds `crash`, `hang` and `memory`); tests/test_mockkfd_hostile.py runs it under hypothesis.
"""
from __future__ import annotations

import ctypes
import errno
import random
import struct

import numpy as np

from stack.hcq import fileio, pm4, sdma
from stack.hcq import kfd_ioctl as k
from tools.kfd_client import VRAM_FLAGS, RawClient, aql_packet

KINDS = ("ioctl", "pm4", "sdma", "aql")
BAD = ("internal", "changed-on-error", "dead-engine", "canary", "saxpy", "stuck")
ARCH, GFX = "gfx1100", 11
SAXPY = """__kernel void saxpy(__global float *y, __global const float *x, float a, uint n) {
  uint i = get_global_id(0);
  if (i < n) y[i] = a * x[i] + y[i];
}"""
ERRNOS = {errno.EINVAL, errno.EFAULT, errno.ENOMEM, errno.ENOENT, errno.EBUSY, errno.ENOSPC, errno.EPERM,
          errno.ENOTTY}
SETTLE = 1.0  # seconds an input's queue may run before it is destroyed (a WAIT_REG_MEM may wait for ever)
HOST_BYTES = 256 << 10  # host memory the ioctls' pointer fields point into
SPARE = 1 << 20  # bytes of GPU VA (and of host pages) the inputs' allocations may take
INTS = (0, 1, 2, 3, 4, 7, 8, 63, 64, 255, 256, 1023, 4096, 0x7FFF, 0xFFFF, 0x10000, 0x7FFFFFFF, 0x80000000,
        0xFFFFFFFF, 1 << 32, 1 << 47, (1 << 48) - 4, (1 << 63) - 1, (1 << 64) - 1)


class Bench:
    """One mock system with a raw client, a host canary, a victim buffer the inputs may aim at and saxpy loaded."""

    def __init__(self, arch: str = ARCH):
        from objfile.codeobj import CodeObject
        from stack.codegen.opencl import compile_cl
        self.c = c = RawClient(arch, 3)
        self.canary = (ctypes.c_char * 4096).from_buffer_copy(bytes(range(256)) * 16)
        # what ioctl pointer fields point at: large enough for any count the driver accepts (4096 events of 48 bytes)
        self.host = (ctypes.c_uint8 * HOST_BYTES)()
        # and a read-only page with the gpu ids: the driver can read it but return no result there
        self.readonly = c.io.anon_mmap(0, 4096, fileio.PROT_READ | fileio.PROT_WRITE, fileio.MAP_PRIVATE, 0)
        ctypes.memmove(self.readonly, bytes((ctypes.c_uint32 * 8)(*c.gpu_ids)), 4 * len(c.gpu_ids))
        if ctypes.CDLL(None, use_errno=True).mprotect(ctypes.c_void_p(self.readonly), 4096, fileio.PROT_READ):
            raise OSError(ctypes.get_errno(), "mprotect of the read-only page")
        self.victim = c.alloc(8192)
        # free GPU VA for the inputs' ALLOC_MEMORY_OF_GPU, and writable host pages for their USERPTR buffers
        self.spare = c.io.anon_mmap(0, SPARE, fileio.PROT_NONE, fileio.MAP_PRIVATE | fileio.MAP_NORESERVE, 0)
        self.user = c.io.anon_mmap(0, SPARE, fileio.PROT_READ | fileio.PROT_WRITE, fileio.MAP_PRIVATE, 0)
        self.co = CodeObject.parse(compile_cl(SAXPY, arch))
        self.code = c.alloc(self.co.image_size, VRAM_FLAGS)
        self.keep = set(c.system.kfd.proc.bos)

    # -- what the inputs aim at ---------------------------------------------------------------------------------
    def addresses(self, gpu: bool = True) -> tuple[int, ...]:
        """Addresses of interest; for GPU packets (`gpu`) also the host canary, which the GPU was never given (an
        ioctl may legitimately be asked to write there: the driver writes its results where it is told)."""
        v = self.victim
        return (v.va, v.va + 4, v.va + v.size - 4, v.va + v.size, self.code.va, 0, 0x7000_0000_0000, (1 << 48) - 8,
                (1 << 64) - 8, *((ctypes.addressof(self.canary),) if gpu else ()))

    def value(self, rng: random.Random, extra: tuple[int, ...] = (), gpu: bool = True) -> int:
        return rng.choice((*INTS, *extra, *self.addresses(gpu))) if rng.random() < 0.8 else rng.getrandbits(64)

    # -- the checks after each input ----------------------------------------------------------------------------
    def verdict(self) -> str | None:
        """None when all is as it should be; else the bad outcome."""
        g = self.c.system.gpus[0]
        bad = [r for r in g.faults if r.kind == "emulator-error"]
        if bad:
            return f"internal:{bad[0].detail[:100]}"
        if not self.engine_alive():
            return "dead-engine"
        if bytes(self.canary) != bytes(range(256)) * 16:
            return "canary"
        return self.saxpy()

    def engine_alive(self) -> bool:
        q, sig = self.c.queue(), self.c.alloc(4096)
        try:
            q.submit(pm4.release_mem(GFX, sig.va, 0x600D, pm4.DATA_SEL_SEND_32_BIT_LOW))
            return self.c.wait_for(lambda: sig.mem.view(np.uint32)[0] == 0x600D)
        finally:
            self.c.destroy(q)
            self.c.free(sig)

    def saxpy(self, n: int = 256, block: int = 64) -> str | None:
        """None if saxpy on a fresh AQL queue is right; else what went wrong. The code image is written again first
        (the inputs may aim at it: it is GPU memory the client gave the GPU)."""
        from objfile.kernargs import hidden_args, pack_kernargs
        c, kern = self.c, self.co.kernels["saxpy"]
        self.code.mem[:self.co.image_size] = np.frombuffer(bytes(self.co.image(self.code.va)), np.uint8)
        xb, yb, args, sig = c.alloc(4 * n), c.alloc(4 * n), c.alloc(4096), c.alloc(4096)
        q = c.queue(k.QUEUE_TYPE_COMPUTE_AQL, ring_size=4096)
        try:
            x = np.arange(n, dtype=np.float32)
            xb.mem[:4 * n], yb.mem[:4 * n] = x.view(np.uint8), (x + 1).view(np.uint8)
            ka = pack_kernargs(kern, [yb.va, xb.va, np.float32(2), np.uint32(n)], hidden_args((n,), (block,)))
            args.mem[:len(ka)] = np.frombuffer(ka, np.uint8)
            sig.mem.view(np.int64)[1] = 1
            q.ring.mem[:64] = np.frombuffer(aql_packet(2, struct.pack(
                "<HHHHHIIIIIQQ", 1, block, 1, 1, 0, n, 1, 1, 0, 0, self.code.va + kern.descriptor_address, args.va),
                sig.va), np.uint8)
            q.gart.mem[56:64].view(np.uint64)[0] = 1
            q.doorbell[0] = 0
            if not c.wait_for(lambda: sig.mem.view(np.int64)[1] == 0):
                model = c.system.gpus[0].queues[q.args.queue_id]
                return f"saxpy: not done in 30 s (queue {model.state} {model.error[:80]!r})"
            wrong = int(np.count_nonzero(yb.mem[:4 * n].view(np.float32) != 3 * x + 1))
            return f"saxpy: {wrong} of {n} results wrong" if wrong else None
        finally:
            c.destroy(q)
            for b in (xb, yb, args, sig):
                c.free(b)

    def snapshot(self) -> tuple:
        """The driver's and the GPUs' state an ioctl may change."""
        s, p = self.c.system, self.c.system.kfd.proc
        return (dict(p.vms), {h: (b.va, b.size, frozenset(map(id, b.mapped_on))) for h, b in p.bos.items()},
                {i: (e.type, e.signaled, e.slot) for i, e in p.events.items()}, sorted(p.queues), p.runtime_enabled,
                p.xnack, p.event_page is None, tuple(len(g.vm.mappings) for g in s.gpus),
                tuple(h.used for h in s.kfd.heaps), tuple(len(g.queues) for g in s.gpus))

    def reset(self) -> None:
        """Undo what an input's successful ioctls made: its queues, events and buffers go (through ioctls)."""
        c, p = self.c, self.c.system.kfd.proc
        for qid in list(p.queues):
            c.ioctl("DESTROY_QUEUE", k.DestroyQueue(qid))
        for eid in list(p.events):
            c.ioctl("DESTROY_EVENT", k.EventId(eid))
        for h, bo in list(p.bos.items()):
            if h in self.keep:
                for g in self.c.system.gpus:
                    if g.gpu_id != c.gpu_id and g in bo.mapped_on:
                        c.map(h, [g.gpu_id], "UNMAP_MEMORY_FROM_GPU")
                continue
            if bo.mapped_on:
                c.map(h, [g.gpu_id for g in bo.mapped_on], "UNMAP_MEMORY_FROM_GPU")
            if bo is not p.event_page_bo:
                c.ioctl("FREE_MEMORY_OF_GPU", k.FreeMemoryOfGpu(h))
        if p.xnack:
            c.ioctl("SET_XNACK_MODE", k.SetXnackMode(0))
        if p.runtime_enabled:  # a mode without the enable bit disables
            c.ioctl("RUNTIME_ENABLE", k.RuntimeEnable())
        for h in self.keep:
            if c.gpu_id not in {g.gpu_id for g in p.bos[h].mapped_on}:
                c.map(h, [c.gpu_id])
        self.victim.mem[:] = 0


# -- inputs ----------------------------------------------------------------------------------------------------------
def _valid_fields(b: Bench, rng: random.Random, ids: ctypes.Array, events: ctypes.Array) -> dict:
    """field name -> a value that field would have in a well-formed request of this client (for any request)."""
    c, p = b.c, b.c.system.kfd.proc
    pages = rng.choice((1, 2, 16))
    pick = lambda seq, default=0: rng.choice(list(seq)) if seq else default  # noqa: E731
    flags = rng.choice((k.ALLOC_GTT | k.ALLOC_WRITABLE, k.ALLOC_VRAM | k.ALLOC_WRITABLE | k.ALLOC_PUBLIC,
                        k.ALLOC_USERPTR | k.ALLOC_WRITABLE, k.ALLOC_GTT, k.ALLOC_DOORBELL, k.ALLOC_MMIO_REMAP))
    at = 4096 * rng.randrange(SPARE // 4096 - pages)
    for d in events:
        d.event_id = pick(p.events)
    return {"gpu_id": pick(c.gpu_ids), "handle": pick(p.bos), "event_id": pick(p.events), "queue_id": pick(p.queues),
            "va_addr": b.spare + at, "size": 4096 * pages, "flags": flags,
            "mmap_offset": b.user + at if flags & k.ALLOC_USERPTR else 0,
            "device_ids_array_ptr": ctypes.addressof(ids), "n_devices": rng.randint(1, len(c.gpu_ids)),
            "events_ptr": ctypes.addressof(events), "num_events": rng.randint(1, len(events)),
            "ring_base_address": b.victim.va, "ring_size": 4096, "write_pointer_address": b.victim.va + 4096 + 56,
            "read_pointer_address": b.victim.va + 4096 + 128, "queue_type": rng.randrange(4),
            "queue_percentage": 100, "queue_priority": 7, "drm_fd": pick(d.fd for d in c.drms),
            "event_type": rng.choice((k.EVENT_SIGNAL, k.EVENT_HW_EXCEPTION, k.EVENT_MEMORY)),
            "auto_reset": rng.randrange(2), "num_of_nodes": rng.randrange(4), "mode_mask": rng.randrange(2),
            "kfd_process_device_apertures_ptr": ctypes.addressof(b.host) + HOST_BYTES // 2,
            "xnack_enabled": rng.choice((-1, 0, 1))}


def ioctl_input(b: Bench, rng: random.Random) -> tuple[int, object]:
    """(request, argument): a KFD command with each field a value of interest, random bytes, or a well-formed struct
    of the request with one field changed; the size in the request sometimes wrong; the argument sometimes bytes."""
    c = b.c
    nr = rng.choice(list(k.IOCTLS)) if rng.random() < 0.95 else rng.randrange(256)
    name, direction, cls = k.IOCTLS.get(nr, ("?", 3, k.GetVersion))
    ctypes.memset(b.host, 0, HOST_BYTES)
    ids = (ctypes.c_uint32 * 4).from_buffer(b.host)  # the driver's inputs and outputs lie in b.host, never past it
    ids[:] = [*rng.sample(c.gpu_ids, len(c.gpu_ids)), 0]
    events = (k.EventData * 2).from_buffer(b.host, 4096)
    handles = (*c.system.kfd.proc.bos, *c.gpu_ids, *c.system.kfd.proc.events, *(d.fd for d in c.drms))
    extra = (*handles, ctypes.addressof(ids), ctypes.addressof(events), b.readonly)
    arg = bytearray(ctypes.sizeof(cls))
    if rng.random() < 0.15:
        arg[:] = rng.randbytes(len(arg))
    else:
        s = cls.from_buffer(arg)
        valid = _valid_fields(b, rng, ids, events) if rng.random() < 0.6 else None
        names = [f for f, *_ in cls._fields_ if isinstance(getattr(s, f), int)]
        odd = rng.choice(names) if names and (valid is None or rng.random() < 0.7) else None
        for fname, ftype, *_ in cls._fields_:
            if fname not in names:
                continue
            bits = 8 * ctypes.sizeof(ftype)
            if valid is not None and fname != odd:
                setattr(s, fname, valid.get(fname, 0) & ((1 << bits) - 1))
            elif valid is not None or rng.random() < 0.7:
                setattr(s, fname, b.value(rng, extra, gpu=False) & ((1 << bits) - 1))
        if cls is k.WaitEvents:  # a wait for ever is the client's to make, not a fault of the driver
            s.timeout = rng.choice((0, 1, 5))
        del s
    size = len(arg) if rng.random() < 0.9 else rng.choice((0, 1, len(arg) - 1, len(arg) + 8, 0x3FFF))
    request = k.ioc(direction, nr, size & 0x3FFF) if rng.random() < 0.97 else rng.getrandbits(32)
    return request, (bytes(arg) if rng.random() < 0.1 else arg.ljust(size & 0x3FFF, b"\0"))


def _regs(b: Bench, rng: random.Random) -> list[int]:
    reg = rng.choice((pm4.COMPUTE_PGM_LO, pm4.COMPUTE_PGM_RSRC1, pm4.COMPUTE_PGM_RSRC2, pm4.COMPUTE_NUM_THREAD_X,
                      pm4.COMPUTE_START_X, pm4.COMPUTE_TMPRING_SIZE, pm4.COMPUTE_USER_DATA_0,
                      pm4.COMPUTE_DISPATCH_SCRATCH_BASE_LO, pm4.COMPUTE_PGM_RSRC3, pm4.COMPUTE_RESOURCE_LIMITS,
                      rng.randrange(pm4.PACKET3_SET_SH_REG_START, pm4.PACKET3_SET_SH_REG_END)))
    n = min(rng.randint(1, 4), pm4.PACKET3_SET_SH_REG_END - reg)
    return pm4.set_regs(reg, *(b.value(rng) & 0xFFFFFFFF for _ in range(n)))


def pm4_stream(b: Bench, rng: random.Random) -> list[int]:
    """Packets the CP knows with values of interest, and garbage headers of every type, opcode and count."""
    a = lambda: b.value(rng) & ~3  # noqa: E731
    v = lambda: b.value(rng) & 0xFFFFFFFF  # noqa: E731
    out: list[int] = []
    for _ in range(rng.randint(1, 8)):
        pick = rng.randrange(12)
        if pick == 0:
            out += _regs(b, rng)
        elif pick == 1:
            out += pm4.dispatch_direct((v(), v(), v()), rng.choice((pm4.dispatch_initiator(GFX, True), v())))
        elif pick == 2:
            addr = a()
            out += pm4.packet3(pm4.PACKET3_DISPATCH_INDIRECT, [addr & 0xFFFFFFFF, addr >> 32 & 0xFFFFFFFF, v()])
        elif pick == 3:
            ib = pm4.indirect_buffer(a(), rng.choice((0, 1, 4, 0xFFFFF, v() & 0xFFFFF)))
            ib[3] |= rng.getrandbits(32) & ~0xFFFFF if rng.random() < 0.5 else 0
            out += ib
        elif pick == 4:
            out += pm4.write_data(a(), *(v() for _ in range(rng.randint(1, 4))))
        elif pick == 5:
            out += pm4.release_mem(GFX, a(), v(), rng.randrange(8), rng.randrange(8), v())
        elif pick == 6:
            out += pm4.wait_reg_mem(a(), v(), rng.randrange(8), v(), v() & 0xFFFF)
        elif pick == 7:
            out += pm4.acquire_mem(GFX, v())
        elif pick == 8:
            out += pm4.event_write(rng.randrange(64), rng.randrange(16))
        elif pick == 9:
            out += [rng.randrange(4) << 30 | rng.getrandbits(30)]  # a header of any type, opcode and count
        elif pick == 10:
            out += pm4.packet3(rng.randrange(256), [v() for _ in range(rng.randint(1, 6))])
        else:
            words = rng.choice((b.victim.mem.view(np.uint32)[:16], np.zeros(4, np.uint32)))
            b.victim.mem.view(np.uint32)[:16] = [v() for _ in range(16)]  # an IB target with random words
            out += [int(w) for w in words[:rng.randint(1, 4)]]
    return out


def sdma_stream(b: Bench, rng: random.Random) -> list[int]:
    a = lambda: b.value(rng)  # noqa: E731
    v = lambda: b.value(rng) & 0xFFFFFFFF  # noqa: E731
    lo, hi = (lambda x: x & 0xFFFFFFFF), (lambda x: x >> 32 & 0xFFFFFFFF)
    out: list[int] = []
    for _ in range(rng.randint(1, 6)):
        pick, d, s = rng.randrange(10), a(), a()
        if pick == 0:
            out += [sdma.header(sdma.SDMA_OP_COPY, sdma.SDMA_SUBOP_COPY_LINEAR), v(), 0, lo(s), hi(s), lo(d), hi(d)]
        elif pick == 1:
            n = rng.choice((0, 1, 3, 0xFFFFF, v() & 0xFFFFF))
            out += [sdma.header(sdma.SDMA_OP_WRITE), lo(d), hi(d), n, *(v() for _ in range(min(n + 1, 8)))]
        elif pick == 2:
            out += [sdma.header(sdma.SDMA_OP_CONST_FILL, 0, rng.randrange(4) << 30), lo(d), hi(d), v(), v()]
        elif pick == 3:
            out += [sdma.header(sdma.SDMA_OP_FENCE, 0, rng.getrandbits(16) << 16), lo(d), hi(d), v()]
        elif pick == 4:
            out += sdma.trap(v() & 0xFFFFFFF)
        elif pick == 5:
            out += [sdma.header(sdma.SDMA_OP_POLL_REGMEM, 0, rng.getrandbits(16) << 16), lo(d), hi(d), v(), v(), v()]
        elif pick == 6:
            out += [sdma.header(sdma.SDMA_OP_TIMESTAMP, rng.randrange(4)), lo(d), hi(d)]
        elif pick == 7:
            out += [sdma.header(sdma.SDMA_OP_INDIRECT, 0, rng.getrandbits(16) << 16), lo(d), hi(d), v(), v(), v()]
        elif pick == 8:
            out += [sdma.header(sdma.SDMA_OP_NOP, 0, rng.getrandbits(16) << 16), v()]
        else:
            out += [rng.getrandbits(32) for _ in range(rng.randint(1, 4))]
    return out


def aql_stream(b: Bench, rng: random.Random) -> bytes:
    """Packets of any header type; dispatches with sizes and kernel objects of interest, barriers on signals at
    addresses of interest."""
    v = lambda: b.value(rng) & 0xFFFFFFFF  # noqa: E731
    out = b""
    for _ in range(rng.randint(1, 4)):
        kind = rng.choice((2, 2, 3, 5, 4, rng.randrange(256)))
        body = bytearray(rng.randbytes(54))
        if kind == 2:
            struct.pack_into("<HHHHIIIIIQQ", body, 2, *(v() & 0xFFFF for _ in range(3)), 0, v(), v(), v(), v(),
                             v(), b.value(rng), b.value(rng))
        elif kind in (3, 5):
            struct.pack_into("<QQQQQ", body, 6, *(b.value(rng) for _ in range(5)))
        out += aql_packet(kind, bytes(body), b.value(rng) if rng.random() < 0.3 else 0)
    return out


# -- one input -------------------------------------------------------------------------------------------------------
def run(b: Bench, kind: str, seed: int) -> str:
    rng = random.Random(seed)
    b.c.system.gpus[0].faults.clear()
    out = run_ioctl(b, rng) if kind == "ioctl" else run_queue(b, kind, rng)
    if out.startswith(BAD):
        return out
    b.reset()  # first: the input may have unmapped the bench's own buffers
    return b.verdict() or out


def run_ioctl(b: Bench, rng: random.Random) -> str:
    """1 to 4 ioctls (a later one may name what an earlier one made); the outcome of the last."""
    for _ in range(rng.randint(1, 4)):
        request, arg = ioctl_input(b, rng)
        before = b.snapshot()
        try:
            b.c.kfd.ioctl(request, arg)
            out = f"ok:{k.IOCTLS.get(k.ioc_nr(request), ('?',))[0]}"
        except OSError as e:
            if e.errno not in ERRNOS:
                return f"internal:{errno.errorcode.get(e.errno, e.errno)}: {str(e)[:100]}"
            if b.snapshot() != before:
                return f"changed-on-error:{str(e)[:100]}"
            out = f"ok:{errno.errorcode[e.errno]}"
    return out


def run_queue(b: Bench, kind: str, rng: random.Random) -> str:
    c = b.c
    qtype = {"pm4": k.QUEUE_TYPE_COMPUTE, "sdma": k.QUEUE_TYPE_SDMA, "aql": k.QUEUE_TYPE_COMPUTE_AQL}[kind]
    q = c.queue(qtype, ring_size=4096)
    model = c.system.gpus[0].queues[q.args.queue_id]
    if kind == "aql":
        pkts = aql_stream(b, rng)
        q.ring.mem[:len(pkts)] = np.frombuffer(pkts, np.uint8)
        q.gart.mem[56:64].view(np.uint64)[0] = len(pkts) // 64
        q.doorbell[0] = len(pkts) // 64 - 1
    else:
        q.submit((pm4_stream if kind == "pm4" else sdma_stream)(b, rng)[:1000])
    c.wait_for(lambda: model.state != "running" or not model.pending(), SETTLE)
    state, error = model.state, model.error
    c.destroy(q)
    if "emulator error" in error:
        return f"internal:{error[:120]}"
    if not c.wait_for(lambda: q.args.queue_id not in c.system.gpus[0].queues):
        return "stuck"
    return f"ok:{state}"
