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
  access outside the scratch directory (reads: scratch + the standard library). Known gaps: it
  sees paths, not dir_fd-relative opens; a symlink swapped in by another thread between check
  and use (threads are allowed); anything reachable without an audited event.
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
     "resource.prlimit", "sys.remote_exec", "pty.spawn", "webbrowser.open", "sys.setprofile"}
)  # fmt: skip
_BLOCKED_PREFIXES = ("ctypes.", "socket.", "_ctypes", "winreg.", "syslog.")
_BLOCKED_IMPORTS = frozenset({"ctypes", "_ctypes", "_posixsubprocess", "_socket", "socket", "ssl"})
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
    stdlib = (os.path.realpath(p) for p in sys.path if p and os.path.exists(p))
    read_roots = (*stdlib, scratch)
    realpath = os.path.realpath
    fspath = os.fspath
    fsdecode = os.fsdecode
    sep = os.sep

    def inside(path: str, roots: tuple) -> bool:
        return any(path == r or path.startswith(r + sep) for r in roots)

    def resolve(path: object) -> str:
        return realpath(fsdecode(fspath(path)))  # relative paths: against cwd, the scratch

    def refuse(what: str) -> None:
        raise PermissionError(f"sandbox: {what} is not allowed")

    def hook(event: str, args: tuple) -> None:
        if event == "open":
            path, mode, flags = args
            if isinstance(path, int):
                return
            target = resolve(path)
            writes = bool(flags & _WRITE_FLAGS) or any(c in (mode or "") for c in "wax+")
            if writes and not inside(target, (scratch,)):
                refuse(f"writing {target} (only the scratch directory is writable)")
            if not writes and target not in _DEVICES and not inside(target, read_roots):
                refuse(f"reading {target} (only the scratch directory and the standard library)")
        elif event in _BLOCKED_EVENTS or event.startswith(_BLOCKED_PREFIXES):
            refuse(event)
        elif event == "import" and args[0].partition(".")[0] in _BLOCKED_IMPORTS:
            refuse(f"importing {args[0]}")
        elif event in _WRITE_EVENTS or event == "os.chdir":
            if not isinstance(args[0], int) and not inside(resolve(args[0]), (scratch,)):
                refuse(f"{event} outside the scratch directory")
        elif event == "os.rename":
            for p in args[:2]:
                if not inside(resolve(p), (scratch,)):
                    refuse("renaming outside the scratch directory")
        elif event in _READ_EVENTS and args and args[0] is not None:
            if not isinstance(args[0], int) and not inside(resolve(args[0]), read_roots):
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
