"""The counter control registers (UPCYCLE, PKTCOUNT, UTIMER, qemu-hexagon's c20/c21) and the watchdog of
`hwemu hexagon` (packet limit, wall-time limit, Ctrl-C)."""
import os
import shutil
import signal
import subprocess
import sys

import pytest
from dsp_support import vendor_isa
from hypothesis import given
from hypothesis import strategies as st

from emu.dsp.linux import Process
from tools import dsp_qemu_insn_diff as qd

pytestmark = pytest.mark.skipif(not (shutil.which("llvm-mc-19") and shutil.which("ld.lld-19")),
                                reason="llvm-mc-19 and ld.lld-19 needed (./dev installs them)")

# reads every counter twice, 200 loop iterations apart, then writes the 16 words read to stdout (c20 and c21 as words:
# LLVM has no names for them)
COUNTERS = """.text
.globl _start
_start:
{ r0 = ##buf }
{ r3:2 = c15:14 }
{ r5:4 = c19:18 }
{ r7:6 = c31:30 }
	.word 0x6a14c008
	.word 0x6a15c009
{ loop0(1f,#200) }
1: { r20 = add(r20,#1) }:endloop0
{ r11:10 = c15:14 }
{ r13:12 = c19:18 }
{ r15:14 = c31:30 }
	.word 0x6a14c010
	.word 0x6a15c011
{ memd(r0+#0) = r3:2; memd(r0+#8) = r5:4 }
{ memd(r0+#16) = r7:6; memd(r0+#24) = r9:8 }
{ memd(r0+#32) = r11:10; memd(r0+#40) = r13:12 }
{ memd(r0+#48) = r15:14; memd(r0+#56) = r17:16 }
{ r1 = r0; r0 = #1; r2 = #64; r6 = #64 }
{ trap0(#1) }
{ r0 = #0; r6 = #93 }
{ trap0(#1) }
.bss
.p2align 3
buf: .space 64
"""

SPIN = """.text
.globl _start
_start:
{ r0 = #1; r1 = ##msg; r2 = #6; r6 = #64 }
{ trap0(#1) }
1: { r3 = add(r3,#1) }
{ jump 1b }
.data
msg: .ascii "hello\\n"
"""


def _exe(tmp_path, name: str, asm: str):
    exe = tmp_path / name
    qd.build(asm, exe)
    return exe


def _words(data: bytes) -> list[int]:
    return [int.from_bytes(data[k:k + 4], "little") for k in range(0, len(data), 4)]


def test_counters_count(tmp_path):
    """UPCYCLE, PKTCOUNT and UTIMER read nonzero and move forward (qemu-hexagon 7.2 reads 0 from all three,
    which no hardware does); c20/c21, qemu-hexagon's own packet and instruction counters, read as it reads
    them."""
    exe = _exe(tmp_path, "counters", COUNTERS)
    p = Process(str(exe), isa=vendor_isa())
    assert p.run(max_packets=1000) == 0
    w = _words(bytes(p.stdout))
    upcycle, pktcount, utimer = (w[k] | w[k + 1] << 32 for k in (0, 2, 4))
    upcycle2, pktcount2, utimer2 = (w[k] | w[k + 1] << 32 for k in (8, 10, 12))
    assert 0 < upcycle < upcycle2 and upcycle2 - upcycle >= 200  # at least a cycle per packet
    assert 0 < pktcount < pktcount2 and pktcount2 - pktcount == 200 + 6  # the packets between the two reads
    assert 0 < utimer < utimer2  # 19.2 MHz: a tick every 52 cycles of the nominal 1 GHz clock
    if shutil.which("qemu-hexagon"):
        ref = _words(subprocess.run(["qemu-hexagon", str(exe)], capture_output=True, timeout=60).stdout)
        assert (w[6:8], w[14:16]) == (ref[6:8], ref[14:16])


def test_pktcount_write(tmp_path):
    """A write to PKTCOUNT sets it and it counts on; UPCYCLE and UTIMER ignore writes (read-only counters)."""
    asm = COUNTERS.replace("{ r3:2 = c15:14 }", "{ r2 = #100; r3 = #0 }\n{ c19:18 = r3:2 }\n{ upcyclelo = r3 }\n"
                           "{ utimerlo = r3 }\n{ r3:2 = c15:14 }")
    p = Process(str(_exe(tmp_path, "pktw", asm)), isa=vendor_isa())
    p.run(max_packets=1000)
    w = _words(bytes(p.stdout))
    assert w[2:4] == [100 + 3, 0]  # the PKTCOUNT read is the fourth packet after the write
    assert w[0] > 2 and w[4] > 0


def test_watchdog_packet_limit_and_env(tmp_path):
    exe = _exe(tmp_path, "spin", SPIN)
    r = subprocess.run([sys.executable, "-m", "emu.dsp", "--max-packets", "5000", str(exe)], capture_output=True,
                       timeout=300)
    assert r.returncode == 124 and r.stdout == b"hello\n"
    assert b"packet limit (5000)" in r.stderr and b"after 5000 packets" in r.stderr and b"pc 0x" in r.stderr
    env = {**os.environ, "HWEMU_DSP_TIMEOUT": "1", "HWEMU_DSP_MAX_PACKETS": "0"}
    r = subprocess.run([sys.executable, "-m", "emu.cli", "hexagon", str(exe)], capture_output=True, timeout=300,
                       env=env)  # the default limit (600 s) would outlast the subprocess timeout
    assert r.returncode == 124 and b"time limit (1 s)" in r.stderr
    bad = subprocess.run([sys.executable, "-m", "emu.dsp", "--timeout", "soon", str(exe)], capture_output=True,
                         timeout=300)
    assert bad.returncode == 2 and b"--timeout" not in bad.stdout and b"bad limit" in bad.stderr


def test_ctrl_c_stops_cleanly(tmp_path):
    exe = _exe(tmp_path, "spin", SPIN)
    p = subprocess.Popen([sys.executable, "-m", "emu.dsp", "-strace", "--timeout", "0", str(exe)],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    traced = b""
    while not traced.endswith(b") = 6\n") and (line := p.stderr.readline()):  # the write: the program runs now
        traced += line
    p.send_signal(signal.SIGINT)
    out, err = p.communicate(timeout=60)
    assert traced.startswith(b"64(0x1, ") and p.returncode == 130 and out == b"hello\n"
    assert err.startswith(b"hwemu: interrupted at pc 0x") and b"Traceback" not in err


@given(st.sampled_from(["--max-packets", "--timeout"]), st.text())
def test_limit_options_take_any_text(opt, text):
    """A watchdog limit from the command line or the environment is a number >= 0 or a ValueError (exit 2)."""
    from emu.dsp.__main__ import _limit
    try:
        value = _limit(opt, text)
    except ValueError:
        return
    assert value >= 0
