"""Synthetic conversational English for the context-engine benchmarks, reproducible by seed.

Segments are 1–3 sentences from 68 conversational templates whose slots (people, places,
food, activities, things, times, feelings) are filled with Zipf-distributed choices from
about 1,000 slot words, so a few words are very common and most are rare, as in real speech.
Document frequencies are close to those of the real LoCoMo turns (bench/README.md); the
vocabulary is smaller than a real year of speech, so posting lists are, if anything, denser
than real ones (pessimistic for search latency).

`--locomo PATH` swaps the synthetic text for real turns of the LoCoMo conversations (read at
run time from ../shared/data, never copied into this repository).
"""

from __future__ import annotations

import json
import random
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from itertools import accumulate
from pathlib import Path

from her_os_shared.transcript import Segment, TranscriptPayload


def _words(block: str) -> list[str]:
    return block.split()


# Common first names (frequent) and rare ones (a handful of mentions in a whole corpus).
NAMES = _words("""
    Maya Sam Alex Priya Jordan Emma Liam Olivia Noah Ava Ethan Sophia Lucas Mia Mason Chloe
    Arjun Zoe Daniel Grace Leo Hannah Ben Lily Ryan Ella Nathan Aria Owen Nora Caleb Ruby
    Isaac Clara Adam Alice Henry Julia Marcus Elena Tom Rachel Kevin Laura Omar Fatima Diego
    Lucia Raj Anita Mike Sarah David Jessica Chris Megan Josh Amy Matt Kate Nick Anna Paul
    Rosa Victor Nina Hugo Ivy Felix Iris Oscar Ada Theo Maria Carlos Wei Mei Kenji Yuki
    Sanjay Deepa Tariq Leila Kofi Amara Sven Ingrid Pavel Olga Mateo Sofia Luca Giulia Finn
    Freya Rohan Kavya Andre Camille Jonas Lena Emil Astrid Malik Zara Ezra Naomi Gabe Tessa
""")
RARE_NAMES = _words("""
    Bartholomew Ottoline Thaddeus Philippa Cornelius Wilhelmina Ignatius Perpetua Leopold
    Evangeline Barnaby Clementine Archibald Henrietta Montgomery Seraphina Fitzgerald Rosalind
    Percival Guinevere Ambrose Millicent Lysander Octavia Casimir Beatrix Horatio Winifred
    Florian Ludmila Anselm Marguerite Evander Theodora Leopoldine Radomir Xiomara Quillon
    Zebedee Ptolemy Hyacinth Benedikt Anastasia Cassius Delphine Ermengarde Tobias Araminta
""")
PLACES = _words("""
    Lisbon Berlin Tokyo Chicago Denver Austin Seattle Boston Paris London Madrid Rome Dublin
    Toronto Vancouver Portland Oakland Brooklyn Queens Mumbai Delhi Bangalore Pune Chennai
    Nairobi Lagos Cairo Istanbul Athens Prague Vienna Budapest Warsaw Oslo Stockholm Helsinki
    Copenhagen Amsterdam Brussels Zurich Geneva Milan Naples Seville Porto Barcelona Valencia
    Sydney Melbourne Auckland Singapore Seoul Osaka Kyoto Hanoi Bangkok Manila Jakarta Lima
    Bogota Santiago Montreal Phoenix Atlanta Miami Nashville Detroit Minneapolis Tucson
    Reykjavik Edinburgh Glasgow Manchester Liverpool Bristol Cardiff Belfast Marseille Lyon
""")
VENUES = _words("""
    gym office library park beach museum cafe bakery pharmacy clinic hospital school airport
    station market mall garage theater cinema stadium church temple studio warehouse lab
    restaurant pub bar hotel campsite lake mountain trail river garden playground pool
""")
FOODS = _words("""
    pizza pasta sushi tacos curry ramen dumplings salad soup burgers noodles pancakes waffles
    bagels croissants sandwiches steak salmon risotto paella biryani dosa falafel hummus
    kebabs lasagna burritos nachos pho bibimbap kimchi tofu oatmeal cereal smoothies cookies
    brownies cheesecake pie ice_cream chocolate coffee tea lemonade wine beer
""")
ACTIVITIES = _words("""
    running hiking swimming cycling climbing skiing surfing yoga pilates boxing dancing
    painting drawing knitting baking cooking gardening camping fishing sailing kayaking
    reading writing journaling singing drumming gaming chess photography pottery woodworking
    volunteering tutoring coding meditating skating bowling golfing tennis badminton soccer
    basketball volleyball cricket baseball
""")
THINGS = _words("""
    car bike laptop phone tablet camera guitar piano keyboard headphones watch wallet keys
    passport ticket charger backpack suitcase umbrella jacket boots sneakers dress shirt
    couch table lamp fridge oven dishwasher washer dryer printer router blender kettle
    book novel notebook calendar email report presentation spreadsheet contract invoice
    budget mortgage rent loan insurance paycheck bonus promotion interview deadline meeting
    project proposal review appointment prescription vaccine surgery checkup therapy
    birthday wedding anniversary graduation party concert festival conference workshop
    podcast documentary series movie album playlist recipe cookbook puzzle painting sculpture
    puppy kitten dog cat hamster parrot goldfish horse plant tomato basil sunflower orchid
    apartment house cabin condo lease deposit furniture mattress pillow blanket curtains rug
    mirror shelf desk chair stool drawer closet garage attic basement balcony roof fence
    driveway mailbox doorbell thermostat heater furnace boiler faucet sink shower bathtub
    toilet toaster microwave freezer vacuum mop broom bucket sponge detergent trash recycling
    groceries receipt coupon refund warranty subscription membership account password login
    website app update software server database backup download upload screenshot video
    photo selfie album frame poster map guidebook itinerary reservation flight train bus
    ferry taxi scooter skateboard helmet gloves scarf hat sunglasses earrings necklace ring
    bracelet perfume makeup lipstick shampoo toothbrush razor vitamins medicine bandage
    crutches stitches allergy fever cough headache migraine cold flu rash injury diagnosis
    xray scan bloodwork results diet workout marathon race tournament match season trophy
    medal jersey ball racket bat net glove goal score playoff championship referee coach
    homework essay exam quiz grade semester thesis scholarship application transcript
    diploma lecture seminar textbook assignment internship resume portfolio reference salary
    raise layoff startup merger client customer vendor supplier shipment delivery package
    order return exchange complaint feedback survey newsletter blog article interview
    magazine newspaper headline election vote campaign protest rally petition donation
    charity fundraiser auction raffle bake_sale garage_sale yard picnic barbecue potluck
    brunch dinner lunch breakfast snack dessert appetizer buffet toast speech gift card
    surprise balloon cake candles decorations invitation guest list playlist costume
    sleepover retreat vacation honeymoon roadtrip cruise hostel airbnb motel resort spa
    sauna massage haircut manicure tattoo piercing braces glasses contacts hearing_aid
    wheelchair stroller crib diaper bottle formula nanny daycare preschool kindergarten
    recital rehearsal audition gig band choir orchestra drummer guitarist bassist violin
    cello trumpet saxophone flute ukulele harmonica amplifier microphone speaker record
    vinyl turntable radio television remote console controller headset drone robot
    telescope microscope compass tent sleeping_bag flashlight lantern firewood matches
    kayak canoe paddle surfboard snowboard skis sled bicycle tire brake engine battery
    mechanic oil_change inspection license registration ticket fine parking lot toll
    highway bridge tunnel traffic detour accident insurance_claim lawsuit court judge
    jury witness lawyer will inheritance estate funeral memorial eulogy obituary
""")
PEOPLE_ROLES = _words("""
    mom dad sister brother cousin aunt uncle grandma grandpa boss manager coworker neighbor
    roommate landlord dentist doctor nurse teacher coach therapist lawyer accountant
    plumber electrician mechanic barber trainer professor tutor babysitter friend
""")
FEELINGS = _words("""
    happy tired stressed excited nervous relieved anxious proud grateful annoyed frustrated
    bored calm overwhelmed thrilled worried disappointed hopeful curious confident lonely
    motivated exhausted sad amazed inspired embarrassed nostalgic restless content
""")
ADJECTIVES = _words("""
    great amazing terrible weird awesome fantastic awful beautiful expensive cheap crowded
    quiet loud cozy tiny huge delicious spicy sweet salty fresh stale broken new old fancy
    simple complicated boring interesting hilarious scary cold hot rainy sunny windy snowy
    early late busy slow fast long short easy hard strange perfect messy clean
""")
TIMES = [
    "yesterday", "today", "tomorrow", "last night", "this morning", "tonight",
    "this weekend", "last weekend", "next week", "last week", "on Monday", "on Tuesday",
    "on Wednesday", "on Thursday", "on Friday", "on Saturday", "on Sunday", "next month",
    "last month", "in the afternoon", "after work", "before lunch", "after dinner",
    "in January", "in March", "in May", "in July", "in September", "in November",
    "over the holidays", "during spring break", "last summer", "next year", "a while ago",
]  # fmt: skip
VERBS_PAST = _words("""
    visited tried bought fixed finished started booked cancelled called texted emailed met
    watched cooked ordered lost found sold painted cleaned planned moved organized signed
    returned borrowed shared recommended missed forgot remembered celebrated skipped joined
    """)
