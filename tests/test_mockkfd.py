"""MOCKKFD below the stack: the KFD ABI against the C header, the sysfs topology, ioctls (errno, nothing changed on
error, hypothesis-generated arguments), and PM4 / SDMA streams against a reference model of their memory effects."""
from __future__ import annotations

import ctypes
import errno
import os
import shutil
import struct
import subprocess
import time

import numpy as np
import pytest
from depth import examples
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from stack.hcq import fileio, pm4, sdma
from stack.hcq import kfd_ioctl as k
from tools.kfd_client import HANG_MS, STORE_IDS, VRAM_FLAGS, RawClient, aql_packet, assemble, dispatch_words, wait_for


@pytest.fixture(scope="module")
def client() -> RawClient:
    return RawClient("gfx1100", 4)


# -- the ABI: our structs and request numbers are the kernel's ---------------------------------------------------------
C_NAMES = {k.GetVersion: "kfd_ioctl_get_version_args", k.CreateQueue: "kfd_ioctl_create_queue_args",
           k.DestroyQueue: "kfd_ioctl_destroy_queue_args", k.UpdateQueue: "kfd_ioctl_update_queue_args",
           k.SetMemoryPolicy: "kfd_ioctl_set_memory_policy_args",
           k.GetClockCounters: "kfd_ioctl_get_clock_counters_args",
           k.ProcessDeviceApertures: "kfd_process_device_apertures",
           k.GetProcessApertures: "kfd_ioctl_get_process_apertures_args",
           k.GetProcessAperturesNew: "kfd_ioctl_get_process_apertures_new_args",
           k.CreateEvent: "kfd_ioctl_create_event_args", k.EventId: "kfd_ioctl_set_event_args",
           k.MemoryExceptionData: "kfd_hsa_memory_exception_data", k.HwExceptionData: "kfd_hsa_hw_exception_data",
           k.EventData: "kfd_event_data", k.WaitEvents: "kfd_ioctl_wait_events_args",
           k.SetScratchBackingVa: "kfd_ioctl_set_scratch_backing_va_args",
           k.GetTileConfig: "kfd_ioctl_get_tile_config_args", k.SetTrapHandler: "kfd_ioctl_set_trap_handler_args",
           k.AcquireVm: "kfd_ioctl_acquire_vm_args", k.AllocMemoryOfGpu: "kfd_ioctl_alloc_memory_of_gpu_args",
           k.FreeMemoryOfGpu: "kfd_ioctl_free_memory_of_gpu_args", k.MapMemoryToGpu: "kfd_ioctl_map_memory_to_gpu_args",
           k.SetXnackMode: "kfd_ioctl_set_xnack_mode_args", k.GetAvailableMemory: "kfd_ioctl_get_available_memory_args"}
NEWER = {("CreateQueue", "sdma_engine_id"), ("CreateQueue", "pad")}  # interface 1.14 fields past the 1.11 header


def _c_fields(struct):
    for name, typ, *_ in struct._fields_:
        if name == "u":  # the anonymous union of kfd_event_data
            yield from ((n, t) for n, t, *_ in typ._fields_)
        elif name != "pad" and (struct.__name__, name) not in NEWER:
            yield name, typ


@pytest.mark.skipif(not (shutil.which("gcc") and os.path.exists("/usr/include/linux/kfd_ioctl.h")),
                    reason="needs gcc and linux/kfd_ioctl.h (linux-libc-dev)")
def test_abi_matches_kernel_header(tmp_path):
    (tmp_path / "drm").mkdir()
    (tmp_path / "drm" / "drm.h").write_text("#include <linux/types.h>\n#include <linux/ioctl.h>\n")  # what it needs
    lines = []
    for args, cname in C_NAMES.items():
        lines.append(f'printf("{args.__name__} sizeof %zu\\n", sizeof(struct {cname}));')
        for f, _ in _c_fields(args):
            lines.append(f'printf("{args.__name__} {f} %zu\\n", offsetof(struct {cname}, {f}));')
    header_requests = [n for n in k.REQUEST if n not in ("RUNTIME_ENABLE",)]
    for n in header_requests:
        lines.append(f'printf("request {n} %lu\\n", (unsigned long)AMDKFD_IOC_{n});')
    src = tmp_path / "abi.c"
    src.write_text("#include <stdio.h>\n#include <stddef.h>\n#include <linux/kfd_ioctl.h>\nint main(void) {\n"
                   + "\n".join(lines) + "\nreturn 0; }\n")
    subprocess.run(["gcc", "-I", str(tmp_path), "-o", str(tmp_path / "abi"), str(src)], check=True)
    out = subprocess.run([str(tmp_path / "abi")], check=True, capture_output=True, text=True).stdout.split("\n")
    seen = 0
    for line in filter(None, out):
        a, b, v = line.split()
        if a == "request":
            ours = k.REQUEST[b]
            if b == "CREATE_QUEUE":  # 1.14 grew the struct by sdma_engine_id + pad: same command, larger size
                assert (k.ioc_nr(ours), k.ioc_dir(ours)) == (k.ioc_nr(int(v)), k.ioc_dir(int(v)))
            else:
                assert ours == int(v), b
        else:
            args = next(s for s in C_NAMES if s.__name__ == a)
            if b == "sizeof":
                assert ctypes.sizeof(args) == int(v) + (8 if args is k.CreateQueue else 0), a
            else:
                assert getattr(args, b).offset == int(v), (a, b)
        seen += 1
    assert seen > 80


