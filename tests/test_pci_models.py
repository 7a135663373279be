"""MOCKPCI's register models (emu.pci_mock: nbio's HDP flushes, gmc, smu, psp), driven through the MMIO BAR as a
driver drives them, with commands built from the vendor's ctypes structs (tinygrad's autogen am, as its AM driver
builds them), and with bad values: an error status, never an exception or a hang."""
from __future__ import annotations

import ctypes
import struct

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from emu.pci_mock import PCIFunction, firmware

am = pytest.importorskip("tinygrad.runtime.autogen.am.am")
smu13 = pytest.importorskip("tinygrad.runtime.autogen.am.smu_13_0_0")
MiB = 1 << 20
READY = 0x80000000
KEY, OTHER_KEY = bytes(range(16)), bytes(range(100, 116))
# GlobalPlatform TEE Internal Core API codes
TEE_BAD_FORMAT, TEE_BAD_PARAMETERS, TEE_BAD_STATE, TEE_SECURITY = 0xFFFF0005, 0xFFFF0006, 0xFFFF0007, 0xFFFF000F
SMU_RESULTS = {smu13.PPSMC_Result_OK, smu13.PPSMC_Result_Failed, smu13.PPSMC_Result_UnknownCmd,
               smu13.PPSMC_Result_CmdRejectedPrereq}


@pytest.fixture
def fn():
    f = PCIFunction("gfx1100", vram=512 * MiB)
    yield f
    f.close()


def rd(f, name: str) -> int:
    return f.mmio.read(f.regs.addr(name) * 4)


def wr(f, name: str, value: int) -> None:
    f.mmio.write(f.regs.addr(name) * 4, value)


# -- NBIO / HDP ---------------------------------------------------------------------------------------------------
def test_hdp_flush_through_the_remapped_register(fn):
    """The remap register names a byte offset in the MMIO BAR (amdgpu's MMIO_REG_HOLE_OFFSET page); a write there is
    a flush; moving it makes the old place plain storage."""
    at = rd(fn, "regBIF_BX0_REMAP_HDP_MEM_FLUSH_CNTL")
    assert at == 0x80000 - 0x1000
    fn.mmio.write(at, 0)
    assert fn.hdp.flushes == 1
    wr(fn, "regBIF_BX0_REMAP_HDP_MEM_FLUSH_CNTL", 0x7E000)
    fn.mmio.write(at, 5)
    assert fn.hdp.flushes == 1 and fn.mmio.read(at) == 5
    fn.mmio.write(0x7E000, 0)
    assert fn.hdp.flushes == 2


def test_hdp_flush_request_completes_at_once(fn):
    wr(fn, "regBIF_BX_PF0_GPU_HDP_FLUSH_REQ", 0x3)
    assert rd(fn, "regBIF_BX_PF0_GPU_HDP_FLUSH_DONE") == 0x3


# -- GMC ------------------------------------------------------------------------------------------------------------
def test_fb_location_covers_vram(fn):
    for hub in ("MM", "GC"):
        base, top = rd(fn, f"reg{hub}MC_VM_FB_LOCATION_BASE"), rd(fn, f"reg{hub}MC_VM_FB_LOCATION_TOP")
        assert base and (top - base + 1) << 24 == 512 * MiB
        assert fn.gmc.vram_offset(base << 24) == 0 and fn.gmc.vram_offset((top + 1) << 24) is None


def test_invalidation_semaphore_request_and_ack(fn):
    """SEM: reading takes it (1), reading again while held gives 0, writing 0 frees it; REQ's VMIDs show in ACK."""
    assert rd(fn, "regMMVM_INVALIDATE_ENG17_SEM") & 1 == 1
    assert rd(fn, "regMMVM_INVALIDATE_ENG17_SEM") & 1 == 0
    wr(fn, "regMMVM_INVALIDATE_ENG17_SEM", 0)
    assert rd(fn, "regMMVM_INVALIDATE_ENG17_SEM") & 1 == 1
    wr(fn, "regGCVM_INVALIDATE_ENG17_REQ", 1 << 3 | 1 << 19)  # VMID 3, and an invalidate_l2_ptes bit
    assert rd(fn, "regGCVM_INVALIDATE_ENG17_ACK") == 1 << 3


# -- SMU ------------------------------------------------------------------------------------------------------------
def smu_send(f, msg: int, arg: int) -> tuple[int, int]:
    """amdgpu's smu_cmn protocol: clear the response, write the argument, then the message."""
    wr(f, "regMP1_SMN_C2PMSG_90", 0)
    wr(f, "regMP1_SMN_C2PMSG_82", arg)
    wr(f, "regMP1_SMN_C2PMSG_66", msg)
    return rd(f, "regMP1_SMN_C2PMSG_90"), rd(f, "regMP1_SMN_C2PMSG_82")