VERBS_BASE = _words("""
    visit try buy fix finish start book cancel call text email meet watch cook order find
    sell paint clean plan move organize sign return borrow share recommend celebrate join
    check schedule pick renew update
    """)
OPENERS = [
    "", "", "", "", "", "yeah ", "so ", "oh ", "okay so ", "honestly ", "I mean ",
    "you know, ", "well ", "right, ", "hey, ", "um ", "anyway ", "by the way ", "wait, ",
]  # fmt: skip

_SUBJECTS = ["I", "we", "{name}", "my {role}", "{name} and I", "she", "he", "they"]

TEMPLATES = [
    "{subj} {vpast} the {thing} {time}.",
    "{subj} went to {place} {time} and it was {adj}.",
    "did you {vbase} the {thing} yet?",
    "we should {vbase} the {thing} {time}.",
    "I think {name} would love {activity}.",
    "{name} said the {food} at that {venue} was {adj}.",
    "I've been feeling {feeling} about the {thing} lately.",
    "my {role} wants to go to {place} {time}.",
    "can you remind me to {vbase} the {thing} {time}?",
    "{name} is really into {activity} these days.",
    "we had {food} for dinner {time}.",
    "I'm so {feeling} about the {thing}.",
    "the {venue} near {name}'s place is {adj}.",
    "{name} just got back from {place}.",
    "I need to call my {role} about the {thing}.",
    "have you ever tried {activity} in {place}?",
    "I'm thinking of {activity} {time}.",
    "{name} moved to {place} {time}.",
    "the {thing} was way more {adj} than I expected.",
    "let's get {food} with {name} {time}.",
    "{name} forgot the {thing} at the {venue} again.",
    "my {role} recommended a {adj} {venue} in {place}.",
    "I can't believe {name} {vpast} the {thing}.",
    "we're meeting {name} at the {venue} {time}.",
    "I've got a {thing} {time} so I'm a bit {feeling}.",
    "{name} started {activity} and she is {feeling} about it.",
    "how was your trip to {place}?",
    "it was {adj}, we spent most of the time {activity}.",
    "{name}'s {thing} broke {time}.",
    "I want to learn {activity} this year.",
    "the {food} in {place} is the best I've had.",
    "remember when {name} and I got lost in {place}?",
    "I told my {role} I'd {vbase} the {thing} {time}.",
    "{name} is coming over {time} to help with the {thing}.",
    "we need more {food} for the {thing}.",
    "that {thing} cost way too much.",
    "I'm {feeling}, the {thing} is due {time}.",
    "{name} and {name2} are going to {place} for the {thing}.",
    "my {role} took me to a {adj} {food} place {time}.",
    "I finally {vpast} the {thing}, feels {adj}.",
    "no way, {name} {vpast} the {thing} without telling anyone?",
    "I'll pick up {food} on the way back from the {venue}.",
    "{name} keeps talking about the {thing} in {place}.",
    "what time is the {thing} {time}?",
    "I left my {thing} at {name}'s place.",
    "the {venue} was closed so we ended up {activity}.",
    "my {role} is visiting from {place} {time}.",
    "I should probably {vbase} the {thing} before {name} gets back.",
    "do you know a good {role} around here?",
    "{name} got a new {thing}, it's really {adj}.",
    "we could try {activity} if the weather is {adj}.",
    "I've never been to {place}, is it {adj}?",
    "the {thing} for {name}'s {thing2} is sorted.",
    "I'm not sure about the {thing}, it feels {adj}.",
    "can we talk about the {thing} {time}?",
    "{name} wants to open a {venue} in {place}.",
    "my {role} finally {vpast} the {thing}.",
    "it's been {adj} since we moved to {place}.",
    "we're out of {food} again.",
    "honestly {activity} helps me feel less {feeling}.",
    "the {role} said the {thing} looks {adj}.",
    "I'm saving up for a {thing}.",
    "{name} invited us to the {thing} {time}.",
    "I ran into {name} at the {venue} {time}.",
    "did {name} ever {vbase} the {thing}?",
    "I'm taking the {thing} to the {venue} {time}.",
    "we watched a documentary about {place} {time}.",
    "I have no idea where the {thing} went.",
]


