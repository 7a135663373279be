"""How the lean numpy backend (emu.pcode.npback) writes each IR operation: at natural width where numpy has it,
65..128-bit integers as pairs of uint64 halves, folded where planning knows the operands (encoding fields), else as
the reference backend's code on its representation."""
from __future__ import annotations

from emu.pcode import pyback
from emu.pcode.ir import Const, Op, Ty, Var
from emu.pcode.npvalues import Decline, is_nat, nat_bits, ones, utype, wider

_ARITH = {"add": "+", "sub": "-", "mul": "*", "and": "&", "or": "|", "xor": "^"}
_FLOAT_ARITH = {"add": "+", "sub": "-", "mul": "*", "div": "/"}
_FDT = {16: "np.float16", 32: "np.float32", 64: "np.float64"}
_TYPED_ROWS = {"np.float32": "vf", "np.int32": "vi"}  # the VGPR file's views as these types (the caller loads them)


class NaturalOps:
    """The operations of emu.pcode.npback.Natural, mixed into it: each gives the code of its result (and the form it
    is in) through Natural's `ex`, `k`, `tmp`, `to_nat` and `to_wide`, over its state (`f`, `g`, `lanes`, `pairs`,
    `known`, `rows`, `assigned`)."""

    # -- 65..128-bit integers as (lo, hi) uint64 pairs ---------------------------------------------------------
    def pair(self, e: Op, args) -> tuple[str, str, object]:
        """A value wider than 64 bits as uint64 halves. kind 'z': zero-extended from `bits`, 's': sign-extended
        from `bits`, 'g': any; hi None: not computed (z: zero, s: the sign fill)."""
        t, op = e.ty, e.op
        ps = [self.pairs.get(c) if rep == "p" else None for c, rep, _ in args]
        if op == "resize" and wider(t) and is_nat(e.args[0].ty) and args[0][1] != "p":
            s = e.args[0].ty
            a = self.to_nat(args[0][0], args[0][1], s)
            lo = a if nat_bits(s) == 64 else f"{a}.astype(U64)"
            if s.kind == "i" and s.bits in (32, 64):
                lo = lo if s.bits == 64 else f"{a}.view(np.int32).astype(np.int64).view(U64)"
                return self.new_pair(self.tmp(lo), None, "s", s.bits)
            if s.kind == "u":
                return self.new_pair(self.tmp(lo), None, "z", s.bits)
        if op == "resize" and ps[0] is not None and wider(t) and t.bits == e.args[0].ty.bits:
            return args[0]
        if op == "resize" and ps[0] is not None and is_nat(t):
            return self.tmp(self.resize(ps[0][0], Ty("u", 64), t) or ps[0][0]), "n", None
        if op == "mul" and None not in ps:
            (a, _, ka, ba), (b, _, kb, bb) = ps
            if ka == kb == "z" and ba + bb <= 64:
                return self.new_pair(self.tmp(f"({a} * {b})"), None, "z", ba + bb)
            if ka == kb == "s" and ba <= 32 and bb <= 32:
                return self.new_pair(self.tmp(f"({a}.view(np.int64) * {b}.view(np.int64)).view(U64)"), None, "s", 64)
        if op == "add" and None not in ps:
            (a, _, ka, ba), (b, _, kb, bb) = ps
            lo = self.tmp(f"({a} + {b})")
            if ka == kb == "z" and max(ba, bb) < 64:
                return self.new_pair(lo, None, "z", max(ba, bb) + 1)
            def high() -> str:  # computed when something reads the high half (a carry-out to NULL does not)
                c = self.tmp(f"({lo} < {a}).astype(U64)")
                return self.tmp(f"(({self.hi(ps[0], t)} + {self.hi(ps[1], t)} + {c}) & U64({ones(t.bits - 64)}))")
            return self.new_pair(lo, high, "g", t.bits)
        if op == "and" and ps[0] is not None and isinstance(e.args[1], Const) and e.args[1].value == ones(t.bits):
            return args[0]
        if op == "extract" and ps[0] is not None and isinstance(e.args[1], Const) and is_nat(t) and e.attr <= 64:
            lo = int(e.args[1].value)
            if lo == 0:
                code = ps[0][0]
            elif lo == 64:
                code = self.hi(ps[0], e.args[0].ty)
            else:
                raise Decline(f"extract at {lo} of a {e.args[0].ty.bits}-bit value")
            code = code if e.attr == 64 else f"({code} & U64({ones(e.attr)}))"
            return self.tmp(code if nat_bits(t) == 64 else f"{code}.astype(U32)"), "n", None
        raise Decline(f"{op} on integers wider than 64 bits")

    def new_pair(self, lo: str, hi, kind: str, bits: int) -> tuple[str, str, None]:
        """A pair value; `hi`: code, None (implied by kind) or a function that emits it on first use."""
        self.pairs[lo] = (lo, hi, kind, bits)
        return lo, "p", None

    def hi(self, p: tuple, t: Ty) -> str:
        """Code of a pair's high half (bits 64 .. t.bits-1)."""
        lo, hi, kind, bits = p
        if callable(hi):
            hi = hi()
            self.pairs[lo] = (lo, hi, kind, bits)
        if hi is not None:
            return hi
        if kind == "z" and bits <= 64:
            return "U64(0)"
        if kind == "s":
            return self.tmp(f"((({lo}).view(np.int64) >> np.int64(63)).view(U64) & U64({ones(t.bits - 64)}))")
        raise Decline("high half unknown")

    def fold(self, e: Op):
        """Operations on values known when planning (encoding fields): the branch taken, the flag's value."""
        if e.op == "select" and self._constant(e.args[0]):
            return self.ex(e.args[1] if self.ex(e.args[0])[2] else e.args[2])
        if e.op == "select" and self._decided(e.args[0]) is not None:  # land with a false operand, ...
            return self.ex(e.args[1] if self._decided(e.args[0]) else e.args[2])
        a = e.args[0] if e.args else None
        if e.op == "resize" and is_nat(e.ty) and isinstance(a, Var | Const) and is_nat(a.ty) and a.ty.kind == "u":
            k = self.ex(a)[2] if self._constant(a) else None
            if k is not None:
                return f"{self.k(e.ty, k & ones(e.ty.bits))}", "n", k & ones(e.ty.bits)
        if e.op in ("add", "or", "xor", "sub") and is_nat(e.ty) and self._constant(e.args[1]) and is_nat(e.args[0].ty) \
                and nat_bits(e.args[0].ty) == nat_bits(e.ty) and e.args[0].ty.bits <= e.ty.bits:
            if self.ex(e.args[1])[2] == 0:
                return self.ex(a)
        if e.op == "extract" and is_nat(e.ty) and is_nat(a.ty) and isinstance(e.args[1], Const) \
                and e.args[1].value == 0 and e.attr >= a.ty.bits and nat_bits(a.ty) == nat_bits(e.ty):
            return self.ex(a)
        if e.op == "tobool" and isinstance(a, Op) and a.op == "select" and isinstance(a.args[1], Const) \
                and isinstance(a.args[2], Const) and a.args[1].value == 1 and a.args[2].value == 0:
            return self.ex(a.args[0])  # c ? 1 : 0 as a bool is c
        if e.op in ("tobool", "lnot", "land", "lor"):
            k = [self.ex(a)[2] for a in e.args] if all(self._constant(a) for a in e.args) else None
            if k is not None and None not in k:
                v = {"tobool": lambda: k[0] != 0, "lnot": lambda: not k[0], "land": lambda: bool(k[0] and k[1]),
                     "lor": lambda: bool(k[0] or k[1])}[e.op]()
                return f"np.bool_({v})", "n", v
            if e.op == "land":  # a false operand decides alone
                for a in e.args:
                    if self._constant(a) and self.ex(a)[2] is False:
                        return "np.bool_(False)", "n", False
        return None

    def _decided(self, e) -> bool | None:
        """A condition's value when its constant operands decide it alone, else None."""
        if self._constant(e):
            return bool(self.ex(e)[2])
        if isinstance(e, Op) and e.op in ("land", "lor"):
            k = [self._decided(a) for a in e.args]
            if e.op == "land" and False in k:
                return False
            if e.op == "lor" and True in k:
                return True
        return None

    def _constant(self, e) -> bool:
        if isinstance(e, Const):
            return True
        if isinstance(e, Var):
            return e.name in self.known
        if isinstance(e, Op) and e.op == "resize" and is_nat(e.ty) and is_nat(e.args[0].ty) \
                and e.args[0].ty.kind == "u":
            return self._constant(e.args[0])
        return isinstance(e, Op) and e.op in ("tobool", "lnot", "land", "lor") and all(map(self._constant, e.args))

    def natural(self, e: Op, args) -> str | None:
        """Natural-width code of `e`, or None."""
        t, op = e.ty, e.op
        ts = [a.ty for a in e.args]
        for (_, rep, _), x in zip(args, e.args, strict=True):  # masks and wide integers stay in the reference form
            if rep == "w" and is_nat(x.ty) and (x.ty.bits > 64 or isinstance(x, Var) and x.name in self.f.masks):
                return None
            if x.ty.kind in ("u", "i") and x.ty.bits > 64:
                return None
        a = [self.to_nat(c, rep, x.ty) for (c, rep, _), x in zip(args, e.args, strict=True)]
        if op in _ARITH and is_nat(t) and all(is_nat(x) and nat_bits(x) == nat_bits(t) for x in ts):
            r = f"({a[0]} {_ARITH[op]} {a[1]})"
            return f"({r} & {self.k(t, ones(t.bits))})" if t.bits < nat_bits(t) and op in ("add", "sub", "mul") else r
        if op in _FLOAT_ARITH and t.kind == "f":
            return f"({a[0]} {_FLOAT_ARITH[op]} {a[1]})"
        if op == "fma" and t.kind == "f" and len(a) == 3:
            return f"F.fma({a[0]}, {a[1]}, {a[2]})"
        if op == "neg":
            if t.kind == "f":
                return f"(-{a[0]})"
            if is_nat(t) and nat_bits(ts[0]) == nat_bits(t):
                return f"((-{a[0]}) & {self.k(t, ones(t.bits))})"
        if op == "not" and is_nat(t) and nat_bits(ts[0]) == nat_bits(t):
            return f"((~{a[0]}) & {self.k(t, ones(t.bits))})"
        if op in ("shl", "shr") and is_nat(t) and nat_bits(ts[0]) == nat_bits(t) and self._small(e.args[1], t.bits):
            amt = a[1] if nat_bits(ts[1]) == nat_bits(t) else f"{a[1]}.astype({utype(t)})"
            if op == "shl":
                r = f"({a[0]} << {amt})"
                return f"({r} & {self.k(t, ones(t.bits))})" if t.bits < nat_bits(t) else r
            if t.kind == "u":
                return f"({a[0]} >> {amt})"
            if t.bits == nat_bits(t):
                s = f"np.int{t.bits}"
                return f"({self.view(e.args[0], a[0], s)} >> {self.view(e.args[1], amt, s)}).view({utype(t)})"
            return None
        if op in pyback.CMP:
            s = ts[0]
            if s.kind == "f" or s.kind == "bool" or (s.kind == "u" and is_nat(s)):
                return f"({a[0]} {pyback.CMP[op]} {a[1]})"
            if s.kind == "i" and s.bits in (32, 64):
                t = f"np.int{s.bits}"
                return f"({self.view(e.args[0], a[0], t)} {pyback.CMP[op]} {self.view(e.args[1], a[1], t)})"
            return None
        if op in ("land", "lor"):
            return f"({a[0]} {'&' if op == 'land' else '|'} {a[1]})"
        if op == "lnot":
            return f"(~{a[0]})"
        if op == "select" and (t.kind == "f" or (is_nat(t) and nat_bits(ts[1]) == nat_bits(ts[2]) == nat_bits(t))):
            return f"np.where({a[0]}, {a[1]}, {a[2]})"
        if op == "tobool" and is_nat(ts[0]):
            return f"({a[0]} != 0)"
        if op == "frombool" and is_nat(t):
            return f"{a[0]}.astype({utype(t)})"
        if op == "resize" and is_nat(t) and is_nat(ts[0]):
            return self.resize(a[0], ts[0], t)
        if op == "extract" and is_nat(t) and is_nat(ts[0]) and isinstance(e.args[1], Const):
            lo = int(e.args[1].value)
            if lo >= nat_bits(ts[0]) or t.bits > 32 and nat_bits(ts[0]) == 32:
                return None
            r = f"(({a[0]} >> {self.k(ts[0], lo)}) & {self.k(ts[0], ones(e.attr))})"
            return r if nat_bits(ts[0]) == nat_bits(t) else f"{r}.astype({utype(t)})"
        if op == "load" and e.attr in self.f.files and t.bits == 32 and is_nat(t) and is_nat(ts[0]):
            return f"ML32(mem, act, {self.to_wide(*args[0][:2], ts[0])})"
        if op == "bitcast" and t.kind == "f" and is_nat(ts[0]) and t.bits == ts[0].bits:
            return self.view(e.args[0], a[0], _FDT[t.bits]) if t.bits != 16 else \
                f"{a[0]}.astype(np.uint16).view(np.float16)"
        if op == "bitcast" and is_nat(t) and ts[0].kind == "f" and t.bits == ts[0].bits:
            return f"{a[0]}.view({utype(t)})" if t.bits != 16 else f"{a[0]}.view(np.uint16).astype(U32)"
        return None

    def view(self, x, code: str, dtype: str) -> str:
        """Code of natural value `code` (of IR node `x`) viewed as numpy type `dtype`: a VGPR row input from the
        file's view of that type, no view made per use."""
        while isinstance(x, Op) and x.op == "resize" and is_nat(x.ty) and is_nat(x.args[0].ty) \
                and x.ty.bits == x.args[0].ty.bits:  # a change of signedness: the same bits
            x = x.args[0]
        if isinstance(x, Var) and x.name in self.rows and dtype in _TYPED_ROWS and x.name not in self.assigned:
            return f"{_TYPED_ROWS[dtype]}[{self.rows[x.name]}]"
        return f"{code}.view({dtype})"

    def resize(self, a: str, s: Ty, t: Ty) -> str | None:
        if nat_bits(s) == nat_bits(t):
            if t.bits < s.bits:
                return f"({a} & {self.k(t, ones(t.bits))})"
            if s.kind == "i" and t.bits > s.bits:
                return None
            return a
        if nat_bits(s) == 32:  # to 64 bits
            if s.kind == "i" and t.bits > s.bits:
                return f"{a}.view(np.int32).astype(np.int64).view(U64)" if s.bits == 32 else None
            return f"{a}.astype(U64)"
        r = f"{a}.astype(U32)"
        return f"({r} & {self.k(t, ones(t.bits))})" if t.bits < 32 else r

    @staticmethod
    def _small(e, bits: int) -> bool:
        """Whether a shift amount is below `bits` for every value it can have."""
        if isinstance(e, Const):
            return int(e.value) < bits
        if isinstance(e, Op) and e.op == "resize":
            return NaturalOps._small(e.args[0], bits)
        return is_nat(e.ty) and (1 << e.ty.bits) <= bits

    def wide(self, e: Op, args) -> str:
        """The reference backend's code for `e` on reference-form arguments."""
        a = [c if isinstance(x, Const) or rep == "w" else self.to_wide(c, rep, x.ty)
             for (c, rep, _), x in zip(args, e.args, strict=True)]
        a = [self.g.ex_op(x, "True") if isinstance(x, Const) else c for c, x in zip(a, e.args, strict=True)]
        if e.op == "lane_id":
            return f"L.lane_ids({self.lanes})"
        if e.op == "wave64":
            return repr(self.lanes == 64)
        if e.op == "load" and e.attr in self.f.files and e.ty.bits in (8, 16, 32, 64):
            return f"L.arr(ML(mem, act, {a[0]}, {e.ty.bits}))"
        if e.op in ("load", "fmt_load", "fmt_offset", "callout", "reg_read"):
            raise Decline(f"state access {e.op}")
        if e.op in pyback.ROUNDED and e.ty.is_float and not pyback.is_bf(e.ty):
            return f"F.rop({e.op!r}, 0, {', '.join(a)})"  # the caller guarantees MODE rounds to nearest
        fn = getattr(self.g, "op_" + e.op, None)
        if fn is not None:
            return fn(e, a, "True")
        if e.op in pyback.NP1:
            return self.g.round(e.ty, f"{pyback.NP1[e.op]}({a[0]})", e.op)
        raise Decline(f"op {e.op}")
