"""MOCKKFD against a hostile raw client: a queue's bad state or a packet's size beyond a limit stops that queue with a
CP error and a hardware-exception event, the host and the engine live on (a fresh queue still runs), and an ioctl
whose result cannot be stored changes nothing."""
from __future__ import annotations

import ctypes
import errno
import resource
import shutil
import struct

import numpy as np
import pytest
from depth import examples
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from emu.amd.cp import MAX_IB_ENTRIES
from stack.codegen import opencl
from stack.hcq import fileio, pm4, sdma
from stack.hcq import kfd_ioctl as k
from tools import hostile_kfd
from tools.kfd_client import STORE_IDS, VRAM_FLAGS, RawClient, aql_packet, assemble, dispatch_words, wait_for

GFX = 11


@pytest.fixture(scope="module")
def client() -> RawClient:
    return RawClient("gfx1100", 3)


def engine_alive(c: RawClient) -> bool:
    """A RELEASE_MEM on a fresh PM4 queue lands: the engine runs queues."""
    q, sig = c.queue(), c.alloc(4096)
    try:
        q.submit(pm4.release_mem(GFX, sig.va, 0x600D, pm4.DATA_SEL_SEND_32_BIT_LOW))
        return wait_for(lambda: sig.mem.view(np.uint32)[0] == 0x600D)
    finally:
        c.destroy(q)
        c.free(sig)


def stops_with_cp_error(c: RawClient, submit) -> str:
    """Create a queue with `submit(queue)`, wait for the hardware-exception event; the queue's error text."""
    ev = c.event(k.EVENT_HW_EXCEPTION)
    try:
        q = submit()
        done, data = c.wait_event(ev)
        assert done and data.hw_exception_data.gpu_id == c.gpu_id
        model = c.system.gpus[0].queues[q.args.queue_id]
        assert wait_for(lambda: model.state == "stopped")
        assert "emulator error" not in model.error
        c.destroy(q)
        return model.error
    finally:
        c.ioctl("DESTROY_EVENT", k.EventId(ev.event_id))


def test_aql_queue_with_unmapped_write_pointer_stops_alone(client):
    c = client

    def submit():
        q = c.queue(k.QUEUE_TYPE_COMPUTE_AQL, ring_size=4096)
        c.map(q.gart.handle, [c.gpu_id], "UNMAP_MEMORY_FROM_GPU")  # the amd_queue_t page with write_dispatch_id
        q.doorbell[0] = 1
        return q
    assert "write pointer" in stops_with_cp_error(c, submit)
    assert engine_alive(c)


def _aql(c: RawClient, packet: bytes):
    q = c.queue(k.QUEUE_TYPE_COMPUTE_AQL, ring_size=4096)
    q.ring.mem[:64] = np.frombuffer(packet, np.uint8)
    q.gart.mem[56:64].view(np.uint64)[0] = 1
    q.doorbell[0] = 0
    return q


@pytest.mark.parametrize("kind", [4, 6, 7, 128, 255])
def test_aql_packet_types_not_run_are_cp_errors(client, kind):
    assert f"type {kind}" in stops_with_cp_error(client, lambda: _aql(client, aql_packet(kind, b"")))
    assert engine_alive(client)


def _kernel_dispatch(block, grid, group: int = 0) -> bytes:
    return aql_packet(2, struct.pack("<HHHHHIIIIIQQ", 3, *block, 0, *grid, 0, group, 0x5000_0000_0000, 0))


@pytest.mark.parametrize("block, grid, group, what", [
    ((1, 1, 1), (0xFFFFFFFF,) * 3, 0, "work-items (grid_size (4294967295, 4294967295, 4294967295)) "),
    ((64, 1, 1), (64, 1, 1), 0xFFFFFFFF, "LDS bytes (group_segment_size) 4294967295 exceeds the 64 KiB limit"),
])
def test_aql_dispatch_sizes_beyond_limits_are_cp_errors(client, block, grid, group, what):
    """Checked before the kernel object (unmapped here) is read or anything is allocated."""
    assert what in stops_with_cp_error(client, lambda: _aql(client, _kernel_dispatch(block, grid, group)))


