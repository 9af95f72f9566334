"""Third series of assistant-style prompts for draft distillation.

After the first two series (``draft_prompts``, ``draft_prompts_more``) were
answered, these add topics neither covers: geography and quick facts, space,
sports, arts and media, home and garden, cars, pets, parenting, work, school
subjects, etiquette, shopping and "what if" questions.
"""

from __future__ import annotations

import random

# fmt: off
COUNTRIES = [
    "Japan", "Brazil", "Canada", "Egypt", "India", "Norway", "Australia", "Mexico", "Greece",
    "Thailand", "Argentina", "Ireland", "Morocco", "New Zealand", "South Korea", "Chile",
    "Portugal", "Turkey", "Finland", "Peru", "Kenya", "Vietnam", "Switzerland", "Poland",
    "Colombia", "Indonesia", "Sweden", "Nigeria", "Cuba", "Croatia",
]
FACTS = [
    "Mount Everest", "the Amazon river", "the Sahara desert", "the Pacific Ocean",
    "the Eiffel Tower", "the Great Wall of China", "Antarctica", "the Nile", "the Moon",
    "the Sun", "Mars", "Jupiter", "the Milky Way", "the Statue of Liberty", "Lake Baikal",
]
SPORTS = [
    "soccer", "basketball", "tennis", "cricket", "golf", "baseball", "rugby", "volleyball",
    "cycling", "rock climbing", "skiing", "table tennis", "badminton", "surfing", "boxing",
]
MEDIA = [
    "jazz", "classical music", "hip hop", "film noir", "anime", "science fiction",
    "mystery novels", "impressionist painting", "opera", "stand-up comedy", "poetry",
    "video games", "documentaries", "musicals", "graphic novels",
]
HOME = [
    "clean a microwave", "unclog a drain", "get rid of fruit flies", "hang a picture",
    "remove a coffee stain", "paint a room", "keep my kitchen organized", "descale a kettle",
    "grow herbs indoors", "get rid of a musty smell", "defrost a freezer", "sharpen a knife",
    "fold a fitted sheet", "reduce my electricity bill", "keep mosquitoes away",
    "fix a squeaky door", "clean grout", "make my home smell nice", "childproof a kitchen",
    "clean a cast iron pan", "remove stickers from glass", "stop a toilet from running",
]
CAR = [
    "check my tire pressure", "jump start a car", "save fuel when driving",
    "prepare my car for winter", "clean my car's interior", "check the oil",
    "stay awake on a long drive", "parallel park", "know when my brakes need service",
]
PETS = [
    "a kitten", "an old dog", "a rabbit", "a parrot", "a hamster", "a goldfish", "a puppy",
    "a guinea pig", "a rescue cat", "a tortoise",
]
KIDS = [
    "a toddler", "a six-year-old", "a ten-year-old", "a teenager", "twins", "a newborn",
]
WORK = [
    "ask for a raise", "write a professional email", "run a better meeting",
    "handle a difficult coworker", "say no to extra work", "switch careers",
    "work from home productively", "prepare for a performance review", "network at an event",
    "take better notes", "manage my time at work", "start a side business",
]
SCHOOL = [
    "fractions", "the Pythagorean theorem", "photosynthesis", "the past tense",
    "long division", "the periodic table", "supply and demand", "the causes of World War One",
    "how plants grow", "the solar system", "simple interest", "commas", "algebra",
    "the scientific method", "cell division", "percentages", "probability", "verbs",
    "the water cycle", "multiplication tables", "gravity", "the Roman numerals",
    "decimals", "the food chain", "volume and area",
]
WHAT_IF = [
    "the moon disappeared", "humans could breathe underwater", "there was no internet",
    "we never slept", "everyone spoke the same language", "the earth stopped spinning",
    "cars could fly", "bees went extinct", "it never rained", "we lived on Mars",
    "animals could talk", "we had no money",
]
BUY = [
    "running shoes", "a mattress", "a used car", "a coffee maker", "a winter coat",
    "a first guitar", "a bike", "a vacuum cleaner", "a tent", "a desk chair", "a camera",
    "a laptop for school", "hiking boots", "a blender", "a smartphone", "a backpack",
    "a sofa", "a pair of glasses", "a rice cooker",
]
JOBS = [
    "a pharmacist", "an architect", "a data scientist", "an electrician", "a paramedic",
    "a librarian", "a pilot", "a chef", "a park ranger", "a translator", "a dentist",
    "an accountant", "a firefighter", "a marine biologist", "a graphic designer",
    "a nurse", "a lawyer", "a plumber", "a teacher", "a software engineer", "a journalist",
    "a veterinarian", "an air traffic controller", "a physiotherapist", "a barista",
]
MEALS = ["breakfast", "lunch", "dinner", "snack", "dessert", "packed lunch"]
DIETS = [
    "a vegetarian", "a vegan", "someone with diabetes", "a picky eater", "an athlete",
    "someone on a budget", "someone who hates cooking", "a gluten-free diet", "a student",
]
OCCASIONS = [
    "a job interview", "a wedding", "a first date", "a hike", "a funeral", "a concert",
    "a business dinner", "a beach party", "a graduation",
]
WEATHER = ["rainy", "very hot", "freezing", "windy", "humid", "snowy"]
# fmt: on


