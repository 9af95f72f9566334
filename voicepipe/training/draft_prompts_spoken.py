"""Fourth series of spoken-assistant prompts: many domains, two-slot requests, spoken framing.

The first three series (``draft_prompts*``) hold ~8,000 distinct prompts, one slot per
template. The 1.5B's draft needs tens of thousands, and more of the same templates would
teach it one phrasing per reply. These are built differently: each domain pairs its own
items with its own phrasings, many with a second slot (who asks, for how long, with what
else), and ``speak`` puts what people say around a request to a voice assistant in front
of and after some of them (openers, hedges, "keep it short"). ``series`` enumerates every
combination once and shuffles them with a seed, so any prefix mixes every domain.
"""

from __future__ import annotations

import itertools
import random
from collections.abc import Iterator

# fmt: off
INGREDIENTS = [
    "leeks", "kale", "butternut squash", "canned chickpeas", "frozen peas", "ricotta",
    "ground turkey", "tempeh", "couscous", "black beans", "red lentils", "beets", "halloumi",
    "cod", "sardines", "buckwheat", "polenta", "coconut milk", "day-old bread", "overripe bananas",
    "a whole chicken", "pork chops", "sweet corn", "asparagus", "fennel", "parsnips", "barley",
    "cottage cheese", "Greek yogurt", "miso paste", "tahini", "rice noodles", "bok choy",
    "brussels sprouts", "celery", "pumpkin", "mackerel", "pearl onions", "chorizo", "paneer",
]
COOK_Q = [
    "What can I make with {0}?", "How do I store {0} so it keeps longer?",
    "How long does {0} last in the fridge?", "What goes well with {0}?",
    "How can I tell if {0} has gone bad?", "What's the easiest way to cook {0}?",
    "Can you freeze {0}?", "Give me a quick weeknight idea using {0}.",
]
COOK_PAIR_Q = [
    "I have {0} and {1}. What's a quick dinner?", "Can I cook {0} and {1} together?",
    "Suggest a recipe with {0} and {1}.",
]
DISHES = [
    "risotto", "shakshuka", "pad thai", "a frittata", "ramen from scratch", "a pot roast",
    "falafel", "carrot cake", "a quiche", "dumplings", "paella", "a lemon tart", "pancakes",
    "a bean chili", "pho", "meatballs", "a tuna salad", "cornbread", "a berry crumble",
    "mac and cheese", "tacos", "a mushroom soup", "gnocchi", "naan", "a fruit salad",
    "a veggie burger", "baked oats", "a chicken curry", "a pasta bake", "a cheesecake",
]
DISH_Q = [
    "How do I make {0}?", "What's the trick to really good {0}?",
    "What side dish goes with {0}?", "Can I make {0} ahead of time?",
    "How long does {0} take to make?", "What can I use instead of an oven for {0}?",
]
PHENOMENA = [
    "rainbows", "tides", "earthquakes", "the northern lights", "static electricity",
    "photosynthesis", "black holes", "volcanoes", "hurricanes", "fog", "echoes", "rust",
    "lightning", "gravity", "eclipses", "sunsets", "hail", "condensation on a cold glass",
    "a sonic boom", "the greenhouse effect", "radioactivity", "magnetism", "fermentation",
    "evaporation", "erosion", "tsunamis", "shooting stars", "mirages", "ocean currents",
    "the water cycle", "sound waves", "friction", "buoyancy", "the Doppler effect",
    "plate tectonics",
    "auroras on other planets", "inertia", "osmosis", "jet streams", "bioluminescence",
]
SCI_Q = [
    "What causes {0}?", "Can you explain {0} simply?", "What's the science behind {0}?",
    "Explain {0} to a ten year old.", "Tell me something surprising about {0}.",
    "I never understood {0}. Can you help?",
]
ANIMALS = [
    "elephants", "octopuses", "crows", "dolphins", "hedgehogs", "penguins", "sloths",
    "wolves", "bats", "otters", "parrots", "tortoises", "sharks", "ants", "frogs", "owls",
    "giraffes", "koalas", "hummingbirds", "jellyfish", "horses", "rabbits", "axolotls",
    "camels", "salmon", "beavers", "chameleons", "squirrels", "hamsters", "pigeons",
    "bees", "snails", "whales", "foxes", "raccoons", "goats", "flamingos", "lobsters",
    "cheetahs", "seals", "spiders", "ducks", "polar bears", "pandas", "zebras",
]
ANIMAL_Q = [
    "How long do {0} live?", "What do {0} eat?", "How smart are {0}?",
    "Where do {0} live in the wild?", "Would {0} make good pets?",
    "Tell me something cool about {0}.", "How do {0} sleep?", "How do {0} talk to each other?",
]
CITIES = [
    "Lisbon", "Kyoto", "Edinburgh", "Vancouver", "Marrakech", "Prague", "Buenos Aires",
    "Seoul", "Cape Town", "Copenhagen", "Hanoi", "Budapest", "Reykjavik", "Istanbul",
    "Chicago", "Mexico City", "Vienna", "Dubrovnik", "Singapore", "Amsterdam", "Montreal",
    "Florence", "Bangkok", "Melbourne", "Havana", "Oslo", "Seville", "Nairobi", "Lima",
    "Krakow", "Tallinn", "New Orleans", "San Francisco", "Osaka", "Athens", "Dublin",
    "Porto", "Bruges", "Valencia", "Taipei",
]
CITY_Q = [
    "What should I see in {0}?", "When is the best time to visit {0}?",
    "What food is {0} known for?", "Is {0} expensive to visit?",
    "How many days do I need in {0}?", "Give me a one-day plan for {0}.",
    "What's a good neighborhood to stay in when visiting {0}?",
]
TRIP_WHO = [
    "my partner", "two kids", "my parents", "a group of friends", "my dog", "my coworkers",
]
TRIP_LEN = ["a weekend", "four days", "a week", "ten days"]
TRIP_Q = [
    "I'm going to {0} for {1} with {2}. What should I plan?",
    "Heading to {0} for {1} with {2}. Any tips?",
]
TECH = [
    "two-factor authentication", "a VPN", "cloud storage", "a password manager",
    "browser cookies", "5G", "an SSD", "RAM", "incognito mode", "a firewall", "phishing",
    "end-to-end encryption", "a large language model", "a smart speaker", "an e-reader",
    "a mesh wifi system", "dark mode", "an API", "open source software", "a browser extension",
    "a software update", "a QR code", "machine learning", "a podcast feed", "a USB-C cable",
    "a screen protector", "a passkey", "a data breach", "a cryptocurrency wallet",
    "a router's firmware",
    "streaming quality settings", "a CPU", "a graphics card", "a spam filter", "a backup drive",
]
TECH_Q = [
    "What is {0}?", "How does {0} work?", "Do I really need {0}?",
    "Explain {0} in plain words.", "What are the risks of {0}?",
]
HABITS = [
    "drinking more water", "cold showers", "walking ten thousand steps a day",
    "stretching before bed", "intermittent fasting", "yoga", "strength training", "napping",
    "journaling", "going to bed at the same time", "cutting back on sugar", "eating more fiber",
    "taking the stairs", "meal prepping", "standing desks", "breathing exercises",
    "cycling to work",
    "a digital detox", "eating breakfast", "taking vitamin D", "foam rolling", "running barefoot",
    "swimming laps", "gardening", "reading before sleep", "limiting caffeine after noon",
]
HABIT_Q = [
    "Is {0} actually good for you?", "How do I get started with {0}?",
    "What are the benefits of {0}?", "Are there downsides to {0}?",
    "How long before I notice a difference from {0}?",
]
PERSONAS = [
    "over sixty", "a night shift nurse", "pregnant", "a college student", "a new parent",
    "recovering from a knee injury", "a beginner", "very busy at work", "on a tight budget",
    "someone who hates the gym",
]
PERSONA_Q = ["I'm {1}. Is {0} a good idea for me?", "I'm {1}. How should I approach {0}?"]
MONEY = [
    "an emergency fund", "index funds", "a credit card balance", "a mortgage", "inflation",
    "compound interest on savings", "a pension", "a side hustle", "a no-spend month",
    "a high-yield savings account", "buying versus renting", "a car loan", "student loans",
    "a credit report", "a budget app", "tipping", "splitting bills with a partner",
    "saving for a vacation", "paying off debt", "a health savings account",
]
MONEY_Q = [
    "Can you explain {0}?", "What should I know about {0}?", "Give me a simple tip about {0}.",
    "What's a common mistake with {0}?",
]
PEOPLE = [
    "Hypatia", "Harriet Tubman", "Johannes Gutenberg", "Rosalind Franklin", "Simón Bolívar",
    "Ibn Battuta", "Florence Nightingale", "Louis Pasteur", "Mahatma Gandhi", "Beethoven",
    "Catherine the Great", "Marco Polo", "Ernest Shackleton", "Grace Hopper", "Socrates",
    "Vincent van Gogh", "Napoleon", "Katherine Johnson", "Michelangelo", "Julius Caesar",
    "Sojourner Truth", "Wangari Maathai", "Rumi", "Hokusai", "Charles Dickens",
    "Ludwig Wittgenstein", "Mary Shelley", "Jacques Cousteau", "Emmy Noether", "Bach",
    "Tutankhamun", "Elizabeth the First", "Harry Houdini", "Yuri Gagarin", "Steve Jobs",
]
PERSON_Q = [
    "Who was {0}?", "What is {0} famous for?", "Tell me a fun fact about {0}.",
    "Why does {0} still matter today?",
]
EVENTS = [
    "the Black Death", "the American Revolution", "the Silk Road", "the Cold War",
    "the invention of the printing press", "the fall of Rome", "the Apollo 13 mission",
    "the gold rush", "the Magna Carta", "the first Olympic Games", "the Titanic's sinking",
    "the Meiji Restoration", "the Spanish flu", "the Great Depression", "the Viking age",
    "the space race", "the signing of the Declaration of Independence",
    "the building of the Panama Canal", "the discovery of electricity", "the Ming dynasty",
    "the Aztec empire", "the abolition of slavery in Britain", "the invention of the internet",
    "the women's suffrage movement", "the Crusades", "the Irish potato famine",
]
EVENT_Q = [
    "What happened during {0}?", "Why was {0} such a big deal?",
    "Give me the two-sentence version of {0}.", "What caused {0}?",
]
WORDS = [
    "serendipity", "ubiquitous", "ephemeral", "quixotic", "melancholy", "pragmatic",
    "gregarious", "laconic", "ambivalent", "meticulous", "nostalgia", "resilient",
    "sanguine", "esoteric", "candid", "benevolent", "cynical", "eloquent", "frugal",
    "hubris", "irony", "juxtaposition", "kudos", "lethargic", "mundane", "nuance",
    "obsolete", "paradox", "quintessential", "rhetoric", "schadenfreude", "tenacious",
    "whimsical", "zealous", "wanderlust", "hygge", "procrastinate", "petrichor",
    "empathy", "integrity",
]
WORD_Q = [
    "What does {0} mean?", "Use the word {0} in a sentence.", "What's a synonym for {0}?",
    "Where does the word {0} come from?", "What's the opposite of {0}?",
]
PHRASES = [
    "where is the train station", "I'm allergic to nuts", "can I have the bill",
    "nice to meet you", "how much does this cost", "I don't understand", "happy birthday",
    "see you tomorrow", "I'm lost", "what time is it", "excuse me", "congratulations",
    "I love you", "good night", "could you speak more slowly", "cheers",
]
LANGS = [
    "Italian", "German", "Japanese", "Dutch", "Swahili", "Greek", "Hindi", "Mandarin",
    "Turkish", "Portuguese", "Polish", "Arabic",
]
PHRASE_Q = ["How do you say '{0}' in {1}?", "What's '{0}' in {1}?"]
SITUATIONS = [
    "my roommate never does the dishes", "I can't stop procrastinating",
    "I forgot my best friend's birthday", "my coworker takes credit for my work",
    "I'm bored on a rainy Sunday", "I have a job interview on Monday",
    "I keep waking up at three in the morning", "my houseplants keep dying",
    "I'm moving to a new city where I know no one", "my kid won't eat vegetables",
    "I locked myself out of my car", "my neighbor plays loud music late",
    "I spilled coffee on my laptop", "I have too many tabs open in my life",
    "my sister and I had a fight", "I got a parking ticket I think is unfair",
    "I'm nervous about giving a speech", "my dog is scared of fireworks",
    "I can't decide between two job offers", "I keep losing my keys",
    "I want to quit my job but I'm scared", "I'm always running late",
    "my friend keeps cancelling plans", "I ate too much at dinner",
    "my phone screen cracked", "I feel lonely working from home",
    "I can't get motivated to exercise", "I burned the rice again",
    "my teenager is on their phone all day", "I overslept and missed a meeting",
    "my partner snores", "I have a long flight tomorrow", "I got a bad grade on a test",
    "my landlord won't fix the heating", "I want to make new friends as an adult",
]
SITUATION_Q = [
    "{0}. What should I do?", "{0}. Any advice?", "So {0}. Help?",
    "{0}, what would you suggest?",
]
RECS = [
    "podcast about history", "science fiction book", "family movie", "board game for two",
    "hobby I can do at home", "houseplant for a dark room", "card game for kids",
    "album to study to", "easy instrument to learn", "weekend project", "documentary about nature",
    "video game that's relaxing", "cookbook for beginners", "gift for a coworker",
    "mystery novel", "stretching routine", "app for learning languages", "day trip idea",
    "rainy day activity", "comedy series", "poetry collection", "exercise I can do at my desk",
]
REC_WHO = [
    "", " for a teenager", " for my grandmother", " for someone who's stressed",
    " for a long train ride", " under twenty dollars",
]
REC_Q = ["Recommend a {0}{1}.", "Can you suggest a {0}{1}?", "What's a good {0}{1}?"]
PAIRS = [
    "baking soda and baking powder", "a crocodile and an alligator", "weather and climate",
    "a virus and bacteria", "stocks and bonds", "a comet and an asteroid", "affect and effect",
    "a cold and the flu", "a hurricane and a typhoon", "jam and jelly", "a moth and a butterfly",
    "a lake and a pond", "speed and velocity", "a herb and a spice", "a frog and a toad",
    "a psychologist and a psychiatrist", "a credit card and a debit card", "empathy and sympathy",
    "a tortoise and a turtle", "a violin and a viola", "an ocean and a sea",
    "a mushroom and a toadstool",
    "a rabbit and a hare", "lager and ale", "a city and a town", "a republic and a democracy",
    "an LED and an incandescent bulb", "whisky and whiskey", "a duvet and a comforter",
    "a meteor and a meteorite", "an emu and an ostrich", "fog and mist",
]
PAIR_Q = [
    "What's the difference between {0}?", "Are {0} the same thing?",
    "How can I tell apart {0}?", "Explain {0}: how are they different?",
]
WRITE = [
    "a haiku about autumn", "a short poem for my mom's birthday", "a limerick about a cat",
    "a two-line toast for a retirement party", "a thank-you note to my neighbor",
    "a funny caption for a beach photo", "a bedtime story about a brave snail",
    "a riddle for kids", "a motivational quote for Monday", "a polite reminder to pay me back",
    "a tongue twister", "a short apology to a friend", "a name for a bakery",
    "a slogan for a lemonade stand", "a birthday message for my boss",
    "an out-of-office reply", "a pickup line about astronomy", "a short story opening",
    "a rhyme about brushing teeth", "a welcome message for new neighbors",
    "a compliment for my coworker", "a fun team name for trivia night",
]
WRITE_Q = ["Write {0}.", "Can you come up with {0}?", "I need {0}.", "Make up {0}, please."]
MADE = [
    "paper", "glass", "chocolate", "cheese", "pencils", "plastic", "coffee", "tea", "silk",
    "steel", "soap", "peanut butter", "denim", "rubber", "salt", "honey", "tofu", "vinegar",
    "yogurt", "concrete", "maple syrup", "olive oil", "chewing gum", "crayons", "wool",
]
MADE_Q = ["How is {0} made?", "Where does {0} come from?", "What's the history of {0}?"]
FIRST_AID = [
    "a bee sting", "a small burn", "a nosebleed", "a sprained ankle", "a splinter",
    "a paper cut", "a bruise", "a jellyfish sting", "a twisted wrist", "a minor cut",
    "a bumped head", "heat exhaustion", "a nettle sting", "a pulled muscle", "a tick bite",
]
FIRST_AID_Q = [
    "What's the first aid for {0}?", "How do I treat {0} at home?",
    "When should I see a doctor about {0}?",
]
PLAN_LEN = ["one-hour", "half-day", "weekend", "week-long"]
PLAN_WHAT = [
    "workout routine", "study schedule", "road trip", "cleaning plan", "reading challenge",
    "family outing", "camping trip", "garden makeover",
]
PLAN_WHO = [
    "a beginner", "two adults", "a family with small kids", "a busy student",
    "someone on a tight budget", "retirees",
]
PLAN_Q = [
    "Plan a {0} {1} for {2}.", "Can you sketch a {0} {1} for {2}?",
    "Help me put together a {0} {1} for {2}.",
]
WHAT_IF = [
    "the moon disappeared", "humans could photosynthesize", "everyone spoke the same language",
    "the internet went down for a week", "we had no leap years", "dinosaurs were still alive",
    "cats could talk", "the earth spun twice as fast", "money didn't exist",
    "we could only eat one food forever", "nobody needed to sleep", "it rained every day",
    "bees went extinct", "we lived on Mars", "cars could fly",
]
WHAT_IF_Q = ["What would happen if {0}?", "Imagine {0}. What changes first?"]
CHAT = [
    "What's your favorite season, and why?", "Tell me a joke about computers.",
    "Say something encouraging, I've had a long day.", "Do you ever get tired of questions?",
    "What's a good conversation starter at a party?", "Give me a random fun fact.",
    "What should I have for lunch today?", "Can you cheer me up?",
    "Tell me a pun about cheese.", "What's a good question to ask on a first date?",
    "If you could visit any planet, which one?", "What's the best way to spend a lazy afternoon?",
    "Tell me something that will make me smile.", "What do you think about pineapple on pizza?",
    "Give me a tongue-in-cheek excuse for being late.", "Which is better, mornings or evenings?",
    "What's a small thing I can do to be kinder today?", "Tell me a knock-knock joke.",
    "Give me a challenge for this week.", "What's an easy habit to start tomorrow?",
    "I just got promoted!", "I finished my first marathon today.", "It's my birthday today.",
    "I'm feeling a bit down.", "I can't sleep.", "Talk to me about the stars.",
    "Give me a word of the day.", "Quiz me on world capitals.", "Teach me something new.",
    "What's a good name for a grey kitten?",
]
HOBBIES = [
    "chess", "knitting", "watercolor painting", "photography", "guitar", "piano", "pottery",
    "bouldering", "birdwatching", "baking sourdough", "running", "swimming", "calligraphy",
    "woodworking", "salsa dancing", "skateboarding", "sewing", "origami", "juggling",
    "magic tricks", "singing", "drawing faces", "crossword puzzles", "fishing", "tennis",
    "golf", "coding", "public speaking", "meditation", "stand-up paddleboarding",
]
HOBBY_Q = [
    "How do I get better at {0}?", "What gear do I need for {0}?",
    "Is {0} hard to learn as an adult?", "How can I practice {0} at home?",
    "What's a common beginner mistake in {0}?",
]
HOBBY_PERSONA_Q = [
    "I'm {1}. Is {0} a good hobby for me?", "I'm {1} and want to try {0}. Where do I start?",
]
DIETS = ["vegan", "gluten-free", "dairy-free", "low-carb", "kid-friendly", "spicier", "lighter"]
DIET_Q = ["How do I make {0} {1}?", "Is there a {1} way to do {0}?"]
MEALS = ["breakfast", "lunch", "dinner", "snack", "picnic", "lunchbox"]
MEAL_Q = ["What's a good {0} with {1}?", "Give me a {0} idea with {1}."]
METHODS = ["roast", "steam", "grill", "air fry", "slow cook", "pan fry"]
METHOD_Q = ["How long should I {0} {1}?", "Can I {0} {1}?", "Any tips to {0} {1}?"]
AGES = ["four", "six", "eight", "twelve"]
AGE_Q = [
    "How do I explain {0} to a {1}-year-old?",
    "My {1}-year-old asked about {0}. What do I say?",
]
ANIMAL_PAIR_Q = ["Which are faster, {0} or {1}?", "Who would win a staring contest, {0} or {1}?",
                 "What do {0} and {1} have in common?"]
