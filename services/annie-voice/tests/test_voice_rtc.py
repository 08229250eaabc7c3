"""The audio receivers of Annie's peer connections hand on each packet as soon as it is
complete (voice/rtc.py), on real aiortc objects."""

from __future__ import annotations

import pytest
from aiortc import RTCPeerConnection
from aiortc.jitterbuffer import JitterBuffer
from aiortc.rtp import RtpPacket

from annie_voice.voice.rtc import AUDIO_PREFETCH, BUFFER_ATTR, unbuffer_audio_receivers

OPUS_20_MS = 960  # RTP timestamp step of one 20 ms Opus packet (48 kHz clock)


def packet(n: int) -> RtpPacket:
    p = RtpPacket(payload_type=111, sequence_number=n, timestamp=n * OPUS_20_MS)
    p._data = bytes([n])  # type: ignore[attr-defined]  # what the depayloader leaves there
    return p


def first_out(buffer: JitterBuffer, packets: int = 8) -> int | None:
    """How many packets went in before the first frame came out."""
    for n in range(packets):
        _, frame = buffer.add(packet(n))
        if frame is not None:
            assert frame.data == bytes([0])  # the first packet, first
            return n + 1
    return None


async def answering_peer() -> tuple[RTCPeerConnection, RTCPeerConnection]:
    """A browser-like offerer (audio and a data channel) and the answering side's pc, whose
    receivers exist once the offer is applied, before any packet."""
    offerer, answerer = RTCPeerConnection(), RTCPeerConnection()
    offerer.addTransceiver("audio", direction="sendrecv")
    offerer.createDataChannel("chat")
    await offerer.setLocalDescription(await offerer.createOffer())
    await answerer.setRemoteDescription(offerer.localDescription)
    return offerer, answerer


async def test_audio_receivers_lose_the_80_ms_prefetch() -> None:
    offerer, annie = await answering_peer()
    try:
        (receiver,) = annie.getReceivers()
        default = getattr(receiver, BUFFER_ATTR)
        # aiortc's own buffer releases the first packet only after four more arrived.
        assert first_out(JitterBuffer(default.capacity, prefetch=default._prefetch)) == 5
        assert unbuffer_audio_receivers(annie) == 1
        tuned = getattr(receiver, BUFFER_ATTR)
        assert tuned is not default and tuned._prefetch == AUDIO_PREFETCH
        assert tuned.capacity == default.capacity
        # Now it is out as soon as the next packet shows it complete: 20 ms, not 80 ms more.
        assert first_out(tuned) == 2
        assert unbuffer_audio_receivers(annie) == 0  # already done: left as it is
    finally:
        await offerer.close()
        await annie.close()


async def test_out_of_order_packets_still_come_out_in_order() -> None:
    buffer = JitterBuffer(16, prefetch=AUDIO_PREFETCH)
    out = []
    for n in (0, 2, 1, 3, 4):
        _, frame = buffer.add(packet(n))
        if frame is not None:
            out.append(frame.data[0])
    assert out == [0, 1, 2]  # each add hands on at most one frame, in sequence order


async def test_a_buffer_in_use_is_left_alone() -> None:
    offerer, annie = await answering_peer()
    try:
        (receiver,) = annie.getReceivers()
        getattr(receiver, BUFFER_ATTR).add(packet(0))  # media already flowing
        assert unbuffer_audio_receivers(annie) == 0
        assert getattr(receiver, BUFFER_ATTR)._prefetch != AUDIO_PREFETCH
    finally:
        await offerer.close()
        await annie.close()


async def test_an_aiortc_without_that_buffer_is_logged_and_not_touched(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr("annie_voice.voice.rtc.BUFFER_ATTR", "_no_such_attribute")
    offerer, annie = await answering_peer()
    try:
        assert unbuffer_audio_receivers(annie) == 0
        assert "voice.rtc_buffer_not_found" in capsys.readouterr().out
    finally:
        await offerer.close()
        await annie.close()
