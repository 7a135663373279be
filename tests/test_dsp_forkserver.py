"""The Hexagon fork server (emu.dsp.forkserver) behind the qemu-hexagon shims: clang-19-compiled programs run
through the launcher exactly as alone (stdout, exit status), signals and vanished launchers reach the child, and
a client that sends garbage never takes the server down."""
import os
import shutil
import signal
import socket
import subprocess
import sys
import time

import pytest
from dsp_support import vendor_isa
from hypothesis import given, settings
from hypothesis import strategies as st

from emu.dsp import forkserver, launcher
from emu.dsp.__main__ import write_shims
from tools import dsp_llvm_agreement as la

pytestmark = pytest.mark.skipif(not la.corpus_available(), reason="clang-19 / ld.lld-19 not installed (./dev)")
STDIN = bytes(range(256)) * 20


@pytest.fixture(scope="module")
def programs(tmp_path_factory):
    vendor_isa()
    out = tmp_path_factory.mktemp("dsp")
    for name in ("loops", "stdin_echo", "hvx"):
        la.compile_program(la.PROGRAMS / f"{name}.c", "-O2", out / name)
    return out


@pytest.fixture(scope="module")
def server():
    env = {k: v for k, v in os.environ.items() if k != forkserver.ENV}
    path = forkserver.start(env)
    assert path and os.path.exists(path)
    return env


def _shim(tmp_path):
    return str(write_shims(tmp_path)[0])


def _children(pid: int) -> set[int]:
    with open(f"/proc/{pid}/task/{pid}/children") as f:
        return {int(x) for x in f.read().split()}