MONTHS = [
    "January", "February", "March", "April", "May", "June", "July", "August", "September",
    "October", "November", "December",
]
MONTH_Q = ["What's the weather like in {0} in {1}?", "What should I pack for {0} in {1}?",
           "Is {1} a good month to go to {0}?"]
PLATFORM_TASKS = [
    "take a screenshot", "clear the cache", "turn off notifications", "share my location",
    "set up a hotspot", "change the default browser", "record my screen", "block a number",
    "free up storage", "turn on captions", "find my saved passwords", "update my apps",
    "make the text bigger", "set a screen time limit", "move photos to another device",
    "scan a document", "connect to a printer", "mute a group chat", "back up my contacts",
    "turn on dark mode",
]
PLATFORMS = [
    "an iPhone", "Android", "a Mac", "Windows", "a Chromebook", "an iPad", "a smart TV", "Linux",
]
PLATFORM_Q = ["How do I {0} on {1}?", "What's the way to {0} on {1}?"]
NATIONS = [
    "Norway", "Vietnam", "Ghana", "Chile", "Iceland", "Nepal", "Uruguay", "Estonia",
    "Jordan", "Malaysia", "Ethiopia", "Bolivia", "Slovenia", "Sri Lanka", "Tunisia",
    "Mongolia", "Costa Rica", "Senegal", "Latvia", "the Philippines", "Bhutan", "Madagascar",
    "Scotland", "Belgium", "Austria", "Hungary", "Denmark", "Ecuador", "Uzbekistan", "Fiji",
]
NATION_Q = [
    "What language do people speak in {0}?", "What's the currency in {0}?",
    "What is {0} famous for?", "What's a traditional dish from {0}?",
    "Tell me a bit of history about {0}.", "What's the landscape like in {0}?",
]
PETS = ["dogs", "cats", "rabbits", "hamsters", "parrots", "horses", "guinea pigs"]
PET_FOODS = [
    "grapes", "cheese", "carrots", "chocolate", "peanut butter", "apples", "rice", "eggs",
    "watermelon", "onions", "bread", "popcorn", "strawberries", "tuna", "blueberries",
    "pumpkin", "bananas", "cucumber", "avocado", "milk",
]
PET_Q = ["Can {0} eat {1}?", "Is it okay to give {0} {1}?"]
JOBS = [
    "an electrician", "a data analyst", "a midwife", "an air traffic controller", "a pharmacist",
    "a park ranger", "a translator", "a UX designer", "a physiotherapist", "a sommelier",
    "a court reporter", "an actuary", "a marine biologist", "a paramedic", "a librarian",
    "a plumber", "a product manager", "a veterinarian", "a pilot", "a chef", "an architect",
    "a social worker", "a firefighter", "a dental hygienist", "a carpenter", "a journalist",
]
JOB_Q = [
    "What does {0} do all day?", "How do I become {0}?", "What skills does {0} need?",
    "Is being {0} a stressful job?",
]
CONCEPTS = [
    "the Pythagorean theorem", "supply and demand", "the passive voice", "mitosis",
    "prime numbers", "fractions", "the periodic table", "opportunity cost", "natural selection",
    "Newton's third law", "the scientific method", "negative numbers", "photosynthesis in plants",
    "how interest rates work", "the food chain", "metaphors", "the speed of light", "atoms",
    "algebra", "probability with dice", "the three branches of government", "climate zones",
    "the circulatory system", "entropy", "an ecosystem", "the electoral college",
    "ratios", "a haiku's structure", "Roman numerals", "the difference between mass and weight",
]
CONCEPT_Q = [
    "Can you explain {0}?", "Teach me {0} in one minute.",
    "What's the easiest way to understand {0}?",
    "Give me an everyday example of {0}.",
]
SPORTS = [
    "cricket", "rugby", "curling", "water polo", "fencing", "lacrosse", "American football",
    "ice hockey", "badminton", "handball", "baseball", "sumo wrestling", "snooker",
    "volleyball", "Formula One", "the triathlon", "figure skating", "polo", "darts", "squash",
]
SPORT_Q = [
    "How do you score in {0}?", "What are the basic rules of {0}?",
    "How long does a game of {0} last?",
    "What's the hardest part of {0}?",
]
WORKS = [
    "Pride and Prejudice", "Moby Dick", "The Odyssey", "Frankenstein", "1984", "Don Quixote",
    "The Great Gatsby", "War and Peace", "Hamlet", "The Little Prince", "Jane Eyre",
    "Crime and Punishment", "The Hobbit", "One Hundred Years of Solitude", "Les Misérables",
    "Romeo and Juliet", "The Catcher in the Rye", "Dracula", "Brave New World", "Beloved",
]
WORK_Q = ["What is {0} about?", "Is {0} worth reading?", "Why is {0} considered a classic?"]
HOLIDAYS = [
    "Diwali", "Lunar New Year", "Thanksgiving", "Hanukkah", "Ramadan", "Day of the Dead",
    "Halloween", "Easter", "Holi", "Midsummer in Sweden", "Bastille Day", "Oktoberfest",
    "Hogmanay", "Kwanzaa", "Passover", "the Mid-Autumn Festival", "Carnival in Brazil",
    "St. Patrick's Day", "Eid al-Fitr", "Christmas",
]
HOLIDAY_Q = [
    "How is {0} celebrated?", "What's the origin of {0}?", "What do people eat during {0}?",
]
FEELINGS = [
    "anxious", "unmotivated", "overwhelmed", "homesick", "jealous of my friends", "restless",
    "burnt out", "lonely", "stuck", "guilty for resting", "nervous before exams", "grumpy",
    "sad for no reason", "stressed about money", "bored with my routine",
]
FEELING_Q = [
    "I feel {0}. What can I do?", "How do I deal with feeling {0}?",
    "Lately I've been feeling {0}. Any ideas?",
]
# Arithmetic, money and unit questions as people say them: numbers make every one new.
ARITH_Q = [
    "What's {0} times {1}?", "What is {0} plus {1}?", "What's {0} minus {1}?",
    "What is {0} divided by {1}?",
]
PCT_Q = [
    "What's {0} percent of {1}?", "What's a {0} percent tip on a {1} dollar bill?",
    "If something costs {1} dollars and it's {0} percent off, what do I pay?",
]
CONVERT_Q = [
    "How many {2} is {0} {1}?", "Convert {0} {1} to {2}.", "What's {0} {1} in {2}?",
]
CONVERT = [
    ("miles", "kilometers"), ("kilometers", "miles"), ("pounds", "kilograms"),
    ("kilograms", "pounds"), ("cups", "milliliters"), ("feet", "meters"), ("inches", "centimeters"),
    ("ounces", "grams"), ("liters", "gallons"), ("hours", "minutes"), ("days", "hours"),
    ("weeks", "days"),
]
OPENERS = [
    "Hey, ", "Hi! ", "Quick question: ", "Okay, ", "So, ", "Um, ", "I was wondering, ",
    "Hey assistant, ", "Sorry to bother you, but ", "Random question, ", "Hmm, ", "Alright, ",
    "Real quick, ", "Out of curiosity, ", "Settle something for me: ", "Can I ask you something? ",
    "My friend wants to know: ", "Hey there, ", "Question for you: ", "Okay so ",
]
CLOSERS = [
    " Keep it short.", " Thanks!", " Just the short answer, please.", " In simple words.",
    " Explain it like I'm five.", " Please.", " I'm in a bit of a hurry.", " Thanks so much.",
    " Be honest.", " Just the basics.",
]
# fmt: on


