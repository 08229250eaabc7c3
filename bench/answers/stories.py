"""The memory design's worked examples (design/her-os-memory-tiers.md) as a conversation with
questions and gold answers, told about another household in other words: a daily drink that
changes, running shoes replaced, a wife named in passing, a sister who moves city, a
neighbourhood that keeps coming up, a promise made and kept. The owner (Dev) is the speaker
heard most; questions in the first person are his.

Built as a `locomo_recall.Conversation`, so it goes through the same memory as LoCoMo's.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from locomo_recall import Conversation, LocomoSession, Question, Turn

DAY0 = datetime(2025, 3, 3, 8, 0, tzinfo=UTC)

# (day, hour, [(speaker, words)])
_SESSIONS: list[tuple[int, int, list[tuple[str, str]]]] = [
    (0, 8, [
        ("Nikhil", "Morning Dev, you look like you need caffeine."),
        ("Dev", "I do. I drink coffee every morning, black, two cups before nine."),
        ("Nikhil", "There's a new roastery in Indiranagar, near the metro."),
        ("Dev", "That's five minutes from our flat, Lina and I will try it."),
    ]),
    (4, 19, [
        ("Lina", "Dev, are you running tomorrow?"),
        ("Dev", "Yes, and I love my Adidas running shoes, they are so light."),
        ("Lina", "Then we can have breakfast in Indiranagar afterwards."),
    ]),
    (10, 13, [
        ("Nikhil", "Dev, your sister Tara called the office looking for you."),
        ("Dev", "She always forgets my mobile. Tara lives in Chennai, she works at a bank there."),
    ]),
    (14, 21, [
        ("Arav", "How do you remember all the birthdays?"),
        ("Dev", "I don't. Lina, my wife, keeps every date in her head."),
    ]),
    (30, 18, [
        ("Lina", "The Indiranagar market has fresh mangoes this week."),
        ("Dev", "Let's go on Saturday, I love that market."),
    ]),
    (40, 20, [
        ("Lina", "Omar texted again, he says you never call."),
        ("Dev", "I know. I promise I will call Omar this weekend."),
    ]),
    (43, 9, [
        ("Lina", "Did you do it?"),
        ("Dev", "Yes, I called Omar on Sunday, we talked for an hour about his new job."),
    ]),
    (70, 7, [
        ("Nikhil", "New shoes?"),
        ("Dev", "These Asics shoes are brilliant, I switched from Adidas for my long runs."),
    ]),
    (88, 20, [
        ("Lina", "How is Tara finding the new city?"),
        ("Dev", "She loves it. Tara moved to Delhi last week for a job at a university."),
    ]),
    (95, 8, [
        ("Lina", "Coffee?"),
        ("Dev", "No thanks. I've switched to green tea, coffee keeps me awake at night."),
    ]),
    (110, 17, [
        ("Nikhil", "Still living near Indiranagar?"),
        ("Dev", "Yes, the flat in Indiranagar is home now."),
    ]),
]  # fmt: skip

# (question, gold answer, LoCoMo category: 4 single-hop, 2 temporal)
_QUESTIONS: list[tuple[str, str, int]] = [
    ("Do I still drink coffee?", "No, green tea", 4),
    ("What do I drink in the morning now?", "green tea", 4),
    ("Which running shoes do I use now?", "Asics", 4),
    ("Who is Lina?", "Dev's wife", 4),
    ("Where does Tara live now?", "Delhi", 4),
    ("Where did Tara live before Delhi?", "Chennai", 4),
    ("Who is Tara?", "Dev's sister", 4),
    ("Did I call Omar?", "yes, on Sunday", 4),
    ("When did I switch to green tea?", f"{DAY0 + timedelta(days=95):%-d %B %Y}", 2),
]


def story() -> Conversation:
    sessions = []
    for number, (day, hour, lines) in enumerate(_SESSIONS, start=1):
        started = DAY0.replace(hour=hour) + timedelta(days=day)
        turns = [
            Turn(f"D{number}:{i}", speaker, said) for i, (speaker, said) in enumerate(lines, 1)
        ]
        sessions.append(LocomoSession(number, started, turns))
    every = frozenset(t.dia_id for s in sessions for t in s.turns)
    questions = [Question(q, category, every, gold) for q, gold, category in _QUESTIONS]
    return Conversation("design-stories", sessions, questions)
