"""The functions of the Hexagon native tier: a block (a run of packets from one address up to a packet that may
branch, at most MAX_PACKETS long, enterable at any of its packets) and the dispatcher that runs blocks from a
pc -> block table until it misses."""
from __future__ import annotations

from llvmlite import ir as ll

from emu.dsp import llvmback as lb
from emu.dsp.core import IllegalPacket, Thread
from emu.dsp.isa import ISA
from emu.dsp.llvmback import I8, I32, I64, PTR, Unsupported
from emu.dsp.memory import MemoryFault
from emu.dsp.native_core import PACKETS, PC, const
from emu.dsp.native_packet import Packet

MAX_PACKETS = 48  # packets of one block at most
ELSEWHERE = 3  # a block's status: it holds no packet at the PC it was called for
TABLE_BITS = 14  # the dispatcher's pc -> block table (direct-mapped; a miss returns to Python)


class Block:
    """One block function `i32 f(state, rtab, wtab, limit)`: it starts at the packet at the state's PC (any of its
    packets: a run that stopped at the packet limit resumes in the middle) and returns with the state's PC at the
    next packet to run: 0 when it ran its packets or reached the packet limit, 1 when that packet must run on the
    interpreter, ELSEWHERE when it holds no packet at the PC it was called for."""

    def __init__(self, module: ll.Module, name: str, helpers: dict[str, str]):
        self.helpers = helpers  # instruction tag -> the symbol of its helper function
        fn = self.fn = ll.Function(module, ll.FunctionType(I32, [PTR, PTR, PTR, I64]), name)
        self.state, self.rtab, self.wtab, self.limit = fn.args
        self.entry = fn.append_basic_block("entry")
        self.ab = ll.IRBuilder(self.entry)
        self.b = ll.IRBuilder(fn.append_basic_block("start"))  # into the first packet; unreachable after finish()
        self.heads: dict[int, ll.Block] = {}  # packet address -> its first LLVM block
        self.usr = self.alloca(I32)
        self.head: ll.IRBuilder | None = None
        self.bail: ll.Block | None = None

    def alloca(self, ty: ll.Type) -> ll.Value:
        self.ab.position_at_start(self.entry)
        return lb.alloca(self.ab, ty)

    def init(self, slot: ll.Value, value: ll.Value) -> None:
        """Store `value` in `slot` as the current packet starts."""
        self.head.store(value, slot)

    def exit(self, pc: int, status: int) -> ll.Block:
        bb = self.fn.append_basic_block(f"exit_{pc:x}_{status}")
        b = ll.IRBuilder(bb)
        b.store(const(pc), b.gep(self.state, [const(PC, 64)], source_etype=I8))
        b.ret(const(status))
        return bb

    def finish(self) -> None:
        """Enter at the packet at the state's PC."""
        self.ab.position_at_end(self.entry)
        pc = self.ab.load(self.ab.gep(self.state, [const(PC, 64)], source_etype=I8), typ=I32)
        elsewhere = self.fn.append_basic_block("elsewhere")
        ll.IRBuilder(elsewhere).ret(const(ELSEWHERE))
        sw = self.ab.switch(pc, elsewhere)
        for addr, head in self.heads.items():
            sw.add_case(const(addr), head)

    def packet(self, isa: ISA, plan) -> bool:
        """Emit one packet after the ones before; False (and nothing emitted) when it cannot run natively. True:
        it ran, and whether it may branch is in `self.branched`."""
        pkt, steps, tail, counted = plan
        cont = self.b.block
        head_bb = self.fn.append_basic_block(f"pkt_{pkt.addr:x}")
        body = self.fn.append_basic_block("body")
        self.head = ll.IRBuilder(head_bb)
        self.bail = self.exit(pkt.addr, 1)
        b = self.b
        b.position_at_start(body)
        go = self.fn.append_basic_block("go")
        b.cbranch(b.icmp_unsigned(">=", b.load(b.gep(self.state, [const(PACKETS, 64)], source_etype=I8), typ=I64),
                                  self.limit), self.exit(pkt.addr, 0), go)
        b.position_at_start(go)
        p = Packet(self, pkt, steps, tail, counted)
        try:
            p.emit(isa)
        except Unsupported:
            for bb in self.fn.blocks:
                if not bb.is_terminated and bb not in (cont, self.entry):  # entry: finish() ends it
                    ll.IRBuilder(bb).unreachable()
            b.position_at_end(cont)
            return False
        self.head.branch(body)
        self.heads[pkt.addr] = head_bb
        b.position_at_end(cont)
        b.branch(head_bb)
        b.position_at_end(p.after_commit)
        self.branched = p.branches
        return True


