"""The pcode backends the lean interpreter binds to an instruction's operands: the reference backend's code with its
inputs bound to operand code (emu.pcode.pyback; SALU semantics as plain integer expressions), and the natural-width
backend (emu.pcode.npback) reading VGPR rows through the step's row locals."""
from __future__ import annotations

from emu.amd.exec.interp_code import VIEWS, row_local
from emu.pcode import pyback
from emu.pcode.npback import Natural
from emu.pcode.npvalues import Decline


class NaturalRows(Natural):
    """npback's Natural with whole VGPR rows among the inputs (`rows`: input -> register, its `nat` code the row's
    local, emu.amd.exec.interp_code.row_local): an input taken whole as 32 bits and viewed as f32 / i32 is read from
    the local of the typed view's row (recorded in `typed_rows`: (view, register))."""

    def __init__(self, f, lanes: int, nat: dict[str, str], wide: dict[str, str], consts: dict[str, int], K: list,
                 rows: dict[str, int], **kw):
        super().__init__(f, lanes, nat, wide, consts, K, **kw)
        self.typed_rows: set[tuple[str, int]] = set()
        for var, reg in rows.items():
            if f.vars[var].bits == 32 and var in self.whole:
                self.rows[var] = str(reg)
        # npback names a typed row `view[N]` (its caller loads the views): the step reads the row's local instead
        self.typed = {f"{v}[{reg}]": (v, int(reg)) for reg in self.rows.values() for v in VIEWS.values()}

    def view(self, x, code: str, dtype: str) -> str:
        got = super().view(x, code, dtype)
        typed = self.typed.get(got)
        if typed is None:
            return got
        self.typed_rows.add(typed)
        return row_local(*typed)


def rounds_floats(f) -> bool:
    """emu.pcode.rounds, remembered per IR function (compiled semantics live as long as the process)."""
    r = _rounding.get(id(f))
    if r is None or r[0] is not f:
        from emu.pcode import rounds
        r = _rounding[id(f)] = (f, rounds(f))
    return r[1]


_rounding: dict[int, tuple] = {}


class Bound(pyback.Gen):
    """The reference backend's code for one IR function, inputs bound to operand code, outputs read from its
    variables (emu.pcode.pyback.Gen; MODE read from the wave)."""

    def __init__(self, f, binds: dict[str, str], mode: str, lanes: int, consts: list):
        super().__init__(f)
        self.binds, self.mode, self.lanes = binds, mode, lanes
        self.consts = consts  # shared with the step's other generated code (K)

    def directed(self, e, a, native: str) -> str:
        if pyback.is_bf(e.ty):
            return self.round(e.ty, native, e.op)
        return f"F.rop({e.op!r}, {self.mode}, {', '.join(a)})"

    def body_lines(self) -> list[str]:
        f = self.f
        vec = f.vector
        self.emit(f"lane = L.lane_ids({self.lanes})" if vec else "lane = 0", 0)
        self.emit(f"lanes = {self.lanes}", 0)
        self.emit(f"wave64 = {self.lanes == 64}", 0)
        self.declare(0)
        entry = len(self.lines)
        self.block(f.body, "True", 0)
        self.lines[entry:entry] = [f"{v} = {code}" for code, v in self.hoisted.items()]
        return self.lines

    def load_input(self, var: str) -> str:
        if var not in self.binds:
            raise Decline(f"input {var} unbound")
        return self.binds[var]

    def output(self, name: str) -> str:
        f, v, bits = self.f, pyback.pyname(name), self.f.outputs[name]
        if name in f.masks or not f.vector:
            return f"L.out_scalar({v}, {bits})"
        return f"L.out_lanes({v}, {bits}, {self.lanes})"


def _small_int(t) -> bool:
    return t.kind in ("u", "i") and t.bits <= 64


class Scalar(Bound):
    """Bound for SALU semantics (uniform values: Python ints and bools): integer operations of up to 64 bits as
    plain Python expressions instead of the runtime's helpers."""

    def op_extract(self, e, a, m):
        if not _small_int(e.args[0].ty) or not _small_int(e.args[1].ty):
            return super().op_extract(e, a, m)
        return f"(({a[0]} >> {a[1]}) & {(1 << e.attr) - 1})"

    def op_resize(self, e, a, m):
        s, t = e.args[0].ty, e.ty
        if _small_int(s) and _small_int(t) and t.bits > s.bits and s.kind == "i":
            sign = 1 << (s.bits - 1)
            return f"((({a[0]} ^ {sign}) - {sign}) & {(1 << t.bits) - 1})"
        return super().op_resize(e, a, m)

    def _cmp(self, e, a, m):
        t = e.args[0].ty
        if t.kind == "i" and _small_int(t):  # signed order is the unsigned order of the values with the sign flipped
            sign = 1 << (t.bits - 1)
            return f"(({a[0]} ^ {sign}) {pyback.CMP[e.op]} ({a[1]} ^ {sign}))"
        return super()._cmp(e, a, m)

    op_eq = op_ne = op_lt = op_le = op_gt = op_ge = _cmp

    def op_select(self, e, a, m):
        return f"({a[1]} if {a[0]} else {a[2]})"

    def op_frombool(self, e, a, m):
        return f"(1 if {a[0]} else 0)"

    def op_lnot(self, e, a, m):
        return f"(not {a[0]})"

    def output(self, name: str) -> str:
        return f"({pyback.pyname(name)} & {(1 << self.f.outputs[name]) - 1})"
