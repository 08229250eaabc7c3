"""The first code that runs in execute_python's child process (run as a script, not imported).

It builds the sandbox, then runs the model's code, or refuses to. Standard library only: the
child runs with -I -S, so nothing else is importable (not even annie_voice). Order matters:
ctypes and syscalls are needed to build the kernel layers, and the audit hook forbids them
afterwards.

The decision "may the code run" rests on a kernel-enforced boundary, one of:
- Landlock (preferred): the process may read the interpreter's standard library, the system
  library directory of libc and the loader (extension modules in lib-dynload load libz,
  libcrypto, libffi... from there, through the dynamic loader, which the audit hook never sees)
  and the time-zone database; read and write its scratch directory and /dev/null; open nothing
  else: /proc, /etc, /root, the venv and the data folders stay shut however the path is spelled
  (dir_fd, symlinks, ..). It may execute no file at all, connect or bind no TCP port (ABI 4+),
  and signal or reach abstract UNIX sockets outside its domain (ABI 6+). Landlock does not hide
  metadata (stat, existence of paths) and, up to ABI 7, does not cover UDP or connecting to
  pathname UNIX sockets: seccomp below does (and the network namespace, for UDP); where
  seccomp cannot be installed, only the audit hook stands there.
- uid drop plus network namespace (when Landlock is missing): started as root, the child
  becomes nobody (only when nobody can still read the standard library) inside a network
  namespace with nothing but a down loopback; file permissions then guard the rest.
Neither: the child reports why and exits before compiling the model's code (the parent then
leaves execute_python out of the model's tools).

Extra layers, reported beside the boundary on the first stderr line:
- seccomp (kernel, when installable): no socket(), no new processes (clone without
  CLONE_THREAD, fork, vfork; clone3 reads as missing so threads fall back to clone), no
  execve, no io_uring. It also covers what Landlock leaves open: pathname UNIX sockets and,
  as root, forking (RLIMIT_NPROC does not bind root);
- network namespace whenever unshare is permitted, even beside Landlock;
- rlimits: address space, CPU seconds, file size, open files, processes (non-root only), no
  core files;
- no_new_privs: a setuid binary cannot regain privileges (also required by Landlock/seccomp);
- audit hook (in-process, NOT a kernel layer): refuses sockets, processes, ctypes, and file
  access outside the scratch directory with a readable message. Known gaps, which the kernel
  layers cover: dir_fd-relative opens (it resolves paths against the cwd), a symlink swapped in
  between check and use, anything reachable without an audited event, bytecode forged through
  marshal.

The parent may switch layers off through the spec (`disable`, for tests that prove each layer
alone holds, or that the child refuses without a boundary); the model's code cannot reach it.
"""

import json
import os
import resource
import stat
import struct
import sys
import time
import traceback

_CLONE_NEWUSER = 0x10000000
_CLONE_NEWNET = 0x40000000
_CLONE_THREAD = 0x00010000
_PR_SET_NO_NEW_PRIVS = 38
_NOBODY = 65534
REFUSED_EXIT = 3  # no kernel boundary: the model's code did not run

# Landlock: syscalls 444-446 are in the generic table (x86_64 and aarch64 alike).
_SYS_LANDLOCK_CREATE_RULESET = 444
_SYS_LANDLOCK_ADD_RULE = 445
_SYS_LANDLOCK_RESTRICT_SELF = 446
_LANDLOCK_CREATE_RULESET_VERSION = 1
_LANDLOCK_RULE_PATH_BENEATH = 1
_FS_EXECUTE = 1 << 0
_FS_WRITE_FILE = 1 << 1
_FS_READ_FILE = 1 << 2
_FS_READ_DIR = 1 << 3
_FS_REMOVE_DIR = 1 << 4
_FS_REMOVE_FILE = 1 << 5
_FS_MAKE_DIR = 1 << 7
_FS_MAKE_REG = 1 << 8
_FS_REFER = 1 << 13  # ABI 2
_FS_TRUNCATE = 1 << 14  # ABI 3
_FS_IOCTL_DEV = 1 << 15  # ABI 5
_FS_V1 = (1 << 13) - 1  # EXECUTE .. MAKE_SYM
_NET_BIND_TCP = 1 << 0  # ABI 4
_NET_CONNECT_TCP = 1 << 1
_SCOPE_ABSTRACT_UNIX_SOCKET = 1 << 0  # ABI 6
_SCOPE_SIGNAL = 1 << 1
# rights a rule on a regular file (not a directory) may carry
_FS_FILE_RIGHTS = _FS_EXECUTE | _FS_WRITE_FILE | _FS_READ_FILE | _FS_TRUNCATE | _FS_IOCTL_DEV
_FS_READ = _FS_READ_FILE | _FS_READ_DIR
# no MAKE_SYM (a link out is refused when made, not only when followed), no devices, no EXECUTE
_FS_SCRATCH = (
    _FS_READ | _FS_WRITE_FILE | _FS_REMOVE_DIR | _FS_REMOVE_FILE | _FS_MAKE_DIR | _FS_MAKE_REG
    | _FS_REFER | _FS_TRUNCATE
)  # fmt: skip
_ZONEINFO = ("/usr/share/zoneinfo", "/usr/lib/zoneinfo", "/usr/share/lib/zoneinfo")
_DEVICES = ("/dev/null", "/dev/urandom", "/dev/random", "/dev/zero")