def test_smu_answers_only_once_its_firmware_runs(fn):
    assert smu_send(fn, smu13.PPSMC_MSG_GetSmuVersion, 0)[0] == 0
    fn.smu.start()
    resp, version = smu_send(fn, smu13.PPSMC_MSG_GetSmuVersion, 0)
    assert resp == smu13.PPSMC_Result_OK and version >> 24 == 13
    assert smu_send(fn, smu13.PPSMC_MSG_TestMessage, 41) == (smu13.PPSMC_Result_OK, 42)
    assert smu_send(fn, 0xFFFF, 7)[0] == smu13.PPSMC_Result_UnknownCmd


def test_smu_dpm_levels_and_limits(fn):
    fn.smu.start()
    msg = smu13.PPSMC_MSG_GetDpmFreqByIndex
    resp, count = smu_send(fn, msg, smu13.PPCLK_GFXCLK << 16 | 0xFF)
    assert resp == smu13.PPSMC_Result_OK and count >= 1
    top = smu_send(fn, msg, smu13.PPCLK_GFXCLK << 16 | (count - 1))[1]
    assert top == fn.target.engine_clock
    assert smu_send(fn, msg, smu13.PPCLK_GFXCLK << 16 | count)[0] == smu13.PPSMC_Result_Failed
    assert smu_send(fn, msg, 0x7F << 16)[0] == smu13.PPSMC_Result_Failed  # no such clock
    assert smu_send(fn, smu13.PPSMC_MSG_SetSoftMinByFreq, smu13.PPCLK_GFXCLK << 16 | top)[0] == 1
    assert smu_send(fn, smu13.PPSMC_MSG_SetSoftMaxByFreq, smu13.PPCLK_GFXCLK << 16 | top + 1)[0] == 0xFF
    assert smu_send(fn, smu13.PPSMC_MSG_TransferTableSmu2Dram, 0)[0] == smu13.PPSMC_Result_CmdRejectedPrereq


def test_smu_debug_mailbox_mode1_reset_stops_it(fn):
    fn.smu.start()
    wr(fn, "regMP1_SMN_C2PMSG_54", 0)
    wr(fn, "regMP1_SMN_C2PMSG_53", 0)
    wr(fn, "regMP1_SMN_C2PMSG_75", 2)  # amdgpu's DEBUGSMC_MSG_Mode1Reset
    assert rd(fn, "regMP1_SMN_C2PMSG_54") == smu13.PPSMC_Result_OK and not fn.smu.running


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(msg=st.integers(0, 0xFFFFFFFF), arg=st.integers(0, 0xFFFFFFFF))
def test_smu_any_message_gets_a_result_code(msg, arg):
    with PCIFunction("gfx1100", vram=512 * MiB) as f:
        f.smu.start()
        resp, _ = smu_send(f, msg, arg)
        assert resp in SMU_RESULTS


# -- PSP ------------------------------------------------------------------------------------------------------------
def image(body: bytes, key: bytes = KEY, signed: bool = True) -> bytes:
    """A signed image as AMD ships them: 256-byte header ($PS1 at 0x10, body size at 0x14, key id at 0x38), body,
    256-byte signature."""
    head = bytearray(0x100)
    if signed:
        head[0x10:0x14] = b"$PS1"
    struct.pack_into("<I", head, 0x14, len(body))
    head[0x38:0x48] = key
    return bytes(head) + body + bytes(0x100)


