"""hwemu's host runtime: `Device` drives a GPU through KFD (real or mock) like a GPU runtime does."""
from stack.device import Device, Program, parse_dev
from stack.hcq.memory import Buffer
from stack.hcq.signal import GPUError

__all__ = ["Device", "Program", "Buffer", "GPUError", "parse_dev"]