# -- topology ------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("arch,cus,wave", [("gfx1100", 96, 32), ("gfx1201", 64, 32), ("gfx942", 38, 64)])
def test_topology_as_amdkfd_writes_it(arch, cus, wave):
    c = RawClient(arch)
    p = c.props[0]
    for key in ("gfx_target_version", "simd_count", "simd_per_cu", "array_count", "simd_arrays_per_engine",
                "cu_per_simd_array", "max_waves_per_simd", "lds_size_in_kb", "wave_front_size",
                "max_slots_scratch_cu", "num_xcc", "drm_render_minor", "vendor_id", "device_id", "local_mem_size"):
        assert key in p, key
    assert p["simd_count"] // p["simd_per_cu"] == cus and p["wave_front_size"] == wave and p["vendor_id"] == 0x1002
    v = p["gfx_target_version"]
    assert f"gfx{v // 10000}{(v // 100) % 100:x}{v % 100:x}" == arch
    ips = f"/sys/class/drm/renderD{p['drm_render_minor']}/device/ip_discovery/die/0"
    assert sorted(c.io(ips).listdir(), key=int) == ["11", "42", "108"]
    gc = tuple(int(c.io(f"{ips}/11/0/{f}").read()) for f in ("major", "minor", "revision"))
    assert gc[0] == (9 if arch == "gfx942" else int(arch[3:5]))
    with pytest.raises(FileNotFoundError):  # the mock owns the topology: no node 9, whatever the host has
        c.io("/sys/devices/virtual/kfd/kfd/topology/nodes/9/gpu_id")
    assert c.io.exists("/dev/kfd") and not c.io.exists("/dev/dri/renderD200")
    assert c.io.exists("/etc/hostname") == os.path.exists("/etc/hostname")  # other paths are the OS's


def test_topology_memory_and_caches_as_runtimes_read_them(client):
    """ROCr's pools and cache list (kfd_topology.h): the CPU node's bank is the system heap (HSA_HEAPTYPE_SYSTEM 0)
    with the host's RAM, a GPU node's is its VRAM (FRAME_BUFFER_PUBLIC 1); a GPU's caches carry HSA_CACHE_TYPE_HSACU
    (8), never HSA_CACHE_TYPE_CPU (4)."""
    io, top = client.io, "/sys/devices/virtual/kfd/kfd/topology/nodes"

    def props(path: str) -> dict[str, int]:
        return {a: int(b) for a, b in (line.split() for line in io(path).read().splitlines())}
    cpu = props(f"{top}/0/mem_banks/0/properties")
    assert cpu["heap_type"] == 0 and cpu["size_in_bytes"] == os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    assert props(f"{top}/1/mem_banks/0/properties")["heap_type"] == 1
    for i in range(client.props[0]["caches_count"]):
        kind = props(f"{top}/1/caches/{i}/properties")["type"]
        assert kind & 8 and not kind & 4, (i, kind)


def test_mmio_remap_page_maps_and_the_cpu_node_has_a_clock(client):
    """What libhsakmt's process setup (ROCm 5.2) asks: an MMIO_REMAP allocation's page maps through /dev/kfd at the
    offset it returned (KFD_MMAP_TYPE_MMIO with the gpu_id), one page only; GET_CLOCK_COUNTERS of the CPU node
    (gpu_id 0) answers, as amdkfd answers a node without a GPU: GPU clock 0, the system clock at 1 GHz."""
    c = client
    rw, shared = fileio.PROT_READ | fileio.PROT_WRITE, fileio.MAP_SHARED
    va = c.io.anon_mmap(0, 4096, fileio.PROT_NONE, fileio.MAP_PRIVATE | fileio.MAP_NORESERVE, 0)
    a = c.ioctl("ALLOC_MEMORY_OF_GPU", k.AllocMemoryOfGpu(va_addr=va, size=4096, gpu_id=c.gpu_id,
                                                          flags=k.ALLOC_MMIO_REMAP))
    try:
        assert a.mmap_offset & k.MMAP_TYPE_MASK == k.MMAP_TYPE_MMIO and a.mmap_offset >> k.MMAP_GPU_ID_SHIFT == c.gpu_id
        assert c.kfd.mmap(va, 4096, rw, shared | fileio.MAP_FIXED, a.mmap_offset) == va
        with pytest.raises(OSError) as e:
            c.kfd.mmap(0, 8192, rw, shared, a.mmap_offset)
        assert e.value.errno == errno.EINVAL and "MMIO remap page" in str(e.value)
    finally:
        c.io.munmap(va, 4096)
        c.ioctl("FREE_MEMORY_OF_GPU", k.FreeMemoryOfGpu(a.handle))
    clocks = c.ioctl("GET_CLOCK_COUNTERS", k.GetClockCounters(gpu_id=0))
    assert clocks.gpu_clock_counter == 0 and clocks.system_clock_freq == 1_000_000_000 and clocks.cpu_clock_counter


# -- ioctls: errno and no change on error ---------------------------------------------------------------------------
def snapshot(c: RawClient):
    p = c.system.kfd.proc
    return (sorted((h, b.va, b.size, tuple(sorted(g.gpu_id for g in b.mapped_on))) for h, b in p.bos.items()),
            sorted((e.id, e.type, e.signaled) for e in p.events.values()), sorted(p.queues), dict(p.vms),
            [g.vram.used for g in c.system.gpus], c.system.kfd.gtt.used,
            [tuple(m.va for m in g.vm.mappings) for g in c.system.gpus])


def expect_errno(c: RawClient, code: int, name: str, args):
    before = snapshot(c)
    with pytest.raises(OSError) as e:
        c.ioctl(name, args)
    assert e.value.errno == code, e.value
    assert snapshot(c) == before


