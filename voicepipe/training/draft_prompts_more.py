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

from voicepipe.training.prompt_templates import either, template

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


_food = template(
    (FOODS, DISHES),
    "What can I make with {0}?",
    "Is {0} healthy?",
    "How do I store {0}?",
    "How do you cook {0}?",
    "Give me a quick recipe with {0}.",
    "How do I make {1}?",
    "What goes well with {1}?",
    "Can I freeze {1}?",
    "What's a vegetarian version of {1}?",
    "How long does {1} keep in the fridge?",
    "Why did my {1} turn out dry?",
)


_health = template(
    (SYMPTOMS,),
    "What helps with {0}?",
    "How can I get rid of {0}?",
    "I have {0}. What should I do?",
    "When should I see a doctor for {0}?",
    "What causes {0}?",
    "Any home remedies for {0}?",
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


_why = template(
    (WHY,),
    "Do you know why {0}?",
    "Why is it that {0}?",
    "Can you explain why {0}?",
    "I always wondered why {0}.",
    "Tell me why {0}.",
)


_history = either(
    template(
        (PEOPLE,),
        "Who was {0}?",
        "What is {0} famous for?",
        "Tell me a fun fact about {0}.",
        "When did {0} live?",
        "Why is {0} important?",
        "Summarize the life of {0}.",
    ),
    template(
        (EVENTS,),
        "What was {0}?",
        "When did {0} happen?",
        "Why did {0} matter?",
        "Tell me about {0}.",
        "What led to {0}?",
    ),
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


_feelings = template(
    (FEELINGS,),
    "I'm feeling {0}.",
    "I feel {0}. Any advice?",
    "What can I do when I'm {0}?",
    "How do I stop feeling {0}?",
    "Lately I've been {0}.",
)


_plan = template(
    (EVENTS_TO_PLAN,),
    "Help me plan {0}.",
    "What do I need for {0}?",
    "Give me ideas for {0}.",
    "Make a checklist for {0}.",
    "How far ahead should I plan {0}?",
    "What's a good budget for {0}?",
)


_money = template(
    (MONEY,),
    "What is {0}?",
    "Do I need {0}?",
    "How do I open {0}?",
    "What are the risks of {0}?",
    "How does {0} work?",
    "When should I get {0}?",
)


_animals = template(
    (ANIMALS,),
    "Tell me something surprising about {0}.",
    "How smart are {0}?",
    "Where do {0} live?",
    "What do {0} eat?",
    "How long do {0} live?",
    "How do {0} sleep?",
    "Are {0} dangerous?",
)


_skills = template(
    (SKILLS, PERIODS),
    "How do I get better at {0}?",
    "Can I learn {0} in {1}?",
    "What's a good first step for {0}?",
    "Is {0} a good hobby?",
    "What equipment do I need for {0}?",
    "What mistakes do beginners make in {0}?",
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
