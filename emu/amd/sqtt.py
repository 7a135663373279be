"""The SQ thread trace (SQTT) of RDNA3 and RDNA4: the packet stream a profiler reads out of the trace buffer.

What a driver programs, per shader engine (the one GRBM_GFX_INDEX selects, or all of them): the buffer
(SQ_THREAD_TRACE_BUF0_BASE/SIZE), which waves give instruction tokens (SQ_THREAD_TRACE_MASK: SIMD, WGP, shader
array, wave types), which tokens are left out (SQ_THREAD_TRACE_TOKEN_MASK.token_exclude), and
SQ_THREAD_TRACE_CTRL.mode, which starts (1) and stops (0) the trace. A queue's dispatches are traced while its
COMPUTE_THREAD_TRACE_ENABLE is set. The THREAD_TRACE_FINISH (or _STOP) event flushes the stream to the buffer;
SQ_THREAD_TRACE_WPTR then gives its end in 32-byte units (counted from address 0 on GC 11.0, from the buffer's
base elsewhere) and SQ_THREAD_TRACE_STATUS reports nothing pending, or a write error.

The stream is a sequence of packets of whole nibbles, the low bits of each naming its type, in the layouts AMD's
thread-trace decoders read (rocprof-trace-decoder; tinygrad's renderer/amd/sqtt.py): LAYOUT_HEADER first, then for
every wave WAVESTART, one token per instruction it issues (INST with the instruction's class, VALUINST, IMMEDIATE)
and WAVEEND at s_endpgm. Each packet carries the cycles since the packet before it, preceded by a TS_DELTA_OR_MARK
packet where they do not fit its delta field. s_delay_alu, s_wait_alu and s_barrier_wait give no token, as on the
hardware.

hwemu's model, the same on every run whatever the host's load:
- waves run where hwemu's placement puts them (emu.amd.spi: workgroups round robin over the WGPs, engines first,
  a workgroup's waves over its WGP's SIMDs), in the wave slot of their index in the workgroup. As on the hardware,
  a shader engine traces the waves on the SIMD of the WGP and shader array its SQ_THREAD_TRACE_MASK selects (only
  those leave the native launcher, running native code that logs their PCs, Recording.build; the others keep their
  tier);
- a wave issues its instructions one after another, each taking the cycles of its class (`cycles`), and the waves
  of a workgroup issue in the order hwemu runs them (each until s_barrier or s_endpgm); a dispatch starts
  DISPATCH_GAP cycles after the one before;
- an instruction executes in the cycle it issues: an ALU instruction's token is followed, in that cycle, by an
  ALUEXEC token (source SALU or VALU), a vector memory or DS instruction's by a VMEMEXEC token (source VMEM or
  LDS); scalar memory and control instructions give none;
- the CP's writes to SQ_THREAD_TRACE_USERDATA_n (the markers a profiler leaves, as radv's and tinygrad's
  sqtt_userdata do) give a REG token on each tracing engine they reach, while TOKEN_MASK.reg_include has the SQ's
  registers (SQDEC) and reg_exclude does not leave out user data: its register's dword offset in bits 31:16 and the
  value written in bits 63:32, the bits AMD's decoders and tinygrad's read them from (the type bits 15:4 are 0);
  each EVENT_WRITE the CP processes gives an EVENT token naming its event type on every tracing engine (FINISH and
  STOP before they flush). Each of these comes one cycle after the trace's last packet;
- WAVERDY, WAVEALLOC, PERF and UTILCTR tokens are not written.
A buffer too small keeps what fits (the write pointer stops at its last 32 bytes); a buffer the GPU VM cannot
write is a VM fault, reported to the driver as the hardware's UTCL2 reports one (a memory exception naming the
address), and leaves STATUS.write_error set with nothing written. Nothing a driver programs here raises.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from emu.amd import spi, target
from emu.amd.exec.category import BRANCH, LDS, SALU, SMEM, VALU, VMEM, category
from emu.amd.grbm import GfxIndex
from emu.amd.hw import pm4
from emu.amd.memory import VM, FaultRecord, GPUFault

DISPATCH_GAP = 64  # cycles between the end of a traced dispatch and its next one's first wave
FLUSH_BYTES = 32  # the write pointer's unit


@dataclass(frozen=True)
class Packet:
    code: int  # the type code in the low `bits`
    bits: int
    nibbles: int
    fields: dict[str, tuple[int, int]]  # name -> (lowest bit, width)


def _wave_event(code: int, nibbles: int, delta: int, wgp: int, wave: int) -> Packet:
    """WAVESTART / WAVEEND: the delta field's width, then shader array, SIMD and a WGP field of `wgp` bits in a
    row, and the wave slot at bit `wave`."""
    lo = 5 + delta
    return Packet(code, 5, nibbles, {"delta": (5, delta), "sa": (lo, 1), "simd": (lo + 1, 2), "wgp": (lo + 3, wgp),
                                     "wave": (wave, 5)})


_COMMON = {"VALUINST": Packet(0b011, 3, 3, {"delta": (3, 3), "flag": (6, 1), "wave": (7, 5)}),
           "IMMEDIATE": Packet(0b1101, 4, 3, {"delta": (4, 3), "wave": (7, 5)}),
           "NOP": Packet(0b0000, 4, 1, {}),
           "ALUEXEC": Packet(0b1110, 4, 2, {"delta": (4, 2), "src": (6, 2)}),
           "VMEMEXEC": Packet(0b1111, 4, 2, {"delta": (4, 2), "src": (6, 2)}),
           "EVENT": Packet(0b01100001, 8, 6, {"delta": (8, 3), "event": (11, 13)}),
           "REG": Packet(0b1001, 4, 16, {"delta": (4, 3), "reg": (16, 16), "value": (32, 32)}),
           "LAYOUT_HEADER": Packet(0b0010001, 7, 16, {"layout": (7, 6), "simd": (13, 2), "group": (15, 3)})}
LAYOUTS = {
    3: {**_COMMON,
        "TS_DELTA_OR_MARK": Packet(0b0000001, 7, 12, {"pl": (8, 1), "rt": (9, 1), "delta": (12, 36)}),
        "WAVESTART": _wave_event(0b01100, 8, delta=2, wgp=3, wave=13),
        "WAVEEND": _wave_event(0b10101, 5, delta=3, wgp=3, wave=15),
        "INST": Packet(0b010, 3, 5, {"delta": (4, 3), "wave": (8, 5), "op": (13, 7)})},
    4: {**_COMMON,
        "TS_DELTA_OR_MARK": Packet(0b0000001, 7, 16, {"rt": (7, 1), "pl": (8, 1), "delta": (12, 52)}),
        "WAVESTART": _wave_event(0b01100, 8, delta=2, wgp=4, wave=15),
        "WAVEEND": _wave_event(0b10101, 5, delta=3, wgp=4, wave=15),
        "INST": Packet(0b010, 3, 5, {"delta": (3, 3), "wave": (7, 5), "op": (12, 8)})},
}

# INST op codes (the same numbers in both layouts where both have the class)
SALU_OP, SMEM_OP, JUMP, JUMP_NO, CALL, MESSAGE, VALUT, VALUB_2, VALUB_4, VALUB_16 = 0x0, 0x1, 0x3, 0x4, 0x5, 0x9, \
    0xB, 0xD, 0xE, 0xF
VINTERP, BARRIER, FLAT_RD, FLAT_WR, LDS_RD, LDS_WR = 0x12, 0x13, 0x1C, 0x1D, 0x29, 0x2A
SALU_WR_EXEC, VALU_WR_EXEC = 0x72, 0x73
GLOBAL_RD, GLOBAL_WR = 0x21, {3: 0x24, 4: 0x23}  # + 1 without a scalar base; stores + (dwords - 1)
SMEM_WR, BUF_RD, BUF_WR, LDS_DIR, BARRIER_SIGNAL = 0x2, 0x2F, 0x31, 0x6E, 0x7A  # layout 4's
# token exclusion bits of SQ_THREAD_TRACE_TOKEN_MASK (the same on gfx11 and gfx12)
EXCLUDE = {"VMEMEXEC": 0, "ALUEXEC": 1, "VALUINST": 2, "WAVESTART": 4, "WAVEEND": 4, "IMMEDIATE": 5, "REG": 6,
           "EVENT": 7, "INST": 8}
ALU_SALU, ALU_VALU, MEM_LDS, MEM_VMEM = 1, 2, 0, 2  # the src fields of ALUEXEC and VMEMEXEC
_EXEC = {SALU: ("ALUEXEC", ALU_SALU), VALU: ("ALUEXEC", ALU_VALU), VMEM: ("VMEMEXEC", MEM_VMEM),
         LDS: ("VMEMEXEC", MEM_LDS)}
SQDEC, USER_DATA = 1, 1  # TOKEN_MASK.reg_include: the SQ's registers; .reg_exclude: user data
CS_WAVES = 1 << 6  # SQ_THREAD_TRACE_MASK.wtype_include: compute shader waves
_SILENT = frozenset(("S_DELAY_ALU", "S_WAIT_ALU", "S_BARRIER_WAIT"))
_TRANS = ("V_EXP_", "V_LOG_", "V_RCP_", "V_RSQ_", "V_SQRT_", "V_SIN_", "V_COS_")


def _dwords(name: str) -> int:
    """Data dwords a memory instruction moves, from its name (B64, DWORDX2, ...; 1 for smaller)."""
    for suffix, n in (("B128", 4), ("X4", 4), ("B96", 3), ("X3", 3), ("B64", 2), ("X2", 2), ("_U64", 2),
                      ("_I64", 2), ("_F64", 2)):
        if suffix in name:
            return n
    return 1


def token(inst, next_pc: int, layout: int) -> tuple[str, int] | None:
    """The packet and INST op an instruction's issue gives (op 0 for VALUINST and IMMEDIATE), None for none;
    `next_pc` is where the wave went on (a branch taken or not)."""
    name, cat = inst.op.name if inst.valid else "", category(inst)
    if cat == VALU:
        if name.startswith("V_CMPX_"):
            return "INST", VALU_WR_EXEC
        if name.startswith(_TRANS):
            return "INST", VALUT
        if inst.base == "VINTERP":
            return "INST", VINTERP
        if name in ("V_LSHLREV_B64", "V_LSHRREV_B64", "V_ASHRREV_I64"):
            return "INST", VALUB_2
        if name in ("V_MAD_U64_U32", "V_MAD_I64_I32"):
            return "INST", VALUB_4
        if "_F64" in name:
            return "INST", VALUB_16
        return "VALUINST", 0
    if cat == SALU:
        return "INST", SALU_WR_EXEC if "SAVEEXEC" in name or "WREXEC" in name else SALU_OP
    if cat == SMEM:
        return "INST", SMEM_WR if layout == 4 and "STORE" in name else SMEM_OP
    if cat == BRANCH:
        if name.startswith("S_CALL"):
            return "INST", CALL
        return "INST", JUMP if next_pc != inst.pc + inst.size else JUMP_NO
    if cat == LDS:
        if inst.base != "DS":
            return "INST", LDS_DIR if layout == 4 else LDS_RD
        if "LOAD" in name or "READ" in name:
            return "INST", LDS_RD
        if name.startswith(("DS_APPEND", "DS_CONSUME")) or "ADDTID" in name:
            return "INST", LDS_WR
        return "INST", LDS_WR + min(_dwords(name), 4)
    if cat == VMEM:
        return "INST", _vmem(inst, name, layout)
    if name.startswith("S_ENDPGM") or name in _SILENT:
        return None
    if name == "S_BARRIER":
        return "INST", BARRIER
    if name == "S_BARRIER_SIGNAL":
        return "INST", BARRIER_SIGNAL
    if name.startswith("S_SENDMSG"):
        return "INST", MESSAGE
    return "IMMEDIATE", 0


def _vmem(inst, name: str, layout: int) -> int:
    load = "LOAD" in name and "ATOMIC" not in name
    dw = min(_dwords(name), 4)
    if inst.base in ("FLAT", "VFLAT", "SCRATCH", "VSCRATCH"):
        return FLAT_RD if load else FLAT_WR + dw - 1
    if layout == 4 and inst.base == "VBUFFER":
        return BUF_RD if load else BUF_WR + dw - 1
    off = 0 if inst.base in ("GLOBAL", "VGLOBAL") and "saddr" in inst.fields and \
        not target.generation(inst.family).no_saddr(inst.fields["saddr"]) else 1
    return GLOBAL_RD + off if load else GLOBAL_WR[layout] + off + dw - 1


_VALU_OPS = {VALU_WR_EXEC: 1, VINTERP: 1, VALUT: 4, VALUB_2: 2, VALUB_4: 4, VALUB_16: 16}  # cycles per 32 lanes
_MEMORY_OPS = frozenset((SMEM_OP, SMEM_WR, LDS_DIR, *range(FLAT_RD, BUF_WR + 6)))


def cycles(kind: str, op: int, lanes: int) -> int:
    """The cycles hwemu's model gives an instruction's issue: VALU 1 per 32 lanes (the transcendental and 64-bit
    classes 4, 2, 4 or 16 per 32 lanes), scalar and vector memory and LDS 4, the rest 1."""
    if kind == "VALUINST":
        return lanes // 32
    if kind == "INST" and op in _VALU_OPS:
        return _VALU_OPS[op] * (lanes // 32)
    return 4 if kind == "INST" and op in _MEMORY_OPS else 1


class Stream:
    """A packet stream being written: nibbles packed low first, and the time of the last packet."""

    def __init__(self, layout: int):
        self.packets, self.data, self.nibbles, self.time = LAYOUTS[layout], bytearray(), 0, 0

    def put(self, kind: str, time: int, **values: int) -> None:
        """Packet `kind` at cycle `time` (not before the last packet's), with field values."""
        p = self.packets[kind]
        delta = time - self.time
        width = p.fields["delta"][1] if "delta" in p.fields else 0
        if delta >= 1 << width:
            self._write(self.packets["TS_DELTA_OR_MARK"], {"delta": delta})
            delta = 0
        if width:
            values["delta"] = delta
        self.time = time
        self._write(p, values)

    def _write(self, p: Packet, values: dict[str, int]) -> None:
        word = p.code
        for name, v in values.items():
            lo, width = p.fields[name]
            word |= (v & ((1 << width) - 1)) << lo
        for i in range(p.nibbles):
            self._nibble(word >> (4 * i) & 0xF)

    def _nibble(self, n: int) -> None:
        if self.nibbles & 1:
            self.data[-1] |= n << 4
        else:
            self.data.append(n)
        self.nibbles += 1

    def pad(self) -> None:
        """NOP packets up to the next FLUSH_BYTES, at least 16 of them (a decoder reads 16 nibbles ahead)."""
        nop = self.packets["NOP"]
        for _ in range(16):
            self._write(nop, {})
        while len(self.data) % FLUSH_BYTES or self.nibbles & 1:
            self._write(nop, {})


class Recording:
    """One traced dispatch as its waves run: the run loop's table of traced steps (emu.amd.exec.wave.run) and what
    the selected waves issued, in order: (wave slot, None, workgroup ids) at a wave's start, (wave slot,
    instruction, next pc) after each instruction. `sink(recording)` gets it when the dispatch ends (the thread-trace
    unit writes it to its stream); `select(wg, wave)` picks the waves recorded (default all): the others keep
    their tier."""

    def __init__(self, prog, lanes: int, layout: int, sink: Callable[[Recording], None] | None = None,
                 select: Callable[[tuple[int, int, int], int], bool] | None = None):
        self.prog, self.lanes, self.layout, self.sink, self.select = prog, lanes, layout, sink, select
        self.steps: dict = {}
        self.issued: list = []

    def selects(self, wg: tuple[int, int, int], wave: int) -> bool:
        return self.select is None or self.select(wg, wave)

    def wave(self, wg: tuple[int, int, int], wave: int) -> Recording | None:
        if not self.selects(wg, wave):
            return None
        self.issued.append((wave, None, tuple(wg)))
        return self

    def build(self, pc: int):
        """A traced wave's step at pc: native code that logs what it runs where the threaded tier has it (only the
        selected waves leave the interpreter's blocks), else the instruction alone."""
        s = self.steps[pc] = self.prog.threaded_step(pc, self.step(self.prog.single(pc), self.prog.inst(pc)), self._ran)
        return s

    def _ran(self, w, pcs: list[int]) -> None:
        inst = self.prog.inst
        self.issued.extend((w.wave_id, inst(p), after) for p, after in zip(pcs, pcs[1:] + [w.pc], strict=True))

    def step(self, step, inst):
        """`step` (of `inst`) recording the issue when it has run."""
        issued = self.issued

        def traced(w):
            r = step(w)
            issued.append((w.wave_id, inst, w.pc))
            return r
        return traced

    def timed(self):
        """The packets the waves' issue gives, in order, at hwemu's cycle model (see the module docstring): (cycle
        after the dispatch's start, kind, INST op, wave slot, instruction or None, workgroup ids)."""
        t, wgs, issues = 0, {}, {}
        for slot, inst, after in self.issued:
            if inst is None:
                wgs[slot] = after
                t += 1
                yield t, "WAVESTART", 0, slot, None, after
                continue
            key = inst.pc, after == inst.pc + inst.size  # a branch's token says whether it was taken
            got = issues.get(key)
            if got is None:
                got = issues[key] = self._issue(inst, after)
            if got:
                kind, op, dt = got
                t += dt
                yield t, kind, op, slot, inst, wgs.get(slot)

    def _issue(self, inst, after: int) -> tuple[str, int, int] | tuple[()]:
        """The packet, INST op and cycles of an instruction's issue (empty: it gives no packet)."""
        if inst.valid and inst.op.name.startswith("S_ENDPGM"):
            return "WAVEEND", 0, 1
        tok = token(inst, after, self.layout)
        return () if tok is None else (*tok, cycles(*tok, self.lanes))

    def close(self) -> None:
        if self.sink is not None:
            self.sink(self)


def _reg(gfx: int, name: str) -> int | None:
    r = pm4.REGS[gfx].get(name)
    return None if r is None else r[0]


class ThreadTrace:
    """The thread-trace unit of one GPU: its registers per shader engine and the streams being written."""

    def __init__(self, chip: target.Target, vm: VM, fault: Callable[[FaultRecord], None] | None = None,
                 index: GfxIndex | None = None):
        """`fault`: where a VM fault of the trace's writes is reported (the GPU's fault path); `index`: the GPU's
        GRBM_GFX_INDEX (its own one if not given)."""
        gfx, self.layout, self.chip, self.vm, self.fault = chip.gen.gfx, chip.gen.sqtt_layout, chip, vm, fault
        self.index = index or GfxIndex(chip)
        self.regs = {n: a for n in ("SQ_THREAD_TRACE_BUF0_BASE", "SQ_THREAD_TRACE_BUF0_BASE_LO",
                                    "SQ_THREAD_TRACE_BUF0_BASE_HI", "SQ_THREAD_TRACE_BUF0_SIZE",
                                    "SQ_THREAD_TRACE_MASK", "SQ_THREAD_TRACE_TOKEN_MASK", "SQ_THREAD_TRACE_CTRL",
                                    "SQ_THREAD_TRACE_WPTR", "SQ_THREAD_TRACE_STATUS")
                     if (a := _reg(gfx, n)) is not None}
        self.owned = frozenset(a for n, (a, _) in pm4.REGS[gfx].items() if n.startswith("SQ_THREAD_TRACE_")) | {
            self.index.addr}
        self.fields = {n: pm4.REGS[gfx][n][1] for n in self.regs}
        self.userdata = frozenset(a for n, (a, _) in pm4.REGS[gfx].items() if n.startswith("SQ_THREAD_TRACE_USERDATA_"))
        self.events = pm4.EVENTS[gfx]
        self.values: list[dict[int, int]] = [{} for _ in range(chip.shader_engines)]
        self.streams: list[Stream | None] = [None] * chip.shader_engines
        self.written = [0] * chip.shader_engines  # bytes of each engine's buffer written so far
        self.clock = 0  # cycles of shader engine 0 since its trace started
        self.error = [False] * chip.shader_engines

    # -- registers ---------------------------------------------------------------------------------------------
    def owns(self, addr: int) -> bool:
        return addr in self.owned

    def _get(self, se: int, name: str, field: str) -> int:
        a = self.regs.get(name)
        return 0 if a is None else self.fields[name][field].get(self.values[se].get(a, 0))

    def write(self, addr: int, value: int) -> None:
        if addr == self.index.addr:
            self.index.value = value
            return
        engines = self.index.engines(len(self.values))
        for se in engines:
            was = self._get(se, "SQ_THREAD_TRACE_CTRL", "mode")
            self.values[se][addr] = value
            now = self._get(se, "SQ_THREAD_TRACE_CTRL", "mode")
            if addr == self.regs["SQ_THREAD_TRACE_CTRL"] and bool(was) != bool(now):
                self._start(se) if now else self._flush(se)
        if addr in self.userdata:
            self._mark(engines, "REG", reg=addr & 0xFFFF, value=value & 0xFFFFFFFF)

    def read(self, addr: int) -> int:
        if addr == self.index.addr:
            return self.index.value
        se = next(iter(self.index.engines(len(self.values))), 0)
        if addr == self.regs["SQ_THREAD_TRACE_WPTR"]:
            base = self._base(se) if self.chip.sqtt_wptr_absolute else 0
            return ((base + self.written[se]) // FLUSH_BYTES) & 0x1FFFFFFF
        if addr == self.regs["SQ_THREAD_TRACE_STATUS"]:
            return self.fields["SQ_THREAD_TRACE_STATUS"]["write_error"].put(1) if self.error[se] else 0
        return self.values[se].get(addr, 0)

    def event(self, event: int) -> None:
        """An EVENT_WRITE: its EVENT token; FINISH and STOP then flush every engine's stream to its buffer."""
        self._mark(range(len(self.values)), "EVENT", event=event)
        if event in (self.events["THREAD_TRACE_FINISH"], self.events["THREAD_TRACE_STOP"]):
            for se in range(len(self.values)):
                self._flush(se)

    def _base(self, se: int) -> int:
        if "SQ_THREAD_TRACE_BUF0_BASE_LO" in self.regs:
            lo, hi = self._get(se, "SQ_THREAD_TRACE_BUF0_BASE_LO", "base_lo"), \
                self._get(se, "SQ_THREAD_TRACE_BUF0_BASE_HI", "base_hi")
        else:
            lo, hi = self._get(se, "SQ_THREAD_TRACE_BUF0_BASE", "base_lo"), \
                self._get(se, "SQ_THREAD_TRACE_BUF0_SIZE", "base_hi")
        return (lo | hi << 32) << 12

    def _size(self, se: int) -> int:
        return self._get(se, "SQ_THREAD_TRACE_BUF0_SIZE", "size") << 12

    # -- the trace ---------------------------------------------------------------------------------------------
    def _start(self, se: int) -> None:
        self.written[se], self.error[se] = 0, False
        if se == 0:
            self.clock = 0
        s = self.streams[se] = Stream(self.layout)
        s.put("LAYOUT_HEADER", 0, layout=self.layout, simd=self._get(se, "SQ_THREAD_TRACE_MASK", "simd_sel"))

    def _flush(self, se: int) -> None:
        """Write the stream's bytes to the buffer (padded to FLUSH_BYTES) and end it."""
        s, self.streams[se] = self.streams[se], None
        if s is None:
            return
        s.pad()
        base, room = self._base(se), max(self._size(se) - self.written[se], 0)
        data = bytes(s.data[:room - room % FLUSH_BYTES])
        try:
            self.vm.check_range(base + self.written[se], len(data), True)
        except GPUFault as e:
            self.error[se] = True
            e.record.detail = f"thread trace of shader engine {se}: its buffer write"
            if self.fault is not None:
                self.fault(e.record)
            return
        self.vm.write(base + self.written[se], data)
        self.written[se] += len(data)

    def _where(self, se: int) -> dict[str, int]:
        """The shader array, WGP and SIMD whose waves engine `se` traces (SQ_THREAD_TRACE_MASK)."""
        return {k: self._get(se, "SQ_THREAD_TRACE_MASK", f"{k}_sel") for k in ("sa", "wgp", "simd")}

    def recording(self, prog, lanes: int, grid: tuple[int, int, int], start: tuple[int, int, int]) \
            -> Recording | None:
        """A Recording of a dispatch of `prog` (`grid` workgroups from `start`) about to start, of the waves on the
        SIMDs the tracing shader engines select (None: no engine traces compute waves)."""
        selected = {se: tuple(self._where(se).values()) for se, s in enumerate(self.streams)
                    if s is not None and self._get(se, "SQ_THREAD_TRACE_MASK", "wtype_include") & CS_WAVES}
        if not selected:
            return None
        wgps, simds = spi.wgps(self.chip), spi.simds(self.chip)

        def engine(wg: tuple[int, int, int]) -> tuple[int, int, int]:
            return wgps[spi.workgroup(wg, grid, start) % len(wgps)]

        def traced(wg: tuple[int, int, int], wave: int) -> bool:
            se, sa, wgp = engine(wg)
            return selected.get(se) == (sa, wgp, wave % simds)
        return Recording(prog, lanes, self.layout, lambda rec: self.record(rec, engine), traced)

    def record(self, rec: Recording, engine: Callable[[tuple[int, int, int]], tuple[int, int, int]]) -> None:
        """Append a dispatch's packets to the streams of the shader engines its traced waves ran on (`engine(wg)`:
        a workgroup's shader engine, array and WGP)."""
        masks = {se: (self._get(se, "SQ_THREAD_TRACE_TOKEN_MASK", "token_exclude"), self._where(se))
                 for se, s in enumerate(self.streams) if s is not None}
        t = start = self.clock + DISPATCH_GAP
        execs: dict[int, tuple[str, str] | None] = {}  # pc -> the execution token its instruction gives
        for dt, kind, op, slot, inst, wg in rec.timed():
            t = start + dt
            se = engine(wg)[0]
            if se not in masks:
                continue
            (exclude, where), s = masks[se], self.streams[se]
            if not exclude >> EXCLUDE[kind] & 1:
                extra = where if kind in ("WAVESTART", "WAVEEND") else {"op": op} if kind == "INST" else {}
                s.put(kind, t, wave=slot % 32, **extra)
            ex = None
            if inst is not None:
                if inst.pc not in execs:
                    execs[inst.pc] = _EXEC.get(category(inst))
                ex = execs[inst.pc]
            if ex is not None and not exclude >> EXCLUDE[ex[0]] & 1:
                s.put(ex[0], t, src=ex[1])
        self.clock = t

    def _mark(self, engines, kind: str, **fields: int) -> None:
        """A REG or EVENT token one cycle after the trace's last packet, in the streams of `engines` that trace and
        do not leave it out."""
        self.clock += 1
        for se in engines:
            s = self.streams[se]
            if s is None or self._get(se, "SQ_THREAD_TRACE_TOKEN_MASK", "token_exclude") >> EXCLUDE[kind] & 1:
                continue
            if kind == "REG" and not (self._get(se, "SQ_THREAD_TRACE_TOKEN_MASK", "reg_include") & SQDEC and
                                      not self._get(se, "SQ_THREAD_TRACE_TOKEN_MASK", "reg_exclude") & USER_DATA):
                continue
            s.put(kind, max(self.clock, s.time), **fields)
