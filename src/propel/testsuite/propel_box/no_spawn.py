"""No new processes, threads allowed: what a graded child of value grading applies to itself before model code runs.

``RLIMIT_NPROC`` 0 kept a graded child from starting processes, but Linux counts threads against the same limit, so
honest code that used a ``ThreadPoolExecutor`` failed. The rule is about processes, so it is enforced on the system
calls that make one: a seccomp filter (inherited by every thread, never lifted) refuses ``fork``, ``vfork``,
``execve``, ``execveat`` and a ``clone`` without ``CLONE_THREAD`` with ``EPERM`` (``os.fork``, ``subprocess``,
``multiprocessing`` and ``os.system`` all end there), answers ``clone3`` with ``ENOSYS`` (its flags sit in memory a
filter cannot read; the C library then falls back to ``clone``, whose flags it can), and refuses every system call
of another ABI (32-bit or x32 entry points that would bypass the numbers above). Threads stay capped by the kernel:
the child keeps its job's process limit (``RLIMIT_NPROC`` of the job's own uid or user namespace; the container's
pids cgroup under Docker), which counts the runner and every thread of the child, and its address space (each
thread's stack counts). Nothing is patched in the child's Python: a thread pool runs as in a plain run.
"""

import ctypes
import errno
import platform
import struct
import sys

_SECCOMP_SET_MODE_FILTER, _SECCOMP_FILTER_FLAG_TSYNC = 1, 1
_PR_SET_NO_NEW_PRIVS = 38
_RET_ALLOW, _RET_ERRNO = 0x7FFF0000, 0x00050000
_LD_W_ABS, _JEQ, _JGE, _JSET, _RET = 0x20, 0x15, 0x35, 0x45, 0x06
_CLONE_THREAD = 0x00010000
_X32_BIT = 0x40000000
# machine -> (audit arch, seccomp syscall, clone, clone3, refused with EPERM)
_ARCH = {
    "x86_64": (0xC000003E, 317, 56, 435, (57, 58, 59, 322)),  # fork, vfork, execve, execveat
    "aarch64": (0xC00000B7, 277, 220, 435, (221, 281)),  # execve, execveat (no fork or vfork syscall)
}


def _op(code, k, jt=0, jf=0):
    return struct.pack("HBBI", code, jt, jf, k)


def _program(machine):
    """The classic-BPF filter for ``machine`` (seccomp_data: nr at 0, arch at 4, args[0] from 16, little-endian)."""
    arch, _, clone, clone3, refused = _ARCH[machine]
    deny, nosys = _RET_ERRNO | errno.EPERM, _RET_ERRNO | errno.ENOSYS
    ops = [_op(_LD_W_ABS, 4), _op(_JEQ, arch, 1, 0), _op(_RET, deny), _op(_LD_W_ABS, 0)]
    if machine == "x86_64":
        ops += [_op(_JGE, _X32_BIT, 0, 1), _op(_RET, deny)]
    ops += [_op(_JEQ, clone3, 0, 1), _op(_RET, nosys)]
    for nr in refused:
        ops += [_op(_JEQ, nr, 0, 1), _op(_RET, deny)]
    ops += [_op(_JEQ, clone, 1, 0), _op(_RET, _RET_ALLOW)]
    ops += [_op(_LD_W_ABS, 16), _op(_JSET, _CLONE_THREAD, 0, 1), _op(_RET, _RET_ALLOW), _op(_RET, deny)]
    return b"".join(ops)


def forbid_processes():
    """Install the filter on this process (all its threads); True when it is in force, False where the kernel or
    architecture does not allow it (the caller then forbids processes and threads alike, ``RLIMIT_NPROC`` 0)."""
    machine = platform.machine()
    if machine not in _ARCH or not sys.platform.startswith("linux"):
        return False
    program = _program(machine)
    filters = ctypes.create_string_buffer(program, len(program))

    class _Prog(ctypes.Structure):
        _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]

    prog = _Prog(len(program) // 8, ctypes.cast(filters, ctypes.c_void_p))
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        return False
    seccomp = _ARCH[machine][1]
    flags = _SECCOMP_FILTER_FLAG_TSYNC
    return libc.syscall(seccomp, _SECCOMP_SET_MODE_FILTER, flags, ctypes.byref(prog)) == 0


def apply():
    """Processes forbidden, threads kept; where the filter cannot be installed, ``RLIMIT_NPROC`` 0 (no new process
    and no thread, as before). Returns whether threads are allowed."""
    if forbid_processes():
        return True
    import resource

    resource.setrlimit(resource.RLIMIT_NPROC, (0, 0))
    return False
