"""The queue and interrupt registers of MOCKPCI's function with bad values (emu.pci_mock.queues, emu.pci_mock.ih):
whatever a driver writes, the register write returns, a queue either is refused (recorded) or runs until its packets
end in a CP error, a fault or the ring running dry (never an emulator error, never a hang of the engine); the IH
writes each interrupt as a 32-byte soc15 vector (the layout of amdgpu's SOC15_*_FROM_IH_ENTRY macros, decoded
here) at its write pointer, wrapping at the ring's end."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from test_pci_vm import HUGE, START, TABLES, V, W, clear, program, put, reg

from emu.amd.queue import RUNNING
from emu.pci_mock import PCIFunction

MiB = 1 << 20
RING = 0x400000  # VRAM of the 2 MiB page mapped at START
PROGRESS = 200  # engine progress reports a queue may take to settle (each a turn or a storing packet)
words32 = st.integers(0, (1 << 32) - 1)


@pytest.fixture(scope="module", params=["gfx1100", "gfx1201"])
def fn(request):
    f = PCIFunction(request.param, vram=512 * MiB)
    f.arch = request.param
    clear(f)
    pdb2, pdb1, pdb0 = TABLES, TABLES + 4096, TABLES + 2 * 4096
    put(f, pdb2, 0, pdb1 | V)
    put(f, pdb1, 0, pdb0 | V)
    put(f, pdb0, 0, RING | V | W | HUGE[f.arch])  # START..START+2 MiB: VRAM RING..
    program(f, pdb2)
    yield f
    for q in list(f.gpu.queues.values()):
        f.gpu.destroy_queue(q)
    f.close()


def settle(f, q) -> None:
    """Until the queue has stopped, halted or run dry (bounded by engine progress, not by time)."""
    seen = -1
    for _ in range(PROGRESS):
        if q.state != RUNNING or not (q.serving or q.again or int(f.gpu.doorbells[q.doorbell]) != q.rang):
            return
        seen = f.engine.wait_progress(seen, 0.05)


def check(f, q) -> None:
    if q is None:
        event("refused")
        return
    settle(f, q)
    assert "emulator error" not in q.error, q.error
    event(f"queue {q.state}")


def put_ring(fn, ring: int, words: list[int]) -> None:
    """The drawn words where the ring's VA maps into VRAM (the start of RING when it does not)."""
    fn.vram.write(RING + (ring - START if START <= ring < START + MiB else 0), np.array(words, np.uint32).tobytes())


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_hqd_registers_with_bad_values(fn, data):
    ring = data.draw(st.sampled_from([START, START + 0x1000, 0, 0xDEAD_0000_0000]))
    words = data.draw(st.lists(words32, max_size=16))
    put_ring(fn, ring, words)
    f = fn.regs.field
    reg(fn, "regGRBM_GFX_CNTL", fn.regs.encode("regGRBM_GFX_CNTL", meid=1, queueid=data.draw(st.integers(0, 7))))
    reg(fn, "regCP_HQD_DEQUEUE_REQUEST", 2)  # whatever an earlier example left on this queue
    regs = {"PQ_BASE": ring >> 8 & 0xFFFFFFFF, "PQ_BASE_HI": ring >> 40, "PQ_CONTROL": data.draw(words32),
            "PQ_RPTR_REPORT_ADDR": data.draw(words32), "PQ_RPTR_REPORT_ADDR_HI": data.draw(st.integers(0, 0xFFFF)),
            "PQ_DOORBELL_CONTROL": data.draw(st.one_of(words32, st.just(1 << 30 | 6 << 2))),
            "PQ_WPTR_LO": data.draw(st.integers(0, 64)), "PQ_WPTR_HI": 0,
            "AQL_CONTROL": data.draw(st.sampled_from([0, 0, 1, 0xFFFFFFFF]))}
    for name, v in regs.items():
        reg(fn, f"regCP_HQD_{name}", v)
    before = len(fn.gpu.queues)
    reg(fn, "regCP_HQD_ACTIVE", 1)
    q = fn.compute.queues.get(fn.compute._selected())
    db = regs["PQ_DOORBELL_CONTROL"]
    if q is not None:  # started: from the registers, as the CP reads them
        assert q.ring == ring and q.ring_size == 4 << (f("regCP_HQD_PQ_CONTROL", regs["PQ_CONTROL"], "queue_size") + 1)
        assert q.doorbell == f("regCP_HQD_PQ_DOORBELL_CONTROL", db, "doorbell_offset") // 2
        fn.gpu.doorbells[q.doorbell] = data.draw(st.integers(0, 1 << 40))
        fn.gpu.kick()
    else:
        assert len(fn.gpu.queues) == before and fn.refusals
    check(fn, q)
    reg(fn, "regCP_HQD_DEQUEUE_REQUEST", 2)
    assert q is None or q.id not in fn.gpu.queues
    seen = fn.engine.served
    for _ in range(PROGRESS if q is not None else 0):  # until its last packet has finished
        if not q.serving:
            break
        seen = fn.engine.wait_progress(seen, 0.05)
    assert fn.regs.read(fn.regs.addr("regCP_HQD_ACTIVE")) == 0


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_sdma_ring_registers_with_bad_values(fn, data):
    ring = data.draw(st.sampled_from([START, START + 0x1000, 0, 0xBEEF_0000_0000]))
    words = data.draw(st.lists(words32, max_size=16))
    put_ring(fn, ring, words)
    p = "regSDMA0_QUEUE0"
    reg(fn, f"{p}_RB_CNTL", 0)  # whatever an earlier example left on this queue
    for name, v in (("RB_BASE", ring >> 8 & 0xFFFFFFFF), ("RB_BASE_HI", ring >> 40),
                    ("RB_RPTR_ADDR_LO", data.draw(words32)), ("RB_RPTR_ADDR_HI", data.draw(words32)),
                    ("DOORBELL", data.draw(st.sampled_from([0, 1 << 28, 0xFFFFFFFF]))),
                    ("DOORBELL_OFFSET", data.draw(st.one_of(words32, st.just(0x200 << 2)))),
                    ("RB_WPTR", data.draw(st.integers(0, 64)))):
        reg(fn, f"{p}_{name}", v)
    cntl = data.draw(words32) | 1
    reg(fn, f"{p}_RB_CNTL", cntl)
    q = fn.sdma.queues.get(p)
    enabled = fn.regs.read(fn.regs.addr(f"{p}_RB_CNTL")) & 1
    assert bool(enabled) == (q is not None)
    if q is not None:
        assert q.ring == ring and q.ring_size == 4 << fn.regs.field(f"{p}_RB_CNTL", cntl, "rb_size")
        fn.gpu.doorbells[q.doorbell] = data.draw(st.integers(0, 1 << 40))
        fn.gpu.kick()
    check(fn, q)
    reg(fn, f"{p}_RB_CNTL", 0)
    assert p not in fn.sdma.queues