class Driver:
    """The bootloader and ring protocol of amdgpu's psp_v13_0.c, on a function's registers and VRAM."""
    MSG1, RING, CMD, FENCE = 1 * MiB, 4 * MiB, 5 * MiB, 6 * MiB

    def __init__(self, f: PCIFunction) -> None:
        self.f, self.fb = f, f.gmc.fb_base
        self.wptr, self.fence = 0, 0

    def reg(self, n: int) -> str:
        return f"regMP0_SMN_C2PMSG_{n}"

    def bootload(self, data: bytes, cmd: int) -> int:
        self.f.vram.write(self.MSG1, data)
        wr(self.f, self.reg(36), (self.fb + self.MSG1) >> 20)
        wr(self.f, self.reg(35), cmd)
        return rd(self.f, self.reg(35))

    def boot_sos(self, kdb: bytes) -> None:
        assert self.bootload(kdb, am.PSP_BL__LOAD_KEY_DATABASE) == READY
        assert self.bootload(image(b"sys" * 100), am.PSP_BL__LOAD_SYSDRV) == READY
        assert self.bootload(image(b"sos" * 100), am.PSP_BL__LOAD_SOSDRV) == READY
        assert rd(self.f, self.reg(81)) != 0 and rd(self.f, self.reg(64)) & READY
        wr(self.f, self.reg(69), (self.fb + self.RING) & 0xFFFFFFFF)
        wr(self.f, self.reg(70), (self.fb + self.RING) >> 32)
        wr(self.f, self.reg(71), 0x10000)
        wr(self.f, self.reg(64), am.PSP_RING_TYPE__KM << 16)
        assert rd(self.f, self.reg(64)) & 0x8000FFFF == READY

    def submit(self, cmd) -> tuple[int, bool]:
        """(the response status, whether the fence came)."""
        self.fence += 1
        frame = am.struct_psp_gfx_rb_frame(fence_value=self.fence, cmd_buf_addr_lo=(self.fb + self.CMD) & 0xFFFFFFFF,
                                           cmd_buf_addr_hi=(self.fb + self.CMD) >> 32,
                                           fence_addr_lo=(self.fb + self.FENCE) & 0xFFFFFFFF,
                                           fence_addr_hi=(self.fb + self.FENCE) >> 32)
        self.f.vram.write(self.CMD, bytes(cmd))
        self.f.vram.write(self.RING + self.wptr * 4, bytes(frame))
        self.wptr += ctypes.sizeof(frame) // 4
        wr(self.f, self.reg(67), self.wptr)
        resp = am.struct_psp_gfx_cmd_resp.from_buffer_copy(self.f.vram.read(self.CMD, ctypes.sizeof(cmd)))
        fenced = struct.unpack("<I", self.f.vram.read(self.FENCE, 4))[0] == self.fence
        return resp.resp.status, fenced

    def load_ip_fw(self, data: bytes, fw_type: int, size: int | None = None) -> tuple[int, bool]:
        self.f.vram.write(self.MSG1, data)
        cmd = am.struct_psp_gfx_cmd_resp(cmd_id=am.GFX_CMD_ID_LOAD_IP_FW)
        lo = cmd.cmd.cmd_load_ip_fw
        lo.fw_phy_addr_lo, lo.fw_phy_addr_hi = (self.fb + self.MSG1) & 0xFFFFFFFF, (self.fb + self.MSG1) >> 32
        lo.fw_size, lo.fw_type = len(data) if size is None else size, fw_type
        return self.submit(cmd)


KDB = image(b"\0" * 64 + KEY + b"\0" * 64, key=bytes(16), signed=False)


def test_psp_boots_and_loads_firmware_signed_with_a_database_key(fn):
    d = Driver(fn)
    assert rd(fn, d.reg(81)) == 0 and rd(fn, d.reg(35)) == READY
    d.boot_sos(KDB)
    assert d.load_ip_fw(image(b"mec" * 50), am.GFX_FW_TYPE_CP_MEC) == (0, True)
    assert d.load_ip_fw(image(b"smu" * 50), am.GFX_FW_TYPE_SMU) == (0, True)
    assert fn.smu.running and set(fn.psp.loaded) == {"CP_MEC", "SMU"}


def test_psp_refuses_bad_firmware(fn):
    d = Driver(fn)
    d.boot_sos(KDB)
    good = image(b"x" * 400)
    assert d.load_ip_fw(image(b"x" * 400, key=OTHER_KEY), am.GFX_FW_TYPE_CP_MEC)[0] == TEE_SECURITY
    assert d.load_ip_fw(good[:300], am.GFX_FW_TYPE_CP_MEC)[0] == TEE_BAD_FORMAT  # truncated
    corrupt = bytearray(good)
    corrupt[0x10] ^= 0xFF
    assert d.load_ip_fw(bytes(corrupt), am.GFX_FW_TYPE_CP_MEC)[0] == TEE_BAD_FORMAT
    assert d.load_ip_fw(good, 0xDEAD)[0] == TEE_BAD_PARAMETERS
    cmd = am.struct_psp_gfx_cmd_resp(cmd_id=am.GFX_CMD_ID_AUTOLOAD_RLC)
    assert d.submit(cmd) == (TEE_BAD_STATE, True)  # before the RLC and IMU images
    assert d.submit(am.struct_psp_gfx_cmd_resp(cmd_id=0x77)) == (am.PSP_ERR_UNKNOWN_COMMAND, True)
    assert len(fn.psp.refusals) == 6 and fn.psp.loaded == {}


def test_psp_bootloader_order_and_bad_components(fn):
    d = Driver(fn)
    assert d.bootload(image(b"sos"), am.PSP_BL__LOAD_SOSDRV) & 0xFFFF  # before the system driver
    assert rd(fn, d.reg(81)) == 0
    assert d.bootload(image(b"x"), 0x1234) & 0xFFFF  # no command
    assert d.bootload(image(b"x", signed=False), am.PSP_BL__LOAD_SYSDRV) & 0xFFFF  # unsigned
    wr(fn, d.reg(64), am.PSP_RING_TYPE__KM << 16)  # no sOS: nothing answers
    assert rd(fn, d.reg(64)) == 0