# seccomp
_PR_SET_SECCOMP = 22
_SECCOMP_MODE_FILTER = 2
_SECCOMP_RET_ALLOW = 0x7FFF0000
_SECCOMP_RET_ERRNO = 0x00050000
_SECCOMP_RET_KILL_PROCESS = 0x80000000
_EPERM = 1
_ENOSYS = 38
# (audit arch, socket, clone, execve, execveat, [fork, vfork]); clone3 435, io_uring_setup 425
_SECCOMP_ARCHES = {
    "x86_64": (0xC000003E, 41, 56, 59, 322, (57, 58)),
    "aarch64": (0xC00000B7, 198, 220, 221, 281, ()),
}

_BLOCKED_EVENTS = frozenset(
    {"os.fork", "os.forkpty", "os.system", "os.exec", "os.posix_spawn", "os.spawn",
     "subprocess.Popen", "os.kill", "os.killpg", "os.symlink", "os.link", "os.chroot",
     "os.chown", "os.lchown", "os.setxattr", "os.removexattr", "resource.setrlimit",
     "resource.prlimit", "sys.remote_exec", "pty.spawn", "webbrowser.open", "sys.setprofile",
     # reaching the hook's own objects (to rebind its closure) or forging bytecode
     "sys.settrace", "gc.get_objects", "gc.get_referrers", "gc.get_referents", "code.__new__",
     "sys._current_frames"}
)  # fmt: skip
_BLOCKED_PREFIXES = ("ctypes.", "socket.", "_ctypes", "winreg.", "syslog.")
# subinterpreters start without this process's audit hooks; _testcapi and friends poke memory
_BLOCKED_IMPORTS = frozenset(
    {"ctypes", "_ctypes", "_posixsubprocess", "_socket", "socket", "ssl", "_xxsubinterpreters",
     "_xxinterpchannels", "_testcapi", "_testinternalcapi", "_testmultiphase", "_testbuffer",
     "_testimportmultiple", "_testclinic"}
)  # fmt: skip
# events whose first argument is a path that will be changed
_WRITE_EVENTS = frozenset(
    {"os.mkdir", "os.rmdir", "os.remove", "os.truncate", "os.utime", "os.chmod", "os.chflags",
     "os.lchflags", "os.lchmod", "os.mkfifo", "os.mknod"}
)  # fmt: skip
_READ_EVENTS = frozenset({"os.listdir", "os.scandir", "os.listxattr", "os.getxattr", "glob.glob"})
_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND
# what the probe imports under the finished sandbox: the modules the model reaches for
_PROBE_IMPORTS = (
    "json", "math", "datetime", "decimal", "statistics", "collections", "re", "fractions",
    "random", "hashlib", "zlib", "csv", "zoneinfo",
)  # fmt: skip


class _Libc:
    """syscall/prctl/unshare through ctypes, every argument passed at full width."""

    def __init__(self) -> None:
        import ctypes  # only here, before the hook forbids it

        self.ctypes = ctypes
        self.lib = ctypes.CDLL(None, use_errno=True)
        self.lib.syscall.restype = ctypes.c_long

    def syscall(self, number: int, *args: object) -> tuple[int, int]:
        c = self.ctypes
        wide = [a if isinstance(a, c._SimpleCData | c.Array) else c.c_long(a) for a in args]
        c.set_errno(0)
        result = self.lib.syscall(c.c_long(number), *wide)
        return result, c.get_errno()

    def call(self, name: str, *args: int) -> tuple[int, int]:
        c = self.ctypes
        c.set_errno(0)
        result = getattr(self.lib, name)(*[c.c_ulong(a) for a in args])
        return result, c.get_errno()


