"""Annie's bundled models, sha256-checked before use: hibari-tts's voice `heart` (ONNX) and
Moonshine base English (speech to text).

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

# Moonshine base (English) as ONNX Runtime (ORT-format) files in moonshine-cpp 0.1.4 (MIT).
# The package is never imported: its __init__ loads a native library built for newer CPUs
# (it dies with SIGILL on an AVX2-only EPYC); the files are run by our own onnxruntime.
_MOONSHINE = ("moonshine-cpp", "0.1.4", "moonshine_cpp")
MOONSHINE_BASE_EN: dict[str, BundledFile] = {
    "encoder": BundledFile(
        *_MOONSHINE,
        "models/base-en/encoder_model.ort",
        "9d1a19e044cbf89a207723d1adb667de89a5671a1e3e611b8ebe721b2c31219c",
        importable=False,
    ),
    "decoder": BundledFile(
        *_MOONSHINE,
        "models/base-en/decoder_model_merged.ort",
        "370e0c1f161d68dc1c2264c1a82024fb123380da3b73f47f05531d1e8d3308c3",
        importable=False,
    ),
    "tokenizer": BundledFile(
        *_MOONSHINE,
        "models/base-en/tokenizer.bin",
        "04670d78994d030185c3dd843c60591788fed0a56cc6750747bd326825f13ca9",
        importable=False,
    ),
}
