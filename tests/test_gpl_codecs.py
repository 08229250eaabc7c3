"""ADR 0027: no GPL codec in the images. deploy/gpl_codec_stubs.py, as the Dockerfiles run it,
on a copy of the installed PyAV (the workspace's own install is never changed): the GPL
libraries become stubs, PyAV still does what her-os needs of it, and the ADR and THIRD-PARTY.md
name what the locked wheel really vendors. (tests/test_dockerfiles.py checks that every image
build runs the script after its last install.)"""

from __future__ import annotations

import importlib.metadata
import os
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path
from types import ModuleType

import av
import pytest
from scripts_harness import load_file

REPO = Path(__file__).resolve().parents[1]
ADR = REPO / "docs" / "adr" / "0027-no-gpl-codecs-in-the-images.md"
SITE = Path(av.__file__).resolve().parent.parent  # the workspace's site-packages
BANNERS = {"libx264": b"H.264/MPEG-4 AVC codec", "libx265": b"H.265/HEVC codec"}


@pytest.fixture(scope="module")
def stubs() -> ModuleType:
    return load_file(REPO / "deploy" / "gpl_codec_stubs.py", "gpl_codec_stubs")


@pytest.fixture(scope="module")
def stubbed(stubs: ModuleType, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A site-packages holding a copy of the installed PyAV, after the script ran on it."""
    site = tmp_path_factory.mktemp("site")
    for name in ("av", "av.libs"):
        shutil.copytree(SITE / name, site / name)
    assert stubs.main([str(site)]) == 0  # replaces, then runs its own check of PyAV
    return site


def plain(path: Path) -> str:
    """A vendored library's name without auditwheel's hash: libx264.so.165."""
    return re.sub(r"-[0-9a-f]{8}(?=\.so)", "", path.name)


def test_the_locked_pyav_vendors_the_gpl_codecs_the_adr_names(stubs: ModuleType) -> None:
    lock = tomllib.loads((REPO / "uv.lock").read_text(encoding="utf-8"))
    locked = next(p["version"] for p in lock["package"] if p["name"] == "av")
    assert importlib.metadata.version("av") == locked
    real = stubs.gpl_libraries(SITE)
    assert real, (
        f"PyAV {locked} vendors no GPL codec any more: deploy/gpl_codec_stubs.py, its "
        "Dockerfile steps and ADR 0027 can go"
    )
    assert not any(stubs.is_stub(p) for p in real)  # the workspace's install is PyPI's wheel
    names = sorted(plain(p) for p in real)
    adr = ADR.read_text(encoding="utf-8")
    assert f"av {locked}" in adr
    for name in names:
        assert name in adr, f"ADR 0027 does not name {name}, which av {locked} vendors"
    row = next(
        line
        for line in (REPO / "THIRD-PARTY.md").read_text(encoding="utf-8").splitlines()
        if line.startswith(f"| av | {locked} |") and ".so" in line
    )
    for name in names:
        assert name.split(".so")[0] in row  # the binaries table lists what the wheel holds
    assert "ADR 0027" in row


def test_the_stubs_keep_the_names_and_drop_the_code(stubs: ModuleType, stubbed: Path) -> None:
    real = {plain(p): p for p in stubs.gpl_libraries(SITE)}
    done = {plain(p): p for p in stubs.gpl_libraries(stubbed)}
    assert done.keys() == real.keys()
    for name, stub in done.items():
        assert stubs.is_stub(stub) and stub.name == real[name].name
        assert stubs.soname(stub) == stubs.soname(real[name])  # libavcodec still finds it
        assert stub.stat().st_size < 64_000 < real[name].stat().st_size
        banner = BANNERS[name.split(".so")[0]]  # each encoder's own banner string
        assert banner in real[name].read_bytes() and banner not in stub.read_bytes()
    assert stubs.main(["--check", str(stubbed)]) == 0
    assert stubs.main(["--check", str(SITE)]) == 1  # the wheel as PyPI ships it
    assert stubs.replace(stubbed) == []  # a second run keeps the stubs


def test_pyav_with_the_stubs_does_what_her_os_needs(stubbed: Path, tmp_path: Path) -> None:
    """faster-whisper's decoder (the audio pipeline and Annie) and aiortc's Opus path (Annie's
    WebRTC) on the stubbed PyAV; H.264 and HEVC encoding refused, not crashed."""
    script = f"""
import fractions, math, struct, wave
import av
assert av.__file__.startswith({str(stubbed)!r}), av.__file__

path = {str(tmp_path / "tone.wav")!r}
with wave.open(path, "wb") as w:
    w.setnchannels(1); w.setsampwidth(2); w.setframerate(16000)
    w.writeframes(b"".join(struct.pack("<h", int(8000 * math.sin(i / 8))) for i in range(8000)))
from faster_whisper.audio import decode_audio
assert len(decode_audio(path, sampling_rate=16000)) == 8000

from aiortc.codecs import get_decoder, get_encoder
from aiortc.rtcrtpparameters import RTCRtpCodecParameters
opus = RTCRtpCodecParameters(mimeType="audio/opus", clockRate=48000, channels=2)
frame = av.AudioFrame(format="s16", layout="stereo", samples=960)
frame.sample_rate, frame.pts, frame.time_base = 48000, 0, fractions.Fraction(1, 48000)
frame.planes[0].update(bytes(frame.planes[0].buffer_size))
payloads, _ = get_encoder(opus).encode(frame)
assert payloads
for name in ("libx264", "libx265"):
    ctx = av.CodecContext.create(name, "w")
    ctx.width, ctx.height, ctx.pix_fmt = 64, 64, "yuv420p"
    ctx.time_base = fractions.Fraction(1, 25)
    try:
        ctx.open()
    except av.FFmpegError as exc:
        print(name, "refused:", exc)
    else:
        raise SystemExit(name + " opened")
"""
    env = {**os.environ, "PYTHONPATH": str(stubbed)}
    done = subprocess.run(
        [sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "libx264 refused" in done.stdout and "libx265 refused" in done.stdout