def _errno_text(err: int) -> str:
    return f"{os.strerror(err)} (errno {err})"


def _landlock_unavailable(err: int) -> str:
    why = {
        38: "not built into this kernel",  # ENOSYS
        95: "disabled at boot (add landlock to the lsm= kernel parameter)",  # EOPNOTSUPP
        1: "the syscalls are blocked (a seccomp profile such as a container runtime's)",  # EPERM
    }
    return f"Landlock unavailable: {why.get(err, _errno_text(err))}"


def _system_library_dirs() -> list[str]:
    """The directories of the C library and the dynamic loader this process has mapped.

    Extension modules in lib-dynload link system libraries (libz, libcrypto, libffi, libbz2)
    that the dynamic loader finds beside libc; without read access there, `import zlib` or
    `hashlib` would fail once Landlock is on (the loader's opens are not audit events, so the
    hook never cared). Read-only, public files. Found in /proc/self/maps rather than assumed:
    /lib/x86_64-linux-gnu, /usr/lib/aarch64-linux-gnu, /lib (musl)... Other mapped objects
    (libpython3.11.so, say) are already loaded and need no access: their directory may hold
    more than libraries (site-packages beside a shared libpython)."""
    dirs: set[str] = set()
    with open("/proc/self/maps") as maps:
        for line in maps:
            fields = line.rstrip("\n").split(None, 5)
            if len(fields) < 6 or not fields[5].startswith("/"):
                continue
            path = os.path.realpath(fields[5])
            name = os.path.basename(path)
            if name.startswith(("libc.so", "ld-")) and os.path.isfile(path):
                parent = os.path.dirname(path)
                if parent != "/":  # never open up the root for a library found there
                    dirs.add(parent)
    return sorted(dirs)


def _existing(paths: list[str] | tuple[str, ...]) -> list[str]:
    return [os.path.realpath(p) for p in paths if p and os.path.exists(p)]


def _landlock(libc: _Libc, scratch: str, read_roots: list[str]) -> tuple[int | None, str]:
    """Build a ruleset for this process; (ruleset fd, description) or (None, why not).
    Applied by _restrict after no_new_privs."""
    abi, err = libc.syscall(
        _SYS_LANDLOCK_CREATE_RULESET, libc.ctypes.c_void_p(None), 0,
        _LANDLOCK_CREATE_RULESET_VERSION,
    )  # fmt: skip
    if abi < 0:
        return None, _landlock_unavailable(err)
    fs = _FS_V1
    if abi >= 2:
        fs |= _FS_REFER
    if abi >= 3:
        fs |= _FS_TRUNCATE
    if abi >= 5:
        fs |= _FS_IOCTL_DEV
    attr = [fs]
    parts = ["fs"]
    if abi >= 4:
        attr.append(_NET_BIND_TCP | _NET_CONNECT_TCP)  # handled, and no rule: no TCP at all
        parts.append("no tcp")
    if abi >= 6:
        attr.append(_SCOPE_ABSTRACT_UNIX_SOCKET | _SCOPE_SIGNAL)
        parts.append("scoped")
    # the struct grew with the ABI: pass exactly the fields this kernel knows
    raw = (libc.ctypes.c_uint64 * len(attr))(*attr)
    ruleset, err = libc.syscall(_SYS_LANDLOCK_CREATE_RULESET, raw, libc.ctypes.sizeof(raw), 0)
    if ruleset < 0:
        return None, f"Landlock ruleset refused: {_errno_text(err)}"
    rules = [(p, _FS_READ) for p in read_roots + _system_library_dirs()]
    rules.append((scratch, _FS_SCRATCH))
    rules += [(d, _FS_READ_FILE | (_FS_WRITE_FILE | _FS_TRUNCATE if d == "/dev/null" else 0))
              for d in _DEVICES if os.path.exists(d)]  # fmt: skip
    for path, access in rules:
        problem = _add_rule(libc, ruleset, path, access & fs)
        if problem:
            os.close(ruleset)
            return None, problem
    return ruleset, f"landlock abi {abi} ({', '.join(parts)})"


