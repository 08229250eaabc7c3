"""The first code that runs in execute_python's child process (run as a script, not imported).

It isolates the process, then runs the model's code. Order matters: the network namespace, the
privilege drop and the rlimits need ctypes and syscalls that the audit hook forbids afterwards.
Standard library only: the child runs with -I -S, so nothing else is importable.

Layers, each reported back to the parent on the first stderr line:
- rlimits (kernel): address space, CPU seconds, file size, open files, processes, no core files;
- network namespace (kernel, when unshare is permitted): no interface but a down loopback;
- uid drop to nobody (kernel, when started as root): file permissions apply, RLIMIT_NPROC bites;
- no_new_privs (kernel): a setuid binary cannot regain privileges;
- audit hook (in-process, NOT a kernel sandbox): refuses sockets, processes, ctypes, and file
  access outside the scratch directory (reads: scratch + the standard library). It binds all it
  uses before the model's code runs, so rebinding globals or builtins cannot blind it. Known
  gaps: it sees paths, not dir_fd-relative opens; a symlink swapped in by another thread between
  check and use (threads are allowed); anything reachable without an audited event; bytecode
  forged through marshal (imports need marshal.loads): there the kernel layers above must hold.
"""

import json
import os
import resource
import sys
import traceback

_CLONE_NEWUSER = 0x10000000
_CLONE_NEWNET = 0x40000000
_PR_SET_NO_NEW_PRIVS = 38
_NOBODY = 65534

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
_DEVICES = frozenset({"/dev/null", "/dev/urandom", "/dev/random", "/dev/zero"})


def _libc_call(name: str, *args: int) -> bool:
    import ctypes  # only here, before the hook forbids it

    libc = ctypes.CDLL(None, use_errno=True)
    return getattr(libc, name)(*args) == 0


def _world_readable(path: str) -> bool:
    path = os.path.realpath(path)
    while True:
        if os.stat(path).st_mode & 0o005 != 0o005:
            return False
        parent = os.path.dirname(path)
        if parent == path:
            return True
        path = parent


def _isolate(spec: dict) -> dict:
    report = {"network": "audit-hook", "uid": os.getuid(), "no_new_privs": False}
    root = os.geteuid() == 0
    flags = _CLONE_NEWNET if root else _CLONE_NEWUSER | _CLONE_NEWNET
    try:
        if _libc_call("unshare", flags):
            report["network"] = "netns+audit-hook"
    except (OSError, AttributeError):
        pass
    # Dropping to nobody only works where nobody can still read the standard library (a Python
    # under /root cannot); otherwise stay root and rely on the other layers.
    if root and all(_world_readable(p) for p in sys.path if p and os.path.exists(p)):
        os.setgroups([])
        os.setgid(_NOBODY)
        os.setuid(_NOBODY)
        report["uid"] = os.getuid()
    try:
        report["no_new_privs"] = _libc_call("prctl", _PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)
    except (OSError, AttributeError):
        pass
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
    return report


def _install_hook(scratch: str) -> None:
    """The hook may look nothing up at call time: the model's code can rebind module globals
    (sys.modules["__main__"]._BLOCKED_IMPORTS), builtins (builtins.any) and other modules'
    functions (posixpath.abspath, os.fspath), so everything it uses is bound here, before that
    code runs: C functions, immutable constants, and a realpath of its own."""
    roots: list[str] = []
    for p in sys.path:
        if p and os.path.exists(p):
            roots.append(os.path.realpath(p))
    roots.append(scratch)
    read_roots = tuple(roots)
    write_roots = (scratch,)
    blocked_events = _BLOCKED_EVENTS
    blocked_prefixes = _BLOCKED_PREFIXES
    blocked_imports = _BLOCKED_IMPORTS
    write_events = _WRITE_EVENTS
    read_events = _READ_EVENTS
    write_flags = _WRITE_FLAGS
    devices = _DEVICES
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
            if not writes and target not in devices and not inside(target, read_roots):
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
            if not is_instance(args[0], int_type) and not inside(resolve(args[0]), read_roots):
                refuse(f"{event} outside the scratch directory")

    sys.addaudithook(hook)


def main() -> None:
    spec = json.loads(sys.argv[1])
    code = sys.argv[2]
    scratch = os.path.realpath(spec["scratch"])
    os.chdir(scratch)
    report = _isolate(spec)
    sys.stderr.write(spec["marker"] + json.dumps(report) + "\n")
    sys.stderr.flush()
    _install_hook(scratch)
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
