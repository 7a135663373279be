"""Run at interpreter start by programs under `hwemu run` (this directory is put first on PYTHONPATH): lets
tinygrad find hwemu's mock interface, then runs the sitecustomize this one shadows, if there is one."""
import importlib.machinery
import importlib.util
import os
import sys

try:
    from emu.os import tinygrad

    tinygrad.install()
except ImportError:  # hwemu is not importable by this interpreter: nothing to install
    pass

_here = os.path.dirname(os.path.abspath(__file__))
_rest = [p for p in sys.path if os.path.abspath(p or ".") != _here]
_spec = importlib.machinery.PathFinder.find_spec("sitecustomize", _rest)
if _spec is not None and _spec.loader is not None:
    _spec.loader.exec_module(importlib.util.module_from_spec(_spec))
