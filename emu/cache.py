"""hwemu's cache folder: $HWEMU_CACHE, default $XDG_CACHE_HOME/hwemu (~/.cache/hwemu). Everything under it can be
rebuilt (compiled objects, converted tables, fetched vendor sources); each user names its own subfolder."""
from __future__ import annotations

import hashlib
import marshal
import os
import pickle
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TypeVar

T = TypeVar("T")


def root(env: Mapping[str, str] = os.environ) -> Path:
    """The cache folder `env` names (the process's environment by default; `{}`: the user's default one)."""
    return Path(env.get("HWEMU_CACHE") or os.path.join(env.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"),
                                                       "hwemu"))


def pickled(path: Path, convert: Callable[[], T]) -> T:
    """What `path` holds, else `convert()`, written there atomically (concurrent processes may convert at once; an
    unwritable cache only costs the conversion next time)."""
    try:
        with open(path, "rb") as f:
            return pickle.load(f)
    except (OSError, EOFError, pickle.UnpicklingError, AttributeError, ImportError):
        pass
    out = convert()
    write(path, pickle.dumps(out, protocol=pickle.HIGHEST_PROTOCOL))
    return out


def sealed(path: Path, convert: Callable[[], T]) -> T:
    """Like `pickled`, for plain data (marshal: ints, strings, tuples, lists, None) kept under its SHA-256: a file that
    was cut short or damaged is converted anew, never read as something else."""
    try:
        data = path.read_bytes()
        if hashlib.sha256(data[32:]).digest() == data[:32]:
            return marshal.loads(data[32:])
    except (OSError, EOFError, ValueError, TypeError):
        pass
    out = convert()
    body = marshal.dumps(out)
    write(path, hashlib.sha256(body).digest() + body)
    return out


def write(path: Path, data: bytes) -> None:
    """`data` into `path`, atomically (a temporary file renamed); an unwritable cache is skipped."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".tmp{os.getpid()}")
        tmp.write_bytes(data)
        os.replace(tmp, path)
    except OSError:
        pass