def test_aql_signal_fields_wrap_at_64_bits(client):
    """A barrier-AND whose dependent signal is at 2^64 - 8: the packet processor reads its value at (2^64 - 8 + 8)
    mod 2^64 = 0, faulting there (the fault and its event name page 0, not an address past 64 bits)."""
    c = client
    ev = c.event(k.EVENT_MEMORY)
    q = _aql(c, aql_packet(3, struct.pack("<HI5Q", 0, 0, (1 << 64) - 8, 0, 0, 0, 0)))
    done, data = c.wait_event(ev)
    assert done and data.memory_exception_data.va == 0
    assert c.system.gpus[0].faults[-1].addresses[0] == 0
    c.destroy(q)
    c.ioctl("DESTROY_EVENT", k.EventId(ev.event_id))


def _pm4(c: RawClient, words: list[int]):
    q = c.queue()
    q.submit(words)
    return q


@pytest.mark.parametrize("indirect", [False, True])
def test_pm4_dispatch_grids_beyond_limits_are_cp_errors(client, indirect):
    c = client
    dims = c.alloc(4096)
    dims.mem.view(np.uint32)[:3] = 0xFFFFFFFF
    regs = pm4.set_regs(pm4.COMPUTE_START_X, 0, 0, 0, 1024, 1, 1)
    init = pm4.dispatch_initiator(GFX, True)
    go = (pm4.packet3(pm4.PACKET3_DISPATCH_INDIRECT, [dims.va & 0xFFFFFFFF, dims.va >> 32, init]) if indirect
          else pm4.dispatch_direct((0xFFFFFFFF,) * 3, init))
    err = stops_with_cp_error(c, lambda: _pm4(c, regs + go))
    assert "work-items (grid (4294967295, 4294967295, 4294967295) x block (1024, 1, 1))" in err
    assert "exceeds the 2^32 - 1 limit" in err
    c.free(dims)


def test_pm4_lds_beyond_the_chip_is_a_cp_error(client):
    c = client
    regs = pm4.set_regs(pm4.COMPUTE_PGM_RSRC1, 0, pm4.PGM_RSRC2_LDS_SIZE.put(0x1FF)) \
        + pm4.set_regs(pm4.COMPUTE_START_X, 0, 0, 0, 64, 1, 1)
    go = pm4.dispatch_direct((1, 1, 1), pm4.dispatch_initiator(GFX, True))
    err = stops_with_cp_error(c, lambda: _pm4(c, regs + go))
    assert "LDS bytes (COMPUTE_PGM_RSRC2.LDS_SIZE) 261632 exceeds the 64 KiB limit" in err


def test_indirect_buffer_chained_to_itself_stops_within_a_bound(client):
    c = client
    ib = c.alloc(4096)
    chain = pm4.indirect_buffer(ib.va, 4)
    chain[3] |= pm4.INDIRECT_BUFFER_CHAIN.put(1)
    ib.mem.view(np.uint32)[:4] = chain
    holder = {}

    def submit():
        holder["q"] = q = _pm4(c, pm4.indirect_buffer(ib.va, 4))
        holder["model"] = c.system.gpus[0].queues[q.args.queue_id]
        return q
    assert f"more than {MAX_IB_ENTRIES} indirect buffers entered" in stops_with_cp_error(c, submit)
    assert holder["model"].packets["INDIRECT_BUFFER"] <= MAX_IB_ENTRIES + 1
    c.free(ib)
    assert engine_alive(c)


