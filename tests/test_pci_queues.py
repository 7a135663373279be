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


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_hqd_registers_with_bad_values(fn, data):
    ring = data.draw(st.sampled_from([START, START + 0x1000, 0, 0xDEAD_0000_0000]))
    words = data.draw(st.lists(words32, max_size=16))
    fn.vram.write(RING + (ring - START if START <= ring < START + MiB else 0), np.array(words, np.uint32).tobytes())
    f = fn.regs.field
    reg(fn, "regGRBM_GFX_CNTL", fn.regs.encode("regGRBM_GFX_CNTL", meid=1, queueid=data.draw(st.integers(0, 7))))
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


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_sdma_ring_registers_with_bad_values(fn, data):
    ring = data.draw(st.sampled_from([START, START + 0x1000, 0, 0xBEEF_0000_0000]))
    words = data.draw(st.lists(words32, max_size=16))
    fn.vram.write(RING + (ring - START if START <= ring < START + MiB else 0), np.array(words, np.uint32).tobytes())
    p = "regSDMA0_QUEUE0"
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
