"""The PSP (MP0): its bootloader, which starts the secure OS (sOS), and the sOS's ring, through which a driver has
the firmware of the other IP blocks loaded. Nothing loaded is executed: each image is checked the way the PSP
checks it, recorded in `loaded`, and the block it is for is told (the SMU starts: emu.pci_mock.smu; the RLC's
autoload completes: emu.pci_mock.rlc).

Registers (amdgpu's psp_v13_0.c / psp_v14_0.c; MP0_SMN_C2PMSG_n, MPASP_SMN_C2PMSG_n on MP0 14):

- 35 the bootloader's command and status: bit 31 set when the bootloader is ready, the low 16 bits the last
  command's status (0: done); writing a PSP_BL__ command loads the component whose image is at 36's MC address
  (in MiB). The order: the key database first (or none), the sOS last; the sOS needs the system driver;
- 81 non-zero once the sOS runs;
- 64 the sOS's ring control: bit 31 set when the sOS is ready, the low 16 bits the last control command's status;
  writing ring type << 16 (GFX_CTRL_CMD_ID_INIT_GPCOM_RING for the KM ring) creates the ring at MC address 70:69
  of 71 bytes (whole frames, at most MAX_RING), GFX_CTRL_CMD_ID_DESTROY_RINGS destroys it;
- 67 the ring's write pointer in dwords: each 16-dword frame (psp_gfx_rb_frame) names a command buffer
  (psp_gfx_cmd_resp), into which the sOS writes the response, and a fence it writes the frame's fence value to.

Signed images (the firmware files' ucode, as AMD ships it): a 256-byte header with "$PS1" at 0x10, the body size
at 0x14 and the signing key's 16-byte id at 0x38, the body, a 256-byte signature. The bootloader takes a
component's size from its header (the key database has the same header, unsigned); the sOS accepts an IP block's
image only when it fits in the size the command gives (which may cover padding after it) and its key is one of the
key database's (the database's entry format beyond the
16-byte ids is not modelled, nor are signatures verified: the keys are the hardware's). So a truncated or
corrupted header, or another chip generation's file (signed with another key), is refused.

Statuses: GlobalPlatform TEE codes (the sOS is a TEE; the vendor's table has TEE_ERROR_NOT_SUPPORTED with GP's
value): BAD_FORMAT for a malformed image, SECURITY for an untrusted key, BAD_PARAMETERS for addresses, sizes or
types out of range, BAD_STATE for a command out of order; PSP_ERR_UNKNOWN_COMMAND for an id that is no command.
The bootloader's low-16-bit statuses are the model's own (1 + the index of the failed check in BL_ERRORS): their
values are not public, a driver checks only that they are 0. Each refusal is recorded in `refusals` and written to
stderr naming the firmware file the image came from when hwemu's firmware cache holds it.
"""
from __future__ import annotations

import struct
import sys

from emu.pci_mock.bars import MemoryBar
from emu.pci_mock.gmc import GMC
from emu.pci_mock.mmio import RegisterFile
from emu.pci_mock.rlc import RLC
from emu.pci_mock.smu import SMU
from emu.pci_mock.tables import tables

_T = tables()["psp"]
C = _T["consts"]
READY = 0x80000000
SIGNED_MAGIC, HEADER, SIGNATURE = b"$PS1", 0x100, 0x100
MAGIC_AT, BODY_SIZE_AT, KEY_AT, KEY_LEN = 0x10, 0x14, 0x38, 16
FRAME_DWORDS = _T["structs"]["struct_psp_gfx_rb_frame"]["size"] // 4
CMD_SIZE = _T["structs"]["struct_psp_gfx_cmd_resp"]["size"]
# GlobalPlatform TEE Internal Core API, TEE_Result codes
TEE_ERROR_BAD_FORMAT, TEE_ERROR_BAD_PARAMETERS, TEE_ERROR_BAD_STATE, TEE_ERROR_SECURITY = \
    0xFFFF0005, 0xFFFF0006, 0xFFFF0007, 0xFFFF000F
