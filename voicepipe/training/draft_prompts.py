"""Seeded generator of varied assistant-style user prompts for draft distillation.

The draft learns the target's own replies (self-distillation), so what
matters is that the prompts look like what a voice assistant is asked:
questions, how-tos, definitions, small talk, requests to explain / compare /
list / recommend / rewrite. Templates × slot lists give several thousand
distinct prompts; the same seed always gives the same list.

Held-out prompts (``heldout_prompts``) come from a different seed and are
removed from the training list by normalised text, so no held-out prompt is
ever trained on.
"""

from __future__ import annotations

import random
import re

from voicepipe.training.corpus import TOPICS

# The TTS corpus's topics first (the same order: prompt lists stay as they were), then more.
SUBJECTS = [
    *TOPICS,
    "compound interest",
    "DNA",
    "the French Revolution",
    "democracy",
    "recycling",
    "solar panels",
    "blockchain",
    "the moon landing",
    "evolution",
    "jet engines",
    "antibiotics",
    "the Roman Empire",
    "coffee",
    "sleep",
    "meditation",
    "memory",
    "taxes",
    "credit scores",
    "batteries",
    "wifi",
    "GPS",
    "earth's seasons",
    "thunder",
    "the printing press",
    "music theory",
    "chess openings",
    "probability",
    "bread yeast",
    "honeybees",
    "coral reefs",
    "the heart",
    "viruses",
    "magnets",
    "nuclear power",
]
TASKS = [
    "make a cup of tea",
    "boil an egg",
    "tie a tie",
    "change a flat tire",
    "learn a language",
    "save money",
    "fall asleep faster",
    "start running",
    "write a resume",
    "bake bread",
    "clean a laptop screen",
    "plant tomatoes",
    "reduce stress",
    "prepare for an interview",
    "cook rice",
    "make a budget",
    "stay focused",
    "back up my phone",
    "train a puppy",
    "study for an exam",
    "make pancakes",
    "fix a leaky faucet",
    "improve my posture",
    "write a thank-you note",
    "organize my closet",
    "learn to code",
    "meet new people",
    "keep houseplants alive",
    "make cold brew coffee",
    "speed up my computer",
    "remember names",
    "get up earlier",
    "give a good presentation",
    "pack for a trip",
    "start a vegetable garden",
    "drink more water",
    "choose a laptop",
    "wash wool sweaters",
]
TERMS = [
    "an algorithm",
    "a noun",
    "a metaphor",
    "a mortgage",
    "an atom",
    "a calorie",
    "a haiku",
    "a galaxy",
    "an API",
    "a prime number",
    "a carbon footprint",
    "an ecosystem",
    "a sonnet",
    "a hurricane",
    "a database",
    "a vaccine",
    "a democracy",
    "an allergy",
    "a podcast",
    "a cryptocurrency",
    "a fraction",
    "a protein",
    "a glacier",
    "a synonym",
    "an index fund",
    "a recession",
    "a startup",
    "a neuron",
    "a password manager",
    "a compiler",
    "an eclipse",
    "a placebo",
    "a spreadsheet",
    "a firewall",
    "a dividend",
    "a tsunami",
    "an idiom",
]
PAIRS = [
    ("cats", "dogs"),
    ("tea", "coffee"),
    ("running", "swimming"),
    ("Python", "JavaScript"),
    ("renting", "buying a home"),
    ("trains", "planes"),
    ("books", "audiobooks"),
    ("summer", "winter"),
    ("laptops", "tablets"),
    ("stocks", "bonds"),
    ("email", "chat"),
    ("electric cars", "gas cars"),
    ("yoga", "pilates"),
    ("cities", "the countryside"),
    ("a virus", "a bacterium"),
    ("weather", "climate"),
    ("RAM", "storage"),
    ("butter", "margarine"),
    ("a crocodile", "an alligator"),
    ("speed", "velocity"),
]
THINGS = [
    "healthy breakfasts",
    "fun weekend activities",
    "board games",
    "ways to relax",
    "fruits high in vitamin C",
    "famous painters",
    "planets in the solar system",
    "tips for better sleep",
    "easy dinners",
    "reasons to learn history",
    "indoor hobbies",
    "things to pack for a beach day",
    "classic novels",
    "ways to save energy at home",
    "questions to ask at a job interview",
    "stretches for the back",
    "birthday gift ideas",
    "good habits for students",
    "uses for baking soda",
    "signs of dehydration",
    "programming languages for beginners",
    "ways to be more productive",
    "dog breeds",
    "musical instruments",
    "things to do on a rainy day",
    "podcast topics",
]
PLACES = [
    "Paris",
    "Tokyo",
    "New York",
    "Rome",
    "London",
    "Sydney",
    "Cairo",
    "Lisbon",
    "Mexico City",
    "Toronto",
    "Berlin",
    "Barcelona",
    "Bangkok",
    "Iceland",
    "Kenya",
    "the Grand Canyon",
    "the Alps",
    "Scotland",
    "Peru",
    "Vietnam",
]
SMALL_TALK = [
    "Hi!",
    "Hello there.",
    "Good morning!",
    "How are you today?",
    "What's up?",
    "Thanks for your help.",
    "Can you tell me a joke?",
    "What's your name?",
    "What can you do?",
    "I'm bored.",
    "I had a long day.",
    "Tell me something interesting.",
    "Do you like music?",
    "What's your favorite color?",
    "Say something nice.",
    "Good night!",
    "I'm feeling a bit sad today.",
    "Can you cheer me up?",
    "Tell me a fun fact.",
    "Are you a robot?",
    "What should I do this weekend?",
    "I just got a new puppy!",
    "It's my birthday today.",
    "I'm nervous about my exam.",
    "Who made you?",
    "Do you dream?",
    "Give me a riddle.",
    "Let's chat.",
]
AUDIENCES = [
    "a child",
    "a five-year-old",
    "a beginner",
    "my grandmother",
    "a teenager",
    "someone who has never heard of it",
    "a busy person",
]
NUMS = ["three", "four", "five", "two", "a few"]
TONES = ["more polite", "shorter", "more formal", "friendlier", "more exciting", "simpler"]
SENTENCES = [
    "I can't come to the meeting tomorrow.",
    "The package arrived late and was damaged.",
    "We need the report by Friday.",
    "Thanks for the dinner last night.",
    "The new update broke my settings.",
    "I would like to book a table for two.",
    "Please send me the invoice again.",
    "The concert was amazing.",
]
NUMBERS = [7, 12, 15, 24, 36, 48, 75, 100, 144, 250, 365, 1000]