def _wait_for(cond, what: str, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, f"{what} within {timeout} s"
        time.sleep(0.05)


@pytest.mark.parametrize("name", ["loops", "stdin_echo", "hvx"])
def test_a_program_on_the_server_runs_as_alone(programs, server, tmp_path, name):
    shim = _shim(tmp_path)
    alone_env = {**server, forkserver.ENV: ""}
    alone = subprocess.run([shim, str(programs / name)], input=STDIN, capture_output=True, env=alone_env,
                           timeout=300)
    served = subprocess.run([shim, str(programs / name)], input=STDIN, capture_output=True, env=server, timeout=300)
    assert (served.stdout, served.stderr, served.returncode) == (alone.stdout, alone.stderr, alone.returncode)
    assert alone.stdout
    if shutil.which("qemu-hexagon"):
        ref = subprocess.run(["qemu-hexagon", str(programs / name)], input=STDIN, capture_output=True, timeout=60)
        assert (served.stdout, served.returncode) == (ref.stdout, ref.returncode)


def test_the_childs_environment_and_folder_are_the_launchers(programs, server, tmp_path):
    """A watchdog limit set in the launcher's environment and a relative program path from its folder."""
    r = subprocess.run([_shim(tmp_path), "loops"], capture_output=True, cwd=programs, timeout=300,
                       env={**server, "HWEMU_DSP_MAX_PACKETS": "50"})
    assert r.returncode == 124 and b"watchdog" in r.stderr and b"after 50 packets" in r.stderr


def test_a_signal_to_the_launcher_reaches_the_child(programs, server, tmp_path):
    """SIGINT: the child reports the interruption and exits 130; SIGTERM: both die of it."""
    server_pid = forkserver._SERVER[0].pid
    for sig, code, said in ((signal.SIGINT, 130, b"interrupted"), (signal.SIGTERM, -signal.SIGTERM, b"")):
        p = subprocess.Popen([_shim(tmp_path), str(programs / "stdin_echo")], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=server)
        _wait_for(lambda: len(_children(server_pid)) == 1, "the server forks the program's child")
        p.send_signal(sig)
        out, err = p.communicate(timeout=60)
        assert p.returncode == code and said in err


def test_a_vanished_launcher_takes_its_child_with_it(programs, server, tmp_path):
    p = subprocess.Popen([_shim(tmp_path), str(programs / "stdin_echo")], stdin=subprocess.PIPE, env=server)
    server_pid = forkserver._SERVER[0].pid
    _wait_for(lambda: len(_children(server_pid)) == 1, "the server forks the program's child")
    p.kill()
    p.wait(timeout=60)
    _wait_for(lambda: not _children(server_pid), "the child is killed and reaped")


@settings(max_examples=30, deadline=None)
@given(garbage=st.binary(max_size=64), fds=st.booleans())
def test_garbage_from_a_client_leaves_the_server_serving(programs, server, garbage, fds):
    """Whatever a client sends (with or without descriptors), the server closes it or waits, and goes on."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.connect(server[forkserver.ENV])
        s.sendmsg([garbage or b"\0"], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, bytes(4) * 3)] if fds else [])
    assert forkserver._SERVER[0].poll() is None
    r = subprocess.run([sys.executable, "-I", "-S", os.path.join(os.path.dirname(forkserver.__file__), "launcher.py"),
                        str(programs / "loops")], capture_output=True, env=server, timeout=300)
    assert r.returncode != 125 and b"sum=" in r.stdout


_NAME = st.binary(min_size=1, max_size=20).filter(lambda b: b"\0" not in b and b"=" not in b)
_TEXT = st.binary(max_size=20).filter(lambda b: b"\0" not in b)


@given(cwd=_TEXT, argv=st.lists(_TEXT, min_size=1, max_size=4), env=st.dictionaries(_NAME, _TEXT, max_size=4))
def test_a_launchers_request_parses_back(cwd, argv, env):
    data = bytearray(launcher.request(cwd, argv, env))
    assert forkserver._parse(data, [0, 1, 2]) == (cwd, argv, [k + b"=" + v for k, v in env.items()])
    assert forkserver._parse(data[:-1], [0, 1, 2]) is None  # the rest is still to come
    assert forkserver._parse(data, [0, 1]) is False  # a request comes with stdin, stdout and stderr


@given(data=st.binary(max_size=200), nfds=st.integers(0, 4))
def test_any_bytes_parse_to_a_request_or_are_refused(data, nfds):
    out = forkserver._parse(bytearray(len(data).to_bytes(4, "big") + data), list(range(nfds)))
    assert out is False or (nfds == 3 and all(b"=" in e for e in out[2]))


def test_semantics_a_child_compiles_reach_the_disk_cache(programs, tmp_path):
    """A child leaves as a process of its own would: the semantics it compiled anew are saved for later runs."""
    env = {k: v for k, v in os.environ.items() if k != forkserver.ENV}
    env["HWEMU_CACHE"] = str(tmp_path / "cache")  # no semantics cached yet (the vendor files: the user's cache's)
    code = ("import os, subprocess, sys; from emu.dsp import forkserver; env = dict(os.environ); "
            "forkserver.start(env); sys.exit(subprocess.run(sys.argv[1:], env=env).returncode)")
    r = subprocess.run([sys.executable, "-c", code, _shim(tmp_path), str(programs / "loops")], capture_output=True,
                       timeout=600, env={**env, "PYTHONPATH": os.pathsep.join(sys.path)})
    assert b"sum=" in r.stdout and not r.stderr, r.stderr[-2000:]
    assert list((tmp_path / "cache" / "hexagon").glob("semantics-*.pickle"))


def test_the_server_ends_with_the_process_that_started_it(tmp_path):
    code = ("import os, sys; from emu.dsp import forkserver; env = {}; path = forkserver.start(env); "
            "print(path, forkserver._SERVER[0].pid, flush=True)")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                       env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    path, pid = r.stdout.split()
    _wait_for(lambda: not os.path.exists(os.path.dirname(path)), "the server removes its socket's folder")
    _wait_for(lambda: not os.path.exists(f"/proc/{pid}") or open(f"/proc/{pid}/stat").read().split()[2] == "Z",
              "the server exits")
