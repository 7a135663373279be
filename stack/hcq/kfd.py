"""The process's view of /dev/kfd: the device file, the sysfs topology, counted ioctls.

Everything goes through a file-I/O interface (stack.hcq.fileio): the operating system's or a mock's.

    kfd = Kfd.open(io)                  # one per interface (a process opens /dev/kfd once)
    kfd.nodes                           # GPU nodes of the topology, in node order (CPU nodes skipped)
    kfd.ioctl("ALLOC_MEMORY_OF_GPU", args)
"""
from __future__ import annotations

import ctypes
import os
from collections import Counter
from dataclasses import dataclass

from stack.hcq import kfd_ioctl as k

TOPOLOGY = "/sys/devices/virtual/kfd/kfd/topology/nodes"
GC_HWID, SDMA0_HWID, NBIF_HWID = 11, 42, 108  # IP discovery hardware ids (amdgpu discovery.h)


@dataclass(frozen=True)
class Node:
    """A GPU node of the KFD topology."""
    index: int  # N in topology/nodes/N
    gpu_id: int
    props: dict[str, int]

    @property
    def gfx_version(self) -> tuple[int, int, int]:
        v = self.props["gfx_target_version"]
        return v // 10000, v // 100 % 100, v % 100

    @property
    def arch(self) -> str:
        major, minor, stepping = self.gfx_version
        return f"gfx{major}{minor:x}{stepping:x}"

    @property
    def xccs(self) -> int:
        return self.props.get("num_xcc", 1) or 1

    @property
    def cu_count(self) -> int:
        return self.props["simd_count"] // self.props["simd_per_cu"] // self.xccs

    @property
    def se_count(self) -> int:
        return self.props["array_count"] // self.props["simd_arrays_per_engine"] // self.xccs


def parse_properties(text: str, where: str) -> dict[str, int]:
    out = {}
    for line in text.splitlines():
        if not line.strip():
            continue
        key, _, value = line.partition(" ")
        try:
            out[key] = int(value)
        except ValueError:
            raise ValueError(f"{where}: line {line!r} is not 'key integer'") from None
    return out


class Kfd:
    """/dev/kfd of one file-I/O interface, opened once per process (per interface)."""
    _opened: dict[type, Kfd] = {}

    @classmethod
    def open(cls, io: type) -> Kfd:
        if io not in cls._opened:
            cls._opened[io] = cls(io)
        return cls._opened[io]

    def __init__(self, io: type):
        self.io = io
        self.ioctls: Counter[str] = Counter()
        self.file = io("/dev/kfd", os.O_RDWR)
        ver = self.ioctl("GET_VERSION", k.GetVersion())
        self.version = (ver.major_version, ver.minor_version)
        if self.version[0] != k.KFD_IOCTL_MAJOR_VERSION:
            raise OSError(f"/dev/kfd interface {self.version[0]}.{self.version[1]}: only major version "
                          f"{k.KFD_IOCTL_MAJOR_VERSION} is supported")
        self.nodes = self._topology()
        self.runtime_enabled = False
        self.events = None  # the event page (a Buffer), allocated with the first GPU's events
        self._render: dict[int, object] = {}

    def acquire(self, node: Node):
        """The GPU's render node, opened and bound to this process's GPU VM (ACQUIRE_VM) once; RUNTIME_ENABLE
        once per process on interface 1.14+."""
        if node.gpu_id not in self._render:
            render = self.io(f"/dev/dri/renderD{node.props['drm_render_minor']}", os.O_RDWR)
            self.ioctl("ACQUIRE_VM", k.AcquireVm(drm_fd=render.fd, gpu_id=node.gpu_id))
            self._render[node.gpu_id] = render
            if self.version >= (1, 14) and not self.runtime_enabled:
                self.ioctl("RUNTIME_ENABLE", k.RuntimeEnable(mode_mask=k.RUNTIME_ENABLE_MODE_ENABLE_MASK))
                self.runtime_enabled = True
        return self._render[node.gpu_id]

    def ioctl(self, name: str, args):
        """Issue KFD ioctl `name` with `args` (updated in place and returned); errors raise OSError(errno)."""
        self.ioctls[name] += 1
        self.file.ioctl(k.REQUEST[name], args)
        return args

    def read(self, path: str) -> str:
        return self.io(path).read()

    def _topology(self) -> list[Node]:
        names = self.io(TOPOLOGY).listdir()
        nodes = []
        for n in sorted(int(x) for x in names if x.isdigit()):
            gpu_id = int(self.read(f"{TOPOLOGY}/{n}/gpu_id"))
            if gpu_id:
                nodes.append(Node(n, gpu_id, parse_properties(self.read(f"{TOPOLOGY}/{n}/properties"),
                                                              f"{TOPOLOGY}/{n}/properties")))
        return nodes

    def ip_version(self, node: Node, hwid: int) -> tuple[int, int, int]:
        """(major, minor, revision) of IP block `hwid` from the render node's ip_discovery."""
        base = f"/sys/class/drm/renderD{node.props['drm_render_minor']}/device/ip_discovery/die/0/{hwid}/0"
        return tuple(int(self.read(f"{base}/{f}")) for f in ("major", "minor", "revision"))

    def apertures(self, gpu_id: int) -> k.ProcessDeviceApertures:
        """This process's LDS/scratch/GPUVM apertures on gpu_id (GET_PROCESS_APERTURES_NEW)."""
        args = self.ioctl("GET_PROCESS_APERTURES_NEW", k.GetProcessAperturesNew())
        table = (k.ProcessDeviceApertures * max(args.num_of_nodes, 1))()
        args.kfd_process_device_apertures_ptr = ctypes.addressof(table)
        self.ioctl("GET_PROCESS_APERTURES_NEW", args)
        for ap in table[:args.num_of_nodes]:
            if ap.gpu_id == gpu_id:
                return ap
        raise OSError(f"GET_PROCESS_APERTURES_NEW lists no apertures for gpu_id {gpu_id}")