def test_sdma_fill_of_a_huge_count_faults_before_building_data(client):
    c = client
    dst = c.alloc(4096)
    ev = c.event(k.EVENT_MEMORY)
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    q = c.queue(k.QUEUE_TYPE_SDMA, ring_size=4096)
    q.submit(sdma.constant_fill(6, dst.va, 0x5A5A5A5A, 1 << 30))
    done, data = c.wait_event(ev)
    assert done and data.memory_exception_data.va == dst.va + 4096  # the first page past the buffer
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - rss < 256 * 1024  # KiB: nothing 1 GiB was built
    assert (dst.mem == 0).all()  # a faulting fill writes nothing
    c.destroy(q)
    c.free(dst)
    c.ioctl("DESTROY_EVENT", k.EventId(ev.event_id))


def test_sdma_packet_longer_than_its_ring_is_a_cp_error(client):
    c = client

    def submit():
        q = c.queue(k.QUEUE_TYPE_SDMA, ring_size=1024)
        q.submit([sdma.header(sdma.SDMA_OP_WRITE), 0, 0, 0xFFFFF])
        return q
    assert "more than the 1024-byte ring" in stops_with_cp_error(c, submit)


@pytest.mark.skipif(not shutil.which("llvm-mc-19"), reason="needs llvm-mc-19 (llvm-19)")
def test_destroyed_queue_writes_nothing_after_destroy_returns(client, tmp_path):
    """A kernel storing in a loop is running when its queue is destroyed; its buffer is freed and a new one allocated
    at the same address: the new buffer stays untouched (amdkfd preempts the queue before DESTROY_QUEUE returns), and
    no fault is reported for the stopped dispatch."""
    c = client
    code = c.alloc(4096, VRAM_FLAGS)
    blob = assemble("gfx1100", "s_mov_b32 s4, 0x7fffffff\nv_mov_b32 v1, 0x2a\nv_lshlrev_b32 v2, 2, v0\nloop:\n"
                    "global_store_b32 v2, v1, s[0:1]\ns_sub_u32 s4, s4, 1\ns_cmp_lg_u32 s4, 0\ns_cbranch_scc1 loop\n"
                    "s_endpgm\n", tmp_path)
    code.mem[:len(blob)] = np.frombuffer(blob, np.uint8)
    buf, ev = c.alloc(4096), c.event(k.EVENT_MEMORY)
    faults = len(c.system.gpus[0].faults)
    q = c.queue()
    q.submit(dispatch_words(GFX, code.va, [buf.va & 0xFFFFFFFF, buf.va >> 32], 32, True))
    assert wait_for(lambda: buf.mem.view(np.uint32)[0] == 0x2a)  # the kernel is storing
    va = buf.va
    c.destroy(q)
    c.free(buf)
    again = c.alloc(4096)
    assert again.va == va  # (the host's mmap gave the same range back)
    again.mem[:] = 0
    assert not wait_for(lambda: again.mem.any(), 0.5)
    assert len(c.system.gpus[0].faults) == faults and not c.wait_event(ev, 0)[0]
    c.ioctl("DESTROY_EVENT", k.EventId(ev.event_id))
    c.free(again)
    c.free(code)
    assert engine_alive(c)


# -- ioctl arguments are validated before any effect ------------------------------------------------------------------
def test_read_only_argument_is_efault_with_nothing_changed(client):
    c = client
    g = c.system.gpus[0]
    bos, queues = len(c.system.kfd.proc.bos), len(g.queues)
    alloc = k.AllocMemoryOfGpu(va_addr=0x7000_0000_0000, size=4096, gpu_id=c.gpu_id, flags=k.ALLOC_GTT)
    ring, gart = c.alloc(4096), c.alloc(4096)
    create = k.CreateQueue(ring_base_address=ring.va, ring_size=4096, gpu_id=c.gpu_id, queue_percentage=100,
                           queue_priority=7, write_pointer_address=gart.va + 56, read_pointer_address=gart.va + 128)
    ids = (ctypes.c_uint32 * 1)(c.gpu_id)
    unmap = k.MapMemoryToGpu(handle=ring.handle, device_ids_array_ptr=ctypes.addressof(ids), n_devices=1)
    for name, args in (("ALLOC_MEMORY_OF_GPU", alloc), ("CREATE_QUEUE", create), ("UNMAP_MEMORY_FROM_GPU", unmap)):
        with pytest.raises(OSError) as e:
            c.kfd.ioctl(k.REQUEST[name], bytes(args))
        assert e.value.errno == errno.EFAULT and name in str(e.value) and "read-only" in str(e.value)
    assert (len(c.system.kfd.proc.bos), len(g.queues)) == (bos + 2, queues)
    assert g.vm.mapping(ring.va) is not None  # still mapped
    for b in (ring, gart):
        c.free(b)


