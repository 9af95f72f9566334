"""Second series of assistant-style prompts for draft distillation.

The first series (``draft_prompts``) saturates at 4,337 distinct prompts,
all of which have been answered. These templates and slot lists are new
(everyday help, food, health, money, tech support, science "why" questions,
history, language, feelings, planning), so a longer ``train_prompts`` list
continues with prompts the draft has not seen rather than rephrasings of the
first series. The first series' order is untouched: shard s of the data
still holds prompts 32·s … 32·s + 31 of the same list.
"""

from __future__ import annotations

import random

# fmt: off
FOODS = [
    "lentils", "salmon", "tofu", "spinach", "avocado", "oatmeal", "chickpeas", "broccoli",
    "sweet potatoes", "quinoa", "mushrooms", "zucchini", "ground beef", "shrimp", "cabbage",
    "bananas", "apples", "cauliflower", "eggplant", "leftover rice", "canned tuna", "feta cheese",
]
DISHES = [
    "lasagna", "a simple curry", "guacamole", "banana bread", "fried rice", "a Greek salad",
    "tomato soup", "chocolate chip cookies", "hummus", "a stir fry", "pizza dough",
    "scrambled eggs", "a smoothie", "french toast", "chili", "pesto", "a vegetable omelette",
]
SYMPTOMS = [
    "a headache", "a sore throat", "a cold", "back pain", "trouble sleeping", "hiccups",
    "a sunburn", "a stiff neck", "dry skin", "a blister", "jet lag", "a mild fever",
    "sore muscles after exercise", "a runny nose", "eye strain from screens",
]
GADGETS = [
    "my phone", "my laptop", "my printer", "my wifi router", "my smart TV", "my headphones",
    "my tablet", "my smartwatch", "my bluetooth speaker", "my keyboard", "my email",
]
PROBLEMS = [
    "is very slow", "won't turn on", "keeps disconnecting", "battery drains fast",
    "makes a strange noise", "won't connect to wifi", "is running out of storage",
    "froze and won't respond", "is overheating", "won't charge",
]
WHY = [
    "the sky is blue", "leaves change color in autumn", "we yawn", "ice floats", "cats purr",
    "the ocean is salty", "we have fingerprints", "onions make you cry", "bread goes stale",
    "the moon changes shape", "birds fly south in winter", "we get goosebumps", "popcorn pops",
    "metal feels cold", "stars twinkle", "we dream", "the sea looks green sometimes",
    "our voices sound different on recordings", "planes leave white trails",
    "dogs wag their tails", "we need to sleep", "bubbles are round",
]
PEOPLE = [
    "Marie Curie", "Albert Einstein", "Leonardo da Vinci", "Cleopatra", "Isaac Newton",
    "Ada Lovelace", "Nelson Mandela", "Mozart", "Frida Kahlo", "Charles Darwin", "Galileo",
    "Amelia Earhart", "Shakespeare", "Genghis Khan", "Nikola Tesla", "Jane Austen",
    "Martin Luther King Jr.", "Alan Turing", "Queen Victoria", "Confucius",
]
EVENTS = [
    "the fall of the Berlin Wall", "the first moon landing", "the invention of the telephone",
    "the Renaissance", "the Industrial Revolution", "the building of the pyramids",
    "the discovery of penicillin", "the first flight of the Wright brothers",
    "the end of World War Two", "the invention of the light bulb", "the Olympic games",
]
WORDS = [
    "serendipity", "ubiquitous", "ephemeral", "pragmatic", "nostalgia", "resilient", "ambiguous",
    "meticulous", "candid", "eloquent", "frugal", "benevolent", "quaint", "procrastinate",
    "empathy", "irony", "cliché", "paradox", "whimsical", "tenacious",
]
LANGUAGES = ["Spanish", "French", "German", "Italian", "Japanese", "Portuguese", "Korean"]
PHRASES = [
    "good morning", "thank you very much", "where is the train station", "how much is this",
    "nice to meet you", "I am lost", "see you tomorrow", "happy birthday", "excuse me",
]
FEELINGS = [
    "stressed about work", "lonely", "anxious before a trip", "unmotivated", "overwhelmed",
    "excited about a new job", "homesick", "tired all the time", "worried about money",
    "frustrated with my roommate", "proud of myself", "nervous about a first date",
]
EVENTS_TO_PLAN = [
    "a birthday party", "a picnic", "a dinner party", "a road trip", "a camping weekend",
    "a study schedule", "a workout week", "a surprise party", "a wedding toast",
    "a family reunion", "a garage sale", "a game night",
]
MONEY = [
    "an emergency fund", "a retirement account", "a credit card", "a student loan", "a budget app",
    "a savings account", "an index fund", "a car loan", "a mortgage",
]
ANIMALS = [
    "octopuses", "elephants", "penguins", "owls", "dolphins", "bats", "ants", "sharks", "giraffes",
    "hummingbirds", "wolves", "turtles", "koalas", "crows", "jellyfish",
]
SKILLS = [
    "playing guitar", "drawing", "public speaking", "touch typing", "juggling", "knitting",
    "photography", "chess", "swimming", "baking", "painting", "writing poetry", "dancing",
]
UNITS = [
    ("cups", "milliliters"), ("pounds", "kilograms"), ("inches", "centimeters"),
    ("miles", "kilometers"), ("ounces", "grams"), ("feet", "meters"), ("gallons", "liters"),
    ("Fahrenheit", "Celsius"),
]
AMOUNTS = [2, 3, 5, 8, 10, 20, 25, 50, 60, 90, 120]
PERIODS = ["a week", "a month", "ten minutes a day", "one weekend", "a year", "a summer"]
# fmt: on