def test_ioctl_errors_name_the_problem(client):
    c = client
    g = c.gpu_id
    expect_errno(c, errno.EINVAL, "ALLOC_MEMORY_OF_GPU", k.AllocMemoryOfGpu(va_addr=0x7000_0000_0000, size=4096,
                                                                            gpu_id=12345, flags=VRAM_FLAGS))
    expect_errno(c, errno.EINVAL, "ALLOC_MEMORY_OF_GPU", k.AllocMemoryOfGpu(va_addr=0x7000_0000_0000, size=4096,
                                                                            gpu_id=g, flags=k.ALLOC_WRITABLE))
    expect_errno(c, errno.EINVAL, "ALLOC_MEMORY_OF_GPU", k.AllocMemoryOfGpu(va_addr=0x7000_0000_0800, size=4096,
                                                                            gpu_id=g, flags=VRAM_FLAGS))
    expect_errno(c, errno.ENOMEM, "ALLOC_MEMORY_OF_GPU", k.AllocMemoryOfGpu(va_addr=0x1000_0000_0000, size=1 << 40,
                                                                            gpu_id=g, flags=VRAM_FLAGS))
    expect_errno(c, errno.EFAULT, "ALLOC_MEMORY_OF_GPU", k.AllocMemoryOfGpu(
        va_addr=0x7000_0000_0000, size=4096, gpu_id=g, flags=k.ALLOC_USERPTR | k.ALLOC_WRITABLE,
        mmap_offset=0x10_0000_0000))
    b = c.alloc(8192)
    expect_errno(c, errno.EINVAL, "ALLOC_MEMORY_OF_GPU", k.AllocMemoryOfGpu(va_addr=b.va + 4096, size=4096,
                                                                            gpu_id=g, flags=VRAM_FLAGS))
    expect_errno(c, errno.EBUSY, "FREE_MEMORY_OF_GPU", k.FreeMemoryOfGpu(b.handle))
    expect_errno(c, errno.EINVAL, "FREE_MEMORY_OF_GPU", k.FreeMemoryOfGpu(0xDEAD))
    expect_errno(c, errno.EFAULT, "MAP_MEMORY_TO_GPU", k.MapMemoryToGpu(handle=b.handle, device_ids_array_ptr=8,
                                                                        n_devices=1))
    expect_errno(c, errno.EINVAL, "CREATE_QUEUE", k.CreateQueue(ring_base_address=b.va, ring_size=3000, gpu_id=g))
    expect_errno(c, errno.EINVAL, "WAIT_EVENTS", k.WaitEvents(events_ptr=0, num_events=0))
    expect_errno(c, errno.EINVAL, "CREATE_EVENT", k.CreateEvent(event_type=99))
    with pytest.raises(OSError) as e:
        c.kfd.ioctl(0xC0084C01, k.GetVersion())  # type 'L' is not KFD's
    assert e.value.errno == errno.ENOTTY
    with pytest.raises(OSError) as e:
        c.kfd.ioctl(k.ioc(3, 0x7F, 8), k.GetVersion())
    assert e.value.errno == errno.EINVAL and "unknown KFD command" in str(e.value)
    c.map(b.handle, [g], "UNMAP_MEMORY_FROM_GPU")
    c.ioctl("FREE_MEMORY_OF_GPU", k.FreeMemoryOfGpu(b.handle))


def test_memory_is_shared_between_cpu_and_gpu_views(client):
    c = client
    b = c.alloc(3 * 4096, VRAM_FLAGS, map_to=(0, 1))
    b.mem[:] = np.arange(b.size) % 256
    for g in c.system.gpus[:2]:  # both GPUs' VMs see the process's stores, at the same VA
        assert g.vm.read(b.va + 4095, 3) == bytes(b.mem[4095:4098])
    c.system.gpus[1].vm.write(b.va, b"\xAA")
    assert b.mem[0] == 0xAA
    avail = c.ioctl("AVAILABLE_MEMORY", k.GetAvailableMemory(gpu_id=c.gpu_id)).available
    assert avail == c.system.gpus[0].vram.size - c.system.gpus[0].vram.used


def _ioctl_args(draw, c: RawClient, safe: int):
    """Argument bytes for a random KFD command: fields drawn from values that matter (valid ids and handles, edge
    numbers), pointers only ever to a scratch buffer of ours or to invalid addresses."""
    nr = draw(st.sampled_from(sorted(k.IOCTLS)))
    name, _, struct = k.IOCTLS[nr]
    p = c.system.kfd.proc

    def pick(items: list[int]) -> st.SearchStrategy[int]:  # state-dependent choices, drawn as a stable index
        return st.integers(0, 255).map(lambda i: items[i % len(items)])
    ints = st.one_of(st.sampled_from([0, 1, 7, 0x1000, 0x2000, 0xFFFFFFFF]), st.integers(0, 0xFFFFFFFF))
    u64 = st.one_of(ints, pick([*p.bos, *(b.va for b in p.bos.values()), safe, 1 << 47, 1 << 63]))
    ids = st.sampled_from([*c.gpu_ids, 0, 1, 0xFFFF])
    a = struct()
    for fname, typ, *_ in struct._fields_:
        if fname.endswith("_ptr") or fname in ("events_ptr", "tile_config_ptr", "macro_tile_config_ptr"):
            val = draw(st.sampled_from([0, 8, safe, 1 << 47]))
        elif fname == "gpu_id":
            val = draw(ids)
        elif fname == "timeout":
            val = draw(st.integers(0, 3))
        elif fname in ("event_id",):
            val = draw(pick([*p.events, 0, 4096, 0x80000000]))
        elif fname in ("num_events", "n_devices"):
            val = draw(st.integers(0, 3))
        elif fname == "size":
            val = draw(st.sampled_from([0, 1, 4096, 0x100, 0x2000, 1 << 20, 1 << 45]))
        elif fname == "drm_fd":
            val = draw(st.sampled_from([*(d.fd for d in c.drms), 0, 999]))
        elif typ in (ctypes.c_uint64,):
            val = draw(u64)
        elif isinstance(typ, type) and issubclass(typ, ctypes.Structure | ctypes.Array):
            continue
        else:
            val = draw(ints)
        try:
            setattr(a, fname, val)
        except (TypeError, OverflowError):
            pass
    return name, a


