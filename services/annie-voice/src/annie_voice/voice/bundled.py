"""Annie's bundled voice: hibari-tts's voice `heart` (ONNX), sha256-checked before use.

The mechanism and the Whisper base model (shared with the audio pipeline) live in
her_os_shared.bundled; nothing is ever fetched from a model hub.
"""

from __future__ import annotations

from her_os_shared.bundled import BundledFile

# hibari-tts 0.2.1's bundled voice "heart" (the sha256 its voices.json also records).
HIBARI_HEART = BundledFile(
    "hibari-tts",
    "0.2.1",
    "hibari",
    "assets/hibari.onnx",
    "5f70741d4e900f4e85d0037498736cc1b3e1b9a63a13546a5da1e63abf4fccd8",
)
