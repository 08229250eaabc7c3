from __future__ import annotations

from annie_voice.llm.toolfilter import ToolCallTextFilter


def run(chunks: list[str], known: tuple[str, ...] = ("web_search",)) -> tuple[str, list]:
    f = ToolCallTextFilter(known_tools=known)
    text, calls = "", []
    for c in chunks:
        t, cs = f.feed(c)
        text += t
        calls += cs
    t, cs = f.flush()
    return text + t, calls + cs


def test_tagged_call_split_across_chunks_is_removed_and_parsed() -> None:
    text, calls = run(
        [
            "Let me check. <tool",
            '_call>{"name": "web_search", "argu',
            'ments": {"query": "weather Bengaluru"}}</tool_',
            "call> One moment.",
        ]
    )
    assert text == "Let me check.  One moment."
    assert [(c.name, c.arguments) for c in calls] == [
        ("web_search", {"query": "weather Bengaluru"})
    ]


def test_bare_json_line_of_a_known_tool_becomes_a_call() -> None:
    text, calls = run(
        ["Sure.\n", '{"name": "web_search", ', '"arguments": "{\\"query\\": \\"x\\"}"}\n', "Done."]
    )
    assert text == "Sure.\nDone."
    assert calls[0].name == "web_search" and calls[0].arguments == {"query": "x"}


def test_ordinary_json_and_text_pass_through() -> None:
    text, calls = run(['{"name": "Priya", "age": 3}\n', "a < b and c > d, <b>bold</b>"])
    assert calls == []
    assert text == '{"name": "Priya", "age": 3}\na < b and c > d, <b>bold</b>'


def test_unknown_bare_json_call_stays_text_but_tagged_is_always_hidden() -> None:
    text, calls = run(['{"name": "rm_rf", "arguments": {}}\n'])
    assert calls == [] and "rm_rf" in text
    text, calls = run(["Hi <tool_call>not json at all</tool_call>!"])
    assert text == "Hi !" and calls == []


def test_unclosed_tag_at_the_end_is_never_shown() -> None:
    text, calls = run(['ok <tool_call>{"name": "web_search", "arguments": {"query": "q"}}'])
    assert text == "ok " and calls[0].arguments == {"query": "q"}


def test_partial_tag_prefix_is_released_when_it_is_not_a_tag() -> None:
    text, calls = run(["1 <", "to", "morrow"])
    assert text == "1 <tomorrow" and calls == []