def test_wait_events_on_a_read_only_array_is_efault_with_the_event_kept(client):
    """The event data goes back to events_ptr after the wait, which resets an auto-reset event: a read-only array is
    refused before the wait, and the signaled event stays signaled for a wait that can return it."""
    c = client
    ev = c.ioctl("CREATE_EVENT", k.CreateEvent(event_type=k.EVENT_SIGNAL, auto_reset=1))
    c.ioctl("SET_EVENT", k.EventId(ev.event_id))
    page = c.io.anon_mmap(0, 4096, fileio.PROT_READ | fileio.PROT_WRITE, fileio.MAP_PRIVATE, 0)
    ctypes.memmove(page, bytes(k.EventData(event_id=ev.event_id)), ctypes.sizeof(k.EventData))
    assert ctypes.CDLL(None).mprotect(ctypes.c_void_p(page), 4096, fileio.PROT_READ) == 0
    with pytest.raises(OSError) as e:
        c.ioctl("WAIT_EVENTS", k.WaitEvents(events_ptr=page, num_events=1, timeout=0))
    assert e.value.errno == errno.EFAULT and "events_ptr" in str(e.value) and "not writable" in str(e.value)
    assert c.wait_event(ev, 0)[0]  # still signaled: this wait gets it
    c.io.munmap(page, 4096)
    c.ioctl("DESTROY_EVENT", k.EventId(ev.event_id))


# -- USERPTR pages the client unmapped: the GPU faults, the host lives ----------------------------------------------
def _userptr(c: RawClient, size: int = 8192) -> tuple[int, int]:
    host = c.io.anon_mmap(0, size, fileio.PROT_READ | fileio.PROT_WRITE, fileio.MAP_PRIVATE, 0)
    a = c.ioctl("ALLOC_MEMORY_OF_GPU", k.AllocMemoryOfGpu(va_addr=host, size=size, gpu_id=c.gpu_id, mmap_offset=host,
                                                          flags=k.ALLOC_USERPTR | k.ALLOC_WRITABLE))
    c.map(a.handle, [c.gpu_id])
    return host, a.handle


@pytest.mark.parametrize("how", ["munmap", "PROT_NONE", "PROT_READ"])
def test_sdma_write_to_userptr_pages_the_client_unmapped_faults(client, how):
    c = client
    host, handle = _userptr(c)
    q = c.queue(k.QUEUE_TYPE_SDMA, ring_size=4096)
    q.submit(sdma.write_untiled(host + 4096, [0x11111111]))
    assert wait_for(lambda: ctypes.string_at(host + 4096, 4) == b"\x11" * 4)  # mapped: the GPU writes the page
    ev = c.event(k.EVENT_MEMORY)
    if how == "munmap":
        c.io.munmap(host, 8192)
    else:  # mapped again over the same range, or protected: no longer writable memory
        prot = fileio.PROT_READ if how == "PROT_READ" else fileio.PROT_NONE
        c.io.anon_mmap(host, 8192, prot, fileio.MAP_PRIVATE | fileio.MAP_FIXED, 0)
    q.submit(sdma.write_untiled(host + 4096, [0xDEADBEEF]))
    done, data = c.wait_event(ev)
    assert done and (data.memory_exception_data.va, data.memory_exception_data.failure.NotPresent) == (host + 4096, 1)
    c.destroy(q)
    c.ioctl("DESTROY_EVENT", k.EventId(ev.event_id))
    c.map(handle, [c.gpu_id], "UNMAP_MEMORY_FROM_GPU")  # the driver still knows the buffer: unmap and free work
    c.ioctl("FREE_MEMORY_OF_GPU", k.FreeMemoryOfGpu(handle))
    if how != "munmap":
        c.io.munmap(host, 8192)
    assert engine_alive(c)