@settings(max_examples=examples(300, 2000), suppress_health_check=list(HealthCheck), deadline=None)
@given(data=st.data())
def test_random_ioctls_are_errno_or_success(data):
    c = RawClient("gfx1201")
    scratch = (ctypes.c_uint8 * 4096)()
    name, args = _ioctl_args(data.draw, c, ctypes.addressof(scratch))
    if name == "WAIT_EVENTS" and args.num_events and args.events_ptr == ctypes.addressof(scratch):
        evs = [*c.system.kfd.proc.events, 7]
        ids = [evs[data.draw(st.integers(0, 255)) % len(evs)] for _ in range(args.num_events)]
        ctypes.memmove(scratch, bytes((k.EventData * len(ids))(*[k.EventData(event_id=i) for i in ids])), 48 * len(ids))
    before = snapshot(c)
    try:
        c.ioctl(name, args)
    except OSError as e:
        assert e.errno in (errno.EINVAL, errno.EFAULT, errno.ENOMEM, errno.EBUSY, errno.EPERM, errno.ENOSPC,
                           errno.ENOTTY), e
        assert snapshot(c) == before, name


_EDGE_SIZES = (0, 1, 4095, 4096, 4097, 1 << 20, (1 << 32) - 1, 1 << 32, 1 << 40, 1 << 46, 1 << 47, (1 << 63) - 1,
               (1 << 64) - 1)


@settings(max_examples=examples(120, 600), suppress_health_check=list(HealthCheck), deadline=None)
@given(size=st.one_of(st.sampled_from(_EDGE_SIZES), st.integers(0, (1 << 64) - 1)),
       placement=st.sampled_from([VRAM_FLAGS, k.ALLOC_GTT | k.ALLOC_WRITABLE, k.ALLOC_USERPTR | k.ALLOC_WRITABLE,
                                  k.ALLOC_DOORBELL, k.ALLOC_MMIO_REMAP]),
       va=st.sampled_from([0x1000_0000_0000, 0x7FFF_FFFF_0000, 0x1_0000, 0x8000_0000_0000]))
def test_alloc_sizes_are_checked_before_anything_is_allocated(client, size, placement, va):
    """ALLOC_MEMORY_OF_GPU with any size: success within the heap and the VA range, else EINVAL / ENOMEM / EFAULT
    naming the size, with nothing changed (no heap bytes taken, no buffer)."""
    c = client
    args = k.AllocMemoryOfGpu(va_addr=va, size=size, gpu_id=c.gpu_id, flags=placement, mmap_offset=0x10_0000_0000)
    before = snapshot(c)
    try:
        c.ioctl("ALLOC_MEMORY_OF_GPU", args)
    except OSError as e:
        assert e.errno in (errno.EINVAL, errno.ENOMEM, errno.EFAULT), e
        assert f"size {size:#x}" in str(e), e
        assert snapshot(c) == before
        return
    assert 0 < size and va + size <= 1 << 47
    c.ioctl("FREE_MEMORY_OF_GPU", k.FreeMemoryOfGpu(args.handle))
    assert snapshot(c) == before


@settings(max_examples=examples(80, 300), suppress_health_check=list(HealthCheck), deadline=None)
@given(ring_size=st.one_of(st.sampled_from([0, 1, 255, 256, 1024, 3000, 4096, 1 << 16, 1 << 17, 1 << 31,
                                            (1 << 32) - 1]), st.integers(0, (1 << 32) - 1)),
       offset=st.sampled_from([0, 256, 4096, (1 << 16) - 256]))
def test_queue_ring_sizes_are_checked(client, ring_size, offset):
    """CREATE_QUEUE with any ring size at any place of a 64 KiB buffer: a power of two >= MIN_QUEUE_RING_SIZE that
    fits the buffer makes a queue; anything else is EINVAL naming the ring, with nothing changed."""
    c = client
    ring, gart = c.alloc(1 << 16), c.alloc(4096)
    try:
        before = snapshot(c)
        args = k.CreateQueue(ring_base_address=ring.va + offset, ring_size=ring_size, gpu_id=c.gpu_id,
                             queue_type=k.QUEUE_TYPE_COMPUTE, queue_percentage=100, write_pointer_address=gart.va,
                             read_pointer_address=gart.va + 8)
        ok = ring_size >= k.MIN_QUEUE_RING_SIZE and not ring_size & (ring_size - 1) and offset + ring_size <= 1 << 16
        try:
            c.ioctl("CREATE_QUEUE", args)
        except OSError as e:
            assert not ok and e.errno == errno.EINVAL and "ring" in str(e), e
            assert snapshot(c) == before
            return
        assert ok
        c.ioctl("DESTROY_QUEUE", k.DestroyQueue(args.queue_id))
    finally:
        c.free(ring)
        c.free(gart)


# -- PM4 and SDMA streams against a reference model -----------------------------------------------------------------
def _pm4_program(draw, base: int, nwords: int):
    """A stream of memory-writing PM4 packets and the memory the packets should leave (dword index -> value)."""
    expect: dict[int, int] = {}
    out: list[int] = []
    for _ in range(draw(st.integers(1, 12))):
        kind = draw(st.sampled_from(["write", "release32", "release64", "nop", "setreg", "copy", "wait", "ib"]))
        i = draw(st.integers(0, nwords - 2))
        v = draw(st.integers(0, 0xFFFFFFFF))
        if kind == "write":
            vals = draw(st.lists(st.integers(0, 0xFFFFFFFF), min_size=1, max_size=4))
            i = min(i, nwords - len(vals))
            out += pm4.write_data(base + 4 * i, *vals)
            expect.update({i + j: x for j, x in enumerate(vals)})
        elif kind.startswith("release"):
            wide = kind == "release64"
            v2 = draw(st.integers(0, 0xFFFFFFFF))
            out += pm4.release_mem(11, base + 4 * i, v | v2 << 32 if wide else v,
                                   pm4.DATA_SEL_SEND_64_BIT_DATA if wide else pm4.DATA_SEL_SEND_32_BIT_LOW)
            expect[i] = v
            if wide:
                expect[i + 1] = v2
        elif kind == "nop":
            out += pm4.nop(draw(st.integers(1, 5)))
        elif kind == "setreg":
            out += pm4.set_regs(pm4.COMPUTE_USER_DATA_0, v)
        elif kind == "copy":  # immediate -> memory, then memory -> memory
            j = draw(st.integers(0, nwords - 1))
            out += pm4.packet3(pm4.PACKET3_COPY_DATA, [5 | 5 << 8 | 1 << 20, v, 0, (base + 4 * i) & 0xFFFFFFFF,
                                                       (base + 4 * i) >> 32])
            out += pm4.packet3(pm4.PACKET3_COPY_DATA, [1 | 5 << 8 | 1 << 20, (base + 4 * i) & 0xFFFFFFFF,
                                                       (base + 4 * i) >> 32, (base + 4 * j) & 0xFFFFFFFF,
                                                       (base + 4 * j) >> 32])
            expect[i] = v
            expect[j] = v
        elif kind == "wait":  # already true: the value just written is >= itself
            out += pm4.write_data(base + 4 * i, v)
            out += pm4.wait_reg_mem(base + 4 * i, v, pm4.WAIT_REG_MEM_FUNCTION_GE)
            expect[i] = v
        else:
            out.append(("ib", v, i))
            expect[i] = v
    return out, expect


