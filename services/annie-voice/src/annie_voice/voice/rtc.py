"""Peer-connection tuning for a listener that never plays what it receives.

aiortc holds every received audio packet in a jitter buffer until four later ones arrived
(`JitterBuffer(capacity=16, prefetch=4)` in aiortc 1.16's RTCRtpReceiver): 80 ms of 20 ms Opus
packets added to everything Annie hears. A jitter buffer exists to make playout smooth; Annie
does not play the user's audio, she cuts it into speech segments, so she takes each packet as
soon as the next one shows it complete (prefetch 0). Packets arriving out of order are still
put back in order within the buffer; a lost packet is still waited for as long as before.
aiortc offers no setting for this, so the receiver's buffer is replaced before any packet
arrives (ADR 0016).
"""

from __future__ import annotations

from aiortc import RTCPeerConnection
from aiortc.jitterbuffer import JitterBuffer

from her_os_shared.logging import get_logger

log = get_logger(__name__)

AUDIO_PREFETCH = 0
# aiortc keeps the buffer in a private (name-mangled) attribute of RTCRtpReceiver.
BUFFER_ATTR = "_RTCRtpReceiver__jitter_buffer"


def unbuffer_audio_receivers(pc: RTCPeerConnection) -> int:
    """Give each audio receiver of `pc` that has not received anything yet a jitter buffer
    without prefetch. Returns how many it changed; logs (and changes nothing) when aiortc no
    longer keeps the buffer where this expects it."""
    changed = 0
    for receiver in pc.getReceivers():
        if receiver.track is None or receiver.track.kind != "audio":
            continue
        buffer = getattr(receiver, BUFFER_ATTR, None)
        if not isinstance(buffer, JitterBuffer):
            log.warning("voice.rtc_buffer_not_found", attribute=BUFFER_ATTR)
            continue
        # _origin is set by the first packet: a buffer already in use is left alone.
        if buffer._prefetch == AUDIO_PREFETCH or buffer._origin is not None:
            continue
        setattr(receiver, BUFFER_ATTR, JitterBuffer(buffer.capacity, prefetch=AUDIO_PREFETCH))
        changed += 1
    return changed
