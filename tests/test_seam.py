"""The native seam (emu/seam, docs/seam.md): an LD_PRELOAD library through which programs that are not Python reach
the mock GPUs by libc's calls, as they reach amdkfd. The clients are C programs compiled here with the system's cc
against this machine's linux/kfd_ioctl.h, run under `hwemu run`."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from emu.seam import build

ROOT = Path(__file__).resolve().parent.parent
SEAM_TESTS = Path(__file__).parent / "seam"
# every call the seam interposes, with the 64-bit and fortified variants
INTERPOSED = {"open", "open64", "openat", "openat64", "__open_2", "__open64_2", "__openat_2", "__openat64_2", "close",
              "ioctl", "mmap", "mmap64", "dup", "dup2", "dup3", "fcntl", "fcntl64", "fopen", "fopen64", "opendir",
              "access", "readlink", "realpath", "stat", "stat64", "lstat", "lstat64", "fstat", "fstat64", "fstatat",
              "fstatat64", "statx", "__xstat", "__xstat64", "__lxstat", "__lxstat64", "__fxstat", "__fxstat64",
              "exit", "__libc_start_main",  # exit: the in-process Python finishes first
              "dlsym"}  # lookups in libc's own handle (ctypes.CDLL("libc.so.6")) find the interposers


@pytest.fixture(scope="module")
def library() -> Path:
    try:
        return build.library()
    except build.BuildError as e:
        pytest.skip(str(e))


def compile_c(source: Path, out: Path) -> Path:
    cc = shutil.which("cc")
    if cc is None or not Path("/usr/include/linux/kfd_ioctl.h").exists():
        pytest.skip("needs cc and linux/kfd_ioctl.h (Debian: gcc, linux-libc-dev)")
    subprocess.run([cc, "-O1", "-Wall", "-Werror", "-I", str(SEAM_TESTS / "include"), str(source), "-o", str(out)],
                   check=True)
    return out


def hwemu_run(*argv: str, env: dict[str, str] | None = None, timeout: float = 600) -> subprocess.CompletedProcess:
    env = {**{k: v for k, v in os.environ.items() if k != "DEV"}, **(env or {}),
           "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    return subprocess.run([sys.executable, "-m", "emu.cli", "run", *argv], env=env, capture_output=True, text=True,
                          timeout=timeout)


def exited(r: subprocess.CompletedProcess, done: bool) -> None:
    """A native client's exit, once `done` says it finished its work: status 0, no signal."""
    assert done, r.stdout[-3000:] + r.stderr[-3000:]
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]


def test_exports_the_interposed_calls_and_loads_python_only_when_asked(library):
    nm = subprocess.run(["nm", "-D", "--defined-only", str(library)], capture_output=True, text=True, check=True)
    exported = {line.split()[-1] for line in nm.stdout.splitlines()}
    assert exported == INTERPOSED  # the transport's functions stay inside
    ldd = subprocess.run(["ldd", str(library)], capture_output=True, text=True, check=True).stdout
    assert "libpython" not in ldd  # dlopen()ed on a process's first mock open, not by every program under hwemu run


def test_raw_kfd_client(library, tmp_path):
    client = compile_c(SEAM_TESTS / "kfd_client.c", tmp_path / "kfd_client")
    r = hwemu_run("--arch", "gfx1100", "--", str(client))
    assert r.returncode == 0, r.stdout + r.stderr
    steps = r.stdout.splitlines()
    assert all(s.startswith("ok ") for s in steps) and steps[-1] == "ok close", r.stdout
    assert "EFAULT: unmapped argument" in r.stdout.replace("ok ", "")


FILL = """__attribute__((reqd_work_group_size(64, 1, 1)))
__kernel void fill(__global uint *out, uint add) {
  uint i = __builtin_amdgcn_workgroup_id_x() * 64 + __builtin_amdgcn_workitem_id_x();
  out[i] = 3 * i + add;
}"""


