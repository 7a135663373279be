"""Program control: the instructions the engine performs itself, by name, rather than through their pcode (every tier
and the category tallies go by these sets)."""
from __future__ import annotations

# the PC moves on and nothing else changes: waits, hints, cache controls, messages the engine does not model
ENGINE_NOPS = frozenset({
    "S_NOP", "S_WAITCNT", "S_WAITCNT_DEPCTR", "S_WAIT_IDLE", "S_CLAUSE", "S_DELAY_ALU", "S_SLEEP",
    "S_SET_INST_PREFETCH_DISTANCE", "S_SETPRIO", "S_ICACHE_INV", "S_WAIT_ALU", "S_WAIT_LOADCNT", "S_WAIT_STORECNT",
    "S_WAIT_SAMPLECNT", "S_WAIT_BVHCNT", "S_WAIT_EXPCNT", "S_WAIT_DSCNT", "S_WAIT_KMCNT", "S_WAIT_LOADCNT_DSCNT",
    "S_WAIT_STORECNT_DSCNT", "S_SENDMSG", "S_TTRACEDATA", "S_TTRACEDATA_IMM", "S_INCPERFLEVEL", "S_DECPERFLEVEL",
    "S_WAKEUP", "S_WAITCNT_VSCNT", "S_WAITCNT_VMCNT", "S_WAITCNT_EXPCNT", "S_WAITCNT_LGKMCNT", "S_BARRIER_SIGNAL",
    "S_BARRIER_SIGNAL_ISFIRST", "S_DCACHE_INV", "S_GL1_INV", "S_DCACHE_WB", "S_SET_VALU_COEXEC_MODE",
    "BUFFER_GL0_INV", "BUFFER_GL1_INV", "BUFFER_WBL2", "BUFFER_INV", "BUFFER_WBINVL1", "BUFFER_WBINVL1_VOL",
    "GLOBAL_INV", "GLOBAL_WB", "GLOBAL_WBINV"})
BARRIERS = frozenset({"S_BARRIER", "S_BARRIER_WAIT"})  # the wave waits for its workgroup
ENDS = frozenset({"S_ENDPGM", "S_ENDPGM_SAVED"})  # the wave ends
CLOCKS = frozenset({"S_MEMTIME", "S_MEMREALTIME", "S_SENDMSG_RTN_B32", "S_SENDMSG_RTN_B64"})  # read the clock
HALTS = frozenset({"S_TRAP", "S_CODE_END", "S_SETHALT"})  # the wave faults
CONTROL = ENGINE_NOPS | BARRIERS | ENDS | CLOCKS | HALTS
# the conditional and unconditional branches whose target is the SIMM16 offset (their pcode computes the PC)
SOPP_BRANCHES = frozenset({"S_BRANCH", "S_CBRANCH_SCC0", "S_CBRANCH_SCC1", "S_CBRANCH_VCCZ", "S_CBRANCH_VCCNZ",
                           "S_CBRANCH_EXECZ", "S_CBRANCH_EXECNZ"})