def _t_question(r: random.Random) -> str:
    s = r.choice(SUBJECTS)
    return r.choice(
        [
            f"What is {s}?",
            f"How does {s} work?",
            f"Why is {s} important?",
            f"Can you tell me about {s}?",
            f"What's the history of {s}?",
            f"What are the basics of {s}?",
            f"Is {s} complicated?",
            f"Give me a quick overview of {s}.",
            f"What should everyone know about {s}?",
        ]
    )


def _t_howto(r: random.Random) -> str:
    t = r.choice(TASKS)
    return r.choice(
        [
            f"How do I {t}?",
            f"What's the best way to {t}?",
            f"Can you help me {t}?",
            f"Give me steps to {t}.",
            f"Any tips on how to {t}?",
            f"I want to {t}. Where do I start?",
            f"What's the easiest way to {t}?",
            f"How long does it take to {t}?",
        ]
    )


def _t_define(r: random.Random) -> str:
    t = r.choice(TERMS)
    return r.choice(
        [
            f"What is {t}?",
            f"Define {t}.",
            f"What does {t} mean?",
            f"Can you give me an example of {t}?",
            f"Explain what {t} is in one sentence.",
        ]
    )


def _t_explain(r: random.Random) -> str:
    s = r.choice(SUBJECTS + TERMS)
    a = r.choice(AUDIENCES)
    return r.choice(
        [
            f"Explain {s} to {a}.",
            f"Explain {s} simply.",
            f"Can you explain {s} like I'm {a}?",
            f"Describe {s} in simple words.",
            f"Help me understand {s}.",
        ]
    )


