"""Differential tests: clang-19-compiled static Hexagon programs (tests/dsp_programs) on hwemu and on
qemu-hexagon (Debian qemu-user 7.2): stdout and exit status byte for byte."""
import shutil
import subprocess
import sys

import pytest
from dsp_support import vendor_isa
from hypothesis import given, settings
from hypothesis import strategies as st

from emu import cache
from emu.dsp.linux import Process
from emu.dsp.memory import MemoryFault
from tools import dsp_llvm_agreement as la

PROGRAMS = sorted(p.stem for p in la.PROGRAMS.glob("*.c"))
STDIN = bytes(range(256)) * 20 + b"tail"  # more than one read() of the programs that read stdin
needs_clang = pytest.mark.skipif(not la.corpus_available(), reason="clang-19 / ld.lld-19 not installed (./dev)")


@pytest.fixture(scope="module")
def isa():
    return vendor_isa()


@pytest.fixture(scope="module")
def build(tmp_path_factory):
    out = tmp_path_factory.mktemp("dsp")

    def compile_(name: str, opt: str):
        exe = out / f"{name}{opt}"
        if not exe.exists():
            la.compile_program(la.PROGRAMS / f"{name}.c", opt, exe)
        return exe
    return compile_


@needs_clang
@pytest.mark.skipif(not shutil.which("qemu-hexagon"), reason="qemu-hexagon not installed (./dev installs qemu-user)")
@pytest.mark.parametrize("opt", ["-O0", "-O2"])
@pytest.mark.parametrize("name", PROGRAMS)
def test_matches_qemu(isa, build, name, opt):
    exe = build(name, opt)
    ref = subprocess.run(["qemu-hexagon", str(exe)], input=STDIN, capture_output=True, timeout=60)
    p = Process(str(exe), stdin=STDIN, isa=isa)
    code = p.run(max_packets=5_000_000)
    assert (bytes(p.stdout), code) == (ref.stdout, ref.returncode)
    assert ref.stdout  # the program printed its results


def test_fault_reports_packet_and_leaves_host(isa, tmp_path):
    """A store outside mapped memory: a fault with address, PC and packet text; the host process lives on."""
    from emu.dsp.core import Thread
    from emu.dsp.memory import Memory
    mem = Memory()
    mem.map(0x1000, 0x1000, "rwx")
    code = (0xA180C000).to_bytes(4, "little")  # { memw(r0+#0) = r0 }
    mem.write(0x1000, code)
    t = Thread(isa, mem)
    t.pc, t.r[0] = 0x1000, 0xDEAD0000
    with pytest.raises(MemoryFault) as e:
        t.step()
    assert (e.value.addr, e.value.size, e.value.pc) == (0xDEAD0000, 4, 0x1000)
    assert "memw(r0+#0) = r0" in e.value.packet and t.pc == 0x1000  # nothing committed


@needs_clang
def test_exit_and_output(isa, build):
    p = Process(str(build("arith", "-O2")), isa=isa)
    assert p.run() == 17 and p.stdout.startswith(b"acc=")


@needs_clang
def test_cli_is_a_qemu_hexagon_drop_in(build):
    """`python -m emu.dsp [-strace] PROGRAM`: stdin in, stdout out, the exit status; as qemu-hexagon."""
    import sys
    exe = build("stdin_echo", "-O2")
    r = subprocess.run([sys.executable, "-m", "emu.dsp", "-strace", str(exe)], input=b"hello", capture_output=True,
                       timeout=120)
    assert r.returncode == 5 and r.stdout.startswith(b"HELLO") and b"sum=" in r.stdout
    assert b"63(0x0" in r.stderr  # -strace: the read syscall
    bad = subprocess.run([sys.executable, "-m", "emu.dsp", "/nonexistent"], capture_output=True, timeout=60)
    assert bad.returncode == 1 and b"nonexistent" in bad.stderr


@settings(max_examples=150)
@given(st.data())
def test_any_packet_runs_or_faults(isa, data):
    """Untrusted code: a packet (well-formed or arbitrary words) runs, or raises MemoryFault / IllegalPacket."""
    import numpy as np

    from emu.dsp.core import IllegalPacket, Thread
    from emu.dsp.decode import Decoder
    from emu.dsp.memory import Memory
    from emu.dsp.strategies import packets
    words = data.draw(st.one_of(packets(Decoder.of(isa)), st.lists(st.integers(0, 2**32 - 1), min_size=1, max_size=4)))
    mem = Memory()
    mem.map(0x10000, 0x10000, "rwx")
    for k, w in enumerate(words):
        mem.store(4, 0x10000 + 4 * k, w)
    t = Thread(isa, mem)
    t.pc, t.on_trap = 0x10000, lambda *_: None
    t.r = data.draw(st.lists(st.sampled_from([0, 4, 0x10800, 0x7FFFFFFF, 0xFFFFFFFF]), min_size=32, max_size=32))
    t.v = np.arange(32 * 128, dtype=np.uint32).astype(np.uint8).reshape(32, 128)
    try:
        t.step()
    except (MemoryFault, IllegalPacket):
        pass


@needs_clang
@pytest.mark.skipif(not shutil.which("qemu-hexagon"), reason="qemu-hexagon not installed (./dev installs qemu-user)")
def test_hwemu_cli_runs_programs_like_qemu(isa, build):
    """`hwemu hexagon PROGRAM` and, under `hwemu run`, a `qemu-hexagon` found on PATH both run hwemu's core (the
    shims hwemu's cache holds; the cache's compiled semantics serve both, as they serve the user's runs)."""
    exe = build("arith", "-O2")
    ref = subprocess.run(["qemu-hexagon", str(exe)], capture_output=True, timeout=60)
    direct = subprocess.run([sys.executable, "-m", "emu.cli", "hexagon", str(exe)], capture_output=True, timeout=300)
    shim = subprocess.run([sys.executable, "-m", "emu.cli", "run", "--", "sh", "-c",
                           f"command -v qemu-hexagon && exec qemu-hexagon {exe}"], capture_output=True, timeout=300)
    assert (direct.stdout, direct.returncode) == (ref.stdout, ref.returncode)
    assert shim.stdout.startswith(str(cache.root() / "bin").encode()) and shim.stdout.endswith(ref.stdout)
