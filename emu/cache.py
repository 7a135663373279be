"""hwemu's cache folder: $HWEMU_CACHE, default $XDG_CACHE_HOME/hwemu (~/.cache/hwemu). Everything under it can be
rebuilt (compiled objects, converted tables, fetched vendor sources); each user names its own subfolder."""
from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path


def root(env: Mapping[str, str] = os.environ) -> Path:
    """The cache folder `env` names (the process's environment by default; `{}`: the user's default one)."""
    return Path(env.get("HWEMU_CACHE") or os.path.join(env.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"),
                                                       "hwemu"))