def _add_rule(libc: _Libc, ruleset: int, path: str, access: int) -> str | None:
    try:
        fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
    except OSError as exc:
        return f"Landlock rule for {path}: {exc}"
    try:
        if not stat.S_ISDIR(os.fstat(fd).st_mode):
            access &= _FS_FILE_RIGHTS  # a file rule may carry file rights only
        # struct landlock_path_beneath_attr is packed: u64 allowed_access, s32 parent_fd
        attr = libc.ctypes.create_string_buffer(struct.pack("=Qi", access, fd), 12)
        result, err = libc.syscall(
            _SYS_LANDLOCK_ADD_RULE, ruleset, _LANDLOCK_RULE_PATH_BENEATH, attr, 0
        )
        return None if result == 0 else f"Landlock rule for {path}: {_errno_text(err)}"
    finally:
        os.close(fd)


def _seccomp(libc: _Libc) -> str:
    """Install the seccomp filter; "on" or why not."""
    arch = _SECCOMP_ARCHES.get(os.uname().machine)
    if arch is None:
        return f"off (no filter for {os.uname().machine})"
    audit_arch, nr_socket, nr_clone, nr_execve, nr_execveat, nr_forks = arch

    def stmt(code: int, k: int) -> tuple[int, int, int, int]:
        return (code, 0, 0, k)

    ld_w_abs, jeq_k, jset_k, ret_k = 0x20, 0x15, 0x45, 0x06
    eperm = _SECCOMP_RET_ERRNO | _EPERM
    denied = [nr_socket, nr_execve, nr_execveat, 425, *nr_forks]  # 425: io_uring_setup
    prog: list[tuple[int, int, int, int]] = [
        stmt(ld_w_abs, 4),  # seccomp_data.arch
        (jeq_k, 1, 0, audit_arch),
        stmt(ret_k, _SECCOMP_RET_KILL_PROCESS),
        stmt(ld_w_abs, 0),  # seccomp_data.nr
    ]
    if audit_arch == 0xC000003E:  # x32 syscalls (nr | 0x40000000) alias the blocked ones
        prog += [(0x35, 0, 1, 0x40000000), stmt(ret_k, eperm)]  # jge
    # clone3 passes its flags in memory a filter cannot read: say it is missing, so glibc
    # falls back to clone, whose flags are in a register
    prog += [(jeq_k, 0, 1, 435), stmt(ret_k, _SECCOMP_RET_ERRNO | _ENOSYS)]
    for nr in denied:
        prog += [(jeq_k, 0, 1, nr), stmt(ret_k, eperm)]
    prog += [
        (jeq_k, 0, 3, nr_clone),
        stmt(ld_w_abs, 16),  # args[0] (clone flags), low word on little-endian
        (jset_k, 1, 0, _CLONE_THREAD),
        stmt(ret_k, eperm),  # a new process
        stmt(ret_k, _SECCOMP_RET_ALLOW),
    ]
    if sys.byteorder != "little":
        return "off (big-endian)"
    c = libc.ctypes
    filters = c.create_string_buffer(b"".join(struct.pack("=HBBI", *s) for s in prog))

    class SockFprog(c.Structure):
        _fields_ = (("len", c.c_ushort), ("filter", c.c_void_p))

    fprog = SockFprog(len(prog), c.cast(filters, c.c_void_p))
    c.set_errno(0)
    result = libc.lib.prctl(
        c.c_int(_PR_SET_SECCOMP), c.c_ulong(_SECCOMP_MODE_FILTER), c.byref(fprog),
        c.c_ulong(0), c.c_ulong(0),
    )  # fmt: skip
    return "on" if result == 0 else f"off ({_errno_text(c.get_errno())})"


def _world_readable(path: str) -> bool:
    path = os.path.realpath(path)
    while True:
        if os.stat(path).st_mode & 0o005 != 0o005:
            return False
        parent = os.path.dirname(path)
        if parent == path:
            return True
        path = parent


