"""pyannote's segmentation-3.0 rebuilt in ONNX (speakers/segmentation.py): the graph against
reference values of pyannote.audio's own torch model, the powerset decoding, the checkpoint's
metadata loaded inert, the pinned hash."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from audio_pipeline.bundled import SEGMENTATION_MODEL, ModelIntegrityError, verified_path
from audio_pipeline.speakers.segmentation import (
    CHUNK_SAMPLES,
    FRAMES_PER_CHUNK,
    POWERSET,
    SpeakerSegmentation,
    load_weights,
    powerset_to_multilabel,
)
from audio_pipeline.speakers.torch_zip import TorchZipError, load_checkpoint, load_state_dict


@pytest.fixture(scope="module")
def segmentation() -> SpeakerSegmentation:
    s = SpeakerSegmentation()
    s.load()
    return s


def _inputs() -> np.ndarray:
    """Two deterministic 10 s chunks: a chirp in noise, and a buzz with a syllable-rate
    envelope whose pitch jumps from 120 Hz to 210 Hz at 5 s (a second "voice")."""
    t = np.arange(CHUNK_SAMPLES) / 16_000
    noise = np.random.default_rng(3).standard_normal(CHUNK_SAMPLES)
    chirp = 0.2 * np.sin(2 * np.pi * (150 + 300 * t) * t) + 0.02 * noise
    env = (0.5 + 0.5 * np.sin(2 * np.pi * 4 * t)) ** 2
    phase = 2 * np.pi * np.cumsum(np.where(t < 5, 120.0, 210.0)) / 16_000
    buzz = sum(np.sin(k * phase) / k for k in range(1, 12))
    voiced = 0.1 * env * buzz + 0.005 * noise
    return np.stack([chirp, voiced]).astype(np.float32)


# pyannote.audio 3.3.2's PyanNet with these weights on torch 2.5.1 (CPU), computed once
# outside the repository (torch is not installed here): log-probabilities of frames 0, 100,
# 300 and 588 of each chunk, and how often each powerset class wins.
_REFERENCE = {
    (0, 0): [-1.56583, -6.29855, -0.32738, -3.19029, -6.08222, -8.26962, -3.69949],
    (0, 100): [-0.05932, -6.98702, -3.57904, -3.59719, -9.31305, -8.89489, -6.77335],
    (0, 300): [-0.01896, -7.91132, -4.75774, -4.64352, -11.09438, -10.39158, -8.72583],
    (0, 588): [-0.09676, -5.52522, -3.34696, -2.96594, -8.69182, -8.08629, -6.84316],
    (1, 0): [-7.55828, -6.75403, -0.04571, -5.13692, -4.64688, -9.35302, -3.59564],
    (1, 100): [-17.00617, -8.48386, -0.00357, -5.98759, -8.41198, -15.31429, -7.38196],
    (1, 300): [-5.3409, -4.94062, -1.26098, -1.0607, -4.39446, -5.47188, -1.07318],
    (1, 588): [-5.88496, -7.75837, -5.00853, -0.01999, -9.99371, -7.31255, -4.68965],
}
_WINNERS = [[568, 0, 21, 0, 0, 0, 0], [0, 0, 296, 289, 0, 0, 4]]


def test_the_graph_reproduces_pyannotes_torch_model(segmentation: SpeakerSegmentation) -> None:
    got = segmentation.log_probs(_inputs())
    assert got.shape == (2, FRAMES_PER_CHUNK, 7) and got.dtype == np.float32
    for (chunk, frame), want in _REFERENCE.items():
        np.testing.assert_allclose(got[chunk, frame], want, atol=1e-3)
    for chunk, want in enumerate(_WINNERS):
        assert np.bincount(got[chunk].argmax(-1), minlength=7).tolist() == want
    np.testing.assert_allclose(np.exp(got).sum(-1), 1.0, atol=1e-4)  # a distribution
    # The second "voice" (pitch jump at 5 s) is another local speaker.
    active = segmentation.activity(_inputs()[1:])[0]
    first, second = active[: FRAMES_PER_CHUNK // 2 - 10], active[FRAMES_PER_CHUNK // 2 + 10 :]
    assert first.sum(0).argmax() != second.sum(0).argmax()


def test_the_powerset_is_pyannotes_order_and_decodes_overlap_as_two_speakers() -> None:
    assert POWERSET == ((), (0,), (1,), (2,), (0, 1), (0, 2), (1, 2))
    m = powerset_to_multilabel()
    assert m.shape == (7, 3)
    assert m.sum(1).tolist() == [0, 1, 1, 1, 2, 2, 2]
    assert m[5].tolist() == [1, 0, 1]


def test_batches_and_single_chunks_agree(segmentation: SpeakerSegmentation) -> None:
    x = _inputs()
    both = segmentation.log_probs(x)
    np.testing.assert_allclose(segmentation.log_probs(x[1:]), both[1:], atol=1e-5)
    with pytest.raises(ValueError, match="chunks must be"):
        segmentation.log_probs(x[:, :1000])
    assert segmentation.log_probs(np.zeros((0, CHUNK_SAMPLES))).shape == (0, FRAMES_PER_CHUNK, 7)


def test_the_checkpoints_metadata_loads_inert_and_other_classes_are_refused() -> None:
    path = verified_path(SEGMENTATION_MODEL)
    weights = load_weights(path)
    assert weights["classifier.weight"].shape == (7, 128)
    # Without the inert list, pyannote's classes in the metadata are refused, never imported.
    with pytest.raises(TorchZipError, match="refusing to load"):
        load_state_dict(path, key="state_dict")
    checkpoint = load_checkpoint(
        path,
        inert=frozenset(
            {
                "pyannote.audio.core.task.Problem",
                "pyannote.audio.core.task.Resolution",
                "pyannote.audio.core.task.Specifications",
                "torch.torch_version.TorchVersion",
            }
        ),
    )
    assert checkpoint["hyper_parameters"]["lstm"]["num_layers"] == 4
    assert type(checkpoint["pyannote.audio"]["specifications"]).__name__.startswith("Inert[")


def test_a_segmentation_model_with_another_hash_is_refused() -> None:
    wrong = dataclasses.replace(SEGMENTATION_MODEL, sha256="0" * 64)
    with pytest.raises(ModelIntegrityError, match="corrupt or not the pinned version"):
        SpeakerSegmentation(model=wrong).load()
