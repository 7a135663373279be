"""hwemu's cache folder: $HWEMU_CACHE, default $XDG_CACHE_HOME/hwemu (~/.cache/hwemu). Everything under it can be
rebuilt (compiled objects, converted tables, fetched vendor sources); each user names its own subfolder."""
from __future__ import annotations

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
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".tmp{os.getpid()}")
        with open(tmp, "wb") as f:
            pickle.dump(out, f, protocol=pickle.HIGHEST_PROTOCOL)
        os.replace(tmp, path)
    except OSError:
        pass
    return out
