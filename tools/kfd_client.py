"""A minimal raw KFD client of the mock below the stack (ioctls, buffers, queues and doorbells only), for tests and
the hostile-client campaigns of tools.hostile_kfd."""
from __future__ import annotations

import ctypes
import os
import struct
import subprocess
import time

import numpy as np

from stack.hcq import fileio, pm4
from stack.hcq import kfd_ioctl as k
from stack.hcq.fileio import file_interface

TOPOLOGY = "/sys/devices/virtual/kfd/kfd/topology/nodes"
GTT_FLAGS = k.ALLOC_GTT | k.ALLOC_WRITABLE | k.ALLOC_EXECUTABLE | k.ALLOC_COHERENT | k.ALLOC_UNCACHED | k.ALLOC_PUBLIC
VRAM_FLAGS = k.ALLOC_VRAM | k.ALLOC_WRITABLE | k.ALLOC_EXECUTABLE | k.ALLOC_PUBLIC


HANG_MS = 120_000  # how long a wait for the GPU may take: a bound against hangs (on a loaded machine), no timing check


def wait_for(cond, timeout: float = HANG_MS / 1000) -> bool:
    end = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > end:
            return False
        time.sleep(0.0005)
    return True


def aql_packet(header_type: int, body: bytes, signal: int = 0) -> bytes:
    """A 64-byte AQL packet: header (barrier bit, system-scope acquire and release fences), body, completion signal."""
    header = header_type | 1 << 8 | 2 << 9 | 2 << 11
    return (struct.pack("<H", header) + body).ljust(56, b"\0") + struct.pack("<Q", signal)


STORE_IDS = {"gfx1100": "v_mov_b32 v1, 0x2a\nv_lshlrev_b32 v2, 2, v0\nglobal_store_b32 v2, v1, s[0:1]\ns_endpgm\n",
             "gfx942": "v_mov_b32 v1, 0x2a\nv_lshlrev_b32 v2, 2, v0\nglobal_store_dword v2, v1, s[0:1]\ns_endpgm\n"}


def assemble(arch: str, text: str, tmp_path) -> bytes:
    """The .text bytes of assembly `text` (llvm-mc-19)."""
    src, obj, out = tmp_path / "k.s", tmp_path / "k.o", tmp_path / "k.bin"
    src.write_text(text)
    subprocess.run(["llvm-mc-19", "-triple=amdgcn-amd-amdhsa", f"-mcpu={arch}", "-filetype=obj", str(src), "-o",
                    str(obj)], check=True)
    subprocess.run(["llvm-objcopy-19", "-O", "binary", "--only-section=.text", str(obj), str(out)], check=True)
    return out.read_bytes()


def dispatch_words(gfx: int, code_va: int, user: list[int], block: int, wave32: bool) -> list[int]:
    """PM4 for one workgroup of `block` work-items of the code at code_va, `user` in the user SGPRs."""
    return (pm4.set_regs(pm4.COMPUTE_PGM_LO, code_va >> 8, code_va >> 40)
            + pm4.set_regs(pm4.COMPUTE_PGM_RSRC1, 0, pm4.PGM_RSRC2_USER_SGPR.put(len(user)))
            + pm4.set_regs(pm4.COMPUTE_USER_DATA_0, *user)
            + pm4.set_regs(pm4.COMPUTE_START_X, 0, 0, 0, block, 1, 1)
            + pm4.dispatch_direct((1, 1, 1), pm4.dispatch_initiator(gfx, wave32)))


class Buf:
    def __init__(self, va: int, size: int, handle: int):
        self.va, self.size, self.handle = va, size, handle
        self.mem = np.ctypeslib.as_array((ctypes.c_uint8 * size).from_address(va))