def _one(items: list[str], phrasings: list[str]) -> Iterator[str]:
    for it, ph in itertools.product(items, phrasings):
        yield ph.format(it)


def _cap(s: str) -> str:
    return s[:1].upper() + s[1:]


def _bases(r: random.Random) -> Iterator[str]:
    """Every request of the series once, unframed."""
    yield from _one(INGREDIENTS, COOK_Q)
    for a, b in itertools.combinations(INGREDIENTS, 2):
        if r.random() < 0.25:  # 780 pairs: a quarter of them, so food does not swamp the rest
            yield r.choice(COOK_PAIR_Q).format(a, b)
    yield from _one(DISHES, DISH_Q)
    for d, diet in itertools.product(DISHES, DIETS):
        yield r.choice(DIET_Q).format(d, diet)
    for meal, ing in itertools.product(MEALS, INGREDIENTS):
        yield r.choice(MEAL_Q).format(meal, ing)
    for m, ing in itertools.product(METHODS, INGREDIENTS):
        yield r.choice(METHOD_Q).format(m, ing)
    yield from _one(PHENOMENA, SCI_Q)
    for t, age in itertools.product([*PHENOMENA, *EVENTS], AGES):
        yield r.choice(AGE_Q).format(t, age)
    yield from _one(ANIMALS, ANIMAL_Q)
    for a, b in itertools.combinations(ANIMALS, 2):
        if r.random() < 0.3:
            yield r.choice(ANIMAL_PAIR_Q).format(a, b)
    yield from _one(CITIES, CITY_Q)
    for c, n, w in itertools.product(CITIES, TRIP_LEN, TRIP_WHO):
        yield r.choice(TRIP_Q).format(c, n, w)
    for c, month in itertools.product(CITIES, MONTHS):
        yield r.choice(MONTH_Q).format(c, month)
    yield from _one(HOBBIES, HOBBY_Q)
    yield from _one(TECH, TECH_Q)
    yield from _one(HABITS, HABIT_Q)
    for h, p in itertools.product(HABITS, PERSONAS):
        yield r.choice(PERSONA_Q).format(h, p)
    for h, p in itertools.product(HOBBIES, PERSONAS):
        yield r.choice(HOBBY_PERSONA_Q).format(h, p)
    yield from _one(MONEY, MONEY_Q)
    yield from _one(PEOPLE, PERSON_Q)
    yield from _one(EVENTS, EVENT_Q)
    yield from _one(WORDS, WORD_Q)
    for ph, lang in itertools.product(PHRASES, LANGS):
        yield r.choice(PHRASE_Q).format(ph, lang)
    for s, q in itertools.product(SITUATIONS, SITUATION_Q):
        yield _cap(q.format(s))
    for what, who in itertools.product(RECS, REC_WHO):
        yield r.choice(REC_Q).format(what, who)
    yield from _one(PAIRS, PAIR_Q)
    yield from _one(WRITE, WRITE_Q)
    yield from _one(MADE, MADE_Q)
    yield from _one(FIRST_AID, FIRST_AID_Q)
    for n, what, who in itertools.product(PLAN_LEN, PLAN_WHAT, PLAN_WHO):
        yield r.choice(PLAN_Q).format(n, what, who)
    yield from _one(WHAT_IF, WHAT_IF_Q)
    yield from CHAT
    for task, plat in itertools.product(PLATFORM_TASKS, PLATFORMS):
        yield r.choice(PLATFORM_Q).format(task, plat)
    yield from _one(NATIONS, NATION_Q)
    for pet, food in itertools.product(PETS, PET_FOODS):
        yield r.choice(PET_Q).format(pet, food)
    yield from _one(JOBS, JOB_Q)
    yield from _one(CONCEPTS, CONCEPT_Q)
    for c, age in itertools.product(CONCEPTS, AGES):
        yield r.choice(AGE_Q).format(c, age)
    yield from _one(SPORTS, SPORT_Q)
    yield from _one(WORKS, WORK_Q)
    yield from _one(HOLIDAYS, HOLIDAY_Q)
    yield from _one(FEELINGS, FEELING_Q)
    for _ in range(2500):
        x, y = r.randint(2, 99), r.randint(2, 40)
        q = r.choice(ARITH_Q)
        yield q.format(x * y, y) if "divided" in q else q.format(x, y)  # divisions come out even
    for _ in range(600):
        yield r.choice(PCT_Q).format(r.choice([5, 10, 12, 15, 18, 20, 25, 30, 40, 60]),
                                     r.randint(8, 400))  # fmt: skip
    for _ in range(600):
        src, dst = r.choice(CONVERT)
        yield r.choice(CONVERT_Q).format(
            r.choice([1, 2, 3, 5, 8, 10, 12, 20, 26, 42, 100]), src, dst
        )