def _isolate(spec: dict, scratch: str, stdlib: list[str], read_roots: list[str]) -> dict:
    """Build every layer the kernel allows; the report says which and names the boundary."""
    off = frozenset(spec.get("disable", ()))
    libc = _Libc()
    time.localtime()  # glibc reads /etc/localtime once, now, while it still can
    report: dict = {"boundary": None, "uid": os.getuid()}
    root = os.geteuid() == 0

    netns = False
    if "netns" not in off:
        flags = _CLONE_NEWNET if root else _CLONE_NEWUSER | _CLONE_NEWNET
        netns = libc.call("unshare", flags)[0] == 0

    ruleset, report["landlock"] = (
        (None, "Landlock disabled by the parent")
        if "landlock" in off
        else _landlock(libc, scratch, read_roots)
    )

    # nobody must still be able to read the standard library (a Python under /root cannot)
    dropped = False
    if root and "uid_drop" not in off and all(_world_readable(p) for p in stdlib):
        os.setgroups([])
        os.setgid(_NOBODY)
        os.setuid(_NOBODY)
        dropped = os.getuid() == _NOBODY and os.geteuid() == _NOBODY
        report["uid"] = os.getuid()

    report["no_new_privs"] = libc.call("prctl", _PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)[0] == 0
    landlock = False
    if ruleset is not None:
        if not report["no_new_privs"]:
            report["landlock"] = "not applied: no_new_privs could not be set"
        else:
            result, err = libc.syscall(_SYS_LANDLOCK_RESTRICT_SELF, ruleset, 0)
            landlock = result == 0
            if not landlock:
                report["landlock"] = f"not applied: {_errno_text(err)}"
        os.close(ruleset)
    report["seccomp"] = "disabled" if "seccomp" in off else _seccomp(libc)

    limits = {
        resource.RLIMIT_AS: spec["memory_bytes"],
        resource.RLIMIT_CPU: spec["cpu_seconds"],
        resource.RLIMIT_FSIZE: spec["file_bytes"],
        resource.RLIMIT_NOFILE: 64,
        resource.RLIMIT_CORE: 0,
        resource.RLIMIT_NPROC: spec["processes"],
    }
    for which, value in limits.items():
        resource.setrlimit(which, (value, value))
    sys.modules.pop("ctypes", None)
    sys.modules.pop("_ctypes", None)

    tcp_off = landlock and "no tcp" in report["landlock"]
    report["network"] = (
        "+".join([*(["netns"] if netns else []), *(["landlock-tcp"] if tcp_off else [])])
        or "not isolated"
    )
    if landlock:
        report["boundary"] = "landlock"
    elif dropped and netns:
        report["boundary"] = "uid+netns"
    else:
        report["reason"] = (
            f"no kernel-enforced sandbox: {report['landlock']}; and no uid drop plus network "
            f"namespace ({_no_drop_reason(root, dropped, off)}; network namespace "
            f"{'available' if netns else 'disabled' if 'netns' in off else 'refused'})"
        )
    return report


def _no_drop_reason(root: bool, dropped: bool, off: frozenset) -> str:
    if dropped:
        return "dropped to nobody"
    if "uid_drop" in off:
        return "uid drop disabled"
    if not root:
        return "not started as root, so no other uid to drop to"
    return "the standard library is not readable by nobody"


def _self_check(read_roots: list[str]) -> str | None:
    """Under the finished sandbox (probe mode): the stdlib works and the parent's secrets
    do not. None if all is well, else what is wrong."""
    for name in _PROBE_IMPORTS:
        try:
            __import__(name)
        except Exception as exc:
            return f"import {name} fails inside the sandbox: {exc!r}"
    try:
        with open(f"/proc/{os.getppid()}/environ", "rb") as f:
            f.read(1)
    except OSError:
        return None
    return "the parent's /proc/<pid>/environ is readable inside the sandbox"