def _release(c: RawClient, q, ev, handle: int) -> None:
    """Destroy the queue and event, unmap and free the user pages' buffer (the driver still knows it); the engine
    lives on."""
    c.destroy(q)
    c.ioctl("DESTROY_EVENT", k.EventId(ev.event_id))
    c.map(handle, [c.gpu_id], "UNMAP_MEMORY_FROM_GPU")
    c.ioctl("FREE_MEMORY_OF_GPU", k.FreeMemoryOfGpu(handle))
    assert engine_alive(c)


def test_pages_unmapped_while_a_turn_runs_fault_in_the_next(client, monkeypatch):
    """A client that sees a packet's result may unmap pages and submit a packet that writes them while the engine's
    turn of that queue goes on: the new packet waits for the next turn, which finds the pages gone (a fault, not a
    store into unmapped memory that would kill the host). The client acts here from inside the turn, right after
    the first packet, so that the interleaving is certain."""
    from emu.amd.sdma import SDMAQueue
    c = client
    host, handle = _userptr(c)
    q = c.queue(k.QUEUE_TYPE_SDMA, ring_size=4096)
    ev = c.event(k.EVENT_MEMORY)
    step, armed = SDMAQueue.step, [True]

    def step_then_client_acts(self):
        ran = step(self)
        if armed[0]:
            armed[0] = False
            c.io.munmap(host, 8192)
            q.submit(sdma.write_untiled(host + 4096, [0xDEADBEEF]))
        return ran
    monkeypatch.setattr(SDMAQueue, "step", step_then_client_acts)
    q.submit(sdma.write_untiled(host, [0x11111111]))
    done, data = c.wait_event(ev)
    assert done and (data.memory_exception_data.va, data.memory_exception_data.failure.NotPresent) == (host + 4096, 1)
    monkeypatch.undo()
    _release(c, q, ev, handle)


def test_aql_packets_written_while_a_turn_runs_wait_for_the_next(client, monkeypatch):
    """The AQL half of the test above: the write pointer lives in the client's memory, so a turn runs only to the
    packet index its doorbell held before the revalidation. Here the second packet's completion signal is in user
    pages the client unmaps, from inside the turn, before it writes that packet and rings for it."""
    from emu.amd.aql import AQLQueue
    c = client
    host, handle = _userptr(c)
    signal = np.frombuffer((ctypes.c_uint8 * 8192).from_address(host), np.uint64)
    signal[1] = signal[512 + 1] = 1  # amd_signal_t value of the signals at host and host + 4096
    ev = c.event(k.EVENT_MEMORY)
    q = c.queue(k.QUEUE_TYPE_COMPUTE_AQL, ring_size=4096)
    step, armed = AQLQueue.step, [True]

    def step_then_client_acts(self):
        ran = step(self)
        if armed[0]:
            armed[0] = False
            c.io.munmap(host, 8192)
            q.ring.mem[64:128] = np.frombuffer(aql_packet(3, b"", host + 4096), np.uint8)  # barrier-AND, no deps
            q.gart.mem[56:64].view(np.uint64)[0] = 2
            q.doorbell[0] = 1
        return ran
    monkeypatch.setattr(AQLQueue, "step", step_then_client_acts)
    q.ring.mem[:64] = np.frombuffer(aql_packet(3, b"", host), np.uint8)
    q.gart.mem[56:64].view(np.uint64)[0] = 1
    q.doorbell[0] = 0
    done, data = c.wait_event(ev)
    assert done and (data.memory_exception_data.va, data.memory_exception_data.failure.NotPresent) == (host + 4096, 1)
    monkeypatch.undo()
    _release(c, q, ev, handle)


