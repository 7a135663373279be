"""emu.dsp.cpp (the vendor files' preprocessor) and emu.dsp.isa (the instruction table)."""
import pytest
from dsp_support import vendor_isa

from emu.dsp import cpp


def _pp(tmp_path, text, **defines):
    (tmp_path / "t.def").write_text(text)
    return cpp.spell(cpp.Preprocessor(tmp_path, defines).run("t.def"))


def test_cpp_paste_stringize_variadic(tmp_path):
    text = ('#define CAT(a,b) a##b\n#define STR(x) #x\n#define V(f,...) f(__VA_ARGS__)\n'
            'CAT(A2_,add) STR(r0 = 1) V(g,1,2) CAT(,x)\n')
    assert _pp(tmp_path, text).split() == ['A2_add', '"r0', '=', '1"', 'g(1,2)', 'x']


def test_cpp_conditionals_and_self_reference(tmp_path):
    text = ('#ifndef X\n#define Y 1\n#else\n#define Y 2\n#endif\n#if 0\nno\n#endif\n'
            '/* a\n comment */ #define Q Q(\nY Q 1)\n')
    assert _pp(tmp_path, text) == "1 Q( 1)"
    assert _pp(tmp_path, "#ifdef X\nyes\n#endif\n", X="1") == "yes"


def test_cpp_errors(tmp_path):
    with pytest.raises(cpp.CppError):
        _pp(tmp_path, "#define F(a,b) a\nF(1)\n")
    with pytest.raises(cpp.CppError):
        _pp(tmp_path, "#if 1\nx\n")


@pytest.fixture(scope="module")
def isa():
    return vendor_isa()


def test_table(isa):
    assert len(isa.insns) >= 2100 and sum(i.hvx for i in isa.insns.values()) >= 500
    add = isa.insns["A2_add"]
    assert add.syntax == "Rd32=add(Rs32,Rt32)" and "RdV=RsV+RtV" in add.semantics.replace(" ", "")
    assert add.encoding == "11110011000sssssPP-ttttt---ddddd"
    assert isa.insns["SA1_addi"].subclass == "SUBINSN_A" and len(isa.insns["SA1_addi"].encoding) == 13
    assert {d.encoding[:3] + d.encoding[18] for d in isa.duplexes} == {f"{i:04b}" for i in range(16)}
    assert "fMAX" in isa.macros and len(isa.macros) > 300
    assert all(i.encoding is not None for t, i in isa.insns.items() if not t.startswith("J2_endloop"))
