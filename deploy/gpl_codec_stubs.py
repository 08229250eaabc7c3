"""Take the GPL video encoders out of an installed Python environment (ADR 0027).

PyAV's wheels (`av`: faster-whisper's audio decoding and Annie's WebRTC stack) vendor FFmpeg,
built LGPL, together with libx264 and libx265 (GPL-2.0-or-later), which libavcodec links for
its H.264/HEVC encoders. her-os never encodes video, and PyPI has no PyAV wheel without them
(every version aiortc accepts was checked), so the image build replaces each with a stub:
a small library of our own with the same SONAME that exports every symbol the other
libraries import from it. Each stub function returns 0 (NULL), so opening those encoders
fails with an FFmpeg error; libx265's API table is a table of such functions, because FFmpeg
calls through it before it can notice a missing encoder. Nothing else changes: audio,
decoders and the LGPL parts of FFmpeg are PyAV's own files.

Run by the Python images' Dockerfiles with the image's interpreter (standard library only;
the stubs need a C compiler and binutils, present in the build stage only):

    python deploy/gpl_codec_stubs.py /app/.venv/lib/python3.11/site-packages
    python deploy/gpl_codec_stubs.py --check /app/.venv/lib/python3.11/site-packages

The first replaces every GPL codec library found (a stub already there is kept), then proves
in a fresh interpreter that PyAV still imports, still encodes and decodes audio, and refuses
the stubbed encoders; `--check` only fails (exit 1) if a GPL codec library that is not a stub
is installed, needing no compiler.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

# The GPL-only codec libraries PyAV's wheels vendor (ADR 0027).
GPL_CODECS = ("x264", "x265")
# An exported symbol of every stub (and so a string in it): how a stub is told from the real
# library without binutils.
MARKER = "her_os_gpl_codec_stub"
# libx265 is reached through the table x265_api_get_<build>() returns (ADR 0027).
API_TABLE = re.compile(r"^x265_api_get(_\d+)?$")
API_SLOTS = 128  # more than x265's struct x265_api has members

SMOKE = """
import fractions, sys
import av