@pytest.mark.skipif(not shutil.which("llvm-mc-19"), reason="needs llvm-mc-19 (llvm-19)")
def test_kernel_store_to_userptr_pages_the_client_unmapped_faults(client, tmp_path):
    c = client
    code = c.alloc(4096, VRAM_FLAGS)
    blob = assemble("gfx1100", STORE_IDS["gfx1100"], tmp_path)
    code.mem[:len(blob)] = np.frombuffer(blob, np.uint8)
    host, handle = _userptr(c)
    q, ev = c.queue(), c.event(k.EVENT_MEMORY)
    c.io.munmap(host, 8192)
    q.submit(dispatch_words(GFX, code.va, [host & 0xFFFFFFFF, host >> 32], 32, True))
    done, data = c.wait_event(ev)
    assert done and data.memory_exception_data.va == host
    c.destroy(q)
    c.ioctl("DESTROY_EVENT", k.EventId(ev.event_id))
    rec = c.system.gpus[0].faults[-1]
    assert rec.kind == "unmapped" and rec.write and "global_store" in rec.instruction
    c.map(handle, [c.gpu_id], "UNMAP_MEMORY_FROM_GPU")
    c.ioctl("FREE_MEMORY_OF_GPU", k.FreeMemoryOfGpu(handle))
    c.free(code)
    assert engine_alive(c)


def test_aql_queue_in_userptr_pages_the_client_unmapped_stops_alone(client):
    """The write pointer is read before any packet: it lives in user pages that are gone, so the queue stops."""
    c = client
    host, handle = _userptr(c)
    ring = c.alloc(4096)
    ev = c.event(k.EVENT_HW_EXCEPTION)
    q = c.ioctl("CREATE_QUEUE", k.CreateQueue(
        ring_base_address=ring.va, ring_size=4096, gpu_id=c.gpu_id, queue_type=k.QUEUE_TYPE_COMPUTE_AQL,
        queue_percentage=100, queue_priority=7, write_pointer_address=host + 56, read_pointer_address=host + 128))
    bells = c.kfd.mmap(0, 0x2000, fileio.PROT_READ | fileio.PROT_WRITE, fileio.MAP_SHARED,
                       q.doorbell_offset & ~0x1FFF)
    c.io.munmap(host, 8192)  # (after the mmap above, which could otherwise land in the hole and map it again)
    ctypes.c_uint64.from_address(bells + (q.doorbell_offset & 0x1FFF)).value = 1
    done, data = c.wait_event(ev)
    assert done, c.system.gpus[0].queues[q.queue_id].error
    assert "write pointer" in c.system.gpus[0].queues[q.queue_id].error
    c.ioctl("DESTROY_QUEUE", k.DestroyQueue(q.queue_id))
    c.ioctl("DESTROY_EVENT", k.EventId(ev.event_id))
    c.map(handle, [c.gpu_id], "UNMAP_MEMORY_FROM_GPU")
    c.ioctl("FREE_MEMORY_OF_GPU", k.FreeMemoryOfGpu(handle))
    c.free(ring)
    assert engine_alive(c)


