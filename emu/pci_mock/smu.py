"""The SMU (MP1) message mailbox: how a driver asks the power-management firmware for something.

A message is three registers (amdgpu's smu_cmn.c): the driver clears the response register (C2PMSG_90), writes the
argument (C2PMSG_82) and then the message id (C2PMSG_66); the SMU answers by writing the response (PPSMC_Result_OK
1, Failed 0xFF, UnknownCmd 0xFE, CmdRejectedPrereq 0xFD) and, for messages that return a value, the argument
register. A second mailbox (C2PMSG_75 message, 53 argument, 54 response) takes the debug messages (Mode1Reset, 2).

The SMU answers only once its firmware runs: the PSP loads it (GFX_FW_TYPE_SMU, emu.pci_mock.psp, which calls
`start`); before that a message gets no response, as on hardware. Message ids and result codes are the vendor's
(the wheel's smu_13_0_0 / smu_14_0_2 tables, through emu.pci_mock.tables). What is modelled: the version, the test
message, the driver table's address, feature enables, DPM clock levels (a modelled two-level table per clock: the
lowest and the chip's highest clock, not the product's table), soft/hard limits within them, the power limit, and
acknowledgements of the other known messages; an unknown id answers UnknownCmd, an argument out of range Failed.
"""
from __future__ import annotations

from collections.abc import Callable

from emu.amd.target import Target
from emu.pci_mock.mmio import RegisterFile
from emu.pci_mock.tables import tables

TABLE = {13: "smu_13_0_0", 14: "smu_14_0_2"}  # the consumer parts' message tables, by MP1 major version
MAILBOXES = (("66", "82", "90"), ("75", "53", "54"))  # (message, argument, response) of the main and debug mailboxes
LEGACY_MP = "mp_11_0_0"  # tinygrad's AM driver reaches the mailbox through these offsets in MP1's first segment
DEBUG_MODE1_RESET = 2     # the debug mailbox's Mode1Reset (amdgpu's DEBUGSMC_MSG_Mode1Reset)
MIN_CLOCK_MHZ = 100       # the modelled lowest DPM level of every clock