@pytest.mark.skipif(not shutil.which("clang-19"), reason="needs clang-19 (llvm-19) for the kernel")
@pytest.mark.parametrize("arch, wave", [("gfx90a", 64), ("gfx1100", 32)])  # clang's default wave size for each
def test_c_client_runs_a_kernel_on_an_aql_queue(library, tmp_path, arch, wave):
    """The C client loads a clang-19 code object itself, creates an AQL queue, rings its doorbell and waits on the
    completion signal's KFD event; it checks out[i] = 3 i + 17 for all 1,024 work-items."""
    from stack.codegen.opencl import compile_cl
    client = compile_c(SEAM_TESTS / "kfd_client.c", tmp_path / "kfd_client")
    (tmp_path / "fill.co").write_bytes(compile_cl(FILL, arch))
    r = hwemu_run("--arch", arch, "--", str(client), str(tmp_path / "fill.co"), "fill", env={"HWEMU_STATS": "1"})
    assert "ok kernel results" in r.stdout and r.stdout.splitlines()[-1] == "ok close", r.stdout + r.stderr
    # HWEMU_STATS reports at the C program's exit, as at a Python program's
    assert f"MOCKKFD with 1 emulated {arch}:" in r.stderr, r.stderr
    assert f" 1 dispatches, {1024 // wave} waves," in r.stderr, r.stderr
    exited(r, True)


@pytest.mark.skipif(not shutil.which("clang-19"), reason="needs clang-19 (llvm-19) for the kernel")
def test_a_client_leaving_with_a_dispatch_in_flight_exits_as_it_chose(library, tmp_path):
    """The C client rings the doorbell of a dispatch and leaves at once, the queue and descriptors open, the mock GPU's
    engine and compile threads busy: by returning from main, exit(), _exit() or returning with an exit handler that
    then waits for the dispatch and checks its results. Each run exits with the client's status and no signal (the
    seam's exit ends hwemu's threads before the libraries' exit handlers and destructors run; docs/seam.md)."""
    from stack.codegen.opencl import compile_cl
    client = compile_c(SEAM_TESTS / "kfd_client.c", tmp_path / "kfd_client")
    (tmp_path / "fill.co").write_bytes(compile_cl(FILL, "gfx90a"))
    for run in range(3):  # the threads are at another point of their work each time: every run's verdict is exact
        for how, status in (("return", 0), ("exit", 5), ("_exit", 6), ("atexit", 7)):
            r = hwemu_run("--arch", "gfx90a", "--", str(client), str(tmp_path / "fill.co"), "fill", how, str(status))
            assert r.returncode == status, f"run {run}, {how}: {r.returncode}\n{r.stdout[-2000:]}{r.stderr[-2000:]}"
            if how == "atexit":  # the engine ran the dispatch for the client's exit handler
                assert r.stdout.splitlines()[-1] == "ok DESTROY_QUEUE", r.stdout[-2000:]


def test_tinygrad_with_plain_dev_amd(library):
    """tinygrad's own KFD interface (DEV=AMD, no mock hook): os.open, fcntl.ioctl and its libc binding's mmap
    (looked up in libc's handle: the seam's dlsym) reach the mock GPU."""
    pytest.importorskip("tinygrad")
    r = hwemu_run("--arch", "gfx1100", "--", sys.executable, "-c",
                  "from tinygrad import Tensor; print((Tensor([1, 2, 3]) + 1).tolist())",
                  env={"DEV": "AMD", "HWEMU_STATS": "1"})
    assert r.returncode == 0, r.stderr[-3000:]
    assert r.stdout.strip() == "[2, 3, 4]" and "MOCKKFD with 1 emulated gfx1100" in r.stderr


def test_topology_files_are_read_by_libc_itself(library):
    """Programs that only read the topology (cat, ls: opendir, open, stat) see the mock's, and start no Python."""
    r = hwemu_run("--arch", "gfx90a", "--gpus", "2", "--", "sh", "-c",
                  "cat /sys/class/kfd/kfd/topology/nodes/2/name; ls /sys/devices/virtual/kfd/kfd/topology/nodes; "
                  "test -c /dev/kfd && test -c /dev/dri/renderD129 && echo nodes")
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["gfx90a", "0", "1", "2", "nodes"]