def speak(r: random.Random, base: str) -> str:
    """``base`` as someone might say it: with an opener (a third of the time), a closer
    (a fifth) and sometimes unpunctuated lower case, as a transcript reads."""
    s = base
    if r.random() < 1 / 3:
        o = r.choice(OPENERS)
        keep = o.endswith("? ") or s.startswith(("I ", "I'"))  # a new sentence, or "I"
        s = o + (s if keep else s[:1].lower() + s[1:])
    if r.random() < 0.2 and s.endswith(("?", ".")):
        s += r.choice(CLOSERS)
    if r.random() < 0.1:
        s = s.rstrip(".?!").lower()
    return s


JOINS = [" Also, ", " And ", " Oh, and ", " Then ", " Plus, "]
PAIRED = 6000  # two-request prompts drawn from the bases


def _paired(r: random.Random, bases: list[str]) -> Iterator[str]:
    """Two requests in one breath ("…? Also, …?"), as people ask a voice assistant: each
    pair is a context no single request gives."""
    short = [b for b in bases if len(b) < 70 and b.endswith("?")]
    for _ in range(PAIRED):
        a, b = r.sample(short, 2)
        yield a + r.choice(JOINS) + b[:1].lower() + b[1:]


def series(seed: int = 0) -> list[str]:
    """The series, every base request once (framed by ``speak``) and ``PAIRED`` pairs of
    them, in a seeded order."""
    r = random.Random(seed)
    bases = list(_bases(r))
    out = [speak(r, b) for b in bases] + list(_paired(r, bases))
    r.shuffle(out)
    return out