def test_psp_refuses_another_generations_file_naming_it(fn):
    """gfx1100's key database (psp_13_0_0_sos.bin's) does not hold gfx12's key: gc_12_0_0's MEC is refused, and
    the message names the file the image came from."""
    sos, mec = firmware.path("psp_13_0_0_sos.bin"), firmware.path("gc_12_0_0_mec.bin")
    if sos is None or mec is None:
        pytest.skip("the distribution's firmware is not in hwemu's cache (`./dev firmware`)")
    blob = sos.read_bytes()
    hdr = am.struct_psp_firmware_header_v2_0.from_buffer_copy(blob)
    descs = (am.struct_psp_fw_bin_desc * hdr.psp_fw_bin_count).from_buffer_copy(
        blob, am.struct_psp_firmware_header_v2_0.psp_fw_bin.offset)
    kdb = next(d for d in descs if d.fw_type == am.PSP_FW_TYPE_PSP_KDB)
    start = hdr.header.ucode_array_offset_bytes + kdb.offset_bytes
    d = Driver(fn)
    d.boot_sos(blob[start:start + kdb.size_bytes])
    m = mec.read_bytes()
    g = am.struct_gfx_firmware_header_v2_0.from_buffer_copy(m)
    ucode = m[g.header.ucode_array_offset_bytes:g.header.ucode_array_offset_bytes + g.ucode_size_bytes]
    assert d.load_ip_fw(ucode, am.GFX_FW_TYPE_RS64_MEC)[0] == TEE_SECURITY
    assert "gc_12_0_0_mec.bin" in fn.psp.refusals[-1]
    own = firmware.path("gc_11_0_0_mec.bin").read_bytes()
    g = am.struct_gfx_firmware_header_v2_0.from_buffer_copy(own)
    ucode = own[g.header.ucode_array_offset_bytes:g.header.ucode_array_offset_bytes + g.ucode_size_bytes]
    assert d.load_ip_fw(ucode, am.GFX_FW_TYPE_RS64_MEC) == (0, True)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(cmd_id=st.integers(0, 0xFFFFFFFF), words=st.lists(st.integers(0, 0xFFFFFFFF), min_size=8, max_size=8),
       body=st.binary(max_size=64))
def test_psp_any_ring_command_gets_a_status(cmd_id, words, body):
    """Random commands, command fields and images: a status in the response and the fence, never an exception."""
    with PCIFunction("gfx1100", vram=512 * MiB) as f:
        d = Driver(f)
        d.boot_sos(KDB)
        f.vram.write(d.MSG1, image(body) if words[0] & 1 else body)
        cmd = am.struct_psp_gfx_cmd_resp(cmd_id=cmd_id)
        ctypes.memmove(ctypes.addressof(cmd.cmd), struct.pack("<8I", *words), 32)
        status, fenced = d.submit(cmd)
        assert fenced and isinstance(status, int)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=st.lists(st.tuples(st.sampled_from([35, 36, 64, 67, 69, 70, 71]), st.integers(0, 0xFFFFFFFF)),
                    max_size=12))
def test_psp_any_register_writes_leave_it_answering(ops):
    """Random bootloader and ring register writes: no exception, and the bootloader's ready bit stays set."""
    with PCIFunction("gfx1100", vram=512 * MiB) as f:
        for n, v in ops:
            wr(f, f"regMP0_SMN_C2PMSG_{n}", v)
        assert rd(f, "regMP0_SMN_C2PMSG_35") & READY


# -- RLC ------------------------------------------------------------------------------------------------------------
def test_rlc_takes_safe_mode_requests_and_reports_autoload(fn):
    """The driver writes CMD with MESSAGE 1 (enter) or 0 (leave) and waits for CMD to clear; BOOTLOAD_COMPLETE is
    set once the PSP's RLC autoload ran."""
    wr(fn, "regRLC_SAFE_MODE", 1 << 1 | 1)
    assert rd(fn, "regRLC_SAFE_MODE") & 1 == 0 and fn.rlc.safe_mode
    wr(fn, "regRLC_SAFE_MODE", 1)
    assert rd(fn, "regRLC_SAFE_MODE") & 1 == 0 and not fn.rlc.safe_mode
    assert rd(fn, "regRLC_RLCS_BOOTLOAD_STATUS") >> 31 == 0
    d = Driver(fn)
    d.boot_sos(KDB)
    for t in (am.GFX_FW_TYPE_RLC_G, am.GFX_FW_TYPE_IMU_I, am.GFX_FW_TYPE_IMU_D):
        assert d.load_ip_fw(image(b"r" * 40), t) == (0, True)
    assert d.submit(am.struct_psp_gfx_cmd_resp(cmd_id=am.GFX_CMD_ID_AUTOLOAD_RLC)) == (0, True)
    assert rd(fn, "regRLC_RLCS_BOOTLOAD_STATUS") >> 31 == 1