def test_render_node_answers_what_libdrm_amdgpu_asks():
    """drmGetVersion's DRM_IOCTL_VERSION as drm_copy_field fills it (each string cut to the caller's length, the length
    then set to the string's: amdgpu_drv.c's "amdgpu", "20150101", "AMD GPU"), and DRM_IOCTL_AMDGPU_INFO at the
    kernel's 32-byte struct size, READ_MMR_REG of GB_ADDR_CONFIG included (what libdrm reads on gfx9 and later)."""
    import ctypes
    import errno
    import struct

    from emu.amd import drm, target
    chip, name = target.get("gfx90a"), ctypes.create_string_buffer(3)
    arg = ctypes.create_string_buffer(struct.pack("<iii4xQQQQQQ", 0, 0, 0, 3, ctypes.addressof(name), 0, 0, 0, 0), 64)
    assert drm.ioctl(chip, 0xC0406400, arg) == 0  # _IOWR('d', 0x00, struct drm_version)
    major, _, _, name_len, _, date_len, _, desc_len, _ = struct.unpack("<iii4xQQQQQQ", arg.raw)
    assert (major, name.raw, name_len, date_len, desc_len) == (3, b"amd", 6, 8, 7)
    value = ctypes.c_uint32()
    info = ctypes.create_string_buffer(struct.pack("<QIIIIII", ctypes.addressof(value), 4, 0x15, 0x263E, 1, 0xFFFFFFFF,
                                                   0))
    assert drm.ioctl(chip, 0x40206445, info) == 0  # _IOW('d', 0x45, 32 bytes)
    from emu.os import interface
    from stack.hcq import kfd_ioctl as k
    system = interface("gfx90a", 1).system
    tiles = k.GetTileConfig(gpu_id=system.gpus[0].gpu_id)
    system.kfd.ioctl(k.REQUEST["GET_TILE_CONFIG"], tiles, {})
    assert value.value == tiles.gb_addr_config != 0  # the driver reports one GB_ADDR_CONFIG through both
    for register, count in ((0x263D, 1), (0x263E, 0), (0x263E, 129)):
        info = ctypes.create_string_buffer(struct.pack("<QIIIIII", ctypes.addressof(value), 4, 0x15, register, count,
                                                       0xFFFFFFFF, 0))
        with pytest.raises(OSError) as e:
            drm.ioctl(chip, 0x40206445, info)
        assert e.value.errno == errno.EINVAL


def test_a_chip_hwemu_does_not_emulate_is_named(library):
    r = hwemu_run("--arch", "gfx9999", "--", "true")
    assert r.returncode == 2 and r.stderr.startswith("hwemu run: no KFD topology for 'gfx9999'"), r.stderr


def test_missing_compiler_is_named(tmp_path, monkeypatch):
    monkeypatch.setenv("HWEMU_CACHE", str(tmp_path))
    monkeypatch.setenv("CC", "/nonexistent/cc")
    with pytest.raises(build.BuildError, match="no C compiler .*/nonexistent/cc"):
        build.library()


def test_rocminfo_lists_the_emulated_gfx90a(library):
    """Debian's ROCm 5.2 runtime (libhsakmt, libhsa-runtime64) through the seam: the topology, libdrm_amdgpu's device
    setup on the render node, the VM, the event page, the system memory pool."""
    if shutil.which("rocminfo") is None:
        pytest.skip("needs Debian's rocminfo (ROCm 5.2.3; ./dev installs it as root)")
    r = hwemu_run("--arch", "gfx90a", "--", "rocminfo")
    assert "Device Type:             GPU" in r.stdout, r.stdout[-2000:] + r.stderr[-2000:]
    gpu = r.stdout[r.stdout.index("Device Type:             GPU") - 800:]
    assert "Name:                    gfx90a" in gpu and "amdgcn-amd-amdhsa--gfx90a" in gpu
    assert "Compute Unit:            104" in gpu  # an MI210's 104 CUs (emu.amd.target)
    assert "L2:                      8192(0x2000) KB" in gpu  # its 8 MiB L2: a GPU cache (HSACU) in the topology
    assert "Device Type:             CPU" in r.stdout and "FLAGS: KERNARG, FINE GRAINED" in r.stdout  # system memory
    exited(r, r.stdout.rstrip().endswith("*** Done ***"))