def _food(r: random.Random) -> str:
    f, d = r.choice(FOODS), r.choice(DISHES)
    return r.choice(
        [
            f"What can I make with {f}?",
            f"Is {f} healthy?",
            f"How do I store {f}?",
            f"How do you cook {f}?",
            f"Give me a quick recipe with {f}.",
            f"How do I make {d}?",
            f"What goes well with {d}?",
            f"Can I freeze {d}?",
            f"What's a vegetarian version of {d}?",
            f"How long does {d} keep in the fridge?",
            f"Why did my {d} turn out dry?",
        ]
    )


def _health(r: random.Random) -> str:
    s = r.choice(SYMPTOMS)
    return r.choice(
        [
            f"What helps with {s}?",
            f"How can I get rid of {s}?",
            f"I have {s}. What should I do?",
            f"When should I see a doctor for {s}?",
            f"What causes {s}?",
            f"Any home remedies for {s}?",
        ]
    )


def _tech(r: random.Random) -> str:
    g, p = r.choice(GADGETS), r.choice(PROBLEMS)
    return r.choice(
        [
            f"{g.capitalize()} {p}. What can I do?",
            f"What should I check if {g} {p}?",
            f"How do I fix it when {g} {p}?",
            f"Help, {g} {p}.",
            f"How do I update {g}?",
            f"How do I reset {g}?",
            f"How do I keep {g} secure?",
        ]
    )


def _why(r: random.Random) -> str:
    w = r.choice(WHY)
    return r.choice(
        [
            f"Do you know why {w}?",
            f"Why is it that {w}?",
            f"Can you explain why {w}?",
            f"I always wondered why {w}.",
            f"Tell me why {w}.",
        ]
    )


def _history(r: random.Random) -> str:
    if r.random() < 0.5:
        p = r.choice(PEOPLE)
        return r.choice(
            [
                f"Who was {p}?",
                f"What is {p} famous for?",
                f"Tell me a fun fact about {p}.",
                f"When did {p} live?",
                f"Why is {p} important?",
                f"Summarize the life of {p}.",
            ]
        )
    e = r.choice(EVENTS)
    return r.choice(
        [
            f"What was {e}?",
            f"When did {e} happen?",
            f"Why did {e} matter?",
            f"Tell me about {e}.",
            f"What led to {e}?",
        ]
    )


def _language(r: random.Random) -> str:
    w, lang, ph = r.choice(WORDS), r.choice(LANGUAGES), r.choice(PHRASES)
    return r.choice(
        [
            f"What does {w} mean?",
            f"Use {w} in a sentence.",
            f"What's a synonym for {w}?",
            f"How do you pronounce {w}?",
            f"How do you say {ph} in {lang}?",
            f"Is {lang} hard to learn?",
            f"Teach me {r.choice(['three', 'five'])} words in {lang}.",
            f"What's the opposite of {w}?",
        ]
    )


def _feelings(r: random.Random) -> str:
    f = r.choice(FEELINGS)
    return r.choice(
        [
            f"I'm feeling {f}.",
            f"I feel {f}. Any advice?",
            f"What can I do when I'm {f}?",
            f"How do I stop feeling {f}?",
            f"Lately I've been {f}.",
        ]
    )


def _plan(r: random.Random) -> str:
    e = r.choice(EVENTS_TO_PLAN)
    return r.choice(
        [
            f"Help me plan {e}.",
            f"What do I need for {e}?",
            f"Give me ideas for {e}.",
            f"Make a checklist for {e}.",
            f"How far ahead should I plan {e}?",
            f"What's a good budget for {e}?",
        ]
    )


def _money(r: random.Random) -> str:
    m = r.choice(MONEY)
    return r.choice(
        [
            f"What is {m}?",
            f"Do I need {m}?",
            f"How do I open {m}?",
            f"What are the risks of {m}?",
            f"How does {m} work?",
            f"When should I get {m}?",
        ]
    )


def _animals(r: random.Random) -> str:
    a = r.choice(ANIMALS)
    return r.choice(
        [
            f"Tell me something surprising about {a}.",
            f"How smart are {a}?",
            f"Where do {a} live?",
            f"What do {a} eat?",
            f"How long do {a} live?",
            f"How do {a} sleep?",
            f"Are {a} dangerous?",
        ]
    )


def _skills(r: random.Random) -> str:
    s, p = r.choice(SKILLS), r.choice(PERIODS)
    return r.choice(
        [
            f"How do I get better at {s}?",
            f"Can I learn {s} in {p}?",
            f"What's a good first step for {s}?",
            f"Is {s} a good hobby?",
            f"What equipment do I need for {s}?",
            f"What mistakes do beginners make in {s}?",
        ]
    )


def _convert(r: random.Random) -> str:
    (a, b), n = r.choice(UNITS), r.choice(AMOUNTS)
    if r.random() < 0.5:
        a, b = b, a
    return r.choice(
        [
            f"How many {b} is {n} {a}?",
            f"Convert {n} {a} to {b}.",
            f"What's {n} {a} in {b}?",
        ]
    )


TEMPLATES = [
    (_food, 3),
    (_health, 2),
    (_tech, 2),
    (_why, 2),
    (_history, 2),
    (_language, 2),
    (_feelings, 1),
    (_plan, 2),
    (_money, 1),
    (_animals, 2),
    (_skills, 2),
    (_convert, 1),
]
FNS = [f for f, w in TEMPLATES for _ in range(w)]
