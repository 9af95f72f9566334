"""What people ask a voice assistant about, and how: the seeds of ``train draft-questions``.

Written by hand, area by area, as a spread of everyday life (no benchmark's prompts were
looked at for it); ``draft_questions`` asks the target for one question per topic and
style, so the questions' wording is the model's, not a template's.
"""

from __future__ import annotations

# One topic a line would be 350 lines:
# fmt: off
AREAS: dict[str, tuple[str, ...]] = {
    "animals": (
        "cats", "dogs", "hamsters", "parrots", "goldfish", "horses", "bees", "ants", "owls",
        "whales", "sharks", "snakes", "frogs", "elephants", "penguins", "crows", "squirrels",
        "spiders", "bats", "dolphins", "tortoises", "jellyfish",
    ),
    "the body and health": (
        "hiccups", "sneezing", "yawning", "sunburn", "headaches", "muscle cramps", "sleep",
        "dreams", "blood types", "vitamins", "allergies", "the common cold", "eyesight",
        "hearing", "teeth", "bones", "posture", "caffeine", "dehydration", "stretching",
        "jet lag",
    ),
    "food and cooking": (
        "bread", "rice", "pasta", "eggs", "cheese", "coffee", "tea", "chocolate", "spices",
        "garlic", "tomatoes", "potatoes", "soup", "baking soda", "olive oil", "leftovers",
        "the freezer", "knives", "cast iron pans", "fermentation", "honey", "avocados",
        "breakfast", "lunchboxes", "barbecues",
    ),
    "home and chores": (
        "laundry", "stains", "mold", "dishwashers", "vacuum cleaners", "houseplants",
        "light bulbs", "smoke alarms", "leaky taps", "painting a room", "moving house",
        "decluttering", "rent", "neighbors", "noise", "heating bills", "insulation",
        "recycling", "composting", "spiders in the house",
    ),
    "garden and outdoors": (
        "lawns", "roses", "tomato plants", "seeds", "weeds", "hiking", "camping", "rain",
        "snow", "thunderstorms", "sunsets", "rainbows", "mushrooms", "birdwatching", "fishing",
        "picnics",
    ),
    "science": (
        "gravity", "magnets", "electricity", "light", "sound", "atoms", "the moon", "the sun",
        "black holes", "planets", "volcanoes", "earthquakes", "tides", "clouds", "the ocean",
        "glaciers", "fossils", "DNA", "evolution", "rust", "boiling water", "ice",
        "static electricity", "the speed of light",
    ),
    "technology": (
        "wifi", "passwords", "smartphones", "batteries", "laptops", "email", "printers",
        "bluetooth", "cloud storage", "backups", "spam calls", "online shopping", "video calls",
        "social media", "robots", "electric cars", "solar panels", "GPS", "3D printing",
        "headphones", "smart speakers", "computer viruses",
    ),
    "money": (
        "budgets", "savings", "credit cards", "interest rates", "taxes", "tipping", "insurance",
        "loans", "pensions", "inflation", "coins", "shopping sales", "splitting a bill",
        "pocket money",
    ),
    "work and study": (
        "job interviews", "resumes", "asking for a raise", "meetings", "deadlines",
        "working from home", "coworkers", "exams", "homework", "learning a language",
        "taking notes", "public speaking", "procrastination", "internships", "changing careers",
        "a first day at work",
    ),
    "people and feelings": (
        "friendship", "apologies", "birthdays", "weddings", "small talk", "shyness", "stress",
        "boredom", "loneliness", "motivation", "gratitude", "arguments", "compliments",
        "first dates", "family dinners", "grandparents", "teenagers", "toddlers", "new babies",
        "twins",
    ),
    "travel and places": (
        "airports", "jet lag", "packing", "passports", "hotels", "trains", "road trips",
        "time zones", "Japan", "Mexico", "Iceland", "Egypt", "Canada", "Italy", "Brazil",
        "India", "Australia", "New York", "the Alps", "deserts", "islands", "Antarctica",
        "the Amazon rainforest",
    ),
    "history": (
        "the pyramids", "the Romans", "the Vikings", "castles", "knights", "pirates",
        "the printing press", "the first airplane", "the moon landing", "ancient Greece",
        "the Silk Road", "the Titanic", "the Olympic games", "old maps", "dinosaurs",
        "the ice age", "samurai", "the telegraph",
    ),
    "language and words": (
        "idioms", "spelling", "grammar", "slang", "accents", "sign language", "palindromes",
        "rhymes", "the alphabet", "nicknames", "place names", "swear words", "emoji",
        "the longest word",
    ),
    "arts and culture": (
        "painting", "poetry", "novels", "jazz", "classical music", "guitars", "pianos",
        "singing", "dancing", "theater", "movies", "cartoons", "museums", "photography",
        "knitting", "pottery", "comics", "board games", "chess", "crossword puzzles",
        "magic tricks",
    ),
    "sport and fitness": (
        "running", "swimming", "cycling", "yoga", "football", "basketball", "tennis", "golf",
        "skiing", "surfing", "climbing", "the marathon", "push-ups", "warming up",
        "sore muscles", "team sports",
    ),
    "numbers and time": (
        "leap years", "calendars", "daylight saving time", "clocks", "prime numbers",
        "fractions", "percentages", "roman numerals", "units of measurement",
        "temperature scales", "big numbers", "probability", "averages", "time zones",
    ),
    "everyday puzzles": (
        "why the sky is blue", "why ice floats", "why we get goosebumps", "why cats knead",
        "why bread goes stale", "why socks go missing", "why the fridge hums",
        "why onions sting", "why leaves change color", "why yawns are catching", "why we blush",
        "why water is wet",
    ),
    "cars and getting around": (
        "tire pressure", "parking", "learning to drive", "speeding tickets", "buses",
        "bicycles", "scooters", "traffic jams", "fuel economy", "car washes", "winter driving",
        "flat tires",
    ),
    "pets and care": (
        "walking a dog", "litter boxes", "pet food", "vet visits", "fleas", "adopting a pet",
        "training a puppy", "an aquarium", "a rabbit", "a guinea pig",
    ),
    "holidays and events": (
        "Halloween costumes", "New Year's resolutions", "gift ideas", "party games",
        "wrapping presents", "fireworks", "Thanksgiving dinner", "a surprise party",
        "a baby shower", "a retirement party",
    ),
}
# fmt: on