def test_an_sdma_packet_larger_than_its_ring_stops_the_queue_with_a_cp_error(fn):
    # found by hypothesis above: a COPY_LINEAR header (7 dwords) in a 2-dword ring, the doorbell past it
    put_ring(fn, START, [1])
    p = "regSDMA0_QUEUE0"
    for name, v in (("RB_BASE", START >> 8 & 0xFFFFFFFF), ("RB_BASE_HI", START >> 40), ("DOORBELL", 1 << 28),
                    ("DOORBELL_OFFSET", 0x200 << 2), ("RB_WPTR", 0)):
        reg(fn, f"{p}_{name}", v)
    reg(fn, f"{p}_RB_CNTL", 1 | 1 << 1)  # enabled, RB_SIZE 1: 2 dwords
    q = fn.sdma.queues[p]
    fn.gpu.doorbells[q.doorbell] = 28
    fn.gpu.kick()
    settle(fn, q)
    assert "more than the 8-byte ring" in q.error and "emulator error" not in q.error, q.error
    reg(fn, f"{p}_RB_CNTL", 0)


IH_BASE = 0x600000  # VRAM offset of the IH ring


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(size_log=st.integers(0, 31), base=st.sampled_from([IH_BASE, 512 * MiB - 0x1000, 1 << 40]),
       wptr=words32, enable=st.booleans(), posts=st.lists(st.tuples(st.integers(0, 255), st.integers(0, 255),
                                                                    st.lists(words32, max_size=4)), max_size=6))
def test_ih_ring_with_bad_values(fn, size_log, base, wptr, enable, posts):
    fb = fn.gmc.fb_base
    mc = fb + base
    reg(fn, "regIH_RB_BASE", mc >> 8 & 0xFFFFFFFF)
    reg(fn, "regIH_RB_BASE_HI", mc >> 40 & 0xFF)
    reg(fn, "regIH_RB_WPTR", wptr)
    cntl = fn.regs.encode("regIH_RB_CNTL", rb_enable=int(enable), rb_size=size_log)
    reg(fn, "regIH_RB_CNTL", cntl)
    size = 4 << (size_log & 0x1F)
    ok = enable and size >= 32 and base + size <= 512 * MiB
    for client, src, data in posts:
        at = (fn.regs.read(fn.regs.addr("regIH_RB_WPTR")) >> 2 & 0xFFFF) * 4 % size // 32 * 32
        assert fn.ih.post(client, src, tuple(data)) == ok
        if ok:
            e = np.frombuffer(fn.vram.read(base + at, 32), np.uint32)
            assert (e[0] & 0xFF, e[0] >> 8 & 0xFF, e[0] >> 24 & 0xF) == (client, src, 0)  # client, source, VMID
            assert list(e[4:4 + len(data)]) == data
            assert fn.regs.read(fn.regs.addr("regIH_RB_WPTR")) >> 2 & 0xFFFF == (at + 32) % size // 4 & 0xFFFF