@settings(max_examples=examples(80, 200), suppress_health_check=list(HealthCheck), deadline=None)
@given(data=st.data())
def test_pm4_streams_match_reference_model(client, data):
    c = client
    q = c.queue(ring_size=1024)  # a small ring: streams wrap around its end
    mem, ib = c.alloc(4096), c.alloc(4096)
    try:
        _run_pm4_stream(c, q, mem, ib, data)
    finally:
        c.destroy(q)
        for b in (mem, ib):
            c.free(b)


def _run_pm4_stream(c, q, mem, ib, data):
    words = mem.mem.view(np.uint32)
    stream, expect = _pm4_program(data.draw, mem.va, 1024)
    packets: list[int] = []
    for item in stream:
        if isinstance(item, tuple):  # an indirect buffer holding one WRITE_DATA
            _, v, i = item
            body = pm4.write_data(mem.va + 4 * i, v)
            ib.mem.view(np.uint32)[:len(body)] = body
            packets += pm4.indirect_buffer(ib.va, len(body))
            c_stream = packets
            q.submit(c_stream)
            packets = []
            assert wait_for(lambda: q.rptr == q.put and not c.system.gpus[0].queues[q.args.queue_id].ibs)
        else:
            packets.append(item)
            if len(packets) > 100:
                q.submit(packets)
                packets = []
    q.submit(packets + pm4.release_mem(11, ib.va + 4092, 1, pm4.DATA_SEL_SEND_32_BIT_LOW))
    assert wait_for(lambda: ib.mem.view(np.uint32)[1023] == 1)
    for i, v in expect.items():
        assert words[i] == v, (i, hex(v))


@settings(max_examples=examples(60, 150), suppress_health_check=list(HealthCheck), deadline=None)
@given(data=st.data())
def test_sdma_streams_match_reference_model(client, data):
    c = client
    q = c.queue(k.QUEUE_TYPE_SDMA, ring_size=1024)
    src, dst, done = c.alloc(8192, VRAM_FLAGS), c.alloc(8192), c.alloc(4096)
    try:
        _run_sdma_stream(c, q, src, dst, done, data)
    finally:
        c.destroy(q)
        for b in (src, dst, done):
            c.free(b)