def extent(t: Thread, pc: int) -> list:
    """The plans of the packets a block at pc may hold: up to one with an end of loop or a J-class instruction."""
    plans = []
    while len(plans) < MAX_PACKETS:
        try:
            plan = t.plan(pc)
        except (IllegalPacket, MemoryFault):
            break
        plans.append(plan)
        pkt = plan[0]
        if pkt.endloop0 or pkt.endloop1 or any(i.tag.startswith(("J", "SL2_jump", "SL2_return", "L4_return"))
                                                for i in pkt.insts):
            break
        pc = (pc + pkt.size) & 0xFFFFFFFF
    return plans


def build(isa: ISA, plans: list, name: str, helpers: dict[str, str]) -> tuple[ll.Module, int]:
    """The module of a block function `name` over `plans`, and how many packets it runs natively (0: none); the
    instructions in `helpers` are calls of those functions."""
    m = ll.Module(name)
    blk = Block(m, name, helpers)
    n = 0
    for plan in plans:
        if not blk.packet(isa, plan):
            blk.b.ret(const(0))  # the state's PC is this packet's: the previous one committed it
            break
        n += 1
        if blk.branched:
            blk.b.ret(const(0))
            break
    else:
        blk.b.ret(const(0))
    blk.finish()
    return m, n


def dispatcher(name: str) -> ll.Module:
    """`i32 run(state, rtab, wtab, table, limit)`: runs the blocks the table has for the PC until the packet
    limit (0), a block returning 1 (its packet must be interpreted) or ELSEWHERE, or a PC without a block (2)."""
    m = ll.Module(name)
    fn = ll.Function(m, ll.FunctionType(I32, [PTR, PTR, PTR, PTR, I64]), name)
    state, rtab, wtab, table, limit = fn.args
    entry, loop, look, call, out = (fn.append_basic_block(n) for n in ("entry", "loop", "look", "call", "out"))
    b = ll.IRBuilder(entry)
    b.branch(loop)
    b.position_at_end(loop)
    packets = b.load(b.gep(state, [const(PACKETS, 64)], source_etype=I8), typ=I64)
    b.cbranch(b.icmp_unsigned(">=", packets, limit), out, look)
    b.position_at_end(look)
    pc = b.zext(b.load(b.gep(state, [const(PC, 64)], source_etype=I8), typ=I32), I64)
    idx = b.and_(b.lshr(pc, const(2, 64)), const((1 << TABLE_BITS) - 1, 64))
    entry_ptr = b.gep(table, [b.mul(idx, const(2, 64))], source_etype=I64)
    miss = fn.append_basic_block("miss")
    b.cbranch(b.icmp_unsigned("==", b.load(entry_ptr, typ=I64), pc), call, miss)
    b.position_at_end(call)
    block_type = ll.FunctionType(I32, [PTR, PTR, PTR, I64])
    target = b.load(b.gep(entry_ptr, [const(1, 64)], source_etype=I64), typ=block_type.as_pointer())
    status = b.call(target, [state, rtab, wtab, limit])
    stop = fn.append_basic_block("stop")
    b.cbranch(b.icmp_unsigned("==", status, const(0)), loop, stop)
    b.position_at_end(stop)
    b.ret(status)
    b.position_at_end(miss)
    b.ret(const(2))
    b.position_at_end(out)
    b.ret(const(0))
    return m