MAX_RING = 1 << 20  # the model's largest ring (amdgpu's is 4 KiB, tinygrad's 64 KiB): bounds the frames one
# write pointer moves over
TMR_SIZE = 0x400000  # what LOAD_TOC answers: amdgpu's PSP_TMR_SIZE for these chips
BL_ERRORS = ("unknown command", "image outside VRAM", "malformed image", "out of order")
BL_STATUS = {TEE_ERROR_BAD_PARAMETERS: 2, TEE_ERROR_BAD_FORMAT: 3}  # the image checks' statuses, as the bootloader's
BL_COMMANDS = {v: k.removeprefix("PSP_BL__") for k, v in C.items() if k.startswith("PSP_BL__")}
FW_TYPES = {v: k.removeprefix("GFX_FW_TYPE_") for k, v in C.items() if k.startswith("GFX_FW_TYPE_")}
CMD_NAMES = {v: k.removeprefix("GFX_CMD_ID_") for k, v in C.items() if k.startswith("GFX_CMD_ID_")}


class Refused(Exception):
    """A command the PSP refuses: its status, why, and the MC address of the image it was about (if any)."""

    def __init__(self, status: int, why: str, mc: int | None = None) -> None:
        super().__init__(why)
        self.status, self.mc = status, mc


def _field(struct_name: str, name: str) -> tuple[int, int]:
    off, size, _bits, _bit = _T["structs"][struct_name]["fields"][name]
    return off, size


