"""Instruction-level differential test of the compiled vendor semantics against qemu-hexagon: every
register-to-register form, random operands (tools/dsp_qemu_insn_diff; the full run takes --per-form 2+)."""
import shutil

import pytest
from dsp_support import vendor_isa

from emu.dsp.decode import Decoder
from tools import dsp_qemu_insn_diff as qd

pytestmark = pytest.mark.skipif(
    not (shutil.which("qemu-hexagon") and shutil.which("llvm-mc-19") and shutil.which("ld.lld-19")),
    reason="qemu-hexagon (qemu-user), llvm-mc-19 and ld.lld-19 needed (./dev installs them)")


def test_forms_agree_with_qemu():
    isa = vendor_isa()
    decoder = Decoder(isa)
    forms = qd.forms(decoder)
    assert len(forms) > 850
    cases = qd.cases_for(decoder, forms, 1, seed=20261130)
    theirs, mine = qd.run_both(cases, isa)
    assert len(theirs) == len(mine) == len(cases) * qd.SLOT
    diffs = qd.differences(cases, theirs, mine)
    assert diffs == []