def zipf_weights(n: int, s: float = 0.9) -> list[float]:
    return [1.0 / (rank**s) for rank in range(1, n + 1)]


class Chooser:
    """Zipf-weighted choice from a list, the order of which is shuffled once by the seed."""

    def __init__(self, rng: random.Random, items: Sequence[str], s: float = 0.9) -> None:
        self.items = list(items)
        rng.shuffle(self.items)
        self.cum = list(accumulate(zipf_weights(len(self.items), s)))
        self.rng = rng

    def __call__(self) -> str:
        return self.rng.choices(self.items, cum_weights=self.cum, k=1)[0]


class TextGenerator:
    """Conversational sentences. Deterministic for a given seed."""

    def __init__(self, seed: int = 42, rare_name_rate: float = 0.0005) -> None:
        self.rng = random.Random(seed)
        r = self.rng
        self.rare_name_rate = rare_name_rate
        self.pick = {
            "name": Chooser(r, NAMES),
            "role": Chooser(r, PEOPLE_ROLES),
            "place": Chooser(r, PLACES),
            "venue": Chooser(r, VENUES),
            "food": Chooser(r, FOODS),
            "activity": Chooser(r, ACTIVITIES),
            "thing": Chooser(r, THINGS),
            "feeling": Chooser(r, FEELINGS),
            "adj": Chooser(r, ADJECTIVES),
            "time": Chooser(r, TIMES),
            "vpast": Chooser(r, VERBS_PAST),
            "vbase": Chooser(r, VERBS_BASE),
            "template": Chooser(r, TEMPLATES, s=0.3),
            "opener": Chooser(r, OPENERS, s=0.3),
        }
        self.rare = list(RARE_NAMES)

    def name(self) -> str:
        if self.rng.random() < self.rare_name_rate:
            return self.rng.choice(self.rare)
        return self.pick["name"]()

    def sentence(self) -> str:
        p = self.pick
        template = p["template"]()
        subj = self.rng.choice(_SUBJECTS)
        fills = {
            "subj": subj.format(name=self.name(), role=p["role"]()),
            "name": self.name(),
            "name2": self.name(),
        }
        for slot in ("role", "place", "venue", "food", "activity", "thing", "feeling", "adj"):
            fills[slot] = p[slot]().replace("_", " ")
        fills["thing2"] = p["thing"]().replace("_", " ")
        for slot in ("time", "vpast", "vbase"):
            fills[slot] = p[slot]()
        text = p["opener"]() + template.format(**fills)
        return text[0].upper() + text[1:]

    def segment_text(self) -> str:
        n = self.rng.choices((1, 2, 3), weights=(5, 3, 1))[0]
        return " ".join(self.sentence() for _ in range(n))

    def vocabulary(self) -> dict[str, list[str]]:
        """Query vocabulary by class (content words only)."""
        return {
            "names": list(NAMES),
            "rare_names": list(RARE_NAMES),
            "places": list(PLACES),
            "content": [
                w.replace("_", " ")
                for w in (
                    *VENUES,
                    *FOODS,
                    *ACTIVITIES,
                    *THINGS,
                    *PEOPLE_ROLES,
                    *FEELINGS,
                    *ADJECTIVES,
                    *VERBS_PAST,
                )
            ],
        }