class RawClient:
    """A raw client of its own mock systems: these have 3 or 4 GPUs, so that a `stack.Device` in the same test
    process (one or two GPUs, or 5 and more for the tests that need a system of their own) never shares the KFD
    process state with it (a second ACQUIRE_VM from another render fd, or RUNTIME_ENABLE, is EBUSY, as on a real
    kernel)."""

    def __init__(self, arch: str = "gfx1100", gpus: int = 3):
        self.io = file_interface("MOCKKFD", arch, gpus)
        self.kfd = self.io("/dev/kfd", os.O_RDWR)
        self.gpu_ids, self.props = [], []
        for n in sorted(self.io(TOPOLOGY).listdir(), key=int):
            gid = int(self.io(f"{TOPOLOGY}/{n}/gpu_id").read())
            if gid:
                self.gpu_ids.append(gid)
                self.props.append({a: int(b) for a, b in (ln.split() for ln in
                                                          self.io(f"{TOPOLOGY}/{n}/properties").read().splitlines())})
        self.gpu_id = self.gpu_ids[0]
        self.drms = [self.io(f"/dev/dri/renderD{p['drm_render_minor']}", os.O_RDWR) for p in self.props]
        for gid, drm in zip(self.gpu_ids, self.drms, strict=True):
            if gid not in self.system.kfd.proc.vms:
                self.ioctl("ACQUIRE_VM", k.AcquireVm(drm.fd, gid))

    @property
    def system(self):
        return self.io.system

    def ioctl(self, name: str, args):
        self.kfd.ioctl(k.REQUEST[name], args)
        return args

    def wait_for(self, cond, timeout: float = HANG_MS / 1000) -> bool:
        """wait_for(cond) as a client that waits for the device: first it kicks the engines of this client's GPUs
        (as the driver's WAIT_EVENTS and tinygrad's signal poll do), so that the idle engine looks at the doorbells
        at once rather than at the end of its nap (up to emu.amd.doorbell.LAST_US after the doorbell store)."""
        for g in self.system.gpus:
            g.kick()
        return wait_for(cond, timeout)

    def event(self, event_type: int):
        return self.ioctl("CREATE_EVENT", k.CreateEvent(event_type=event_type))

    def wait_event(self, ev, timeout_ms: int = HANG_MS):
        """WAIT_EVENTS on one event: (completed, its kfd_event_data)."""
        data = (k.EventData * 1)(k.EventData(event_id=ev.event_id))
        w = self.ioctl("WAIT_EVENTS", k.WaitEvents(events_ptr=ctypes.addressof(data), num_events=1,
                                                   timeout=timeout_ms))
        return w.wait_result == k.WAIT_COMPLETE, data[0]

    def alloc(self, size: int, flags: int = GTT_FLAGS, gpu: int = 0, map_to=(0,)) -> Buf:
        size = -(-size // 4096) * 4096
        va = self.io.anon_mmap(0, size, fileio.PROT_NONE, fileio.MAP_PRIVATE | fileio.MAP_NORESERVE, 0)
        a = self.ioctl("ALLOC_MEMORY_OF_GPU", k.AllocMemoryOfGpu(va_addr=va, size=size, gpu_id=self.gpu_ids[gpu],
                                                                  flags=flags))
        if map_to:
            self.map(a.handle, [self.gpu_ids[i] for i in map_to])
        rw, fixed = fileio.PROT_READ | fileio.PROT_WRITE, fileio.MAP_SHARED | fileio.MAP_FIXED
        self.drms[gpu].mmap(va, size, rw, fixed, a.mmap_offset)
        return Buf(va, size, a.handle)

    def map(self, handle: int, gpu_ids, name: str = "MAP_MEMORY_TO_GPU"):
        ids = (ctypes.c_uint32 * len(gpu_ids))(*gpu_ids)
        return self.ioctl(name, k.MapMemoryToGpu(handle=handle, device_ids_array_ptr=ctypes.addressof(ids),
                                                 n_devices=len(gpu_ids)))

    def free(self, b: Buf) -> None:
        self.map(b.handle, self.gpu_ids[:1], "UNMAP_MEMORY_FROM_GPU")
        self.io.munmap(b.va, b.size)
        self.ioctl("FREE_MEMORY_OF_GPU", k.FreeMemoryOfGpu(b.handle))

    def destroy(self, q: Queue) -> None:
        self.ioctl("DESTROY_QUEUE", k.DestroyQueue(q.args.queue_id))
        for b in (q.ring, q.gart):
            self.free(b)

    def queue(self, qtype: int = k.QUEUE_TYPE_COMPUTE, ring_size: int = 1 << 16) -> Queue:
        ring, gart = self.alloc(ring_size), self.alloc(4096)
        q = self.ioctl("CREATE_QUEUE", k.CreateQueue(
            ring_base_address=ring.va, ring_size=ring_size, gpu_id=self.gpu_id, queue_type=qtype,
            queue_percentage=100, queue_priority=7, write_pointer_address=gart.va + 56,
            read_pointer_address=gart.va + 128))
        base = q.doorbell_offset & ~0x1FFF
        bells = self.kfd.mmap(0, 0x2000, fileio.PROT_READ | fileio.PROT_WRITE, fileio.MAP_SHARED, base)
        return Queue(self, q, ring, gart, bells + (q.doorbell_offset - base), qtype == k.QUEUE_TYPE_COMPUTE)


class Queue:
    """Submission: packets into the ring, then the write pointer, then the doorbell (plain stores)."""

    def __init__(self, client: RawClient, args, ring: Buf, gart: Buf, doorbell: int, pm4: bool):
        self.client, self.args, self.ring, self.gart, self.pm4 = client, args, ring, gart, pm4
        self.doorbell = np.ctypeslib.as_array((ctypes.c_uint64 * 1).from_address(doorbell))
        self.words = ring.mem.view(np.uint32)
        self.put = 0  # dwords (PM4) or bytes (SDMA) published so far

    @property
    def rptr(self) -> int:
        return int(self.gart.mem[128:136].view(np.uint64)[0])

    def submit(self, dwords: list[int]) -> None:
        pos = self.put if self.pm4 else self.put // 4
        for i, d in enumerate(dwords):
            self.words[(pos + i) % len(self.words)] = d & 0xFFFFFFFF
        self.put += len(dwords) * (1 if self.pm4 else 4)
        self.gart.mem[56:64].view(np.uint64)[0] = self.put
        self.doorbell[0] = self.put
