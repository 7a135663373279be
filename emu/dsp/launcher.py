"""What hwemu's qemu-hexagon shims run (`python -I -S launcher.py [qemu options] PROGRAM [ARGS...]`): hand the
program to the fork server that $HWEMU_DSP_SERVER names (emu.dsp.forkserver, which has its protocol) and exit as
its child does; without a server, run `python -m emu.dsp` here. It imports only built-in modules, so that it
starts in a few milliseconds.
"""
import _signal
import _socket
import os
import struct
import sys

_FORWARDED = (_signal.SIGINT, _signal.SIGTERM, _signal.SIGHUP)
_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def pythonpath(env) -> str:
    """`env`'s PYTHONPATH with this hwemu first."""
    return os.pathsep.join(p for p in (_ROOT, env.get("PYTHONPATH")) if p)


def _alone(args: list) -> None:
    """Run the program in this process's place, on a fresh interpreter."""
    env = {**os.environ, "PYTHONPATH": pythonpath(os.environ)}
    os.execve(sys.executable, [sys.executable, "-m", "emu.dsp", *args], env)


def _connect(path: str):
    sock = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
    try:
        sock.connect(path)
    except OSError:
        sock.close()
        return None
    return sock


def _recv_result(sock) -> bytes:
    out = b""
    while len(out) < 8:
        try:
            chunk = sock.recv(8 - len(out))
        except InterruptedError:
            continue
        if not chunk:
            break
        out += chunk
    return out


def request(cwd: bytes, argv: list, env: dict) -> bytes:
    """The request for the server (emu.dsp.forkserver's protocol)."""
    body = b"\0".join([cwd, str(len(argv)).encode(), *argv, *(k + b"=" + v for k, v in env.items())])
    return len(body).to_bytes(4, "big") + body


def main(args: list) -> None:
    path = os.environ.get("HWEMU_DSP_SERVER")
    sock = _connect(path) if path else None
    if sock is None:
        _alone(args)
    for sig in _FORWARDED:
        _signal.signal(sig, lambda s, _: sock.send(bytes([s])))
    data = request(os.fsencode(os.getcwd()), [os.fsencode(a) for a in (sys.argv[0], *args)], dict(os.environb))
    sent = sock.sendmsg([data], [(_socket.SOL_SOCKET, _socket.SCM_RIGHTS, struct.pack("3i", 0, 1, 2))])
    sock.sendall(data[sent:])
    result = _recv_result(sock)
    if len(result) < 8:
        os.write(2, b"hwemu: the Hexagon fork server ended the program without its status (see its report)\n")
        os._exit(125)
    kind, value = struct.unpack("!ii", result)
    if kind == 1:  # the child died of a signal: so does this process
        _signal.signal(value, _signal.SIG_DFL)
        os.kill(os.getpid(), value)
        os._exit(128 + value)
    os._exit(value & 0xFF)


if __name__ == "__main__":
    main(sys.argv[1:])
