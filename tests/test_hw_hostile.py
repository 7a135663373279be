"""Untrusted descriptor bytes reach the AQL packet processor's vendor-layout parser (emu.amd.hw.kd) and initial-SGPR
builder (emu.amd.aql.user_sgprs): whatever 64 bytes a kernel object points at, the queue runs the dispatch, faults
or stops with a CP error naming it, and the engine lives on."""
from __future__ import annotations

import struct

import numpy as np
import pytest
from depth import examples
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from stack.hcq import kfd_ioctl as k
from stack.hcq import pm4
from tools.kfd_client import RawClient, aql_packet


@pytest.fixture(scope="module")
def client() -> RawClient:
    return RawClient("gfx1100", 3)


def _engine_alive(c: RawClient) -> bool:
    q, sig = c.queue(), c.alloc(4096)
    try:
        q.submit(pm4.release_mem(11, sig.va, 0x600D, pm4.DATA_SEL_SEND_32_BIT_LOW))
        return c.wait_for(lambda: sig.mem.view(np.uint32)[0] == 0x600D)  # kicking the engine, as a waiter does
    finally:
        c.destroy(q)
        c.free(sig)


@settings(max_examples=examples(20, 150), deadline=None, suppress_health_check=list(HealthCheck))
@given(kd=st.binary(min_size=64, max_size=64), entry=st.sampled_from([None, 256, 1 << 40]))
def test_any_descriptor_bytes_leave_the_engine_alive(client, kd, entry):
    c = client
    obj = c.alloc(4096)
    data = bytearray(kd)
    if entry is not None:  # a code offset in or far past the page (the rest of the page is zeroes)
        struct.pack_into("<q", data, 16, entry)
    obj.mem[:64] = np.frombuffer(bytes(data), np.uint8)
    pkt = bytearray(aql_packet(2, b""))
    struct.pack_into("<HHHHHIIIIIQQ", pkt, 2, 1, 1, 1, 1, 0, 1, 1, 1, 0, 0, obj.va, 0)
    q = c.queue(k.QUEUE_TYPE_COMPUTE_AQL, ring_size=4096)
    q.ring.mem[:64] = np.frombuffer(bytes(pkt), np.uint8)
    q.gart.mem[56:64].view(np.uint64)[0] = 1
    q.doorbell[0] = 0
    try:
        model = c.system.gpus[0].queues[q.args.queue_id]
        assert c.wait_for(lambda: model.state != "running" or model.rptr >= 1)
        assert _engine_alive(c)
        assert "emulator error" not in model.error, model.error
    finally:
        c.destroy(q)
        c.free(obj)
