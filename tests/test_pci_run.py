"""tinygrad 0.14's AM driver runs work on the emulated GPU through MOCKPCI: after its boot it maps a compute queue
through the HQD registers and an SDMA queue through the SDMA ring registers, rings their doorbells in BAR2, and the
device's engines (the same as MOCKKFD's) run the PM4 and SDMA streams through the GFX hub's page tables. Then a wild
SDMA store: the GPU VM fault reaches the driver on the IH ring (tinygrad prints the entry and the fault registers it
reads), its recovery resets the compute queue, and the next program runs. The expected values are numpy's and the
addresses the test chose."""
from __future__ import annotations

import numpy as np
import pytest
from test_pci_boot import run_am

WILD = 0x7000_0000_0000  # inside the context's range, never mapped by tinygrad (its VAs start at 0x2000_0000_0000)
RUN = """
import json, sys
sys.path.insert(0, {tests!r})
import am_firmware
from tinygrad.runtime.support import hcq  # the mock interface is chosen on this import
am_firmware.install()
from tinygrad import Device, Tensor
from tinygrad.runtime.support.hcq import HCQBuffer
out = {{"add": (Tensor([1, 2, 3]) + 1).tolist(), "sum": Tensor.arange(1000).float().sum().item()}}
from emu.os import pci
fn = pci.systems()[0].functions[0]
out["packets"] = sorted({{k for q in fn.gpu.queues.values() for k in q.packets}})
out["kinds"] = sorted(type(q).__name__ for q in fn.gpu.queues.values())
dev = Device["AMD"]
src = dev.allocator.alloc(4096)
try:
    q = dev.hw_copy_queue_t().copy(HCQBuffer({wild}, 16), src, 16)
    q.signal(dev.timeline_signal, dev.next_timeline()).submit(dev)
    dev.synchronize()
    out["error"] = None
except RuntimeError as e:
    out["error"], out["cause"] = str(e), str(e.__context__)
out["ih"] = [list(d) for d in fn.ih.delivered]
out["after"] = (Tensor([5, 6]) * 2).tolist()
print(json.dumps(out))
"""


@pytest.mark.parametrize("arch", ["gfx1100", "gfx1201"])
def test_tinygrads_am_driver_runs_kernels_and_copies(arch):
    r, text = run_am(RUN.replace("{wild}", str(WILD)), arch, timeout=900)
    assert r["add"] == (np.array([1, 2, 3]) + 1).tolist()
    assert r["sum"] == float(np.arange(1000).sum())
    assert r["kinds"] == ["ComputeQueue", "SDMAQueue"]
    assert {"DISPATCH_DIRECT", "RELEASE_MEM", "SDMA_COPY_LINEAR"} <= set(r["packets"])
    # the wild store: an SDMA write fault at WILD, delivered as UTCL2_FAULT (client GFX 10, source 0) with the page
    # address bits 43:12 and 47:44 (amdgpu's gmc_v11_0 decoding), which tinygrad reads and reports
    page = WILD >> 12
    assert [10, 0, [page & 0xFFFFFFFF, page >> 32 & 0xF]] in r["ih"]
    assert "src=UTCL2_FAULT(0)" in text and f"{WILD:#x}" in text
    assert r["error"] == "Device hang detected" and r["cause"] == "Device is in error state"
    assert r["after"] == (np.array([5, 6]) * 2).tolist()  # the next program runs
