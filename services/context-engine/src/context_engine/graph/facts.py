"""The writer's vocabulary: predicates, graphiti edge names, readable fact sentences, node
types and deterministic uuids. The predicates themselves are in
context_engine/extract/predicates.py.

- A relation's predicate is normalised to ours: snake_case ("ex spouse" → "ex_spouse"), an
  LLM's synonym mapped ("WORKS_FOR" → "works_at"); its graphiti edge name is the upper-case
  form ("EX_SPOUSE"), graphiti's own style.
- Kinship and role predicates are nouns: (Asha, spouse, Priya) reads "Asha's spouse is Priya";
  any other predicate is a verb phrase, in its own words where it has them: (Asha, likes,
  coffee) reads "Asha likes coffee", (Asha, lives_in, Pune) "Asha lives in Pune".
- A relation end that is not among the extracted entities gets a node of the predicate's
  object type: a person for kinship, a place for lives_in, an organisation for works_at, a
  "topic" otherwise ("coffee").
- Commitments and other things a speaker says (promise, decision, question, habit, emotion) are
  nodes linked from their speaker: PROMISED, DECIDED, ASKED, HAS_HABIT, FELT.
"""

from __future__ import annotations

import uuid

from context_engine.extract import predicates
from context_engine.extract.schema import canonical_name

# uuid5 namespace of every id the writer derives (fixed forever: ids must not change).
NAMESPACE = uuid.uuid5(uuid.NAMESPACE_URL, "https://her-os.local/graph")

# Words that are not names: a relation whose end is one of these was not resolved to a person
# by the extractor ("her brother Arjun" → (her, sibling, Arjun)) and is not written.
PRONOUNS = frozenset(
    {
        "i", "me", "my", "mine", "we", "us", "our", "ours", "you", "your", "yours", "he", "him",
        "his", "she", "her", "hers", "they", "them", "their", "theirs", "it", "its", "someone",
    }
)  # fmt: skip

# Entity types a speaker says rather than mentions → the edge from the speaker to them.
SPEAKER_EDGES: dict[str, tuple[str, str]] = {
    # type: (edge name, fact template: {s} the speaker, {o} what was said)
    "promise": ("PROMISED", "{s} promised: {o}"),
    "decision": ("DECIDED", "{s} decided: {o}"),
    "question": ("ASKED", "{s} asked: {o}"),
    "habit": ("HAS_HABIT", "{s} has a habit: {o}"),
    "emotion": ("FELT", "{s} felt {o}"),
}

# What was said rather than what is true: the edges of questions asked, feelings felt,
# decisions and promises made (a promise's state is promises.py's). Knowledge (query_facts.py,
# profile.py) leaves them out; habits stay (a habit holds until it ends).
SPEECH_ACTS = frozenset(SPEAKER_EDGES[t][0] for t in ("promise", "decision", "question", "emotion"))
# Every edge from a speaker to what they said (habits too): the daily reflection's facts leave
# them all out (day_facts.py).
SPEAKER_EDGE_NAMES = frozenset(name for name, _ in SPEAKER_EDGES.values())

# Node types, in the order a name is resolved when it is among several types in one session.
TYPE_PRIORITY = (
    "person", "organization", "place", "event", "topic", "habit", "promise", "decision",
    "question", "emotion",
)  # fmt: skip


def normalise_predicate(predicate: str) -> str:
    """Our predicate: snake_case ("Ex Spouse" / "ex-spouse" → "ex_spouse"), an LLM's synonym
    mapped ("WORKS_FOR" → "works_at"); an unknown one stays, in snake_case."""
    return predicates.normalise(predicate)


def edge_name(predicate: str) -> str:
    """graphiti's edge name for a predicate: "likes" → "LIKES"."""
    return normalise_predicate(predicate).upper()


def fact_sentence(subject: str, predicate: str, obj: str) -> str:
    """The fact's stored text: the vocabulary's clause for it ("Asha's spouse is Priya")."""
    return predicates.statement(subject, predicate, obj)


def object_type(predicate: str) -> str:
    """The node type of a relation's object that is not an extracted entity."""
    known = predicates.spec(predicate)
    return known.object_type if known is not None else "topic"


def label_of(entity_type: str) -> str:
    """graphiti node label of one of our types: "person" → "Person"."""
    return "".join(part.capitalize() for part in entity_type.split("_"))


def is_pronoun(name: str) -> bool:
    return canonical_name(name) in PRONOUNS


def _id(*parts: str) -> str:
    return str(uuid.uuid5(NAMESPACE, "\x1f".join(parts)))


def node_uuid(group_id: str, entity_type: str, name: str) -> str:
    """The same (type, canonical name) in a group is one node, across sessions."""
    return _id(group_id, "node", entity_type, canonical_name(name))


def episode_uuid(group_id: str, session_id: str) -> str:
    return _id(group_id, "episode", session_id)


def relation_uuid(group_id: str, source: str, name: str, target: str, session_id: str) -> str:
    """One edge per (source, edge name, target) and session: re-writing a session replaces
    its edges instead of adding more."""
    return _id(group_id, "edge", source, name, target, session_id)


def mention_uuid(episode: str, node: str) -> str:
    return _id("mention", episode, node)