class LocomoText:
    """Real conversation turns (LoCoMo), cycled in order; speaker names come along."""

    def __init__(self, path: Path) -> None:
        data_file = path / "locomo-dev.json" if path.is_dir() else path
        items = json.loads(data_file.read_text(encoding="utf-8"))
        self.turns: list[tuple[str, str]] = []
        for item in items:
            conv = item["conversation"]
            keys = [k for k in conv if re.fullmatch(r"session_\d+", k)]
            for key in sorted(keys, key=lambda k: int(k.split("_")[1])):
                for turn in conv[key]:
                    if turn.get("text"):
                        self.turns.append((turn["speaker"], turn["text"]))
        if not self.turns:
            raise ValueError(f"no conversation turns in {data_file}")
        self._i = 0

    def next_turn(self) -> tuple[str, str]:
        turn = self.turns[self._i % len(self.turns)]
        self._i += 1
        return turn


SPEAKERS = ["SPEAKER_00", "SPEAKER_01", "SPEAKER_02", "SPEAKER_03"]


@dataclass(frozen=True, slots=True)
class SessionPlan:
    session_id: str
    device_id: str
    started_at: datetime
    segments: int


class PayloadFactory:
    """Transcript payloads of realistic shape: 5–20 segments a line, a few seconds each,
    speakers taking turns, segment ids unique within the session."""

    def __init__(
        self,
        seed: int = 42,
        locomo: Path | None = None,
        min_segments: int = 5,
        max_segments: int = 20,
    ) -> None:
        self.rng = random.Random(seed + 1)
        self.text = TextGenerator(seed)
        self.locomo = LocomoText(locomo) if locomo is not None else None
        self.min_segments = min_segments
        self.max_segments = max_segments

    def _turn(self) -> tuple[str | None, str]:
        if self.locomo is not None:
            return self.locomo.next_turn()
        return None, self.text.segment_text()

    def session_payloads(self, plan: SessionPlan) -> Iterator[TranscriptPayload]:
        """All payloads (lines) of one session, in order."""
        made = 0
        t = 0.0
        speaker = 0
        while made < plan.segments:
            n = min(self.rng.randint(self.min_segments, self.max_segments), plan.segments - made)
            segs = []
            for _ in range(n):
                name, text = self._turn()
                if self.rng.random() < 0.6:
                    speaker = (speaker + 1) % 2 if self.rng.random() < 0.9 else 2
                duration = max(0.6, len(text) / 15.0 + self.rng.uniform(-0.5, 1.0))
                segs.append(
                    Segment(
                        segment_id=f"seg-{made:06d}",
                        speaker=name or SPEAKERS[speaker],
                        text=text,
                        start=round(t, 3),
                        end=round(t + duration, 3),
                        language="en",
                        stt_engine="whisper-large-v3",
                    )
                )
                made += 1
                t += duration + self.rng.uniform(0.1, 1.5)
            yield TranscriptPayload(
                session_id=plan.session_id,
                device_id=plan.device_id,
                session_started_at=plan.started_at,
                segments=segs,
            )


def spread_sessions(
    total_segments: int,
    sessions: int,
    start: datetime,
    span: timedelta,
    prefix: str,
    seed: int = 42,
) -> list[SessionPlan]:
    """`sessions` sessions sharing `total_segments`, started at random times over `span`."""
    rng = random.Random(seed + 2)
    base, extra = divmod(total_segments, sessions)
    times = sorted(start + span * rng.random() for _ in range(sessions))
    return [
        SessionPlan(
            session_id=f"{prefix}-{i:05d}",
            device_id="bench-device",
            started_at=times[i],
            segments=base + (1 if i < extra else 0),
        )
        for i in range(sessions)
    ]