def _geo(r: random.Random) -> str:
    if r.random() < 0.5:
        c = r.choice(COUNTRIES)
        return r.choice(
            [
                f"What is the capital of {c}?",
                f"What is {c} famous for?",
                f"What's the population of {c}?",
                f"What currency does {c} use?",
                f"Tell me three facts about {c}.",
                f"What is traditional food in {c}?",
            ]
        )
    f = r.choice(FACTS)
    return r.choice(
        [
            f"How big is {f}?",
            f"How old is {f}?",
            f"How far away is {f}?",
            f"What's special about {f}?",
            f"Give me a fun fact about {f}.",
        ]
    )


def _sports(r: random.Random) -> str:
    s = r.choice(SPORTS)
    return r.choice(
        [
            f"What are the rules of {s}?",
            f"How do I start playing {s}?",
            f"Is {s} good exercise?",
            f"Who is the best {s} player ever?",
            f"How is {s} scored?",
            f"What gear do I need for {s}?",
        ]
    )


def _media(r: random.Random) -> str:
    m = r.choice(MEDIA)
    return r.choice(
        [
            f"Where should I start with {m}?",
            f"What makes {m} special?",
            f"Recommend something in {m}.",
            f"What is the history of {m}?",
            f"Why do people love {m}?",
        ]
    )


def _home(r: random.Random) -> str:
    h = r.choice(HOME + CAR)
    return r.choice(
        [
            f"How do I {h}?",
            f"What's the quickest way to {h}?",
            f"Can you tell me how to {h}?",
            f"I need to {h}. Any tips?",
            f"What do I need to {h}?",
        ]
    )


def _pets(r: random.Random) -> str:
    p = r.choice(PETS)
    return r.choice(
        [
            f"How do I take care of {p}?",
            f"What should I feed {p}?",
            f"How often should I take {p} to the vet?",
            f"Is {p} a good first pet?",
            f"How do I keep {p} happy?",
        ]
    )


def _kids(r: random.Random) -> str:
    k = r.choice(KIDS)
    return r.choice(
        [
            f"How much sleep does {k} need?",
            f"What are good activities for {k}?",
            f"How do I get {k} to eat vegetables?",
            f"What books are good for {k}?",
            f"How do I handle tantrums from {k}?",
            f"How much screen time is okay for {k}?",
        ]
    )


def _work(r: random.Random) -> str:
    w = r.choice(WORK)
    return r.choice(
        [
            f"How do I {w}?",
            f"What's the best way to {w}?",
            f"Give me advice on how to {w}.",
            f"I'm nervous to {w}. Help?",
            f"What mistakes should I avoid when I {w}?",
        ]
    )


def _school(r: random.Random) -> str:
    s = r.choice(SCHOOL)
    return r.choice(
        [
            f"Can you teach me {s}?",
            f"I don't understand {s}.",
            f"Explain {s} with an example.",
            f"What's an easy way to remember {s}?",
            f"Quiz me on {s}.",
        ]
    )


def _what_if(r: random.Random) -> str:
    w = r.choice(WHAT_IF)
    return r.choice(
        [
            f"What would happen if {w}?",
            f"Imagine {w}. What then?",
            f"What if {w}?",
            f"How would life change if {w}?",
        ]
    )


def _buy(r: random.Random) -> str:
    b = r.choice(BUY)
    return r.choice(
        [
            f"What should I look for in {b}?",
            f"How much should I spend on {b}?",
            f"Is it worth buying {b} second hand?",
            f"Help me choose {b}.",
            f"How long does {b} usually last?",
        ]
    )


def _jobs(r: random.Random) -> str:
    j = r.choice(JOBS)
    return r.choice(
        [
            f"What does {j} do?",
            f"How do I become {j}?",
            f"How much does {j} earn?",
            f"What's a typical day for {j}?",
            f"What skills does {j} need?",
            f"Is it hard to work as {j}?",
        ]
    )


def _meals(r: random.Random) -> str:
    m, d = r.choice(MEALS), r.choice(DIETS)
    return r.choice(
        [
            f"What's a good {m} for {d}?",
            f"Suggest a quick {m} for {d}.",
            f"Give me {m} ideas for {d}.",
            f"What should {d} eat for {m}?",
        ]
    )


def _wear(r: random.Random) -> str:
    o, w = r.choice(OCCASIONS), r.choice(WEATHER)
    return r.choice(
        [
            f"What should I wear to {o} when it's {w}?",
            f"What do I wear to {o}?",
            f"It's {w} today. What should I wear to {o}?",
            f"How should I dress for {o}?",
        ]
    )


TEMPLATES = [
    (_geo, 3), (_sports, 2), (_media, 2), (_home, 3), (_pets, 2), (_kids, 2), (_work, 2),
    (_school, 2), (_what_if, 1), (_buy, 2), (_jobs, 2), (_meals, 2), (_wear, 2),
]  # fmt: skip
FNS = [f for f, w in TEMPLATES for _ in range(w)]
