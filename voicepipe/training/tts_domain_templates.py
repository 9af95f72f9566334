"""Templated assistant-style sentences for the TTS domain corpus (training/tts_domain.py).

What the seeded corpus lacks and replies are full of: numbered and bulleted
list items, quoted titles, people's names (many not English), foreign words
and phrases, years, full dates, clock times, money in several currencies,
units with symbols, percentages, ordinals and abbreviations. Written raw, as
an LLM writes them; the corpus passes them through ``core.textnorm.normalize``.
"""

from __future__ import annotations

import random

PEOPLE = (
    "Michelangelo Leonardo da Vinci|Frida Kahlo|Haruki Murakami|Gabriel García Márquez|"
    "Marie Curie|Ada Lovelace|Nelson Mandela|Giuseppe Verdi|Antonio Vivaldi|Ludwig van "
    "Beethoven|Wolfgang Amadeus Mozart|Johann Sebastian Bach|Pablo Picasso|Vincent van Gogh|"
    "Claude Monet|Fyodor Dostoevsky|Leo Tolstoy|Chimamanda Ngozi Adichie|Rabindranath Tagore|"
    "Akira Kurosawa|Hayao Miyazaki|Serena Williams|Lionel Messi|Cristiano Ronaldo|Usain Bolt|"
    "Albert Einstein|Isaac Newton|Galileo Galilei|Nikola Tesla|Charles Darwin|Jane Austen|"
    "William Shakespeare|Confucius|Cleopatra|Genghis Khan|Simone de Beauvoir|Jean-Paul Sartre|"
    "Søren Kierkegaard|Alexander Graham Bell|Alexander Fleming|Louis Armstrong|Björk|"
    "Dr. Patel|Dr. Nguyen|Mr. Okafor|Mrs. Schmidt|Ms. Rodríguez|Prof. Tanaka"
).split("|")
TITLES = (
    "One Hundred Years of Solitude|Romeo and Juliet|Casablanca|The Starry Night|"
    "Bohemian Rhapsody|The Four Seasons|Kafka on the Shore|Pride and Prejudice|"
    "War and Peace|The Great Gatsby|Don Quixote|Spirited Away|The Godfather|La Traviata|"
    "The Little Prince|Things Fall Apart|Moby-Dick|The Odyssey|Hamlet|Norwegian Wood|"
    "The Grand Budapest Hotel|Clair de Lune|Swan Lake|The Catcher in the Rye|Dune|"
    "The Hitchhiker's Guide to the Galaxy|Frankenstein|Les Misérables|Guernica|Rashomon"
).split("|")
FOREIGN = [
    ("Schadenfreude", "German"),
    ("déjà vu", "French"),
    ("ikigai", "Japanese"),
    ("hygge", "Danish"),
    ("c'est la vie", "French"),
    ("mi casa es su casa", "Spanish"),
    ("wabi-sabi", "Japanese"),
    ("saudade", "Portuguese"),
    ("carpe diem", "Latin"),
    ("dolce far niente", "Italian"),
    ("Wanderlust", "German"),
    ("namaste", "Hindi"),
    ("hakuna matata", "Swahili"),
    ("fika", "Swedish"),
    ("bon appétit", "French"),
    ("gracias", "Spanish"),
    ("arigato", "Japanese"),
    ("danke schön", "German"),
    ("au revoir", "French"),
    ("ciao", "Italian"),
    ("sayonara", "Japanese"),
    ("zeitgeist", "German"),
    ("tsunami", "Japanese"),
    ("siesta", "Spanish"),
]
PLACES = (
    "Reykjavik|Kyoto|Budapest|Lisbon|Marrakesh|Buenos Aires|Wellington|Kraków|Zürich|"
    "São Paulo|Hanoi|Dubrovnik|Edinburgh|Montréal|Cape Town|Kathmandu|Seoul|Istanbul|"
    "Helsinki|Oaxaca|Chiang Mai|Bruges|Valparaíso|Tbilisi|Ljubljana|Quebec City"
).split("|")
THINGS = (
    "a reusable water bottle|comfortable walking shoes|a phone charger|sunscreen|a rain jacket|"
    "a first aid kit|snacks|a map|a notebook|headphones|a travel pillow|spare socks|"
    "olive oil|garlic|two eggs|fresh basil|a pinch of salt|lemon juice|brown sugar|butter|"
    "flour|baking soda|a cup of milk|chopped onions|black pepper|a ripe avocado"
).split("|")
ADVICE = (
    "drink plenty of water|get some fresh air|take short breaks|stretch your legs|"
    "write things down|ask for help early|keep a regular schedule|turn off screens at night|"
    "start with small steps|practice a little every day|read the instructions first|"
    "check the weather before you leave|save a little each month|be kind to yourself"
).split("|")
UNITS = [
    "km",
    "kg",
    "mph",
    "km/h",
    "°C",
    "°F",
    "ml",
    "L",
    "cm",
    "mm",
    "lbs",
    "oz",
    "GB",
    "MB",
    "ft",
    "mi",
    "m",
    "g",
    "kWh",
    "hrs",
    "min",
]
CURRENCY = ["$", "€", "£", "¥"]
MONTHS = (
    "January February March April May June July August September October November December"
).split()
OPEN = [
    "Sure!",
    "Of course.",
    "Great question!",
    "Absolutely.",
    "Here you go:",
    "Certainly.",
    "Good news:",
    "In short,",
    "Yes,",
    "Well,",
]