# How a question is asked (each ends in the word before the topic): every topic is
# asked once in each.
STYLES: tuple[str, ...] = (
    "short why-question about",
    "how-to question about",
    "request in which the asker describes a problem of their own with",
    "yes-or-no question about",
    "question asking for a fact, a date or a number about",
    "question in plain everyday words about",
    "question asking for a recommendation on",
    "question comparing two things related to",
    "question a curious child would ask about",
    "question asking for a simple explanation of",
)

# Who asks, and in what situation: the second pass of questions (``draft_questions``).
# The first (topic × style) gave 3,123 questions in the 1.5B's own narrow band of
# openings ("What is the…", "How do I…"); an asker with a situation changes what is asked
# and how ("I'm on a tight budget, …", "My kid wants to know…").
ASKERS: tuple[str, ...] = (
    "who is cooking dinner",
    "working on a school project",
    "travelling abroad",
    "who is a complete beginner",
    "looking after an elderly parent",
    "on a tight budget",
    "in a hurry",
    "at work",
    "with a small child",
    "who just watched a documentary",
    "in the middle of winter",
    "who cannot sleep at night",
)


def topics() -> list[str]:
    """Every topic once, in area order (a topic in two areas is asked once)."""
    out: list[str] = []
    seen: set[str] = set()
    for items in AREAS.values():
        for t in items:
            if t.lower() not in seen:
                seen.add(t.lower())
                out.append(t)
    return out