class SMU:
    MAILBOX = "regMP1_SMN_C2PMSG_66"  # the register a chip's tables must have for it to have this model
    def __init__(self, regs: RegisterFile, t: Target, on_reset: Callable[[], None] | None = None) -> None:
        c = tables()["smu"][TABLE[t.mp1[0]]]
        self.regs, self.c, self.on_reset = regs, c, on_reset
        self.ok, self.failed, self.unknown, self.prereq = (c[f"PPSMC_Result_{k}"] for k in
                                                          ("OK", "Failed", "UnknownCmd", "CmdRejectedPrereq"))
        self.msgs = {v: k.removeprefix("PPSMC_MSG_") for k, v in c.items() if k.startswith("PPSMC_MSG_")}
        self.running = False
        self.version = t.mp1[0] << 24 | t.mp1[1] << 16 | t.mp1[2] << 8
        self.driver_table = 0
        self.features = 0
        self.levels = {c[k]: [MIN_CLOCK_MHZ, t.engine_clock if k == "PPCLK_GFXCLK" else t.memory_clock]
                       for k in c if k.startswith("PPCLK_") and k != "PPCLK_COUNT"}  # the product figures
        self.limits: dict[tuple[str, int], int] = {}
        self.messages: list[tuple[str, int, int]] = []  # (name, argument, response) answered
        for i, (msg, arg, resp) in enumerate(MAILBOXES):
            for addrs in self._addresses(msg, arg, resp):
                regs.on_write(addrs[0], lambda _a, v, addrs=addrs, debug=bool(i): self._message(v, *addrs[1:], debug))

    def _addresses(self, msg: str, arg: str, resp: str) -> list[tuple[int, int, int]]:
        """The mailbox's registers: the vendor table's, and the legacy offsets' when they differ."""
        names = [f"regMP1_SMN_C2PMSG_{n}" for n in (msg, arg, resp)]
        out = [tuple(self.regs.addr(n) for n in names)]
        legacy = tables()["regs"][LEGACY_MP]
        mp1 = next(b for b in self.regs.blocks if b.name == "MP1")
        alias = tuple(mp1.bases[legacy["mm" + n[3:]][1]] + legacy["mm" + n[3:]][0] for n in names)
        return out if alias == out[0] else out + [alias]

    def start(self) -> None:
        """The PSP has loaded the SMU's firmware: it runs and answers messages."""
        self.running = True

    def _message(self, msg: int, arg_reg: int, resp_reg: int, debug: bool) -> None:
        if not self.running:
            return  # nothing runs to answer
        arg = self.regs.stored(arg_reg)
        name = ("Mode1Reset" if msg == DEBUG_MODE1_RESET else None) if debug else self.msgs.get(msg)
        handler = getattr(self, f"_{name}", None) if name else None
        if name is None:
            result, out = self.unknown, None
        elif handler is None:
            result, out = self.ok, None  # known, acknowledged, no modelled effect
        else:
            result, out = handler(arg)
        if out is not None:
            self.regs.store(arg_reg, out)
        self.regs.store(resp_reg, result)
        self.messages.append((name or f"{msg:#x}", arg, result))

    def _GetSmuVersion(self, _arg: int):
        return self.ok, self.version

    def _TestMessage(self, arg: int):
        return self.ok, (arg + 1) & 0xFFFFFFFF

    def _SetDriverDramAddrHigh(self, arg: int):
        self.driver_table = arg << 32 | self.driver_table & 0xFFFFFFFF
        return self.ok, None

    def _SetDriverDramAddrLow(self, arg: int):
        self.driver_table = self.driver_table & ~0xFFFFFFFF | arg
        return self.ok, None

    def _EnableAllSmuFeatures(self, _arg: int):
        self.features = (1 << 64) - 1
        return self.ok, None

    def _DisableAllSmuFeatures(self, _arg: int):
        self.features = 0
        return self.ok, None

    def _clock(self, arg: int) -> tuple[int, list[int]] | None:
        clk = arg >> 16
        return (clk, self.levels[clk]) if clk in self.levels else None

    def _GetDpmFreqByIndex(self, arg: int):
        """arg = clock << 16 | level; level 0xFF asks the number of levels."""
        found, idx = self._clock(arg), arg & 0xFFFF
        if found is None or (idx != 0xFF and idx >= len(found[1])):
            return self.failed, None
        return self.ok, len(found[1]) if idx == 0xFF else found[1][idx]

    def _limit(self, kind: str, arg: int):
        """arg = clock << 16 | MHz (0xFFFF: no limit)."""
        found, mhz = self._clock(arg), arg & 0xFFFF
        if found is None or not (mhz == 0xFFFF or found[1][0] <= mhz <= found[1][-1] or mhz == 0):
            return self.failed, None
        self.limits[(kind, found[0])] = mhz
        return self.ok, None

    def _SetSoftMinByFreq(self, arg: int):
        return self._limit("soft_min", arg)

    def _SetSoftMaxByFreq(self, arg: int):
        return self._limit("soft_max", arg)

    def _SetHardMinByFreq(self, arg: int):
        return self._limit("hard_min", arg)

    def _SetHardMaxByFreq(self, arg: int):
        return self._limit("hard_max", arg)

    def _SetPptLimit(self, arg: int):
        if not 0 < arg < 1000:
            return self.failed, None
        self.limits[("ppt", 0)] = arg
        return self.ok, None

    def _TransferTableSmu2Dram(self, _arg: int):
        if not self.driver_table:
            return self.prereq, None  # no driver table address was set
        return self.ok, None

    def _Mode1Reset(self, _arg: int):
        self.running = False
        if self.on_reset:
            self.on_reset()
        return self.ok, None