def _money(r: random.Random) -> str:
    c = r.choice(CURRENCY)
    v = r.choice(
        [
            f"{r.randint(1, 99)}",
            f"{r.randint(1, 999)}.{r.randint(0, 99):02d}",
            f"{r.randint(1, 99)},{r.randint(0, 999):03d}",
            f"{r.randint(1, 9)}.5 million",
        ]
    )
    return f"{c}{v}"


def _year(r: random.Random) -> str:
    return str(r.choice([r.randint(1066, 1899), r.randint(1900, 1999), r.randint(2000, 2035)]))


def _date(r: random.Random) -> str:
    d, m, y = r.randint(1, 28), r.choice(MONTHS), _year(r)
    return r.choice(
        [f"{m} {d}, {y}", f"{d} {m} {y}", f"{m} {y}", f"{y}-{MONTHS.index(m) + 1:02d}-{d:02d}"]
    )


def _time(r: random.Random) -> str:
    h, mi = r.randint(1, 12), r.choice([0, 5, 15, 30, 45, 50])
    return r.choice(
        [
            f"{h}:{mi:02d} {r.choice(['AM', 'PM', 'a.m.', 'p.m.'])}",
            f"{r.randint(0, 23)}:{mi:02d}",
            f"{h} {r.choice(['AM', 'PM'])}",
        ]
    )


def _qty(r: random.Random) -> str:
    v = r.choice(
        [
            str(r.randint(1, 500)),
            f"{r.randint(0, 99)}.{r.randint(1, 9)}",
            f"{r.randint(1, 20)},{r.randint(0, 999):03d}",
        ]
    )
    return f"{v} {r.choice(UNITS)}" if r.random() < 0.6 else f"{v}{r.choice(UNITS)}"


def _list(r: random.Random) -> str:
    items = r.sample(THINGS + ADVICE, 3)
    style = r.randrange(4)
    if style == 0:
        return " ".join(f"{i + 1}. {x.capitalize()}." for i, x in enumerate(items))
    if style == 1:
        return "\n".join(f"- {x.capitalize()}" for x in items)
    if style == 2:
        return f"{r.choice(OPEN)} you'll need {items[0]}, {items[1]}, and {items[2]}."
    return f"First, {items[0]}. Second, {items[1]}. Finally, {items[2]}."


def sentence(r: random.Random) -> str:
    p, t, (w, lang), pl = r.choice(PEOPLE), r.choice(TITLES), r.choice(FOREIGN), r.choice(PLACES)
    forms = [
        lambda: f'"{t}" was written by {p} in {_year(r)}.',
        lambda: f'{r.choice(OPEN)} I recommend "{t}" by {p}.',
        lambda: f'{p} is best known for "{t}".',
        lambda: f'The {lang} word "{w}" roughly means something like {r.choice(ADVICE)}.',
        lambda: f"In {lang}, you can say {w}.",
        lambda: f"{p} was born on {_date(r)} and died in {_year(r)}.",
        lambda: f"The event in {pl} starts on {_date(r)} at {_time(r)}.",
        lambda: f"A ticket to {pl} costs about {_money(r)}, or {_money(r)} in high season.",
        lambda: f"It's about {_qty(r)} from here, which takes roughly {r.randint(2, 59)} min.",
        lambda: (
            f"Set the oven to {r.randint(150, 250)}°C and bake for {r.randint(10, 60)} minutes."
        ),
        lambda: f"Prices rose {r.randint(1, 30)}.{r.randint(0, 9)}% in {_year(r)}.",
        lambda: (
            f"That's the {r.randint(1, 31)}{r.choice(['st', 'nd', 'rd', 'th'])} time this year."
        ),
        lambda: (
            f"Your appointment with {p} is on {r.choice(MONTHS)} {r.randint(1, 28)} at {_time(r)}."
        ),
        lambda: f"{pl} has about {r.randint(1, 20)}.{r.randint(0, 9)} million people.",
        lambda: f"Mix {_qty(r)} of flour with {_qty(r)} of water, e.g. in a large bowl.",
        lambda: _list(r),
        lambda: f"{r.choice(OPEN)} Here are a few tips: {_list(r)}",
        lambda: (
            f"The temperature in {pl} will be {r.randint(-10, 38)}°C, "
            f"i.e. about {r.randint(14, 99)}°F."
        ),
        lambda: f"Call {p} at {r.randint(200, 999)}-{r.randint(100, 999)}-{r.randint(1000, 9999)}.",
        lambda: f"The {t} premiered in {pl} in {_year(r)} and ran for {r.randint(2, 40)} years.",
    ]
    return r.choice(forms)()
