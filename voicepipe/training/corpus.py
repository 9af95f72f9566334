"""Seeded generator of varied English sentences for the TTS training corpus.

Templates × word lists: assistant-style replies like a small chat LLM writes
("Sure! The capital of France is Paris."), questions, numbers, dates, times,
money, short acknowledgements and long explanations (1–25 words). The same
seed always gives the same sentences; held-out sentences are disjoint from
the training ones by construction (deduplicated by normalised text).
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable

COUNTRIES = {
    "France": "Paris",
    "Japan": "Tokyo",
    "Italy": "Rome",
    "Spain": "Madrid",
    "Germany": "Berlin",
    "Canada": "Ottawa",
    "Australia": "Canberra",
    "Brazil": "Brasilia",
    "Egypt": "Cairo",
    "Kenya": "Nairobi",
    "Norway": "Oslo",
    "Sweden": "Stockholm",
    "Portugal": "Lisbon",
    "Greece": "Athens",
    "Mexico": "Mexico City",
    "India": "New Delhi",
    "China": "Beijing",
    "Peru": "Lima",
    "Chile": "Santiago",
    "Ireland": "Dublin",
    "Poland": "Warsaw",
    "Austria": "Vienna",
    "Thailand": "Bangkok",
    "Vietnam": "Hanoi",
    "Argentina": "Buenos Aires",
}
NAMES = (
    "Alice Bob Carol David Emma Frank Grace Henry Isabel Jack Karen Liam Maria Noah "
    "Olivia Peter Quinn Rachel Sam Tina Victor Wendy Yusuf Zoe Maya Omar Lucy Ethan Sofia "
    "Daniel"
).split()
CITIES = (
    "London Chicago Boston Seattle Denver Austin Toronto Sydney Berlin Paris Tokyo Dallas "
    "Miami Phoenix Atlanta Portland Vancouver Dublin Madrid Rome Oslo Prague Vienna"
).split()
ANIMALS = "cat dog horse rabbit parrot turtle dolphin elephant tiger owl fox whale penguin".split()
FOODS = (
    "pasta soup rice bread salad pizza curry tacos pancakes noodles sandwiches cookies "
    "oatmeal lasagna dumplings"
).split()
OBJECTS = (
    "umbrella laptop phone notebook jacket wallet backpack bicycle camera guitar lamp "
    "kettle blanket ticket charger"
).split()
ADJ = (
    "quick quiet bright simple helpful careful gentle strong warm fresh clear busy calm "
    "friendly modern ancient tiny huge"
).split()
VERBS = "read write cook paint visit call clean fix plan study watch learn build".split()
TOPICS = [
    "photosynthesis",
    "gravity",
    "the water cycle",
    "inflation",
    "machine learning",
    "the immune system",
    "volcanoes",
    "black holes",
    "electricity",
    "the stock market",
    "climate change",
    "the internet",
    "vaccines",
    "tides",
    "rainbows",
    "earthquakes",
]
FACTS = [
    "plants turn sunlight, water and carbon dioxide into sugar and oxygen",
    "every object with mass pulls on every other object",
    "water evaporates, forms clouds and falls again as rain",
    "prices rise when more money chases the same amount of goods",
    "computers learn patterns from many examples instead of fixed rules",
    "white blood cells find and destroy germs",
    "hot melted rock rises through cracks in the crust",
    "gravity is so strong that not even light can escape",
    "charged particles flow through a wire like water through a pipe",
    "people buy and sell small pieces of companies",
    "the moon's gravity pulls the oceans toward it",
    "sunlight bends and splits inside raindrops",
]
MONTHS = (
    "January February March April May June July August September October November December"
).split()
DAYS = "Monday Tuesday Wednesday Thursday Friday Saturday Sunday".split()
OPENERS = [
    "Sure!",
    "Of course.",
    "Great question.",
    "Absolutely.",
    "Okay.",
    "Certainly!",
    "Good news.",
    "Here you go.",
    "No problem.",
    "Happy to help.",
    "Alright.",
    "Good idea!",
]
SHORT = [
    "Yes.",
    "No.",
    "Thanks!",
    "Hello!",
    "Goodbye.",
    "Got it.",
    "Sounds good.",
    "I see.",
    "Not yet.",
    "Maybe later.",
    "Right away.",
    "Good morning!",
    "Okay, done.",
    "Let me check.",
    "One moment please.",
    "That's correct.",
    "I'm not sure.",
    "Nice to meet you.",
    "See you soon.",
    "You're welcome.",
]
PARTS_OF_DAY = ["morning", "afternoon", "weekend", "evening"]
PLACES = ["table", "shelf", "desk", "counter", "chair"]
GROUNDS = ["field", "road", "garden", "beach", "street"]
UNITS = [
    "kilometers",
    "miles",
    "minutes",
    "hours",
    "degrees",
    "percent",
    "dollars",
    "meters",
    "pounds",
    "liters",
    "steps",
    "pages",
    "people",
    "days",
]


def _time(r: random.Random) -> str:
    h, m = r.randint(1, 12), r.choice([0, 5, 10, 15, 20, 30, 45, 50])
    suffix = r.choice([" am", " pm", "", " in the morning", " in the evening"])
    if m:
        return f"{h}:{m:02d}{suffix}"
    return f"{h} o'clock{suffix if suffix.startswith(' in') else ''}"


def _date(r: random.Random) -> str:
    d = r.randint(1, 28)
    suf = "th" if 10 <= d % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(d % 10, "th")
    form = r.randrange(3)
    if form == 0:
        return f"{r.choice(MONTHS)} {d}{suf}"
    if form == 1:
        return f"the {d}{suf} of {r.choice(MONTHS)}"
    return f"{r.choice(MONTHS)} {d}, {r.randint(1950, 2030)}"


def _num(r: random.Random) -> str:
    kind = r.randrange(5)
    if kind == 0:
        return str(r.randint(0, 20))
    if kind == 1:
        return str(r.randint(21, 99))
    if kind == 2:
        return str(r.randint(100, 999))
    if kind == 3:
        return f"{r.randint(1, 99)},{r.randint(0, 999):03d}"
    return f"{r.randint(0, 99)}.{r.randint(1, 9)}"


def _capital(r: random.Random) -> str:
    c = r.choice(list(COUNTRIES))
    return r.choice(
        [
            f"{r.choice(OPENERS)} The capital of {c} is {COUNTRIES[c]}.",
            f"The capital of {c} is {COUNTRIES[c]}.",
            f"What is the capital of {c}?",
            f"{COUNTRIES[c]} is the capital and largest city of {c}.",
        ]
    )


def _weather(r: random.Random) -> str:
    city, t = r.choice(CITIES), r.randint(-5, 35)
    cond = r.choice(["sunny", "cloudy", "rainy", "windy", "foggy", "snowy", "clear", "stormy"])
    return r.choice(
        [
            f"Today in {city} it will be {cond} with a high of {t} degrees.",
            f"What's the weather like in {city} on {r.choice(DAYS)}?",
            f"{r.choice(OPENERS)} Expect {cond} skies in {city} and around {t} degrees.",
            f"It is {cond} right now, so you might want your {r.choice(OBJECTS)}.",
        ]
    )


def _timeq(r: random.Random) -> str:
    return r.choice(
        [
            f"Your meeting with {r.choice(NAMES)} is at {_time(r)}.",
            f"I set an alarm for {_time(r)} on {r.choice(DAYS)}.",
            f"What time does the train to {r.choice(CITIES)} leave?",
            f"The store opens at {_time(r)} and closes at {_time(r)}.",
            f"{r.choice(OPENERS)} I'll remind you at {_time(r)}.",
            f"It's {_time(r)} now.",
        ]
    )


def _dateq(r: random.Random) -> str:
    return r.choice(
        [
            f"The event takes place on {_date(r)}.",
            f"{r.choice(NAMES)} was born on {_date(r)}.",
            f"When is the deadline? It's {_date(r)}.",
            f"Your next appointment is on {r.choice(DAYS)}, {_date(r)}.",
            f"Is the concert on {_date(r)} or later?",
        ]
    )


def _numbers(r: random.Random) -> str:
    return r.choice(
        [
            f"That is about {_num(r)} {r.choice(UNITS)}.",
            f"{_num(r)} plus {_num(r)} equals {_num(r)}.",
            f"The total comes to ${r.randint(1, 500)}.{r.randint(0, 99):02d}.",
            f"There are {_num(r)} {r.choice(UNITS)} left.",
            f"How many {r.choice(UNITS)} is that?",
            f"Your order number is {r.randint(1000, 99999)}.",
            f"It costs {r.randint(2, 90)} dollars, or about {r.randint(2, 90)} euros.",
            f"The population is roughly {r.randint(2, 900)} thousand.",
            f"Call me at {r.randint(200, 999)} {r.randint(100, 999)} {r.randint(1000, 9999)}.",
        ]
    )


def _explain(r: random.Random) -> str:
    i = r.randrange(len(FACTS))
    topic = TOPICS[i] if i < len(TOPICS) else r.choice(TOPICS)
    return r.choice(
        [
            f"{r.choice(OPENERS)} In short, {FACTS[i]}.",
            f"Can you explain {topic} in simple terms?",
            f"{topic.capitalize()} is a {r.choice(ADJ)} idea: {FACTS[i]}.",
            f"Here's a simple way to think about it: {FACTS[i]}, and that is why it matters.",
        ]
    )


def _request(r: random.Random) -> str:
    return r.choice(
        [
            f"Could you help me {r.choice(VERBS)} something this {r.choice(PARTS_OF_DAY)}?",
            f"Please add {r.choice(FOODS)} to my shopping list.",
            f"I'd like to {r.choice(VERBS)} with {r.choice(NAMES)} on {r.choice(DAYS)}.",
            f"Remind me to bring my {r.choice(OBJECTS)} tomorrow.",
            f"Where did I leave my {r.choice(OBJECTS)}?",
            f"Do you know a {r.choice(ADJ)} recipe for {r.choice(FOODS)}?",
            f"How far is {r.choice(CITIES)} from {r.choice(CITIES)}?",
            f"Who wrote the book about the {r.choice(ADJ)} {r.choice(ANIMALS)}?",
        ]
    )


def _reply(r: random.Random) -> str:
    o = r.choice(OPENERS)
    return r.choice(
        [
            f"{r.choice(OPENERS)} I've added {r.choice(FOODS)} to your list.",
            f"{o} A {r.choice(ANIMALS)} is a {r.choice(ADJ)} animal that many people love.",
            f"I'm sorry, I can't {r.choice(VERBS)} that for you, but I can help you plan it.",
            f"{r.choice(NAMES)} said the {r.choice(OBJECTS)} is on the {r.choice(PLACES)}.",
            f"You could try making {r.choice(FOODS)} with a {r.choice(ADJ)} side of {r.choice(FOODS)}.",
            f"{o} Here are three ideas: {r.choice(VERBS)}, {r.choice(VERBS)}, or just relax.",
            f"The {r.choice(ADJ)} {r.choice(ANIMALS)} ran across the {r.choice(GROUNDS)}.",
            f"Let me know if you'd like more details about {r.choice(TOPICS)}.",
            f"I think {r.choice(CITIES)} is a {r.choice(ADJ)} place to visit in {r.choice(MONTHS)}.",
            f"{o} {r.choice(NAMES)} and {r.choice(NAMES)} will meet at {_time(r)} near the station.",
        ]
    )


def _long(r: random.Random) -> str:
    parts = [r.choice(GENERATORS[:-1])(r) for _ in range(2)]
    return " ".join(parts)


def _short(r: random.Random) -> str:
    return r.choice(SHORT)


GENERATORS: list[Callable[[random.Random], str]] = [
    _capital,
    _weather,
    _timeq,
    _dateq,
    _numbers,
    _explain,
    _request,
    _reply,
    _short,
    _long,
]
WEIGHTS = [1.0, 1.2, 1.2, 1.0, 1.5, 1.0, 1.3, 2.0, 0.4, 1.5]


def _articles(text: str) -> str:
    return re.sub(r"\b([Aa]) (?=[aeiouAEIOU])", lambda m: m.group(1) + "n ", text)


def _key(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", " ", text.lower()).strip()


def sentences(
    n_train: int = 4000, n_heldout: int = 60, seed: int = 0, max_words: int = 25
) -> tuple[list[str], list[str]]:
    """(train, heldout): distinct sentences, the held-out ones never in train."""
    r = random.Random(seed)
    seen: set[str] = set()
    out: list[str] = []
    tries = 0
    while len(out) < n_train + n_heldout:
        tries += 1
        if tries > 50 * (n_train + n_heldout):
            raise RuntimeError("corpus: cannot generate enough distinct sentences")
        gen = r.choices(GENERATORS, WEIGHTS)[0]
        text = _articles(" ".join(gen(r).split()))
        k = _key(text)
        if not k or k in seen or len(text.split()) > max_words:
            continue
        seen.add(k)
        out.append(text)
    # Held-out picked from a separate stream so its mix matches the train mix.
    pick = random.Random(seed + 1).sample(range(len(out)), n_heldout)
    held = set(pick)
    return [s for i, s in enumerate(out) if i not in held], [out[i] for i in sorted(pick)]
