"""Third series of assistant-style prompts for draft distillation.

After the first two series (``draft_prompts``, ``draft_prompts_more``) were
answered, these add topics neither covers: geography and quick facts, space,
sports, arts and media, home and garden, cars, pets, parenting, work, school
subjects, etiquette, shopping and "what if" questions.
"""

from __future__ import annotations

from voicepipe.training.prompt_templates import either, template

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


_geo = either(
    template(
        (COUNTRIES,),
        "What is the capital of {0}?",
        "What is {0} famous for?",
        "What's the population of {0}?",
        "What currency does {0} use?",
        "Tell me three facts about {0}.",
        "What is traditional food in {0}?",
    ),
    template(
        (FACTS,),
        "How big is {0}?",
        "How old is {0}?",
        "How far away is {0}?",
        "What's special about {0}?",
        "Give me a fun fact about {0}.",
    ),
)


_sports = template(
    (SPORTS,),
    "What are the rules of {0}?",
    "How do I start playing {0}?",
    "Is {0} good exercise?",
    "Who is the best {0} player ever?",
    "How is {0} scored?",
    "What gear do I need for {0}?",
)


_media = template(
    (MEDIA,),
    "Where should I start with {0}?",
    "What makes {0} special?",
    "Recommend something in {0}.",
    "What is the history of {0}?",
    "Why do people love {0}?",
)


_home = template(
    (HOME + CAR,),
    "How do I {0}?",
    "What's the quickest way to {0}?",
    "Can you tell me how to {0}?",
    "I need to {0}. Any tips?",
    "What do I need to {0}?",
)


_pets = template(
    (PETS,),
    "How do I take care of {0}?",
    "What should I feed {0}?",
    "How often should I take {0} to the vet?",
    "Is {0} a good first pet?",
    "How do I keep {0} happy?",
)


_kids = template(
    (KIDS,),
    "How much sleep does {0} need?",
    "What are good activities for {0}?",
    "How do I get {0} to eat vegetables?",
    "What books are good for {0}?",
    "How do I handle tantrums from {0}?",
    "How much screen time is okay for {0}?",
)


_work = template(
    (WORK,),
    "How do I {0}?",
    "What's the best way to {0}?",
    "Give me advice on how to {0}.",
    "I'm nervous to {0}. Help?",
    "What mistakes should I avoid when I {0}?",
)


_school = template(
    (SCHOOL,),
    "Can you teach me {0}?",
    "I don't understand {0}.",
    "Explain {0} with an example.",
    "What's an easy way to remember {0}?",
    "Quiz me on {0}.",
)


_what_if = template(
    (WHAT_IF,),
    "What would happen if {0}?",
    "Imagine {0}. What then?",
    "What if {0}?",
    "How would life change if {0}?",
)


_buy = template(
    (BUY,),
    "What should I look for in {0}?",
    "How much should I spend on {0}?",
    "Is it worth buying {0} second hand?",
    "Help me choose {0}.",
    "How long does {0} usually last?",
)


_jobs = template(
    (JOBS,),
    "What does {0} do?",
    "How do I become {0}?",
    "How much does {0} earn?",
    "What's a typical day for {0}?",
    "What skills does {0} need?",
    "Is it hard to work as {0}?",
)


_meals = template(
    (MEALS, DIETS),
    "What's a good {0} for {1}?",
    "Suggest a quick {0} for {1}.",
    "Give me {0} ideas for {1}.",
    "What should {1} eat for {0}?",
)


_wear = template(
    (OCCASIONS, WEATHER),
    "What should I wear to {0} when it's {1}?",
    "What do I wear to {0}?",
    "It's {1} today. What should I wear to {0}?",
    "How should I dress for {0}?",
)


TEMPLATES = [
    (_geo, 3), (_sports, 2), (_media, 2), (_home, 3), (_pets, 2), (_kids, 2), (_work, 2),
    (_school, 2), (_what_if, 1), (_buy, 2), (_jobs, 2), (_meals, 2), (_wear, 2),
]  # fmt: skip
FNS = [f for f, w in TEMPLATES for _ in range(w)]