def _t_compare(r: random.Random) -> str:
    a, b = r.choice(PAIRS)
    if r.random() < 0.5:
        a, b = b, a
    return r.choice(
        [
            f"What's the difference between {a} and {b}?",
            f"Compare {a} and {b}.",
            f"Which is better, {a} or {b}?",
            f"{a.capitalize()} or {b}?",
            f"What are the pros and cons of {a} versus {b}?",
        ]
    )


def _t_list(r: random.Random) -> str:
    t, n = r.choice(THINGS), r.choice(NUMS)
    return r.choice(
        [
            f"List {n} {t}.",
            f"Name {n} {t}.",
            f"Give me {n} {t}.",
            f"What are some {t}?",
            f"Can you suggest {n} {t}?",
        ]
    )


def _t_travel(r: random.Random) -> str:
    p = r.choice(PLACES)
    return r.choice(
        [
            f"What should I see in {p}?",
            f"Is {p} worth visiting?",
            f"What's the weather like in {p}?",
            f"What food is {p} known for?",
            f"Plan a one-day trip to {p}.",
            f"What language do they speak in {p}?",
            f"When is the best time to visit {p}?",
        ]
    )


def _t_small(r: random.Random) -> str:
    return r.choice(SMALL_TALK)


def _t_rewrite(r: random.Random) -> str:
    s, t = r.choice(SENTENCES), r.choice(TONES)
    return r.choice(
        [
            f"Make this {t}: {s}",
            f"Rewrite this sentence to sound {t}: {s}",
            f"Can you rephrase this? {s}",
            f"Fix the tone of this message: {s}",
        ]
    )


def _t_math(r: random.Random) -> str:
    a, b = r.choice(NUMBERS), r.choice(NUMBERS)
    return r.choice(
        [
            f"What is {a} plus {b}?",
            f"What's {a} times {b}?",
            f"What is {a} percent of {b}?",
            f"How many minutes are in {a} hours?",
            f"Is {a} a prime number?",
            f"Convert {a} kilometers to miles.",
            f"What is half of {b}?",
        ]
    )


def _t_write(r: random.Random) -> str:
    topic = r.choice(SUBJECTS + [t.split(" ", 1)[-1] for t in THINGS])
    return r.choice(
        [
            f"Write a short poem about {topic}.",
            f"Write a haiku about {topic}.",
            f"Tell me a short story about {topic}.",
            f"Write a tweet about {topic}.",
            f"Give me a catchy title for an article about {topic}.",
        ]
    )


def _t_recommend(r: random.Random) -> str:
    return r.choice(
        [
            f"Recommend a book about {r.choice(SUBJECTS)}.",
            f"What should I cook for dinner with {r.choice(['rice', 'eggs', 'chicken', 'beans', 'pasta', 'potatoes'])}?",
            f"Suggest a name for my {r.choice(['cat', 'dog', 'goldfish', 'band', 'blog', 'bakery'])}.",
            f"What movie should I watch {r.choice(['tonight', 'with my kids', 'on a date', 'alone'])}?",
            f"Suggest a hobby for {r.choice(AUDIENCES)}.",
        ]
    )


TEMPLATES = [
    (_t_question, 3),
    (_t_howto, 3),
    (_t_define, 2),
    (_t_explain, 2),
    (_t_compare, 2),
    (_t_list, 2),
    (_t_travel, 1),
    (_t_small, 1),
    (_t_rewrite, 1),
    (_t_math, 1),
    (_t_write, 1),
    (_t_recommend, 1),
]
_FNS = [f for f, w in TEMPLATES for _ in range(w)]


