"""Annie's bundled models, sha256-checked before use: hibari-tts's voice `heart` (ONNX) with the
pronunciation data hibari reads for it, Moonshine base English (speech to text) and Pipecat's
Silero VAD.

The mechanism and the Whisper base model (shared with the audio pipeline) live in
her_os_shared.bundled; nothing is ever fetched from a model hub.
"""

from __future__ import annotations

from her_os_shared.bundled import BundledFile

_HIBARI = ("hibari-tts", "0.2.1", "hibari")
# hibari-tts 0.2.1's bundled voice "heart" (the sha256 its voices.json also records).
HIBARI_HEART = BundledFile(
    *_HIBARI,
    "assets/hibari.onnx",
    "5f70741d4e900f4e85d0037498736cc1b3e1b9a63a13546a5da1e63abf4fccd8",
)
# What else hibari reads from its package for an American voice (heart): the voice registry
# and the text normaliser's tables (read when hibari is imported), the phoneme vocabulary, and
# the G2P's lexicons, tagger, tokenizer exceptions and out-of-vocabulary net (oov.onnx with its
# metadata). The British variants (lexicon_gb_*, oov_gb.*) are never read.
HIBARI_ASSETS: dict[str, BundledFile] = {
    name: BundledFile(*_HIBARI, f"assets/{name}", sha256)
    for name, sha256 in {
        "voices.json": "f8b7657ecd0e0e362d3403e99538c0e5bfe20d6a903dfcd04c772b2c73abb204",
        "normalize.json": "d478ff05404bc43ac3e0468e306674e51085f1b1afc94cdef7c7ea4fb0d56bd8",
        "vocab.json": "70abefbe8a1c8865e43e0a43bbdc25b91a33e4aa053479d443ccf23e20a59e5d",
        "lexicon_us_gold.json.gz": (
            "63ae94f8ef0e906d5b24fe9b59ffcbd1529aca5686a774610e43973cbaa86ad2"
        ),
        "lexicon_us_silver.json.gz": (
            "c4c2546ebf1eb07010331e7ef785a431aa17ba8e7bfb6b4af8d654ee96a71fd3"
        ),
        "tagger.json.gz": "d2da7502284bbbe45d49e0b7ce3ce67bdab82254150f4317f1b8559b4d38d0eb",
        "tokenizer_exceptions.json": (
            "ddf3a3da07bdcf5144270ea4530191d8580fb4fd6f5ae93296e87916e795659a"
        ),
        "oov.onnx": "d3cfd8122c5f172a98c8de38268bf1213ee09f2c2ae4df6e055fc6532590fe76",
        "oov.json": "b462e6e5dbdf0e7346c732385d0dd844f612f1770871441c56932bff4ca75d8c",
    }.items()
}

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

# Silero VAD (ONNX) as shipped in the pipecat-ai 1.14.0 wheel: Pipecat's SileroVADAnalyzer
# loads it from this package path, unchecked; vad.py checks it before each analyzer is built.
PIPECAT_SILERO_VAD = BundledFile(
    "pipecat-ai",
    "1.14.0",
    "pipecat.audio.vad.data",
    "silero_vad.onnx",
    "1a153a22f4509e292a94e67d6f9b85e8deb25b4988682b7e174c65279d8788e3",
)
