"""tinygrad 0.14's AM driver boots the emulated GPU through MOCKPCI (emu.os.pci's seam, emu.pci_mock's models):
discovery, PSP (bootloader, sOS ring, every firmware image), SMU, GFX and SDMA init, with the distribution's
firmware (tests/am_firmware.py, the test-only shim of tinygrad's firmware lookup)."""
from __future__ import annotations

import fcntl
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from emu.amd import target
from emu.pci_mock import firmware

ROOT = Path(__file__).resolve().parents[1]
BOOT = """
import json, sys
sys.path.insert(0, {tests!r})
import am_firmware
from tinygrad.runtime.support import hcq  # the mock interface is chosen on this import
am_firmware.install()
from tinygrad.runtime.ops_amd import PCIIface
from tinygrad.runtime.autogen.am import am
AMDDevice = type("AMDDevice", (), {{}})  # PCIIface names its lock file after its device's class
iface = PCIIface(AMDDevice(), 0)
adev = iface.dev_impl
from emu.os import pci
fn = pci.systems()[0].functions[0]
descs = sorted(am.enum_psp_gfx_fw_type[t].removeprefix("GFX_FW_TYPE_") for types, _ in adev.fw.descs for t in types)
print(json.dumps({{"sos": adev.psp.is_sos_alive(), "scratch7": adev.regSCRATCH_REG7.read(),
                  "loaded": sorted(fn.psp.loaded), "descs": descs, "smu": [m[0] for m in fn.smu.messages],
                  "results": sorted({{m[2] for m in fn.smu.messages}}), "refusals": fn.psp.refusals,
                  "props": iface.props["simd_count"], "flushes": fn.hdp.flushes}}))
"""


def run_am(script: str, arch: str, timeout: float = 600) -> tuple[dict, str]:
    """Run `script` (a format string given `tests`, the tests folder) under DEV=MOCKPCI+AMD for `arch` in a fresh
    process; returns the JSON of its last stdout line and all it printed."""
    pytest.importorskip("tinygrad")
    missing = [n for n in firmware.names(target.get(arch)) if firmware.path(n) is None]
    if missing:
        pytest.skip(f"firmware {', '.join(missing)} not in hwemu's cache (`./dev firmware` fetches it)")
    env = {**os.environ, "DEV": f"MOCKPCI+AMD::{arch}", "PYTHONPATH": f"{ROOT / 'emu/os/boot'}:{ROOT}", "HWEMU": "1"}
    # tinygrad locks /tmp/am_<bdf>.lock while it owns a device, and the mock's first function has one bdf: the cases
    # take turns (pytest-xdist runs them at once), as two drivers of one device would
    with open(os.path.join("/tmp", "hwemu-test-pci-boot.lock"), "w") as turn:
        fcntl.flock(turn, fcntl.LOCK_EX)
        out = subprocess.run([sys.executable, "-c", script.format(tests=str(ROOT / "tests"))], env=env,
                             capture_output=True, text=True, timeout=timeout, cwd="/")
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1]), out.stdout + out.stderr


@pytest.mark.parametrize("arch", ["gfx1100", "gfx1201"])
def test_tinygrads_am_driver_boots_the_function(arch):
    r, _ = run_am(BOOT, arch)
    assert r["sos"] and r["scratch7"] == 0xA0000008  # tinygrad's "booted by AM" mark, written after its boot
    assert set(r["descs"]) <= set(r["loaded"]) and {"SMU", "TOC", "AUTOLOAD_RLC"} <= set(r["loaded"])
    assert {"SetDriverDramAddrHigh", "EnableAllSmuFeatures", "GetDpmFreqByIndex", "SetSoftMinByFreq"} <= set(r["smu"])
    assert r["results"] == [1]  # every SMU message answered OK
    # tinygrad's MP0 13 boot (gfx1100) hands the key database to the bootloader's SPL command too (unsigned: refused,
    # a status tinygrad does not read); nothing else is refused
    assert all("LOAD_TOS_SPL_TABLE" in m for m in r["refusals"]), r["refusals"]
    assert r["props"] == 2 * target.get(arch).cus and r["flushes"] > 0