def norm(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", " ", text.lower()).strip()


def _generate(n: int, seed: int, exclude: set[str], fns: list | None = None) -> list[str]:
    r = random.Random(seed)
    fns = fns or _FNS
    out: list[str] = []
    seen = set(exclude)
    tries = 0
    while len(out) < n and tries < 50 * n:
        tries += 1
        p = r.choice(fns)(r)
        if r.random() < 0.15:  # some users don't capitalise or punctuate when speaking
            p = p.rstrip(".?!").lower()
        k = norm(p)
        if k in seen:
            continue
        seen.add(k)
        out.append(p)
    return out


# Hand-written questions from none of the templates above: the held-out prompts
# share the training prompts' templates and subjects, so they show how drafting
# does on the distribution the draft (and its reply store) learnt from; these show
# how it does beyond it (bench draft / bench replay --prompts open).
OPEN_PROMPTS = [
    "My neighbor's dog barks all night. What can I do about it?",
    "Is it safe to eat eggs past their expiry date?",
    "Tell me a fun fact about octopuses.",
    "Why do cats purr?",
    "What should I name my new goldfish?",
    "Can you suggest a quick dinner with chicken and spinach?",
    "Why do onions make me cry?",
    "I feel nervous about my driving test tomorrow.",
    "What's the difference between a latte and a cappuccino?",
    "Who invented the telephone?",
    "Give me a good opening line for a wedding toast.",
    "How many bones are in the human body?",
    "Should I water succulents every day?",
    "What is a good stretch for lower back pain?",
    "Translate 'good morning' into Spanish.",
    "Why is the ocean salty?",
    "How do airplanes stay in the air?",
    "My phone battery drains fast. Any tips?",
    "What's a polite way to decline a meeting invitation?",
    "Recommend a board game for four players.",
    "How long should I steep green tea?",
    "How do noise-cancelling headphones work?",
    "Is a tomato a fruit or a vegetable?",
    "Can you help me plan a birthday party for a ten-year-old?",
    "What does a software engineer do all day?",
    "How do I get red wine out of a carpet?",
    "Why do leaves change color in the fall?",
    "What's the capital of Australia?",
    "What rhymes with orange?",
    "How can I be more productive in the morning?",
    # Written later, in other styles (rambling, terse, several parts, spoken asides),
    # so the open set is large enough to trust (bench draft --prompts open).
    "ok so my sourdough starter smells like nail polish, is it dead or what",
    "Which planet has the most moons right now?",
    "I've got twenty minutes and a bag of flour. Impress me.",
    "Is it rude to recline my seat on a plane?",
    "What's the story behind the name of the day Wednesday?",
    "How do vaccines teach the body to fight a disease?",
    "My grandpa keeps calling the fridge the icebox. Where does that come from?",
    "Give me two arguments for and two against school uniforms.",
    "Why does my voice crack when I'm nervous?",
    "How do I say no to my boss without sounding lazy?",
    "What makes a diamond so hard?",
    "Help me remember the order of the planets with a silly sentence.",
    "Do fish ever sleep?",
    "umm what's the tallest building in the world and how tall is it",
    "If I leave a cast iron skillet wet overnight, is it ruined?",
    "Why do we say bless you when someone sneezes?",
]


def heldout_prompts(n: int = 40, seed: int = 1_000_003) -> list[str]:
    """Evaluation prompts; never in ``train_prompts`` (any n, same seeds)."""
    return _generate(n, seed, set())


# Distinct prompts each finished series yields for the default seed 0 (series i draws
# with seed + i); the next series' templates then take over. The last is open-ended.
FIRST_SERIES = 4337
SECOND_SERIES = 2204


def _series() -> list[tuple[list, int]]:
    from voicepipe.training import draft_prompts_more, draft_prompts_third

    return [(_FNS, FIRST_SERIES), (draft_prompts_more.FNS, SECOND_SERIES),
            (draft_prompts_third.FNS, 0)]  # fmt: skip


def train_prompts(n: int = 3000, seed: int = 0, n_heldout: int = 40) -> list[str]:
    """Training prompts in a fixed order (a prefix of a longer list is the shorter list).

    A series' templates saturate; the list then continues with the next
    series (``draft_prompts_more``, then ``draft_prompts_third``),
    deduplicated against everything before it and the held-out prompts, so the
    data's existing shards keep their prompts when new series are added.
    """
    out: list[str] = []
    seen = {norm(p) for p in heldout_prompts(n_heldout)}
    for i, (fns, size) in enumerate(_series()):
        want = n - len(out)
        if want <= 0:
            break
        if not size or want < size:
            out += _generate(want, seed + i, seen, fns)
            break
        # Ask for more than the series holds: _generate's try budget scales with
        # the request, and asking for exactly its size can give up a prompt short.
        got = _generate(2 * size, seed + i, seen, fns)
        out += got
        seen |= {norm(p) for p in got}
    return out