class PSP:
    def __init__(self, regs: RegisterFile, vram: MemoryBar, gmc: GMC, smu: SMU, rlc: RLC,
                 mp0: tuple[int, int, int]) -> None:
        self.regs, self.vram, self.gmc, self.smu, self.rlc = regs, vram, gmc, smu, rlc
        pref = "regMP0_SMN_C2PMSG_" if mp0[0] < 14 else "regMPASP_SMN_C2PMSG_"
        self.r = {n: regs.addr(f"{pref}{n}") for n in (35, 36, 64, 67, 69, 70, 71, 81)}
        self.keys: set[bytes] = set()         # the key database's key ids (every aligned 16 bytes of its body)
        self.components: list[str] = []       # the bootloader components loaded, in order
        self.loaded: dict[str, int] = {}      # firmware type name -> image size, loaded through the ring
        self.tmr: tuple[int, int] | None = None
        self.ring: tuple[int, int] | None = None  # (VRAM offset, size in bytes)
        self.rptr = 0
        self.refusals: list[str] = []
        regs.store(self.r[35], READY)
        regs.on_write(self.r[35], self._bootloader)
        regs.on_write(self.r[64], self._ring_control)
        regs.on_write(self.r[67], self._doorbell)

    # -- images ---------------------------------------------------------------------------------------------------
    def _image(self, mc: int, size: int | None, signed: bool) -> bytes:
        """The image at MC address `mc`: `size` bytes, or as many as its header says; Refused when it is not one."""
        head_at = self.gmc.vram_offset(mc, HEADER)
        if head_at is None:
            raise Refused(TEE_ERROR_BAD_PARAMETERS, f"image at MC {mc:#x} is not in VRAM", mc)
        head = self.vram.read(head_at, HEADER)
        (body,) = struct.unpack_from("<I", head, BODY_SIZE_AT)
        total = HEADER + body + SIGNATURE
        if signed and head[MAGIC_AT:MAGIC_AT + 4] != SIGNED_MAGIC:
            raise Refused(TEE_ERROR_BAD_FORMAT, f"image at MC {mc:#x} has no signing header ($PS1 at 0x10)", mc)
        if body == 0 or (size is not None and size < total):
            raise Refused(TEE_ERROR_BAD_FORMAT, f"image at MC {mc:#x}: its header says {total:#x} bytes "
                          f"(body {body:#x} + header + signature), " + (f"more than the command's {size:#x}"
                                                                         if body else "with an empty body"), mc)
        at = self.gmc.vram_offset(mc, total)
        if at is None:
            raise Refused(TEE_ERROR_BAD_PARAMETERS, f"image of {total:#x} bytes at MC {mc:#x} runs past VRAM", mc)
        return self.vram.read(at, total)

    def _trusted(self, image: bytes, mc: int) -> None:
        key = image[KEY_AT:KEY_AT + KEY_LEN]
        if key not in self.keys:
            raise Refused(TEE_ERROR_SECURITY, f"image signed with key {key.hex()}, which the key database "
                          f"does not hold", mc)

    def _refuse(self, what: str, e: Refused) -> int:
        from emu.pci_mock import firmware
        name = None
        if e.mc is not None and (at := self.gmc.vram_offset(e.mc, HEADER)) is not None:
            name = firmware.identify(self.vram.read(at, HEADER))
        msg = f"PSP refused {what}: {e}" + (f" (the image of {name})" if name else "")
        self.refusals.append(msg)
        print(f"hwemu: {msg}", file=sys.stderr)
        return e.status

    # -- the bootloader ---------------------------------------------------------------------------------------------
    def _bootloader(self, _addr: int, cmd: int) -> None:
        mc = self.regs.stored(self.r[36]) << 20
        name = BL_COMMANDS.get(cmd)
        try:
            if name is None:
                raise Refused(1, f"{cmd:#x} is not a bootloader command")
            if self.regs.stored(self.r[81]):
                raise Refused(4, f"{name} after the sOS started")
            image = self._image(mc, None, signed=name != "LOAD_KEY_DATABASE")
            if name == "LOAD_KEY_DATABASE":
                if self.components:
                    raise Refused(4, "the key database after other components")
                self.keys = {image[i:i + KEY_LEN] for i in range(HEADER, len(image) - SIGNATURE - KEY_LEN + 1, 4)
                             if any(image[i:i + KEY_LEN])}
            if name == "LOAD_SOSDRV" and "LOAD_SYSDRV" not in self.components:
                raise Refused(4, "the sOS before the system driver")
            self.components.append(name)
            status = 0
        except Refused as e:
            status = self._refuse(f"bootloader {name or hex(cmd)}",
                                  Refused(BL_STATUS.get(e.status, e.status), str(e), e.mc))
        self.regs.store(self.r[35], READY | status & 0xFFFF)
        if status == 0 and name == "LOAD_SOSDRV":
            self.regs.store(self.r[81], 1)  # the sOS runs (its version is not modelled)
            self.regs.store(self.r[64], READY)

    # -- the sOS ring -----------------------------------------------------------------------------------------------
    def _ring_control(self, _addr: int, value: int) -> None:
        if not self.regs.stored(self.r[81]):
            return  # no sOS runs to answer
        status = 0
        if value == C["GFX_CTRL_CMD_ID_DESTROY_RINGS"]:
            self.ring, self.rptr = None, 0
            self.regs.store(self.r[71], 0)
            self.regs.store(self.r[67], 0)
        elif value >> 16 == C["PSP_RING_TYPE__KM"] and value & 0xFFFF == 0:
            mc = self.regs.stored(self.r[70]) << 32 | self.regs.stored(self.r[69])
            size = self.regs.stored(self.r[71])
            at = self.gmc.vram_offset(mc, size)
            if self.ring is not None or at is None or not 0 < size <= MAX_RING or size % (FRAME_DWORDS * 4):
                status = self._refuse("ring creation", Refused(2, f"ring of {size:#x} bytes at MC {mc:#x}"
                                      + (" while one exists" if self.ring is not None else "")))
            else:
                self.ring, self.rptr = (at, size), 0
                self.regs.store(self.r[67], 0)
        else:
            status = self._refuse("ring control", Refused(1, f"{value:#x} is not a ring command"))
        self.regs.store(self.r[64], READY | status)

    def _doorbell(self, addr: int, wptr: int) -> None:
        self.regs.store(addr, wptr)
        if self.ring is None:
            return
        at, size = self.ring
        frames = size // (FRAME_DWORDS * 4)
        if wptr % FRAME_DWORDS:
            self._refuse("ring write pointer", Refused(0, f"{wptr:#x} is not a whole number of frames"))
            return
        end = wptr // FRAME_DWORDS
        for _ in range((end - self.rptr) % frames if end % frames != self.rptr else 0):
            self._frame(self.vram.read(at + self.rptr * FRAME_DWORDS * 4, FRAME_DWORDS * 4))
            self.rptr = (self.rptr + 1) % frames

    def _frame(self, frame: bytes) -> None:
        def get(name: str) -> int:
            off, n = _field("struct_psp_gfx_rb_frame", name)
            return int.from_bytes(frame[off:off + n], "little")
        cmd_mc = get("cmd_buf_addr_hi") << 32 | get("cmd_buf_addr_lo")
        fence_mc = get("fence_addr_hi") << 32 | get("fence_addr_lo")
        cmd_at, fence_at = self.gmc.vram_offset(cmd_mc, CMD_SIZE), self.gmc.vram_offset(fence_mc, 4)
        if cmd_at is None or fence_at is None:
            self._refuse("ring frame", Refused(0, f"command buffer MC {cmd_mc:#x} or fence MC {fence_mc:#x} is not "
                                                  "in VRAM"))
            return
        cmd = bytearray(self.vram.read(cmd_at, CMD_SIZE))
        self._command(cmd)
        self.vram.write(cmd_at, bytes(cmd))
        self.vram.write(fence_at, struct.pack("<I", get("fence_value")))

    def _command(self, cmd: bytearray) -> None:
        def get(name: str) -> int:
            off, n = _field("struct_psp_gfx_cmd_resp", name)
            return int.from_bytes(cmd[off:off + n], "little")

        def put(name: str, value: int) -> None:
            off, n = _field("struct_psp_gfx_cmd_resp", name)
            cmd[off:off + n] = value.to_bytes(n, "little")
        cmd_id = get("cmd_id")
        name = CMD_NAMES.get(cmd_id)
        handler = getattr(self, f"_{name}", None) if name else None
        try:
            if name is None:
                raise Refused(C["PSP_ERR_UNKNOWN_COMMAND"], f"command id {cmd_id:#x} is no command")
            if handler is None:
                raise Refused(C["TEE_ERROR_NOT_SUPPORTED"], f"{name} is not modelled")
            out = handler(get)
            for k, v in out.items():
                put(k, v)
            put("resp.status", 0)
        except Refused as e:
            put("resp.status", self._refuse(f"{name or hex(cmd_id)}", e))

    def _LOAD_IP_FW(self, get) -> dict:
        mc = get("cmd.cmd_load_ip_fw.fw_phy_addr_hi") << 32 | get("cmd.cmd_load_ip_fw.fw_phy_addr_lo")
        fw_type, size = get("cmd.cmd_load_ip_fw.fw_type"), get("cmd.cmd_load_ip_fw.fw_size")
        kind = FW_TYPES.get(fw_type)
        if kind is None:
            raise Refused(TEE_ERROR_BAD_PARAMETERS, f"firmware type {fw_type} is no GFX_FW_TYPE")
        try:
            self._trusted(self._image(mc, size, signed=True), mc)
        except Refused as e:
            raise Refused(e.status, f"{kind}: {e}", e.mc) from None
        self.loaded[kind] = size
        if kind == "SMU":
            self.smu.start()
        return {}

    def _LOAD_TOC(self, get) -> dict:
        mc = get("cmd.cmd_load_toc.toc_phy_addr_hi") << 32 | get("cmd.cmd_load_toc.toc_phy_addr_lo")
        self._trusted(self._image(mc, get("cmd.cmd_load_toc.toc_size"), signed=True), mc)
        self.loaded["TOC"] = get("cmd.cmd_load_toc.toc_size")
        return {"resp.tmr_size": TMR_SIZE}

    def _SETUP_TMR(self, get) -> dict:
        mc = get("cmd.cmd_setup_tmr.buf_phy_addr_hi") << 32 | get("cmd.cmd_setup_tmr.buf_phy_addr_lo")
        size = get("cmd.cmd_setup_tmr.buf_size")
        if size and (self.gmc.vram_offset(mc, size) is None or mc % C["PSP_TMR_ALIGNMENT"]):
            raise Refused(TEE_ERROR_BAD_PARAMETERS, f"TMR of {size:#x} bytes at MC {mc:#x}: not aligned VRAM")
        self.tmr = (mc, size)
        return {}

    def _AUTOLOAD_RLC(self, get) -> dict:
        missing = [k for k in ("RLC_G", "IMU_I", "IMU_D") if k not in self.loaded]
        if missing:
            raise Refused(TEE_ERROR_BAD_STATE, f"RLC autoload before {', '.join(missing)} were loaded")
        self.loaded["AUTOLOAD_RLC"] = 0
        self.rlc.autoloaded()
        return {}
