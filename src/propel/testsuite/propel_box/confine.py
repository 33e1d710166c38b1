"""What a graded child applies to itself before any model-written code runs: rlimits, and a Landlock file-system
ruleset the process can never lift.

Landlock (Linux >= 5.13, unprivileged, inherited by every thread and any child) turns "the tests are read-only to
the graded code" from a permission bit the sandbox uid owns (and could flip back) into a kernel rule: only the
``read`` paths can be opened for reading (and listed), only the ``write`` paths can be created, written, truncated,
renamed or removed, and nothing else on the file system is reachable at all, ``/proc`` of the runner included. A
second call stacks a stricter layer (the pytest runner hides the test folder once pytest has read it). On a kernel
without Landlock the child runs without it and says so (``landlock_abi`` 0 in its records).
"""

import ctypes
import os
import resource
import signal

_SYS_CREATE_RULESET, _SYS_ADD_RULE, _SYS_RESTRICT_SELF = 444, 445, 446  # the same numbers on x86_64 and aarch64
_PR_SET_NO_NEW_PRIVS = 38
_RULE_PATH_BENEATH = 1
_EXECUTE, _WRITE_FILE, _READ_FILE, _READ_DIR = 1 << 0, 1 << 1, 1 << 2, 1 << 3
_REMOVE_DIR, _REMOVE_FILE, _MAKE_CHAR, _MAKE_DIR, _MAKE_REG = 1 << 4, 1 << 5, 1 << 6, 1 << 7, 1 << 8
_MAKE_SOCK, _MAKE_FIFO, _MAKE_BLOCK, _MAKE_SYM = 1 << 9, 1 << 10, 1 << 11, 1 << 12
_REFER, _TRUNCATE, _IOCTL_DEV = 1 << 13, 1 << 14, 1 << 15
_FILE_RIGHTS = _EXECUTE | _WRITE_FILE | _READ_FILE | _TRUNCATE | _IOCTL_DEV
"""The rights Landlock accepts on a rule for a single file (the others only make sense beneath a directory)."""
READ = _EXECUTE | _READ_FILE | _READ_DIR
"""Read a tree: open files for reading, list folders, run programs (the interpreter's shared libraries)."""


_SCOPE_ABSTRACT_UNIX_SOCKET, _SCOPE_SIGNAL = 1 << 0, 1 << 1
SCOPED_ABI = 6
"""From this ABI on, a ruleset also scopes signals and abstract unix sockets to the process's own domain."""


class _RulesetAttr(ctypes.Structure):
    _fields_ = [("handled_access_fs", ctypes.c_uint64), ("handled_access_net", ctypes.c_uint64)]
    _fields_ += [("scoped", ctypes.c_uint64)]


class _PathBeneath(ctypes.Structure):
    _pack_ = 1
    _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


def _libc():
    return ctypes.CDLL(None, use_errno=True)


def landlock_abi():
    """The kernel's Landlock ABI version, 0 when Landlock is unavailable (old kernel, disabled, or seccomp-blocked)."""
    try:
        version = _libc().syscall(_SYS_CREATE_RULESET, None, ctypes.c_size_t(0), ctypes.c_uint32(1))
    except (OSError, AttributeError):
        return 0
    return max(0, int(version))


def _handled(abi):
    rights = (1 << 13) - 1  # ABI 1: execute .. make_sym
    if abi >= 2:
        rights |= _REFER
    if abi >= 3:
        rights |= _TRUNCATE
    if abi >= 5:
        rights |= _IOCTL_DEV
    return rights


def restrict(read=(), write=(), read_write_files=(), list_only=()):
    """Allow only ``read`` trees (read/list/execute), ``write`` trees (everything), ``read_write_files`` (single
    files such as ``/dev/null``) and ``list_only`` trees (folders listed, no file opened) from now on, for this
    process and whatever it starts; from ABI 6, signals and abstract unix sockets reach only processes of the same
    domain. Paths that do not exist are skipped. Returns the ABI version applied (0: Landlock unavailable, nothing
    restricted)."""
    abi = landlock_abi()
    if abi <= 0:
        return 0
    libc, handled = _libc(), _handled(abi)
    # signals and abstract sockets stay inside the domain: the runner, its other children and whatever an earlier
    # graded child left behind are out of reach (the kernel checks the zero tail on an older ABI)
    attr = _RulesetAttr(handled, 0, _SCOPE_SIGNAL | _SCOPE_ABSTRACT_UNIX_SOCKET if abi >= SCOPED_ABI else 0)
    ruleset = libc.syscall(_SYS_CREATE_RULESET, ctypes.byref(attr), ctypes.c_size_t(ctypes.sizeof(attr)), 0)
    if ruleset < 0:
        return 0
    try:
        rules = [(p, READ) for p in read] + [(p, handled) for p in write]
        rules += [(p, _READ_FILE | _WRITE_FILE | _TRUNCATE) for p in read_write_files]
        rules += [(p, _READ_DIR) for p in list_only]
        for path, rights in rules:
            try:
                fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
            except OSError:
                continue
            try:
                if not os.path.isdir(path):
                    rights &= _FILE_RIGHTS
                rule = _PathBeneath(rights & handled, fd)
                if libc.syscall(_SYS_ADD_RULE, ruleset, _RULE_PATH_BENEATH, ctypes.byref(rule), 0) != 0:
                    err = ctypes.get_errno()
                    raise OSError(err, f"landlock_add_rule({path}): {os.strerror(err)}")
            finally:
                os.close(fd)
        if libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "prctl(PR_SET_NO_NEW_PRIVS)")
        if libc.syscall(_SYS_RESTRICT_SELF, ruleset, 0) != 0:
            err = ctypes.get_errno()
            raise OSError(err, f"landlock_restrict_self: {os.strerror(err)}")
    finally:
        os.close(ruleset)
    return abi


def runtime_paths():
    """What an interpreter needs to keep importing the standard library: the system runtime folders and the
    interpreter's own installation (read-only)."""
    import sys

    paths = ["/usr", "/lib", "/lib64", "/lib32", "/bin", "/etc"]
    for prefix in {sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix}:
        if prefix and not any(prefix == p or prefix.startswith(p + "/") for p in paths):
            paths.append(prefix)
    return [p for p in paths if os.path.exists(p)]


def apply_limits(limits, max_processes=0):
    """rlimits of a graded child: address space, CPU seconds, largest file, and no new processes (``RLIMIT_NPROC``
    0: nothing it starts can outlive it and touch the next submission). Linux counts threads against the same
    limit, so a suite whose own tests start threads (a repository's) passes ``max_processes`` > 0; the pytest
    runner then kills whatever a child left running before the next suite starts. ``max_processes`` None leaves the
    job's own limit: the child forbids new processes itself and keeps its threads (``no_spawn``)."""
    if max_processes is not None:
        resource.setrlimit(resource.RLIMIT_NPROC, (max_processes, max_processes))
    if limits.get("max_file_bytes"):
        resource.setrlimit(resource.RLIMIT_FSIZE, (limits["max_file_bytes"],) * 2)
    resource.setrlimit(resource.RLIMIT_AS, (limits["memory_mb"] << 20,) * 2)
    cpu = int(limits["timeout_s"]) + 1
    resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu))
    signal.signal(signal.SIGXFSZ, signal.SIG_DFL)