site = sys.argv[1]
assert av.__file__.startswith(site), (av.__file__, site)
# Audio through libavcodec: 20 ms of audio to Opus (WebRTC's codec) and back.
enc = av.CodecContext.create("libopus", "w")
enc.sample_rate, enc.layout, enc.format = 48000, "mono", "s16"
frame = av.AudioFrame(format="s16", layout="mono", samples=960)
frame.sample_rate, frame.pts = 48000, 0
size = frame.planes[0].buffer_size
frame.planes[0].update((bytes(range(256)) * (size // 256 + 1))[:size])
packets = enc.encode(frame) + enc.encode(None)
dec = av.CodecContext.create("opus", "r")
decoded = [f for p in packets for f in dec.decode(p)]
assert packets and decoded and decoded[0].samples > 0, (packets, decoded)
for name in ("libx264", "libx265"):
    if name not in av.codecs_available:
        continue
    ctx = av.CodecContext.create(name, "w")
    ctx.width, ctx.height, ctx.pix_fmt = 64, 64, "yuv420p"
    ctx.time_base = fractions.Fraction(1, 25)
    try:
        ctx.open()
    except av.FFmpegError:
        continue
    raise SystemExit(f"{name} opened: it is not the stub")
print("av ok:", av.__version__)
"""


def gpl_libraries(site: Path) -> list[Path]:
    """Every GPL codec library file under `site` (real or stub), e.g. av.libs/libx264-*.so.*."""
    name = re.compile(rf"^lib({'|'.join(GPL_CODECS)})[-.].*\.so(\.|$)")
    return sorted(p for p in site.rglob("lib*.so*") if p.is_file() and name.match(p.name))


def is_stub(path: Path) -> bool:
    return MARKER.encode() in path.read_bytes()


def _run(*args: str) -> str:
    return subprocess.run(args, capture_output=True, text=True, check=True).stdout  # noqa: S603 - fixed argv


def _is_elf(path: Path) -> bool:
    with path.open("rb") as f:
        return f.read(4) == b"\x7fELF"


def soname(path: Path) -> str:
    found = re.search(
        r"\(SONAME\)\s+Library soname: \[([^\]]+)\]", _run("readelf", "-dW", str(path))
    )
    if not found:
        raise SystemExit(f"{path} has no SONAME")
    return found.group(1)


def needed(path: Path) -> set[str]:
    return set(
        re.findall(r"\(NEEDED\)\s+Shared library: \[([^\]]+)\]", _run("readelf", "-dW", str(path)))
    )


def imports(path: Path) -> set[str]:
    return {
        line.split()[-1] for line in _run("nm", "-D", "--undefined-only", str(path)).splitlines()
    }


def exports(path: Path) -> dict[str, tuple[bool, int]]:
    """name -> (is a function, size in bytes) of the dynamic symbols `path` defines."""
    out: dict[str, tuple[bool, int]] = {}
    for line in _run("nm", "-D", "--defined-only", "-S", str(path)).splitlines():
        fields = line.split()
        if len(fields) == 4:  # value size type name
            size, kind, name = int(fields[1], 16), fields[2], fields[3]
        elif len(fields) == 3:  # value type name (no size)
            size, kind, name = 0, fields[1], fields[2]
        else:
            continue
        out[name.split("@")[0]] = (kind in "Tti", size)
    return out


def stub_source(library: str, symbols: dict[str, tuple[bool, int]]) -> str:
    """C for a stub of `library` exporting `symbols` (name -> (is a function, size))."""
    lines = [
        f"/* Generated by deploy/gpl_codec_stubs.py in place of {library} (ADR 0027). */",
        f'const char {MARKER}[] = "her-os: {library} removed; this stub only refuses";',
        "static long refuse(void) { return 0; }",
        f"static void *const api[{API_SLOTS}] = {{ [0 ... {API_SLOTS - 1}] = (void *)refuse }};",
    ]
    for name, (function, size) in sorted(symbols.items()):
        if not function:
            lines.append(f"char {name}[{max(size, 8)}] __attribute__((aligned(64)));")
        elif API_TABLE.match(name):
            lines.append(f"const void *{name}(void) {{ return api; }}")
        else:
            lines.append(f"long {name}(void) {{ return 0; }}")
    return "\n".join(lines) + "\n"


def build_stub(real: Path, consumers: list[Path], workdir: Path) -> Path:
    """A stub for `real`: its SONAME, and every symbol that `consumers` import from it."""
    name = soname(real)
    wanted = set().union(*(imports(c) for c in consumers)) if consumers else set()
    symbols = {s: v for s, v in exports(real).items() if s in wanted}
    source = workdir / f"{real.name}.c"
    source.write_text(stub_source(real.name, symbols), encoding="utf-8")
    out = workdir / real.name
    cc = os.environ.get("CC", "cc")
    subprocess.run(  # noqa: S603 - argv is built here, no shell
        [cc, "-shared", "-fPIC", "-O2", "-nostdlib", "-fno-stack-protector",
         f"-Wl,-soname,{name}", "-o", str(out), str(source)],
        check=True,
    )  # fmt: skip
    missing = symbols.keys() - exports(out).keys()
    if soname(out) != name or missing or not is_stub(out):
        raise SystemExit(f"the stub for {real} is incomplete: {sorted(missing)}")
    return out


def same_wheel(site: Path, library: Path) -> list[Path]:
    """The other ELF files of the wheel that vendors `library`: its package folder and the
    `<package>.libs` folder auditwheel puts vendored libraries in (their SONAMEs carry a hash,
    so nothing outside the wheel can link them)."""
    top = library.relative_to(site).parts[0].removesuffix(".libs")
    files = [p for d in (site / top, site / f"{top}.libs") if d.is_dir() for p in d.rglob("*.so*")]
    return [p for p in files if p.is_file() and p != library and _is_elf(p)]


def replace(site: Path) -> list[Path]:
    """Replace every real GPL codec library under `site` with a stub; the replaced paths."""
    targets = [p for p in gpl_libraries(site) if not is_stub(p)]
    with tempfile.TemporaryDirectory(prefix="gpl-codec-stubs-") as tmp:
        for real in targets:
            name = soname(real)
            consumers = [p for p in same_wheel(site, real) if name in needed(p)]
            stub = build_stub(real, consumers, Path(tmp))
            staged = real.with_name(f".{real.name}.stub")
            shutil.copyfile(stub, staged)
            staged.chmod(real.stat().st_mode & 0o777)
            os.replace(staged, real)
            print(f"replaced {real.relative_to(site)} ({len(consumers)} users) with a stub")
    return targets


def smoke(site: Path) -> None:
    """PyAV from `site`, in a fresh interpreter: imports, does audio, refuses the stubs."""
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(site), os.environ.get("PYTHONPATH", "")]),
    }
    done = subprocess.run(  # noqa: S603 - our interpreter, no shell
        [sys.executable, "-c", SMOKE, str(site)],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise SystemExit(f"PyAV does not work with the stubs:\n{done.stdout}{done.stderr}")
    print(done.stdout.strip())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("site", type=Path, help="a site-packages folder")
    parser.add_argument("--check", action="store_true", help="only fail if a GPL codec is there")
    args = parser.parse_args(argv)
    site: Path = args.site.resolve()
    if not site.is_dir():
        parser.error(f"{site} is not a folder")
    if args.check:
        real = [p for p in gpl_libraries(site) if not is_stub(p)]
        for path in real:
            print(f"GPL codec library installed: {path}", file=sys.stderr)
        return 1 if real else 0
    replace(site)
    if (site / "av").is_dir():
        smoke(site)
    else:
        print("no PyAV here; nothing to check")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
