"""The Hexagon fork server: one process that has imported the core and built its tables forks a child per
program, so that a program the qemu-hexagon shims start runs within milliseconds (as under qemu), not after the
few hundred a fresh Python process takes to import and build them.

    start(env) -> str | None   # a server for the programs `env`'s processes start: env[ENV] is its socket

The shims run emu/dsp/launcher.py, which hands the server its program's command line, working folder,
environment and standard streams (SCM_RIGHTS) over the Unix socket that $HWEMU_DSP_SERVER names; the server forks,
the child runs `python -m emu.dsp` on them (emu.dsp.__main__.main) and exits, and the launcher exits with the
child's status (or its signal). A launcher that finds no server runs the program itself. Protocol, on one stream
connection per program:

    launcher -> server: u32 length (big-endian), then cwd NUL argc NUL argv... NUL env entries (NUL-separated),
                        with fds 0, 1, 2 attached to its first bytes
    launcher -> server: a byte per signal it caught (SIGINT, SIGTERM, SIGHUP), forwarded to the child
    server -> launcher: i32 kind, i32 value (big-endian): (0, exit status) or (1, signal number)

A launcher that goes away (its connection closes) takes its child with it (SIGKILL). The server lives as long as
its lifeline, a pipe whose write end the starting process holds: at EOF it kills the children in flight, removes
its socket and exits. HWEMU_DSP_SERVER set but empty: no server.
"""
from __future__ import annotations

import atexit
import gc
import os
import selectors
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import traceback
from collections.abc import MutableMapping
from dataclasses import dataclass, field

from emu.dsp import launcher
from emu.dsp.__main__ import EXIT_INTERRUPTED

ENV = "HWEMU_DSP_SERVER"
MAX_REQUEST = 1 << 20  # bytes of command line and environment
RESULT = struct.Struct("!ii")
EXITED, SIGNALED = 0, 1
FORWARDED = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
_SERVER: tuple[subprocess.Popen, int] | None = None  # this process's server and its lifeline's write end


def start(env: MutableMapping[str, str] = os.environ, *, survive_exec: bool = False) -> str | None:
    """Start a fork server (in `env`) for the programs `env`'s processes start, unless `env` names one (ENV) already;
    its socket's path, also put in env[ENV] (None: it could not start; the shims then run each program alone). It
    lives as long as this process, or with `survive_exec` as long as the program this process execs (and the
    children that keep the lifeline)."""
    global _SERVER
    if ENV in env:
        return env[ENV] or None
    folder = tempfile.mkdtemp(prefix="hwemu-dsp-")
    path = os.path.join(folder, "socket")
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        listener.bind(path)  # bound and listening before the server has imported: early programs queue
        listener.listen(64)
        lifeline, keep = os.pipe()
        try:
            server = subprocess.Popen(
                [sys.executable, "-m", "emu.dsp.forkserver", str(listener.fileno()), str(lifeline), folder],
                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, pass_fds=(listener.fileno(), lifeline),
                start_new_session=True, env={**env, "PYTHONPATH": launcher.pythonpath(env)})
        finally:
            os.close(lifeline)
    except OSError:
        shutil.rmtree(folder, ignore_errors=True)
        return None
    finally:
        listener.close()
    os.set_inheritable(keep, survive_exec)
    _SERVER = (server, keep)  # the lifeline is closed only when this process exits
    env[ENV] = path
    return path


@dataclass
class _Run:
    """A connection: its request while it arrives, then its child."""
    conn: socket.socket
    data: bytearray = field(default_factory=bytearray)
    fds: list[int] = field(default_factory=list)
    pid: int = 0
    pidfd: int = -1