def _install_hook(scratch: str, read_roots: list[str]) -> None:
    """The hook may look nothing up at call time: the model's code can rebind module globals
    (sys.modules["__main__"]._BLOCKED_IMPORTS), builtins (builtins.any) and other modules'
    functions (posixpath.abspath, os.fspath), so everything it uses is bound here, before that
    code runs: C functions, immutable constants, and a realpath of its own."""
    read_roots_t = (*read_roots, scratch)
    write_roots = (scratch,)
    blocked_events = _BLOCKED_EVENTS
    blocked_prefixes = _BLOCKED_PREFIXES
    blocked_imports = _BLOCKED_IMPORTS
    write_events = _WRITE_EVENTS
    read_events = _READ_EVENTS
    write_flags = _WRITE_FLAGS
    devices = frozenset(_DEVICES)
    lstat = os.lstat  # posix C functions: rebinding os.lstat later does not change these
    readlink = os.readlink
    getcwd = os.getcwd
    fspath = os.fspath
    is_instance = isinstance
    str_type = str
    int_type = int
    denied = PermissionError
    sep = os.sep
    link_bits = 0o120000

    def inside(path: str, where: tuple) -> bool:
        for r in where:
            if path == r or path.startswith(r + sep):
                return True
        return False

    def resolve(path: object) -> str:
        """realpath with no global lookups (relative paths: against the cwd)."""
        raw = fspath(path)
        text = raw if is_instance(raw, str_type) else raw.decode("utf-8", "surrogateescape")
        if not text.startswith(sep):
            text = getcwd() + sep + text
        pending = text.split(sep)
        pending.reverse()
        parts: list[str] = []
        hops = 0
        while pending:
            name = pending.pop()
            if name == "" or name == ".":
                continue
            if name == "..":
                if parts:
                    parts.pop()
                continue
            candidate = sep + sep.join([*parts, name])
            try:
                mode = lstat(candidate).st_mode
            except OSError:
                parts.append(name)  # missing: judged by its name, as realpath does
                continue
            if mode & 0o170000 != link_bits:
                parts.append(name)
                continue
            hops += 1
            if hops > 40:
                raise denied("sandbox: too many symbolic links")
            target = readlink(candidate)
            if target.startswith(sep):
                parts = []
            more = target.split(sep)
            more.reverse()
            pending.extend(more)
        return sep + sep.join(parts)

    def refuse(what: str) -> None:
        raise denied(f"sandbox: {what} is not allowed")

    def hook(event: str, args: tuple) -> None:
        if event == "open":
            path, mode, flags = args
            if is_instance(path, int_type):
                return
            target = resolve(path)
            writes = flags & write_flags != 0
            for c in mode or "":
                if c in "wax+":
                    writes = True
            if writes and not inside(target, write_roots):
                refuse(f"writing {target} (only the scratch directory is writable)")
            if not writes and target not in devices and not inside(target, read_roots_t):
                refuse(f"reading {target} (only the scratch directory and the standard library)")
        elif event in blocked_events or event.startswith(blocked_prefixes):
            refuse(event)
        elif event == "import" and args[0].partition(".")[0] in blocked_imports:
            refuse(f"importing {args[0]}")
        elif event in write_events or event == "os.chdir":
            if not is_instance(args[0], int_type) and not inside(resolve(args[0]), write_roots):
                refuse(f"{event} outside the scratch directory")
        elif event == "os.rename":
            for p in args[:2]:
                if not inside(resolve(p), write_roots):
                    refuse("renaming outside the scratch directory")
        elif event in read_events and args and args[0] is not None:
            if not is_instance(args[0], int_type) and not inside(resolve(args[0]), read_roots_t):
                refuse(f"{event} outside the scratch directory")

    sys.addaudithook(hook)


def _report(spec: dict, report: dict) -> None:
    sys.stderr.write(spec["marker"] + json.dumps(report) + "\n")
    sys.stderr.flush()


def main() -> None:
    spec = json.loads(sys.argv[1])
    code = sys.argv[2]
    scratch = os.path.realpath(spec["scratch"])
    os.chdir(scratch)
    stdlib = _existing(sys.path)  # the -I -S child's sys.path: the standard library only
    read_roots = stdlib + _existing(_ZONEINFO)
    report = _isolate(spec, scratch, stdlib, read_roots)
    if spec.get("probe") and report["boundary"] is not None:
        problem = _self_check(read_roots)
        if problem is not None:
            report["boundary"] = None
            report["reason"] = f"the sandbox does not hold: {problem}"
    _report(spec, report)
    if report["boundary"] is None:
        sys.stderr.write(f"sandbox: refusing to run code: {report['reason']}\n")
        sys.exit(REFUSED_EXIT)
    if spec.get("probe"):
        return
    if "audit_hook" not in spec.get("disable", ()):
        _install_hook(scratch, read_roots)
    del sys.argv[1:]
    namespace = {"__name__": "__main__", "__builtins__": __builtins__}
    try:
        exec(compile(code, "<annie>", "exec"), namespace)  # noqa: S102  (running it is the point)
    except SystemExit:
        raise
    except BaseException as exc:
        # the model needs its own frames, not this script's
        traceback.print_exception(type(exc), exc, exc.__traceback__.tb_next)
        sys.exit(1)


if __name__ == "__main__":
    main()