# -- the watchdog through MOCKKFD: a hardware-exception event, and words on stderr and in the report --------------
@pytest.mark.skipif(not shutil.which("llvm-mc-19"), reason="needs llvm-mc-19 (llvm-19)")
def test_watchdog_stop_is_a_hw_exception_with_a_report(client, tmp_path, monkeypatch, capfd):
    c = client
    monkeypatch.setenv("HWEMU_TIMEOUT", "0.3")
    monkeypatch.setenv("HWEMU_WAVE_LIMIT", str(1 << 62))  # the dispatch's budget stops it, not the wave's
    monkeypatch.setenv("HWEMU_REPORT_DIR", str(tmp_path))
    code = c.alloc(4096, VRAM_FLAGS)
    blob = assemble("gfx1100", "loop:\ns_add_u32 s2, s2, 1\ns_branch loop\n", tmp_path)
    code.mem[:len(blob)] = np.frombuffer(blob, np.uint8)

    def submit():
        return _pm4(c, dispatch_words(GFX, code.va, [0], 32, True))
    ev = c.event(k.EVENT_HW_EXCEPTION)
    q = submit()
    done, data = c.wait_event(ev, 60000)
    assert done and data.hw_exception_data.gpu_id == c.gpu_id
    err = capfd.readouterr().err
    line = next(ln for ln in err.splitlines() if "GPU watchdog" in ln)
    for words in (f"kernel kernel@{code.va:#x}", "0.3 s of engine CPU time", "HWEMU_TIMEOUT=S raises"):
        assert words in line
    report = line.rsplit("report: ", 1)[1]
    assert report.startswith(str(tmp_path)) and "watchdog stopped kernel" in open(report).read()
    c.destroy(q)
    c.ioctl("DESTROY_EVENT", k.EventId(ev.event_id))
    c.free(code)
    assert engine_alive(c)


# -- a campaign of hostile AQL packets: after each, the host, a canary and the engine are as they were ----------------
@settings(max_examples=examples(25, 200), deadline=None,
          suppress_health_check=list(HealthCheck))
@given(kind=st.one_of(st.integers(0, 255), st.sampled_from([0, 2, 3, 5])),
       body=st.binary(min_size=54, max_size=54), kobj=st.sampled_from([0, 0x5000_0000_0000, 0xFFFF_FFFF_FFFF_FFF8]),
       grid=st.tuples(*[st.sampled_from([0, 1, 64, 0xFFFFFFFF])] * 3),
       block=st.tuples(*[st.sampled_from([0, 1, 64, 1024, 0xFFFF])] * 3),
       group=st.sampled_from([0, 1 << 16, 0xFFFFFFFF]))
def test_hostile_aql_packets_leave_host_and_engine_alive(client, kind, body, kobj, grid, block, group):
    c = client
    canary = bytes(range(256)) * 16
    host = (ctypes.c_char * len(canary)).from_buffer_copy(canary)
    pkt = bytearray(aql_packet(kind, body))
    if kind == 2:  # a dispatch with chosen sizes and a kernel object nothing valid is mapped at
        struct.pack_into("<HHHHIIIIIQ", pkt, 4, *block, 0, *grid, 0, group, kobj)
    q = _aql(c, bytes(pkt))
    try:
        assert engine_alive(c)
        assert bytes(host) == canary
        state = c.system.gpus[0].queues[q.args.queue_id].state
        assert state in ("running", "halted", "stopped")
        assert "emulator error" not in c.system.gpus[0].queues[q.args.queue_id].error
    finally:
        c.destroy(q)


# -- the hostile client's campaigns (tools.hostile_kfd): ioctl structs, PM4, SDMA and AQL streams ------------------
@pytest.fixture(scope="module")
def bench() -> hostile_kfd.Bench:
    return hostile_kfd.Bench()


@pytest.mark.skipif(not opencl.available(), reason="clang-19 and ld.lld-19 are needed to build saxpy")
@pytest.mark.parametrize("kind", hostile_kfd.KINDS)
@settings(max_examples=examples(40, 300), deadline=None,
          suppress_health_check=list(HealthCheck))
@given(seed=st.integers(0, (1 << 64) - 1))
def test_hostile_client_leaves_host_engine_and_driver_as_they_were(bench, monkeypatch, tmp_path, kind, seed):
    """After each input: the engine serves a fresh queue, the host canary is unchanged, saxpy is right, no queue
    stopped with an emulator error, a failed ioctl named an errno other than EIO and changed nothing."""
    monkeypatch.setenv("HWEMU_TIMEOUT", "1")  # random code may loop: short budgets
    monkeypatch.setenv("HWEMU_WAVE_LIMIT", "200000")
    monkeypatch.setenv("HWEMU_REPORT_DIR", str(tmp_path))
    out = hostile_kfd.run(bench, kind, seed)
    assert out.startswith("ok:"), out