def _run_sdma_stream(c, q, src, dst, done, data):
    src.mem[:] = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1))).integers(0, 256, 8192, np.uint8)
    ref = np.zeros(8192, np.uint8)
    for _ in range(data.draw(st.integers(1, 10))):
        kind = data.draw(st.sampled_from(["copy", "write", "fill", "fence", "nop"]))
        off = data.draw(st.integers(0, 4095))
        if kind == "copy":
            n = data.draw(st.integers(1, 4096))
            so = data.draw(st.integers(0, 8192 - n))
            q.submit(sdma.copy_linear(6, dst.va + off, src.va + so, n))
            ref[off:off + n] = src.mem[so:so + n]
        elif kind == "write":
            vals = data.draw(st.lists(st.integers(0, 0xFFFFFFFF), min_size=1, max_size=6))
            q.submit(sdma.write_untiled(dst.va + off, vals))
            ref[off:off + 4 * len(vals)] = np.array(vals, np.uint32).view(np.uint8)
        elif kind == "fill":
            n, v = 4 * data.draw(st.integers(1, 256)), data.draw(st.integers(0, 0xFFFFFFFF))
            q.submit(sdma.constant_fill(6, dst.va + off, v, n))
            ref[off:off + n] = np.full(n // 4, v, np.uint32).view(np.uint8)
        elif kind == "fence":
            v = data.draw(st.integers(0, 0xFFFFFFFF))
            q.submit(sdma.fence(6, dst.va + off // 4 * 4, v))
            ref[off // 4 * 4:off // 4 * 4 + 4] = np.array([v], np.uint32).view(np.uint8)
        else:
            q.submit(sdma.nops(data.draw(st.integers(1, 5))))
    q.submit(sdma.timestamp(done.va + 8) + sdma.fence(6, done.va, 1))
    assert wait_for(lambda: done.mem.view(np.uint32)[0] == 1)
    assert (dst.mem == ref).all()
    assert done.mem[8:16].view(np.uint64)[0] > 0  # the global timestamp
    assert wait_for(lambda: q.rptr == q.put)  # the read pointer is written back after the packets it passed


@settings(max_examples=examples(100, 300), suppress_health_check=list(HealthCheck), deadline=None)
@given(words=st.lists(st.integers(0, 0xFFFFFFFF), min_size=1, max_size=64), sdma_queue=st.booleans(),
       typed=st.booleans())
def test_malformed_streams_never_hang_or_crash(client, words, sdma_queue, typed):
    """Garbage (or type-3 headers with garbage bodies) stops or stalls that queue; the CP and other queues go on."""
    c = client
    if typed and not sdma_queue:  # plausible headers with random opcodes and counts
        words = [pm4.HEADER_TYPE.put(3) | (w & 0x3FFF_FF00) for w in words[:1]] + words[1:]
    bad = c.queue(k.QUEUE_TYPE_SDMA if sdma_queue else k.QUEUE_TYPE_COMPUTE, ring_size=1024)
    good, sig = c.queue(), c.alloc(4096)
    try:
        bad.submit(words)
        good.submit(pm4.release_mem(11, sig.va, 5, pm4.DATA_SEL_SEND_32_BIT_LOW))
        assert wait_for(lambda: sig.mem.view(np.uint32)[0] == 5)
        q = c.system.gpus[0].queues[bad.args.queue_id]
        assert q.state in ("running", "halted", "stopped")
        if q.state == "stopped":
            assert q.error  # a CP error names the packet
    finally:
        for x in (bad, good):
            c.destroy(x)
        c.free(sig)


def test_cp_error_raises_hw_exception_event(client):
    c = client
    ev = c.ioctl("CREATE_EVENT", k.CreateEvent(event_type=k.EVENT_HW_EXCEPTION))
    q = c.queue()
    q.submit([pm4.HEADER_TYPE.put(3) | pm4.HEADER_OPCODE.put(0xEE), 0])  # an opcode the CP does not know
    data = (k.EventData * 1)(k.EventData(event_id=ev.event_id))
    w = c.ioctl("WAIT_EVENTS", k.WaitEvents(events_ptr=ctypes.addressof(data), num_events=1, timeout=HANG_MS))
    assert w.wait_result == k.WAIT_COMPLETE
    assert data[0].hw_exception_data.gpu_id == c.gpu_id
    assert "unknown PM4 opcode 0xee" in c.system.gpus[0].queues[q.args.queue_id].error
    c.ioctl("DESTROY_EVENT", k.EventId(ev.event_id))


def test_fault_injection_raises_memory_exception_event(client):
    """emu.os.MockSystem.inject_fault: the GPU raises a VM fault at the address through the real fault path (the
    record, the memory-exception event naming the faulting page and GPU); bad arguments are EINVAL, nothing recorded."""
    c = client
    ev = c.ioctl("CREATE_EVENT", k.CreateEvent(event_type=k.EVENT_MEMORY))
    gpu = c.system.gpus[1]
    before = len(gpu.faults)
    for args, what in (((0x1000, 9), "no GPU 9"), ((-1, 1), "not a 64-bit address")):
        with pytest.raises(OSError, match=what) as e:
            c.system.inject_fault(*args)
        assert e.value.errno == errno.EINVAL and len(gpu.faults) == before
    c.system.inject_fault(0x7000_0000_1234, gpu=1, write=True)
    data = (k.EventData * 1)(k.EventData(event_id=ev.event_id))
    w = c.ioctl("WAIT_EVENTS", k.WaitEvents(events_ptr=ctypes.addressof(data), num_events=1, timeout=HANG_MS))
    m = data[0].memory_exception_data
    assert w.wait_result == k.WAIT_COMPLETE and (m.va, m.gpu_id, m.failure.NotPresent) == (0x7000_0000_1000,
                                                                                           c.gpu_ids[1], 1)
    rec = gpu.faults[-1]
    assert len(gpu.faults) == before + 1 and rec.kind == "unmapped" and rec.write and "injected" in rec.detail
    c.ioctl("DESTROY_EVENT", k.EventId(ev.event_id))


def test_signal_event_from_release_mem_interrupt(client):
    c = client
    page = c.system.kfd.proc.event_page
    if page is None:
        ev_page = c.alloc(0x8000)
        ev = c.ioctl("CREATE_EVENT", k.CreateEvent(event_page_offset=ev_page.handle, event_type=k.EVENT_SIGNAL,
                                                   auto_reset=1))
        slots = ev_page.mem.view(np.uint64)
    else:
        ev = c.ioctl("CREATE_EVENT", k.CreateEvent(event_type=k.EVENT_SIGNAL, auto_reset=1))
        slots = c.system.kfd.proc.event_page
    q, sig = c.queue(), c.alloc(4096)
    data = (k.EventData * 1)(k.EventData(event_id=ev.event_id))
    w = c.ioctl("WAIT_EVENTS", k.WaitEvents(events_ptr=ctypes.addressof(data), num_events=1, timeout=0))
    assert w.wait_result == k.WAIT_TIMEOUT
    slot_va = None
    if c.system.kfd.proc.event_page_bo is not None:
        slot_va = c.system.kfd.proc.event_page_bo.va + 8 * ev.event_slot_index
    q.submit(pm4.release_mem(11, sig.va, 9, pm4.DATA_SEL_SEND_32_BIT_LOW)
             + (pm4.release_mem(11, slot_va, ev.event_id, pm4.DATA_SEL_SEND_32_BIT_LOW,
                                pm4.INT_SEL_SEND_INTERRUPT_AFTER_WRITE_CONFIRM, ev.event_id) if slot_va else
                pm4.release_mem(11, 0, 0, pm4.DATA_SEL_NONE, pm4.INT_SEL_SEND_INTERRUPT_AFTER_WRITE_CONFIRM,
                                ev.event_id)))
    w = c.ioctl("WAIT_EVENTS", k.WaitEvents(events_ptr=ctypes.addressof(data), num_events=1, timeout=HANG_MS))
    assert w.wait_result == k.WAIT_COMPLETE and sig.mem.view(np.uint32)[0] == 9
    assert slots[ev.event_slot_index] == 0xFFFFFFFFFFFFFFFF  # acknowledged: the slot is unsignaled again
    w = c.ioctl("WAIT_EVENTS", k.WaitEvents(events_ptr=ctypes.addressof(data), num_events=1, timeout=0))
    assert w.wait_result == k.WAIT_TIMEOUT  # auto-reset


# -- dispatch from registers, GPU VM faults, resuming after the fault is reported -------------------------------------
@pytest.mark.skipif(not shutil.which("llvm-mc-19"), reason="needs llvm-mc-19 (llvm-19)")
@pytest.mark.parametrize("arch", ["gfx1100", "gfx942"])
def test_dispatch_fault_is_reported_and_queue_resumes(arch, tmp_path):
    c = RawClient(arch)
    gfx, wave32 = (11, True) if arch == "gfx1100" else (9, False)
    lanes = 32 if wave32 else 64
    code, out, sig = c.alloc(4096, VRAM_FLAGS), c.alloc(4096), c.alloc(4096)
    blob = assemble(arch, STORE_IDS[arch], tmp_path)
    code.mem[:len(blob)] = np.frombuffer(blob, np.uint8)
    mem_ev = c.ioctl("CREATE_EVENT", k.CreateEvent(event_type=k.EVENT_MEMORY))
    q = c.queue()
    q.submit(dispatch_words(gfx, code.va, [out.va & 0xFFFFFFFF, out.va >> 32], lanes, wave32)
             + pm4.release_mem(gfx, sig.va, 1, pm4.DATA_SEL_SEND_32_BIT_LOW))
    assert wait_for(lambda: sig.mem.view(np.uint32)[0] == 1)
    assert (out.mem.view(np.uint32)[:lanes] == 0x2A).all() and out.mem.view(np.uint32)[lanes] == 0
    bad = 0x5000_0000_1000  # mapped nowhere
    q.submit(dispatch_words(gfx, code.va, [bad & 0xFFFFFFFF, bad >> 32], lanes, wave32)
             + pm4.release_mem(gfx, sig.va, 2, pm4.DATA_SEL_SEND_32_BIT_LOW))
    data = (k.EventData * 1)(k.EventData(event_id=mem_ev.event_id))
    w = c.ioctl("WAIT_EVENTS", k.WaitEvents(events_ptr=ctypes.addressof(data), num_events=1, timeout=HANG_MS))
    assert w.wait_result == k.WAIT_COMPLETE
    m = data[0].memory_exception_data
    assert (m.va, m.gpu_id, m.failure.NotPresent, m.failure.ReadOnly) == (bad, c.gpu_id, 1, 0)
    assert wait_for(lambda: sig.mem.view(np.uint32)[0] == 2)  # reported: the queue went on after the dispatch
    rec = c.system.gpus[0].faults[-1]
    assert rec.kind == "unmapped" and rec.write and rec.addresses[0] == bad and "global_store" in rec.instruction


# -- AQL queues ---------------------------------------------------------------------------------------------------
SAXPY = """__kernel void saxpy(__global float *y, __global const float *x, float a, uint n) {
  uint i = get_global_id(0);
  if (i < n) y[i] = a * x[i] + y[i];
  else y[i] = -1.0f;  /* no lane of a partial workgroup may run past the grid */
}"""


@pytest.mark.skipif(not shutil.which("clang-19"), reason="needs clang-19 (llvm-19)")
@pytest.mark.parametrize("arch", ["gfx1100", "gfx942", "gfx90a"])
def test_aql_dispatch_barrier_and_pm4_ib(arch):
    from objfile.codeobj import CodeObject
    from objfile.kernargs import hidden_args, pack_kernargs
    from stack.codegen.opencl import compile_cl
    c = RawClient(arch)
    co = CodeObject.parse(compile_cl(SAXPY, arch))
    kern = co.kernels["saxpy"]
    code = c.alloc(co.image_size, VRAM_FLAGS)
    code.mem[:co.image_size] = np.frombuffer(bytes(co.image(code.va)), np.uint8)
    n, block = 1000, 64  # 15 full workgroups and a partial one of 40 work-items
    x, y = np.arange(n, dtype=np.float32), np.full(n, 2, np.float32)
    xb, yb, args = c.alloc(4 * n), c.alloc(4 * 1024), c.alloc(4096)
    xb.mem[:4 * n] = x.view(np.uint8)
    yb.mem[:4 * n] = y.view(np.uint8)
    ka = pack_kernargs(kern, [yb.va, xb.va, np.float32(3), np.uint32(n)], hidden_args((n,), (block,)))
    args.mem[:len(ka)] = np.frombuffer(ka, np.uint8)
    ev = c.ioctl("CREATE_EVENT", k.CreateEvent(event_type=k.EVENT_SIGNAL, auto_reset=1))
    sigs = c.alloc(4096)  # amd_signal_t: [0] gates the dispatch, [1] completes it (with an event mailbox)
    gate, done, mailbox = sigs.va, sigs.va + 64, sigs.va + 256
    sigs.mem.view(np.int64)[[1, 9]] = [1, 1]
    sigs.mem.view(np.uint64)[10] = mailbox
    sigs.mem.view(np.uint32)[2 * 8 + 8] = ev.event_id
    q = c.queue(k.QUEUE_TYPE_COMPUTE_AQL, ring_size=4096)
    ring = q.ring.mem
    packets = [aql_packet(3, struct.pack("<HI5Q", 0, 0, gate, 0, 0, 0, 0)),  # BARRIER_AND on the gate signal
               aql_packet(2, struct.pack("<HHHHHIIIIIQQ", 1, block, 1, 1, 0, n, 1, 1, 0, 0,
                                          code.va + kern.descriptor_address, args.va), done)]
    flag = c.alloc(4096)
    ib = c.alloc(4096)
    body = pm4.release_mem(11 if arch == "gfx1100" else 9, flag.va, 7, pm4.DATA_SEL_SEND_32_BIT_LOW)
    ib.mem.view(np.uint32)[:len(body)] = body
    packets.append(aql_packet(0, struct.pack("<H", 1) + np.array(pm4.indirect_buffer(ib.va, len(body)) + [10],
                                                                   np.uint32).tobytes()))
    for i, p in enumerate(packets):
        ring[64 * i:64 * i + 64] = np.frombuffer(p, np.uint8)
    stats = next(g for g in c.system.gpus if g.gpu_id == c.gpu_id).stats  # the GPU's packet counts (HWEMU_STATS)
    before = {n: stats.get(n, 0) for n in ("AQL_BARRIER_AND", "AQL_KERNEL_DISPATCH", "AQL_VENDOR")}

    def ran() -> tuple[int, ...]:
        return tuple(stats.get(n, 0) - b for n, b in before.items())
    q.gart.mem[56:64].view(np.uint64)[0] = len(packets)  # write_dispatch_id
    q.doorbell[0] = len(packets) - 1
    time.sleep(0.05)
    assert q.rptr == 0 and (yb.mem[:4 * n].view(np.float32) == 2).all()  # the barrier holds the dispatch back
    assert ran() == (0, 0, 0)  # the barrier is retried while it holds the dispatch back: counted once it runs
    sigs.mem.view(np.int64)[1] = 0  # release the gate
    q.doorbell[0] = len(packets) - 1
    data = (k.EventData * 1)(k.EventData(event_id=ev.event_id))
    w = c.ioctl("WAIT_EVENTS", k.WaitEvents(events_ptr=ctypes.addressof(data), num_events=1, timeout=HANG_MS))
    assert w.wait_result == k.WAIT_COMPLETE and sigs.mem.view(np.int64)[9] == 0  # completion signal decremented
    assert sigs.mem.view(np.uint64)[32] == ev.event_id  # the mailbox got the event id
    assert wait_for(lambda: flag.mem.view(np.uint32)[0] == 7 and q.rptr == 3)
    got = yb.mem.view(np.float32)
    assert (got[:n] == 3 * x + 2).all() and (got[n:1024] == 0).all()
    assert all(ring[64 * i] == 1 for i in range(3))  # consumed packets are INVALID again
    assert ran() == (1, 1, 1)


def test_indirect_buffer_at_unmapped_address_is_a_cp_error(client):
    c = client
    ev = c.ioctl("CREATE_EVENT", k.CreateEvent(event_type=k.EVENT_HW_EXCEPTION))
    q = c.queue()
    try:
        q.submit(pm4.indirect_buffer(0x5000_0000_0000, 16))
        data = (k.EventData * 1)(k.EventData(event_id=ev.event_id))
        w = c.ioctl("WAIT_EVENTS", k.WaitEvents(events_ptr=ctypes.addressof(data), num_events=1, timeout=HANG_MS))
        assert w.wait_result == k.WAIT_COMPLETE and data[0].hw_exception_data.gpu_id == c.gpu_id
        q_model = c.system.gpus[0].queues[q.args.queue_id]
        assert q_model.state == "stopped" and "0x500000000000" in q_model.error and "not mapped" in q_model.error
    finally:
        c.destroy(q)
        c.ioctl("DESTROY_EVENT", k.EventId(ev.event_id))


def test_indirect_buffer_runs_as_fetched_when_freed_after_its_signal(client):
    """The CP fetches an indirect buffer as it enters it: a client that frees the buffer once a signal written from
    inside it arrives (tinygrad frees a graph's command buffer so) does not take the packets after it away. Here
    the packets after the signal wait for a flag the client sets only after the free."""
    c = client
    q = c.queue()
    mem, ib = c.alloc(4096), c.alloc(4096)
    try:
        words = mem.mem.view(np.uint32)
        body = (pm4.write_data(mem.va, 1) + pm4.wait_reg_mem(mem.va + 4, 1, pm4.WAIT_REG_MEM_FUNCTION_EQ)
                + pm4.write_data(mem.va + 8, 3) + pm4.packet3(pm4.PACKET3_NOP, [0] * 4))
        ib.mem.view(np.uint32)[:len(body)] = body
        q.submit(pm4.indirect_buffer(ib.va, len(body)))
        assert wait_for(lambda: words[0] == 1)
        c.free(ib)
        words[1] = 1
        assert wait_for(lambda: words[2] == 3 and q.rptr == q.put)
        assert not c.system.gpus[0].queues[q.args.queue_id].error
    finally:
        c.destroy(q)
        c.free(mem)


def test_each_gpu_has_a_vm_of_its_own(client):
    """A host buffer allocated as USERPTR on two GPUs uses the same VA in both VMs; mapping a buffer into a peer's
    VM where that VM already holds another buffer is EINVAL, with nothing changed."""
    from stack.hcq.fileio import MAP_ANONYMOUS, MAP_SHARED, PROT_READ, PROT_WRITE
    c = client
    host = c.io.anon_mmap(0, 8192, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, 0)
    flags = k.ALLOC_USERPTR | k.ALLOC_WRITABLE | k.ALLOC_PUBLIC
    handles = [c.ioctl("ALLOC_MEMORY_OF_GPU", k.AllocMemoryOfGpu(va_addr=host, size=8192, gpu_id=g, flags=flags,
                                                                 mmap_offset=host)).handle for g in c.gpu_ids[:2]]
    for h, g in zip(handles, c.gpu_ids[:2], strict=True):
        c.map(h, [g])
    ctypes.memmove(host, b"shared", 6)
    assert all(g.vm.read(host, 6) == b"shared" for g in c.system.gpus[:2])
    peer = (ctypes.c_uint32 * 1)(c.gpu_ids[1])
    expect_errno(c, errno.EINVAL, "MAP_MEMORY_TO_GPU", k.MapMemoryToGpu(
        handle=handles[0], device_ids_array_ptr=ctypes.addressof(peer), n_devices=1))
    for h, g in zip(handles, c.gpu_ids[:2], strict=True):
        c.map(h, [g], "UNMAP_MEMORY_FROM_GPU")
        c.ioctl("FREE_MEMORY_OF_GPU", k.FreeMemoryOfGpu(h))