# client and source ids (soc15_ih_clientid.h, gfx_11_0_0 / gfx_12_0_0 ivsrcid headers)
CLIENT_GRBM_CP, CLIENT_GFX, SRC_CP_EOP, SRC_SDMA_TRAP = 20, 10, 181, 49


def entries_at(f, base: int, first: int, last: int) -> list[tuple[int, int, int]]:
    """(client, source, context data 0) of the IH ring's entries from byte `first` to `last`."""
    raw = np.frombuffer(f.vram.read(base + first, last - first), np.uint32).reshape(-1, 8)
    return [(int(e[0] & 0xFF), int(e[0] >> 8 & 0xFF), int(e[4])) for e in raw]


def test_end_of_pipe_and_sdma_trap_interrupts_reach_the_ih_ring(fn):
    mc = fn.gmc.fb_base + IH_BASE
    reg(fn, "regIH_RB_BASE", mc >> 8 & 0xFFFFFFFF)
    reg(fn, "regIH_RB_BASE_HI", mc >> 40)
    reg(fn, "regIH_RB_WPTR", 0)
    reg(fn, "regIH_RB_CNTL", fn.regs.encode("regIH_RB_CNTL", rb_enable=1, rb_size=10))  # 1024 dwords
    # an SDMA TRAP packet (op 6, INT_CONTEXT in dword 1) on SDMA0 queue 0, ring at START, doorbell dword 0x300
    fn.vram.write(RING, np.array([6, 0x1234], np.uint32).tobytes())
    p = "regSDMA0_QUEUE0"
    for name, v in (("RB_BASE", START >> 8 & 0xFFFFFFFF), ("RB_BASE_HI", START >> 40), ("RB_WPTR", 0),
                    ("RB_RPTR_ADDR_LO", (START + 0x1F000) & 0xFFFFFFFF), ("RB_RPTR_ADDR_HI", START >> 32),
                    ("DOORBELL", 1 << 28), ("DOORBELL_OFFSET", 0x300 << 2)):
        reg(fn, f"{p}_{name}", v)
    reg(fn, f"{p}_RB_CNTL", fn.regs.encode(f"{p}_RB_CNTL", rb_enable=1, rb_size=10))
    sdma = fn.sdma.queues[p]
    fn.gpu.doorbells[0x180] = 8  # bytes
    fn.gpu.kick()
    settle(fn, sdma)
    # a RELEASE_MEM (nvd.h: PACKET3 0x49; DATA_SEL 1 = 32 bits, INT_SEL 2 = interrupt after the write is confirmed)
    # on an HQD whose ring is at START + 0x2000, doorbell dword 0x310
    out = START + 0x1E000
    body = [0x14 | 5 << 8, 1 << 29 | 2 << 24, out & 0xFFFFFFFF, out >> 32, 0xCAFE, 0, 0x77]
    fn.vram.write(RING + 0x2000, np.array([3 << 30 | (len(body) - 1) << 16 | 0x49 << 8, *body], np.uint32).tobytes())
    reg(fn, "regGRBM_GFX_CNTL", fn.regs.encode("regGRBM_GFX_CNTL", meid=1, queueid=1))
    for name, v in (("PQ_BASE", (START + 0x2000) >> 8 & 0xFFFFFFFF), ("PQ_BASE_HI", START >> 40),
                    ("PQ_CONTROL", fn.regs.encode("regCP_HQD_PQ_CONTROL", queue_size=9)), ("PQ_WPTR_LO", 0),
                    ("PQ_WPTR_HI", 0), ("AQL_CONTROL", 0), ("PQ_RPTR_REPORT_ADDR", (START + 0x1F100) & 0xFFFFFFFF),
                    ("PQ_RPTR_REPORT_ADDR_HI", START >> 32),
                    ("PQ_DOORBELL_CONTROL", fn.regs.encode("regCP_HQD_PQ_DOORBELL_CONTROL", doorbell_offset=0x310,
                                                           doorbell_en=1))):
        reg(fn, f"regCP_HQD_{name}", v)
    reg(fn, "regCP_HQD_ACTIVE", 1)
    cp = fn.compute.queues[(1, 0, 1)]
    fn.gpu.doorbells[0x188] = 1 + len(body)  # dwords
    fn.gpu.kick()
    settle(fn, cp)
    assert (sdma.error, cp.error, sdma.rptr, cp.rptr) == ("", "", 8, 1 + len(body))
    assert fn.vram.read(RING + 0x1E000, 4) == (0xCAFE).to_bytes(4, "little")
    wptr = (fn.regs.read(fn.regs.addr("regIH_RB_WPTR")) >> 2 & 0xFFFF) * 4
    assert entries_at(fn, IH_BASE, 0, wptr) == [(CLIENT_GFX, SRC_SDMA_TRAP, 0x1234), (CLIENT_GRBM_CP, SRC_CP_EOP, 0x77)]
    reg(fn, "regCP_HQD_DEQUEUE_REQUEST", 2)
    reg(fn, f"{p}_RB_CNTL", 0)
