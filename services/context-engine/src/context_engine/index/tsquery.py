"""PostgreSQL tsquery text (what `websearch_to_tsquery(...)::text` returns) → a Tantivy query.

Grammar (PostgreSQL's precedence, tightest first): `!x`, `x <N> y` (`<->` is `<1>`), `x & y`,
`x | y`, parentheses. Operands are quoted lexemes (`'it''s'`). A phrase becomes a Tantivy
phrase query with the same offsets, so `"moving to Koramangala"` (`'move' <2> 'koramangala'`)
matches exactly what PostgreSQL matches. Anything outside what websearch_to_tsquery produces
(prefix `:*`, weights, phrases of non-lexemes) raises `UnsupportedQuery`; the caller then uses
PostgreSQL's own full-text search for that query.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import tantivy

_TOKEN = re.compile(r"\s*(?:'((?:[^']|'')*)'(:[*A-D]+)?|(<->|<\d+>)|([&|!()]))")


class UnsupportedQuery(ValueError):
    pass


@dataclass(frozen=True, slots=True)
class Lexeme:
    text: str


@dataclass(frozen=True, slots=True)
class Phrase:
    words: tuple[tuple[int, str], ...]  # (offset, lexeme)


@dataclass(frozen=True, slots=True)
class Op:
    kind: str  # "and" | "or" | "not"
    args: tuple[Node, ...]


Node = Lexeme | Phrase | Op


def _tokens(src: str) -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    pos = 0
    src = src.rstrip()
    while pos < len(src):
        m = _TOKEN.match(src, pos)
        if m is None:
            raise UnsupportedQuery(f"cannot read tsquery at {src[pos : pos + 20]!r}")
        if m.group(1) is not None:
            if m.group(2):
                raise UnsupportedQuery("prefix or weighted lexemes")
            out.append(("lex", m.group(1).replace("''", "'")))
        elif m.group(3):
            out.append(("phrase", "1" if m.group(3) == "<->" else m.group(3)[1:-1]))
        else:
            out.append(("op", m.group(4)))
        pos = m.end()
    return out


class _Parser:
    def __init__(self, tokens: list[tuple[str, str]]) -> None:
        self.tokens = tokens
        self.i = 0

    def peek(self) -> tuple[str, str] | None:
        return self.tokens[self.i] if self.i < len(self.tokens) else None

    def take(self) -> tuple[str, str]:
        tok = self.tokens[self.i]
        self.i += 1
        return tok

    def parse(self) -> Node:
        node = self.or_()
        if self.peek() is not None:
            raise UnsupportedQuery(f"unexpected {self.peek()}")
        return node

    def or_(self) -> Node:
        args = [self.and_()]
        while self.peek() == ("op", "|"):
            self.take()
            args.append(self.and_())
        return args[0] if len(args) == 1 else Op("or", tuple(args))

    def and_(self) -> Node:
        args = [self.phrase()]
        while self.peek() == ("op", "&"):
            self.take()
            args.append(self.phrase())
        return args[0] if len(args) == 1 else Op("and", tuple(args))

    def phrase(self) -> Node:
        left = self.unary()
        while (tok := self.peek()) is not None and tok[0] == "phrase":
            distance = int(self.take()[1])
            right = self.unary()
            left = _join(left, right, distance)
        return left

    def unary(self) -> Node:
        tok = self.take()
        if tok == ("op", "!"):
            return Op("not", (self.unary(),))
        if tok == ("op", "("):
            node = self.or_()
            if self.take() != ("op", ")"):
                raise UnsupportedQuery("unbalanced parentheses")
            return node
        if tok[0] == "lex":
            return Lexeme(tok[1])
        raise UnsupportedQuery(f"unexpected {tok}")


def _words(node: Node) -> tuple[tuple[int, str], ...]:
    if isinstance(node, Lexeme):
        return ((0, node.text),)
    if isinstance(node, Phrase):
        return node.words
    raise UnsupportedQuery("phrase of something other than words")


def _join(left: Node, right: Node, distance: int) -> Phrase:
    lw, rw = _words(left), _words(right)
    last = max(offset for offset, _ in lw)
    return Phrase(lw + tuple((last + distance + o, w) for o, w in rw))


def parse(tsquery: str) -> Node | None:
    """None for an empty query (only stopwords): it matches nothing, as in PostgreSQL."""
    tokens = _tokens(tsquery)
    return _Parser(tokens).parse() if tokens else None


def any_term(node: Node) -> Node:
    """The query's words as alternatives (a disjunction of every lexeme, phrases split into
    their words): BM25 then ranks by how many and how rare the matched words are, which is what
    a question in natural language wants (ANDing every word of "when did Priya move to Lisbon"
    finds only texts that contain all of them)."""
    terms: list[str] = []

    def walk(n: Node) -> None:
        if isinstance(n, Lexeme):
            terms.append(n.text)
        elif isinstance(n, Phrase):
            terms.extend(word for _, word in n.words)
        elif n.kind == "not":
            raise UnsupportedQuery("a negation is not a natural-language query")
        else:
            for arg in n.args:
                walk(arg)

    walk(node)
    unique = tuple(Lexeme(t) for t in dict.fromkeys(terms))
    return unique[0] if len(unique) == 1 else Op("or", unique)


def to_tantivy(node: Node, schema: tantivy.Schema, field: str) -> tantivy.Query:
    Q, Occur = tantivy.Query, tantivy.Occur
    if isinstance(node, Lexeme):
        return Q.term_query(schema, field, node.text)
    if isinstance(node, Phrase):
        if len(node.words) == 1:
            return Q.term_query(schema, field, node.words[0][1])
        return Q.phrase_query(schema, field, list(node.words))
    if node.kind == "not":
        return Q.boolean_query(
            [(Occur.Must, Q.all_query()), (Occur.MustNot, to_tantivy(node.args[0], schema, field))]
        )
    if node.kind == "or":
        return Q.boolean_query([(Occur.Should, to_tantivy(a, schema, field)) for a in node.args])
    clauses = []
    for arg in node.args:
        if isinstance(arg, Op) and arg.kind == "not":
            clauses.append((Occur.MustNot, to_tantivy(arg.args[0], schema, field)))
        else:
            clauses.append((Occur.Must, to_tantivy(arg, schema, field)))
    if all(occur == Occur.MustNot for occur, _ in clauses):
        clauses.append((Occur.Must, Q.all_query()))
    return Q.boolean_query(clauses)