class Server:
    def __init__(self, listener: socket.socket, lifeline: int, folder: str) -> None:
        self.listener, self.lifeline, self.folder = listener, lifeline, folder
        self.sel = selectors.DefaultSelector()
        self.sel.register(listener, selectors.EVENT_READ, self._accept)
        self.sel.register(lifeline, selectors.EVENT_READ, self._lifeline)
        self.runs: dict[int, _Run] = {}  # by connection fd
        self.done = False

    def serve(self) -> None:
        while not self.done:
            for key, _ in self.sel.select():
                key.data(key.fileobj)
        for run in list(self.runs.values()):
            if run.pid:
                os.kill(run.pid, signal.SIGKILL)
                os.waitpid(run.pid, 0)
            self._close(run)
        shutil.rmtree(self.folder, ignore_errors=True)

    def _lifeline(self, _) -> None:
        self.done = True

    def _accept(self, _) -> None:
        try:
            conn, _ = self.listener.accept()
        except OSError:
            return
        conn.setblocking(False)
        run = self.runs[conn.fileno()] = _Run(conn)
        self.sel.register(conn, selectors.EVENT_READ, lambda _: self._readable(run))

    def _readable(self, run: _Run) -> None:
        try:
            data, anc, _, _ = run.conn.recvmsg(1 << 16, socket.CMSG_SPACE(3 * 4))
        except BlockingIOError:
            return
        except OSError:
            data, anc = b"", []
        for level, kind, fds in anc:
            if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
                run.fds += struct.unpack(f"{len(fds) // 4}i", fds[:len(fds) // 4 * 4])
        if run.pid:  # a running program: forwarded signals, or its launcher went away
            for sig in data:
                if sig in FORWARDED:
                    os.kill(run.pid, sig)
            if not data:
                os.kill(run.pid, signal.SIGKILL)  # its pidfd then reports the exit
                self.sel.unregister(run.conn)
            return
        run.data += data
        request = _parse(run.data, run.fds) if data else None
        if not data or len(run.data) > MAX_REQUEST + 4 or request is False:
            return self._close(run)  # went away, or sent what no launcher sends
        if request is not None:
            self._fork(run, *request)

    def _fork(self, run: _Run, cwd: bytes, argv: list[bytes], env: list[bytes]) -> None:
        sys.stdout.flush()
        sys.stderr.flush()
        mask = signal.pthread_sigmask(signal.SIG_BLOCK, FORWARDED)  # held for the child until it has its handlers
        try:
            pid = os.fork()
            if pid == 0:
                self._child(run, cwd, argv, env, mask)
            run.pid = pid
            run.pidfd = os.pidfd_open(pid)
        except OSError as e:  # out of processes or memory: this program is not run, the server goes on
            print(f"hwemu: the Hexagon fork server cannot start {argv[-1:]}: {e}", file=sys.stderr)
            if run.pid:
                os.kill(run.pid, signal.SIGKILL)
                os.waitpid(run.pid, 0)
            return self._close(run)
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, mask)
        for fd in run.fds:
            os.close(fd)
        run.fds = []
        self.sel.register(run.pidfd, selectors.EVENT_READ, lambda _: self._exited(run))

    def _exited(self, run: _Run) -> None:
        _, status = os.waitpid(run.pid, 0)
        result = (SIGNALED, os.WTERMSIG(status)) if os.WIFSIGNALED(status) else (EXITED, os.waitstatus_to_exitcode(
            status))
        try:
            run.conn.setblocking(True)
            run.conn.sendall(RESULT.pack(*result))
        except OSError:
            pass
        self._close(run)

    def _close(self, run: _Run) -> None:
        for f in (run.conn, run.pidfd):
            try:
                self.sel.unregister(f)
            except (KeyError, ValueError):
                pass
        if run.pidfd >= 0:
            os.close(run.pidfd)
        for fd in run.fds:
            os.close(fd)
        self.runs.pop(run.conn.fileno(), None)
        run.conn.close()

    def _child(self, run: _Run, cwd: bytes, argv: list[bytes], env: list[bytes], mask) -> None:
        """In the forked child: become the program's process, run it, exit with its status."""
        status = 1
        try:
            for sig in FORWARDED:
                signal.signal(sig, signal.default_int_handler if sig == signal.SIGINT else signal.SIG_DFL)
            signal.pthread_sigmask(signal.SIG_SETMASK, mask)  # a signal forwarded meanwhile arrives now
            keep = set(run.fds)
            for fd in [self.listener.fileno(), self.lifeline, self.sel.fileno(),  # type: ignore[attr-defined]
                       *(r.conn.fileno() for r in self.runs.values()),
                       *(r.pidfd for r in self.runs.values() if r.pidfd >= 0)]:
                if fd not in keep:
                    os.close(fd)
            for i, fd in enumerate(run.fds[:3]):
                os.dup2(fd, i)
            for fd in run.fds:
                if fd > 2:
                    os.close(fd)
            os.chdir(cwd)
            os.environb.clear()
            os.environb.update(e.partition(b"=")[::2] for e in env)
            sys.argv = [os.fsdecode(a) for a in argv]
            from emu.dsp.__main__ import main
            status = main(sys.argv[1:])
        except SystemExit as e:
            status = e.code if isinstance(e.code, int) else 1
        except KeyboardInterrupt:
            print("hwemu: interrupted before the program started", file=sys.stderr)
            status = EXIT_INTERRUPTED
        except BaseException:  # noqa: BLE001 - the child reports and exits; the server goes on
            traceback.print_exc()
        finally:
            try:
                atexit._run_exitfuncs()  # as a process of its own would at exit (e.g. new semantics to the cache)
                sys.stdout.flush()
                sys.stderr.flush()
            finally:
                os._exit(status)


def _parse(data: bytearray, fds: list[int]) -> tuple[bytes, list[bytes], list[bytes]] | None | bool:
    """A whole request (cwd, argv, env); None: more to come; False: not a request."""
    if len(data) < 4:
        return None
    size = int.from_bytes(data[:4], "big")
    if size > MAX_REQUEST or len(data) > 4 + size:
        return False
    if len(data) < 4 + size:
        return None
    parts = bytes(data[4:]).split(b"\0")
    if len(fds) != 3 or len(parts) < 2 or not parts[1].isdigit() or 2 + int(parts[1]) > len(parts):
        return False
    argc = int(parts[1])
    return parts[0], parts[2:2 + argc], [e for e in parts[2 + argc:] if b"=" in e]


def _preload() -> None:
    """What every program needs, made once: the modules, the instruction table and its decoder, the LLVM engines
    and the native tier's dispatcher."""
    from emu.dsp import __main__, native  # noqa: F401 - imported for the children
    from emu.dsp.core import Thread
    from emu.dsp.isa import load
    from emu.dsp.memory import Memory
    native.make(Thread(load(), Memory()))
    gc.collect()
    gc.freeze()  # the children share these pages instead of copying them at their first collection


def main(argv: list[str]) -> int:
    listener_fd, lifeline, folder = int(argv[0]), int(argv[1]), argv[2]
    listener = socket.socket(fileno=listener_fd)
    # the launchers forward what their programs should get; not SIG_IGN, which the children would inherit, and a
    # signal forwarded to a child before it sets its handlers would be lost
    signal.signal(signal.SIGINT, lambda *_: None)
    try:
        _preload()
    except Exception:  # noqa: BLE001 - the children import what they need themselves
        traceback.print_exc()
    Server(listener, lifeline, folder).serve()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
