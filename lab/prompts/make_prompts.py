#!/usr/bin/env python3
"""Deterministically generate the DFlash self-distillation training prompts.

    python lab/prompts/make_prompts.py                 # writes lab/prompts/train.jsonl.xz
    python lab/prompts/make_prompts.py --out /tmp/x.jsonl

Each output line is ``{"category": ..., "prompt": ...}``.  Prompts are built by
filling many hand-written templates (>= 40 per category) with hand-written
topic/entity lists; math prompts draw their numbers from a seeded ``random``.
Only the standard library is used and the output is byte-for-byte
reproducible: a fixed seed, no iteration over sets/dicts of unordered keys, and
explicit UTF-8 / "\\n" output.

Template syntax: ``{pool}`` inserts a random item of ``POOLS[pool]``;
``{pool:2}`` a second, *different* item of the same pool; ``{pool.attr}``
picks a field of a dict item (all references to the same slot share one item);
``{pool|lc}`` lower-cases the first letter, ``{pool|lcs}`` also strips the
final punctuation mark.  Templates may also be functions ``rng -> str``.
"""

from __future__ import annotations

import argparse
import json
import lzma
import random
import re
import sys
from pathlib import Path

SEED = 1350
CATEGORIES = ("chat", "explanation", "code", "math", "lists", "creative")
TARGET_PER_CATEGORY = 6000
DEFAULT_OUT = Path(__file__).resolve().parent / "train.jsonl.xz"
NATURAL_DIR = Path(__file__).resolve().parent / "natural"  # hand-written prompts, one file per category
NATURAL_OUT = Path(__file__).resolve().parent / "train-natural.jsonl.xz"

# Probabilities of decorating a template with a system-like preface / a style suffix.
P_PREFACE = 0.08
P_SUFFIX = 0.16


def normalize(text: str) -> str:
    """Lower-case, drop punctuation, collapse whitespace (used for de-duplication)."""
    text = re.sub(r"[^0-9a-z]+", " ", text.lower())
    return " ".join(text.split())


# =============================================================================
# Shared pools
# =============================================================================

NAMES = [
    "Maya", "Leo", "Aisha", "Tom", "Sofia", "Ravi", "Emma", "Carlos", "Yuki", "Noah",
    "Fatima", "Liam", "Chloe", "Omar", "Grace", "Mateo", "Hannah", "Kenji", "Zara", "Ben",
    "Priya", "Lucas", "Amara", "Jack", "Elena", "Sam", "Nadia", "Diego", "Lily", "Ethan",
    "Mei", "Oscar", "Ana", "Felix", "Ruth", "Jonas", "Ines", "Tariq", "Olivia", "Hugo",
    "Kofi", "Julia", "Arjun", "Mia", "Pedro", "Clara", "Ivan", "Leila", "Max", "Rosa",
]

COUNT_WORDS = ["three", "four", "five", "six", "seven", "eight", "ten", "3", "4", "5", "6", "7", "8", "10"]

CITIES = [
    "Paris", "Tokyo", "Rome", "Barcelona", "New York", "London", "Lisbon", "Amsterdam", "Berlin",
    "Prague", "Vienna", "Istanbul", "Cairo", "Marrakech", "Cape Town", "Nairobi", "Sydney",
    "Melbourne", "Auckland", "Bangkok", "Singapore", "Seoul", "Kyoto", "Hong Kong", "Mumbai",
    "Delhi", "Dubai", "Mexico City", "Buenos Aires", "Rio de Janeiro", "Lima", "Toronto",
    "Vancouver", "Montreal", "Chicago", "San Francisco", "Los Angeles", "Boston", "Seattle",
    "New Orleans", "Edinburgh", "Dublin", "Copenhagen", "Stockholm", "Oslo", "Helsinki",
    "Budapest", "Athens", "Florence", "Venice", "Madrid", "Seville", "Munich", "Zurich",
    "Reykjavik", "Hanoi", "Bali", "Havana", "Quebec City", "Krakow",
]

COUNTRIES = [
    "Japan", "Brazil", "Canada", "Egypt", "India", "Mexico", "Italy", "France", "Germany",
    "Spain", "Portugal", "Greece", "Norway", "Sweden", "Finland", "Iceland", "Ireland",
    "Scotland", "Kenya", "Morocco", "South Africa", "Nigeria", "Ghana", "Ethiopia", "Peru",
    "Chile", "Argentina", "Colombia", "Australia", "New Zealand", "China", "South Korea",
    "Vietnam", "Thailand", "Indonesia", "the Philippines", "Turkey", "Switzerland", "Austria",
    "the Netherlands", "Poland", "Russia", "Mongolia", "Nepal", "Cuba", "Jamaica",
    "Madagascar", "Tanzania", "Saudi Arabia", "Malaysia",
]

SEASONS = ["spring", "summer", "autumn", "winter", "the rainy season", "December", "July", "April"]

ANIMALS_PL = [
    "octopuses", "elephants", "penguins", "honeybees", "owls", "dolphins", "wolves", "cheetahs",
    "giraffes", "kangaroos", "koalas", "sloths", "bats", "crows", "parrots", "sharks", "whales",
    "sea turtles", "frogs", "butterflies", "ants", "spiders", "horses", "cats", "dogs", "rabbits",
    "hedgehogs", "foxes", "polar bears", "pandas", "camels", "hummingbirds", "flamingos", "otters",
    "beavers", "squirrels", "snails", "jellyfish", "seahorses", "lions", "tigers", "zebras",
    "gorillas", "chimpanzees", "eagles", "salmon", "crocodiles", "chameleons", "platypuses",
    "axolotls", "starfish", "woodpeckers", "goats", "cows", "chickens", "ducks",
]

INGREDIENTS = [
    "eggs", "rice", "pasta", "chicken", "tofu", "potatoes", "sweet potatoes", "spinach",
    "tomatoes", "onions", "garlic", "carrots", "broccoli", "mushrooms", "zucchini", "lentils",
    "chickpeas", "black beans", "canned tuna", "cheese", "yogurt", "oats", "bananas", "apples",
    "bread", "peanut butter", "ground beef", "salmon", "shrimp", "cabbage", "bell peppers",
    "corn", "frozen peas", "cauliflower", "noodles", "coconut milk", "avocados", "lemons",
    "cucumbers", "feta cheese", "quinoa", "ham", "sausages", "milk", "flour",
]

DISHES = [
    "pancakes", "banana bread", "vegetable soup", "fried rice", "guacamole", "chocolate chip cookies",
    "spaghetti carbonara", "tomato sauce", "mashed potatoes", "a simple omelette", "hummus",
    "chicken curry", "lentil soup", "homemade pizza", "French toast", "a Greek salad",
    "scrambled eggs", "pad thai", "chili con carne", "mac and cheese", "a fruit smoothie",
    "apple pie", "tacos", "a stir-fry", "roast chicken", "garlic bread", "potato salad",
    "overnight oats", "lemonade", "iced tea", "brownies", "muffins", "a vegetable lasagna",
    "fish tacos", "tomato soup", "a grilled cheese sandwich", "meatballs", "a quiche",
    "pesto pasta", "rice pudding", "a chickpea curry", "falafel", "crepes", "a burrito bowl",
    "shakshuka", "miso soup", "a tuna salad sandwich", "popcorn on the stove", "waffles",
    "a simple bread loaf",
]

HOBBIES = [
    "painting", "knitting", "chess", "gardening", "photography", "rock climbing", "baking",
    "playing the guitar", "playing the piano", "learning the ukulele", "birdwatching", "running",
    "yoga", "swimming", "journaling", "drawing", "pottery", "woodworking", "sewing",
    "writing poetry", "calligraphy", "origami", "cycling", "hiking", "fishing", "board games",
    "jigsaw puzzles", "learning a new language", "singing", "dancing", "skateboarding",
    "bird photography", "stargazing", "bread making", "cooking Thai food", "collecting stamps",
    "geocaching", "crossword puzzles", "meditation", "sketching with charcoal", "martial arts",
    "table tennis", "embroidery", "home brewing kombucha", "model building", "coding for fun",
]

SPORTS = [
    "soccer", "basketball", "tennis", "volleyball", "baseball", "cricket", "rugby",
    "American football", "ice hockey", "badminton", "table tennis", "golf", "handball",
    "water polo", "netball", "curling", "fencing", "field hockey", "squash", "bowling",
    "the long jump", "the triathlon", "the decathlon", "pickleball", "ultimate frisbee",
    "darts", "snooker", "archery", "judo", "figure skating",
]

JOBS = [
    "a pharmacist", "an architect", "an electrician", "a software engineer", "an air traffic controller",
    "a nurse", "a librarian", "a veterinarian", "a firefighter", "a pilot", "a park ranger",
    "an accountant", "a chef", "a journalist", "a dentist", "a plumber", "a marine biologist",
    "a graphic designer", "a teacher", "a carpenter", "a translator", "a data analyst",
    "a paramedic", "a farmer", "a museum curator", "a meteorologist", "a physical therapist",
    "a lawyer", "a mechanic", "an astronaut", "a zookeeper", "a baker", "a judge",
    "an interior designer", "a social worker", "a photographer",
]

LANGS = [
    "Python", "Python", "Python", "JavaScript", "JavaScript", "TypeScript", "Java", "C", "C++",
    "Go", "Rust", "Ruby", "C#", "PHP", "Kotlin", "Swift",
]

AUDIENCES = [
    "a five-year-old", "a ten-year-old", "a high school student", "a complete beginner",
    "my grandmother", "a curious teenager", "a group of middle school students",
    "someone who hates science", "an adult with no background in the topic",
]

# =============================================================================
# chat: everyday questions and advice
# =============================================================================

HABIT_GOALS = [
    "wake up earlier", "drink more water", "stop procrastinating", "keep my room tidy",
    "stay focused while working from home", "save money for a vacation", "eat more vegetables",
    "read more books", "spend less time on my phone", "go to bed at a reasonable time",
    "exercise more regularly", "stop snacking late at night", "be more confident in meetings",
    "make friends as an adult", "keep a journal every day", "learn to cook healthy meals",
    "stick to a budget", "walk 10,000 steps a day", "stop biting my nails",
    "be on time more often", "cut down on sugar", "remember people's names",
    "get better at small talk", "stay calm when I'm stressed", "practice gratitude",
    "declutter my closet", "drink less coffee", "stretch every morning",
    "keep in touch with old friends", "study more effectively", "take better notes in class",
    "stop overthinking everything", "be more patient with my kids", "learn to say no",
    "organize my email inbox", "plan my meals for the week", "build a morning routine",
    "get back into running after a break", "keep my houseplants alive", "feel less lonely",
    "stop comparing myself to others", "manage my time better at work",
    "become a better listener", "make my apartment feel less cluttered", "save for retirement",
    "stay motivated while learning to code", "spend more time outdoors", "reduce food waste at home",
]

FEELINGS = ["nervous", "worried", "stressed", "anxious", "excited but scared", "overwhelmed", "unsure", "frustrated"]

WORRIES = [
    "a job interview next week", "starting at a new school", "moving to another city",
    "giving a presentation at work", "my driving test", "meeting my partner's parents",
    "my first day at a new job", "an exam on Monday", "asking my boss for a raise",
    "living alone for the first time", "a long flight", "going to a party where I know nobody",
    "a difficult conversation with my roommate", "speaking in front of my class",
    "my first half marathon", "a dentist appointment", "traveling abroad alone",
    "changing careers", "my kid starting kindergarten", "retiring next year",
]

EVERYDAY_QS = [
    "How long should I boil an egg for a soft yolk?",
    "What's the best way to remove a coffee stain from a white shirt?",
    "How often should I water a snake plant?",
    "Is it better to shower in the morning or at night?",
    "How do I get rid of fruit flies in my kitchen?",
    "How can I keep bread from going stale so fast?",
    "What's a good way to fall asleep faster?",
    "How do I clean a cast iron pan?",
    "How long do cooked leftovers last in the fridge?",
    "What should I do if my phone gets wet?",
    "How can I make my small bedroom look bigger?",
    "What's the easiest way to fold a fitted sheet?",
    "How do I know if an avocado is ripe?",
    "How much should I tip at a restaurant in the US?",
    "Can I freeze cooked rice?",
    "How do I unclog a bathroom sink without chemicals?",
    "What's a good way to start learning to cook?",
    "How do I stop my glasses from fogging up when I wear a mask?",
    "What's the best way to store fresh herbs?",
    "How can I stay warm at home without turning up the heating?",
    "How can I make my morning coffee taste better?",
    "Why does my laptop get so hot, and is that a problem?",
    "How do I get rid of a bad smell in my fridge?",
    "How can I make a long car ride less boring?",
    "How do I remove a splinter safely?",
    "What's the best way to pack a suitcase so clothes don't wrinkle?",
    "How can I tell if milk has gone bad?",
    "What can I do about squeaky door hinges?",
    "How do I choose a good watermelon at the store?",
    "How can I keep my cut flowers fresh for longer?",
    "What's a good time to go grocery shopping to avoid crowds?",
    "How do I politely leave a group chat?",
    "How often should I replace my toothbrush?",
    "Is it safe to eat cookie dough?",
    "How do I keep my cat off the kitchen counter?",
    "What's a polite way to remind a friend they owe me money?",
    "How do I get my toddler to eat vegetables?",
    "How can I keep my bike from getting rusty?",
    "What's the best way to learn to type faster?",
    "Should I wash new clothes before wearing them?",
    "How do I make ice cubes that are clear?",
    "What's a good way to keep track of my passwords?",
    "How do I stop my shoes from smelling?",
    "Is it okay to put a wooden cutting board in the dishwasher?",
    "How can I make a room smell nice without candles?",
    "How long should a nap be?",
    "How do I get wax off a tablecloth?",
    "What should I eat before a morning run?",
    "How can I save on my electricity bill?",
    "What's the best way to keep bananas from turning brown quickly?",
]

TRIP_LENGTHS = ["weekend", "three-day", "one-week", "two-week", "short", "business"]

GIFT_PEOPLE = [
    "my dad who likes fishing", "a coworker who is leaving the company", "my sister who loves baking",
    "a friend who just moved into a new apartment", "my grandmother's 80th birthday",
    "a ten-year-old who likes science", "my partner who loves reading", "a teacher at the end of the year",
    "a friend who is into hiking", "my brother who has everything", "a host of a dinner party",
    "a new baby and their parents", "my mom who enjoys gardening", "a friend who just graduated",
    "someone who loves coffee", "a teenager who plays video games", "a neighbor who helped me move",
    "a friend recovering from surgery", "my boss for the holidays", "a couple who just got married",
]

CONFLICTS = [
    "My roommate never does the dishes.", "I forgot my best friend's birthday.",
    "My coworker keeps taking credit for my work.", "My neighbor's dog barks all night.",
    "My friend always cancels plans at the last minute.", "My sister borrowed my jacket and ruined it.",
    "My teenager won't talk to me about school.", "My manager sends me emails late at night.",
    "A friend said something hurtful in a group chat.", "My partner and I disagree about where to go on vacation.",
    "My upstairs neighbor is very loud at night.", "A classmate copied my homework.",
    "My friend keeps asking to borrow money.", "My parents want me to study something I don't like.",
    "Someone keeps parking in my parking spot.", "My group project partner isn't doing any work.",
    "My best friend is moving away and I feel sad.", "My coworker talks loudly on the phone all day.",
    "I accidentally broke something at a friend's house.", "My in-laws visit without calling first.",
]

DECISIONS = [
    "learn Spanish or French", "buy a laptop or a tablet for school", "rent an apartment or keep living with my parents",
    "get a cat or a dog", "take the bus or bike to work", "study in the morning or at night",
    "go to the gym or work out at home", "buy a new phone or repair my old one",
    "take a gap year or start college right away", "cook at home or order takeout tonight",
    "learn the piano or the guitar", "travel by train or by plane for a 500 km trip",
    "save my bonus or spend it on a trip", "switch jobs or ask for a promotion",
    "buy a used car or a new one", "read the book first or watch the movie first",
    "paint my bedroom blue or green", "join a running club or run alone",
    "take an online course or an in-person class", "move to a big city or a small town",
]

MEDIA_KINDS = ["books", "movies", "podcasts", "board games", "documentaries", "video games", "TV shows"]
INTERESTS = [
    "history", "space", "mysteries", "cooking", "nature", "science", "travel", "comedy",
    "sports", "art", "music", "animals", "strategy", "puzzles", "adventure", "true stories",
]
FREE_TIMES = ["afternoon", "Saturday", "evening", "Sunday morning", "whole day", "couple of hours"]

PETS = [
    "a goldfish", "a hamster", "a puppy", "a kitten", "a rabbit", "a guinea pig", "a parrot",
    "a turtle", "a bearded dragon", "a senior dog", "a rescue cat", "backyard chickens", "a budgie",
]
PET_KINDS = ["puppy", "kitten", "goldfish", "hamster", "rabbit", "parrot", "turtle", "guinea pig"]

PET_ISSUES = [
    "My cat keeps scratching the sofa.", "My dog barks at every noise outside.",
    "My puppy chews on my shoes.", "My cat wakes me up at 5 a.m. every day.",
    "My dog pulls on the leash during walks.", "My rabbit won't let me pick it up.",
    "My kitten bites my hands when we play.", "My dog is scared of thunderstorms.",
    "My cat stopped using the litter box.", "My dog eats way too fast.",
    "My parrot screams in the morning.", "My hamster runs on its wheel all night.",
]

MEALS = ["dinner", "lunch", "brunch", "picnic", "birthday dinner", "weeknight dinner", "potluck dish"]
PEOPLE_COUNTS = ["two", "four", "six", "eight", "ten", "twelve"]

SNACK_CONTEXTS = [
    "at work", "before a workout", "while studying", "late at night", "on a long hike",
    "on a road trip", "after school", "between meetings",
]

SOCIAL_TASKS = [
    "say no to extra work", "ask my neighbor to turn down the music", "end a long phone call",
    "decline a wedding invitation", "tell a friend I need some space", "ask for a refund in a store",
    "leave a party early", "ask my boss for feedback", "turn down a date",
    "ask someone to repeat their name", "tell my roommate to clean up", "interrupt someone in a meeting",
    "say I disagree without starting an argument", "ask a friend to pay me back",
    "tell a guest it's time to go home", "apologize after an argument",
]

HOUSEHOLD_ISSUES = [
    "My kitchen sink drains really slowly.", "My phone battery dies by lunchtime.",
    "My Wi-Fi keeps dropping in the evening.", "My shower has low water pressure.",
    "My fridge is making a buzzing noise.", "My laptop fan is really loud.",
    "My bathroom mirror fogs up every time I shower.", "My windows get wet on the inside in winter.",
    "My washing machine smells bad.", "My front door sticks when it rains.",
    "My houseplant's leaves are turning yellow.", "My toaster only toasts one side.",
    "My bedroom is too hot at night.", "My printer says it's offline.",
]

EXERCISES = ["running", "lifting weights", "yoga", "swimming", "stretching", "a long walk", "cycling", "a HIIT workout"]

HEALTH_QS = [
    "drink coffee on an empty stomach", "exercise every single day", "skip breakfast",
    "drink water right before bed", "run when my legs are sore", "eat late at night",
    "work out when I have a cold", "take a nap in the afternoon", "stretch before running",
    "eat the same breakfast every day", "sit at a desk all day if I take short breaks",
    "drink sparkling water instead of regular water",
]

AGE_GROUPS = ["a teenager", "an adult", "a toddler", "a school-age child", "an older adult", "a newborn", "a college student"]

MILD_EMERGENCIES = [
    "you lock yourself out of your house", "your phone falls into water", "you get a small burn while cooking",
    "you miss your connecting flight", "your car battery dies", "you lose your wallet",
    "a pan of oil catches fire", "you get a nosebleed", "you get stung by a bee",
    "your basement starts to flood", "the power goes out at night", "you spill coffee on your laptop",
]

WHERES = ["at home", "outside", "with friends", "on my own", "in the city", "on a rainy day", "without spending money"]
ROOMS = ["bedroom", "living room", "small apartment", "home office", "reading corner", "balcony"]
FIRST_TIMES = [
    "day at a new job", "time cooking for guests", "marathon", "flight alone", "week at university",
    "camping trip", "job interview", "time living abroad", "day as a manager", "time hosting Thanksgiving",
    "road trip", "yoga class", "week working from home", "parent-teacher meeting",
]
BUDGETS = ["20", "50", "100", "200", "300", "500", "1,000"]
SPEND_ONS = [
    "a new hobby", "a weekend trip", "kitchen tools", "a date night", "books", "home office gear",
    "a birthday party", "camping gear", "running shoes and clothes", "houseplants",
]

CHAT_TEMPLATES = [
    "How can I {habit_goal}?",
    "What's the best way to {habit_goal}?",
    "I've been trying to {habit_goal} but I keep failing. Any tips?",
    "Do you have any advice for someone who wants to {habit_goal}?",
    "hey, any tips to {habit_goal}?",
    "How do I stay motivated to {habit_goal}?",
    "lol how do i actually {habit_goal}",
    "I'm {feeling} about {worry}. What should I do?",
    "My friend is {feeling} about {worry}. How can I support them?",
    "I feel {feeling} about {worry}. Can you give me a few ways to calm down?",
    "{everyday_q}",
    "Quick question: {everyday_q|lc}",
    "Hi! {everyday_q}",
    "{everyday_q} Please keep the answer short.",
    "What should I cook for dinner if I only have {ingredient} and {ingredient:2}?",
    "Can you suggest a simple recipe using {ingredient}, {ingredient:2} and {ingredient:3}?",
    "How do I make {dish} at home?",
    "I want to make {dish} tonight. What do I need?",
    "What should I pack for a {trip_length} trip to {city}?",
    "I'm visiting {city} for the first time. What should I see?",
    "Is {city} a good place to visit in {season}?",
    "You are a helpful travel assistant. Suggest a one-day plan for {city}.",
    "I just moved to {city}. How can I meet new people?",
    "What's a good gift for {gift_person}?",
    "I need a gift idea for {gift_person}. My budget is about {budget} dollars.",
    "{conflict} How should I handle it?",
    "{conflict} What would you do?",
    "ugh. {conflict|lc} any advice?",
    "Should I {decision}?",
    "I can't decide whether to {decision}. Can you help me think it through?",
    "I want to start {hobby}. Where should I begin?",
    "Is {hobby} a good hobby for a beginner?",
    "How much time should a beginner spend on {hobby} each week?",
    "What are some good {media_kind} for someone who likes {interest}?",
    "I have a free {free_time} this weekend. What could I do?",
    "How do I take care of {pet}?",
    "{pet_issue} What can I do about it?",
    "What's a good name for my new {pet_kind}?",
    "You are a friendly life coach. A client says: \"I want to {habit_goal}, but I never have time.\" How do you respond?",
    "You are a kind and practical assistant. Help me plan a cheap {meal} for {people_count} people.",
    "What's a healthy snack I can eat {snack_context}?",
    "How do I politely {social_task}?",
    "What's a nice way to {social_task} without hurting anyone's feelings?",
    "{household_issue} Any ideas how to fix it?",
    "ok so {household_issue|lcs}. what do i do?",
    "What time of day is best for {exercise}?",
    "Is it okay to {health_q}?",
    "How many hours of sleep does {age_group} need?",
    "What are you supposed to do when {mild_emergency}?",
    "I'm bored. Suggest something fun to do {where}.",
    "How can I make my {room} feel cozier?",
    "Any advice for my first {first_time}?",
    "I have {budget} dollars to spend on {spend_on}. What do you suggest?",
    "My friend and I are arguing about whether it's better to {decision}. What do you think?",
    "Can you give me some encouragement? I'm {feeling} about {worry}.",
]

CHAT_POOLS = {
    "habit_goal": HABIT_GOALS, "feeling": FEELINGS, "worry": WORRIES, "everyday_q": EVERYDAY_QS,
    "ingredient": INGREDIENTS, "dish": DISHES, "trip_length": TRIP_LENGTHS, "city": CITIES,
    "season": SEASONS, "gift_person": GIFT_PEOPLE, "budget": BUDGETS, "conflict": CONFLICTS,
    "decision": DECISIONS, "hobby": HOBBIES, "media_kind": MEDIA_KINDS, "interest": INTERESTS,
    "free_time": FREE_TIMES, "pet": PETS, "pet_issue": PET_ISSUES, "pet_kind": PET_KINDS,
    "meal": MEALS, "people_count": PEOPLE_COUNTS, "snack_context": SNACK_CONTEXTS,
    "social_task": SOCIAL_TASKS, "household_issue": HOUSEHOLD_ISSUES, "exercise": EXERCISES,
    "health_q": HEALTH_QS, "age_group": AGE_GROUPS, "mild_emergency": MILD_EMERGENCIES,
    "where": WHERES, "room": ROOMS, "first_time": FIRST_TIMES, "spend_on": SPEND_ONS,
}

CHAT_PREFACES = [
    "You are a friendly, practical assistant.",
    "You are a helpful assistant. Answer briefly and kindly.",
    "You are a supportive friend giving everyday advice.",
    "You are an experienced home organizer.",
    "Act as a calm, thoughtful advisor.",
]
CHAT_SUFFIXES = [
    "Keep it short.", "Thanks!", "Please be practical.", "Answer in a few sentences.",
    "Give me two or three ideas.", "I'd appreciate a simple answer.", "Be honest with me.",
]

# =============================================================================
# explanation: explain a concept / how something works
# =============================================================================

SCIENCE = [
    "photosynthesis", "gravity", "evaporation", "the water cycle", "plate tectonics", "DNA",
    "the immune system", "vaccination", "electricity", "magnetism", "static electricity",
    "friction", "inertia", "momentum", "the conservation of energy", "the greenhouse effect",
    "climate change", "the ozone layer", "black holes", "the Big Bang", "the seasons", "ocean tides",
    "the phases of the Moon", "solar eclipses", "erosion", "fossils", "evolution", "natural selection",
    "cells", "mitosis", "metabolism", "digestion", "blood circulation", "the nervous system",
    "antibiotics", "bacteria", "viruses", "the food chain", "ecosystems", "biodiversity",
    "pollination", "atoms", "molecules", "chemical reactions", "acids and bases", "the periodic table",
    "the states of matter", "sound waves", "light", "refraction", "heat transfer", "buoyancy",
    "air pressure", "wind", "clouds", "radioactivity", "nuclear energy", "solar power", "wind power",
    "composting", "genes", "proteins", "enzymes", "the carbon cycle", "osmosis", "density",
    "kinetic and potential energy", "Newton's laws of motion", "orbits", "light-years", "the speed of light",
    "the Doppler effect", "electric circuits", "the magnetic field of the Earth", "camouflage in animals",
    "hibernation", "animal migration", "the human microbiome", "allergies", "muscle growth",
    "hydration", "the sense of smell", "color vision", "echoes", "rust", "fermentation",
]

DEVICES = [
    "a refrigerator", "a microwave oven", "a bicycle's gears", "an airplane wing", "a helicopter",
    "a car engine", "an electric car", "a thermostat", "a toaster", "a digital camera",
    "a smartphone touchscreen", "a compass", "a mechanical clock", "a light bulb", "an LED",
    "a solar panel", "a wind turbine", "a dishwasher", "a washing machine", "a vacuum cleaner",
    "an elevator", "an escalator", "a lock and key", "a zipper", "a ballpoint pen", "an inkjet printer",
    "noise-cancelling headphones", "a microphone", "a loudspeaker", "a thermometer", "a telescope",
    "a microscope", "a submarine", "a hot air balloon", "a rocket", "a parachute", "a traffic light",
    "a credit card payment", "an ATM", "a barcode scanner", "a QR code", "Bluetooth", "a Wi-Fi router",
    "a rechargeable battery", "a hydroelectric dam", "a water filter", "a pressure cooker",
    "an air conditioner", "a smoke detector", "a fire extinguisher", "a sewing machine", "a piano",
    "an electric guitar", "a radio", "a 3D printer", "a drone", "a car's airbag", "an induction stove",
    "a heat pump", "a fridge magnet", "a GPS receiver", "a fountain pen", "a space heater",
    "a smartwatch's heart rate sensor", "a bicycle's brakes", "a coffee maker", "a hearing aid",
]

PHENOMENA = [
    "the sky is blue", "leaves change color in autumn", "we have seasons", "ice floats on water",
    "the ocean is salty", "we yawn", "cutting onions makes you cry", "bread rises",
    "cats purr", "the Moon seems to change shape", "we get goosebumps", "metal feels colder than wood",
    "popcorn pops", "birds migrate", "we need sleep", "stars twinkle",
    "our voice sounds different on recordings", "hair turns gray", "soap bubbles are round",
    "cut apples turn brown", "we get hiccups", "planes leave white trails in the sky",
    "dogs wag their tails", "we dream", "water boils at a lower temperature on mountains",
    "iron rusts", "soap removes grease", "sunsets are red and orange", "snow is white",
    "we see lightning before we hear thunder", "fingers wrinkle in the bath", "bananas turn brown",
    "people float easily in the Dead Sea", "deserts get cold at night", "we sneeze",
    "muscles get sore after exercise", "the Moon has craters", "some people are left-handed",
    "our ears pop on airplanes", "ice cubes crack when you drop them in a drink",
    "we feel dizzy after spinning", "the sea has waves", "mirrors flip left and right",
    "a spoon looks bent in a glass of water", "we get brain freeze from ice cream",
    "spicy food feels hot", "the sun looks bigger near the horizon", "cats land on their feet",
    "ice is slippery", "clouds float", "bees buzz", "our stomach growls",
]

DIFF_PAIRS = [
    "weather and climate", "a virus and a bacterium", "speed and velocity", "mass and weight",
    "RAM and storage", "an alligator and a crocodile", "baking soda and baking powder",
    "a simile and a metaphor", "affect and effect", "HTTP and HTTPS", "a debit card and a credit card",
    "stocks and bonds", "a hurricane and a typhoon", "an ocean and a sea", "a comet and an asteroid",
    "a star and a planet", "a frog and a toad", "a rabbit and a hare", "a latte and a cappuccino",
    "jam and jelly", "a hypothesis and a theory", "an element and a compound",
    "AC and DC electricity", "a democracy and a monarchy", "Wi-Fi and Bluetooth",
    "a compiler and an interpreter", "HTML and CSS", "Git and GitHub", "a lake and a pond",
    "a cold and the flu", "a psychologist and a psychiatrist", "a moth and a butterfly",
    "an emu and an ostrich", "whole wheat and white flour", "a fruit and a vegetable",
    "a meteor and a meteorite", "a monkey and an ape", "revenue and profit",
    "a recession and a depression", "a country and a continent", "renewable and non-renewable energy",
    "a tornado and a hurricane", "a dolphin and a porpoise", "a bug and a feature",
    "a browser and a search engine", "a noun and a pronoun", "there, their and they're",
    "a sprain and a strain", "a loan and a grant", "an herbivore and an omnivore",
]

HISTORY = [
    "the invention of the printing press", "the Industrial Revolution", "the French Revolution",
    "the American Revolution", "the Renaissance", "the building of the Egyptian pyramids",
    "the Silk Road", "the Age of Exploration", "the Moon landing in 1969", "World War I",
    "World War II", "the Cold War", "the fall of the Berlin Wall", "the Black Death",
    "the first modern Olympic Games", "the invention of the telephone", "the Wright brothers' first flight",
    "the signing of the Magna Carta", "the civil rights movement in the United States",
    "the abolition of slavery", "the fall of the Western Roman Empire", "the invention of writing",
    "the Agricultural Revolution", "the voyages of Zheng He", "the construction of the Great Wall of China",
    "the invention of the steam engine", "the women's suffrage movement", "the discovery of penicillin",
    "the invention of the internet", "the Gold Rush in California", "the end of apartheid in South Africa",
    "the independence of India", "the Protestant Reformation", "the Scientific Revolution",
    "the invention of the light bulb", "the first vaccines", "the building of the Panama Canal",
]

CIVILIZATIONS = [
    "ancient Egypt", "ancient Rome", "ancient Greece", "the Maya civilization", "the Vikings",
    "the Aztec Empire", "the Inca Empire", "the Mongol Empire", "the Ottoman Empire",
    "medieval Europe", "ancient China during the Han dynasty", "ancient Mesopotamia",
    "the Mali Empire", "feudal Japan", "the Byzantine Empire", "the Indus Valley civilization",
    "ancient Persia", "Victorian England",
]

TECH = [
    "the internet", "Wi-Fi", "GPS", "email", "encryption", "a search engine", "cloud storage",
    "a password manager", "two-factor authentication", "artificial intelligence", "machine learning",
    "a computer virus", "a web browser", "an operating system", "a database", "an app store",
    "online banking", "a VPN", "streaming video", "a spam filter", "a cookie on a website",
    "a QR code payment", "a computer's CPU", "computer memory", "a hard drive", "a USB stick",
    "5G mobile networks", "a chatbot", "face recognition on phones", "a smart speaker",
    "a blockchain", "an online map", "autocorrect", "video calls", "a computer mouse",
]

ECON = [
    "compound interest", "inflation", "supply and demand", "income tax", "a credit score",
    "budgeting", "the stock market", "interest rates", "a mortgage", "an index fund",
    "a savings account", "a pension", "insurance", "a recession", "exchange rates",
    "an emergency fund", "debt", "a loan's APR", "diversification", "a dividend",
    "opportunity cost", "a monopoly", "a startup", "minimum wage", "a trade deficit",
]

BODY_PARTS = [
    "the liver", "the kidneys", "the heart", "the lungs", "the spleen", "the pancreas", "the skin",
    "red blood cells", "white blood cells", "the small intestine", "the brain", "the appendix",
    "the thyroid", "the spine", "the inner ear", "tendons", "the tongue", "bone marrow",
]

BODY_PROCESSES = [
    "digest food", "heal a cut", "fight a cold", "control its temperature", "build muscle",
    "store energy", "keep its balance", "make new blood cells", "react to stress", "fight off germs",
    "turn food into energy", "repair a broken bone", "sense hunger", "stay hydrated",
]

LANDFORMS = [
    "a volcano", "a glacier", "a canyon", "a river delta", "an island", "a cave", "a waterfall",
    "a sand dune", "a mountain range", "a coral reef", "a geyser", "a fjord", "a hot spring",
    "a sinkhole", "an oxbow lake", "a beach", "a valley", "a stalactite",
]

ANIMAL_QS = [
    "How do bats find their way in the dark?", "How do birds know where to migrate?",
    "How do fish breathe underwater?", "How do chameleons change color?",
    "How do bees make honey?", "Why do cats sleep so much?", "How do spiders spin webs?",
    "How do snakes move without legs?", "Why do zebras have stripes?", "How do whales communicate?",
    "How do penguins stay warm?", "How do octopuses change their skin texture?",
    "How do camels survive in the desert?", "How do ants find food?", "How do owls see at night?",
    "Why do dogs have such a good sense of smell?", "How do salmon find the river where they were born?",
    "How do hummingbirds hover in the air?", "Why do flamingos stand on one leg?",
    "How do frogs survive the winter?", "How do sharks detect prey?",
    "How do squirrels remember where they buried nuts?", "How do parrots learn to talk?",
    "How do fireflies glow?", "How do turtles breathe when they are underwater?",
]

MATH_CONCEPTS = [
    "prime numbers", "fractions", "negative numbers", "probability", "percentages",
    "the Pythagorean theorem", "pi", "averages", "exponents", "square roots", "ratios",
    "infinity", "zero", "place value", "angles", "symmetry", "logarithms", "variables in algebra",
    "functions in math", "graphs", "the order of operations", "decimals", "area and perimeter",
    "standard deviation", "multiplication", "long division", "rounding numbers", "the number line",
]

NATURE_PROCESSES = [
    "a caterpillar turns into a butterfly", "a seed grows into a plant", "rain forms",
    "a river carves a valley", "a star is born", "coral reefs grow", "soil is formed",
    "a hurricane develops", "fog forms", "frost forms on a window", "a rainbow appears",
    "lightning forms in a storm", "a tadpole becomes a frog", "bees make honey",
    "cheese is made", "glass is made", "paper is made from trees",
    "chocolate is made from cocoa beans", "a pearl forms inside an oyster", "an island is formed by a volcano",
    "snowflakes form", "wine turns into vinegar", "yogurt is made", "a chick develops inside an egg",
    "oil is formed underground", "diamonds form", "sand is made", "a wave forms in the ocean",
]

SYSTEMS = [
    "the postal service", "a jury trial", "a public library", "recycling collection",
    "triage in a hospital emergency room", "the electric grid", "a water treatment plant",
    "airport security", "the stock exchange", "a bank loan", "health insurance",
    "a supermarket supply chain", "an election", "a city's sewer system", "air traffic control",
    "a weather forecast", "a newspaper", "a subway system", "a blood donation", "a food bank",
]

SOCIETY = [
    "taxes", "laws", "libraries", "public transport", "recycling", "elections", "insurance",
    "national parks", "museums", "public schools", "a central bank", "trade between countries",
    "a constitution", "labels on food", "speed limits", "vaccination programs",
]

WEATHER = [
    "thunderstorms", "fog", "hail", "droughts", "floods", "monsoons", "heat waves", "snow",
    "the northern lights", "strong winds", "tornadoes", "frost", "sea breezes", "dew",
]

PROG_CONCEPTS = [
    "recursion", "variables", "loops", "functions", "classes and objects", "inheritance", "closures",
    "dictionaries", "sets", "exceptions", "list comprehensions", "lambda functions", "decorators",
    "generators", "async and await", "promises", "callbacks", "pointers", "dynamic memory allocation",
    "garbage collection", "Big O notation", "stacks", "queues", "linked lists", "binary trees",
    "hash tables", "sorting algorithms", "binary search", "APIs", "REST APIs", "JSON", "unit tests",
    "version control", "git branches", "merge conflicts", "environment variables",
    "regular expressions", "SQL joins", "primary keys", "database indexes", "type hints",
    "static versus dynamic typing", "compilation", "the event loop", "immutability",
    "string formatting", "reading and writing files", "modules and imports", "virtual environments",
    "debugging", "off-by-one errors", "integer overflow", "floating point rounding errors",
    "variable scope", "global variables", "constants", "enums", "interfaces", "the DOM",
    "CSS selectors", "HTTP status codes", "multithreading", "caching", "pure functions",
    "mutable and immutable data", "iterators", "tuples", "higher-order functions", "pagination",
]

EXPLANATION_TEMPLATES = [
    "Explain {science} in simple terms.",
    "Can you tell me about {science}?",
    "Can you explain {science} to {audience}?",
    "You are a science teacher. Explain {science} to {audience}.",
    "In a few sentences, explain {science} and give one everyday example.",
    "I never understood {science}. Could you break it down for me?",
    "Explain {science} using an analogy.",
    "Give me a two- or three-sentence summary of {science}.",
    "How does {device} work?",
    "Explain how {device} works, step by step.",
    "What happens inside {device} when you use it?",
    "Can you explain the basic idea behind {device}?",
    "Explain why {phenomenon}.",
    "Can you tell me why {phenomenon}?",
    "My kid asked me why {phenomenon}. How do I explain it?",
    "I've always wondered why {phenomenon}. What's the reason?",
    "What is the difference between {diff_pair}?",
    "Explain the difference between {diff_pair} with an example.",
    "People often confuse {diff_pair}. What sets them apart?",
    "Give a short overview of {history}.",
    "Why was {history} important?",
    "You are a history teacher. Explain {history} to {audience}.",
    "What were the main causes and effects of {history}?",
    "You are a museum guide. A visitor asks you about {history}. What do you tell them?",
    "Tell me about {civilization}.",
    "What was daily life like in {civilization}?",
    "Explain how {tech} works.",
    "What is {tech}, and why does it matter?",
    "How would you explain {tech} to someone who has never used a computer?",
    "what even is {tech}? explain like i'm five",
    "Explain {econ} like I'm new to personal finance.",
    "What does {econ} mean in everyday life?",
    "Explain the rules of {sport}.",
    "How is {sport} scored?",
    "What does {body_part} do in the human body?",
    "How does the body {body_process}?",
    "What is {landform}, and how does it form?",
    "{animal_q}",
    "Here's something I've always wondered about: {animal_q|lc}",
    "Explain the concept of {math_concept}.",
    "How is the idea of {math_concept} useful in everyday life?",
    "Explain how {nature_process}.",
    "Can you walk me through how {nature_process}?",
    "What does {job} do all day?",
    "What does {job} do, and what training do they need?",
    "Explain the programming idea of {prog_concept} to someone who has never programmed.",
    "How does {system} work?",
    "Explain how {system} works from start to finish.",
    "Why do we need {society}?",
    "What is {country} known for?",
    "Describe the climate and geography of {country}.",
    "Explain what causes {weather}.",
    "What conditions lead to {weather}?",
]

EXPLANATION_POOLS = {
    "science": SCIENCE, "audience": AUDIENCES, "device": DEVICES, "phenomenon": PHENOMENA,
    "diff_pair": DIFF_PAIRS, "history": HISTORY, "civilization": CIVILIZATIONS, "tech": TECH,
    "econ": ECON, "sport": SPORTS, "body_part": BODY_PARTS, "body_process": BODY_PROCESSES,
    "landform": LANDFORMS, "animal_q": ANIMAL_QS, "math_concept": MATH_CONCEPTS,
    "nature_process": NATURE_PROCESSES, "job": JOBS, "prog_concept": PROG_CONCEPTS,
    "system": SYSTEMS, "society": SOCIETY, "country": COUNTRIES, "weather": WEATHER,
}

EXPLANATION_PREFACES = [
    "You are a patient teacher who explains things clearly.",
    "You are a science communicator writing for a general audience.",
    "You are a helpful tutor.",
    "Act as an encyclopedia written for kids.",
    "You are a friendly expert. Avoid jargon.",
]
EXPLANATION_SUFFIXES = [
    "Use simple language.", "Keep it under 100 words.", "Give one concrete example.",
    "Explain it in three short paragraphs.", "Avoid technical jargon.", "Be concise.",
    "Start with a one-sentence summary.",
]

# =============================================================================
# code: write / fix / explain small programs
# =============================================================================

CODE_TASKS = [
    "reverses a string", "checks whether a number is prime", "returns the factorial of n",
    "computes the nth Fibonacci number", "counts the vowels in a string",
    "finds the largest number in a list", "removes duplicates from a list while keeping the order",
    "checks if a string is a palindrome", "converts Celsius to Fahrenheit",
    "sums all even numbers in a list", "returns the average of a list of numbers",
    "sorts a list of words alphabetically", "counts how many times each word appears in a sentence",
    "checks if two strings are anagrams", "flattens a nested list", "merges two sorted lists",
    "finds the second largest number in a list", "capitalizes the first letter of every word",
    "returns the greatest common divisor of two numbers", "checks whether a year is a leap year",
    "converts a decimal number to binary", "generates a random password of a given length",
    "counts the lines in a text file", "returns the common elements of two lists",
    "rotates a list by k positions", "performs a binary search on a sorted list",
    "implements bubble sort", "does a simple check that an email address looks valid",
    "calculates the area of a circle from its radius", "returns the digits of a number as a list",
    "finds the missing number in a list containing 1 to n", "splits a list into chunks of size n",
    "returns the longest word in a sentence", "computes the sum of the digits of a number",
    "removes all whitespace from a string", "checks if a list is sorted",
    "prints the multiplication table for a number", "prints FizzBuzz from 1 to n",
    "counts the number of words in a string", "finds the minimum and maximum of a list in one pass",
    "reverses the order of words in a sentence", "checks whether a number is a perfect square",
    "calculates compound interest", "converts minutes into hours and minutes",
    "returns the index of the first occurrence of a value in a list",
    "groups a list of words by their first letter", "computes x to the power n using a loop",
    "generates the first n prime numbers", "checks if the parentheses in a string are balanced",
    "converts a Roman numeral to an integer", "calculates BMI from weight and height",
    "returns a dictionary of character frequencies", "finds all pairs in a list that add up to a target",
    "shuffles a list", "truncates a string to n characters and adds an ellipsis",
    "computes the median of a list", "checks whether all characters in a string are unique",
    "computes the dot product of two vectors", "converts a string to snake_case",
    "counts how many numbers in a list are negative", "returns the n largest items in a list",
    "checks if a number is an Armstrong number", "converts a temperature table from Celsius to Fahrenheit",
    "validates that a password has at least 8 characters and one digit",
    "returns the running total of a list", "transposes a matrix", "finds the mode of a list",
    "removes vowels from a string", "checks if a string contains only digits",
    "simulates rolling two dice and returns the total", "computes the sum of the squares from 1 to n",
    "converts a list of key-value pairs into a dictionary", "formats a number with thousands separators",
]

SQL_TASKS = [
    "find the average salary in each department from a table employees(id, name, department, salary)",
    "list the five highest-paid employees from a table employees(id, name, department, salary)",
    "count how many employees work in each department, using a table employees(id, name, department, salary)",
    "find employees who earn more than 50000 in a table employees(id, name, department, salary)",
    "get the total amount spent by each customer from a table orders(id, customer_id, amount, order_date)",
    "find all orders placed in 2023 from a table orders(id, customer_id, amount, order_date)",
    "find customers who have never placed an order, given tables customers(id, name) and orders(id, customer_id, amount)",
    "join customers(id, name, city) and orders(id, customer_id, amount) to show each order with the customer's name",
    "find the month with the highest total sales from a table orders(id, customer_id, amount, order_date)",
    "delete duplicate rows from a table emails(id, address), keeping the lowest id",
    "find the most popular product from a table order_items(order_id, product_id, quantity)",
    "list students with a grade above the class average from a table students(id, name, grade)",
    "count the number of books per author from a table books(id, title, author, year)",
    "find books published before 1950 from a table books(id, title, author, year)",
    "update the price of every product in the 'toys' category by 10 percent in a table products(id, name, category, price)",
    "find products that are out of stock in a table products(id, name, stock)",
    "create a table called tasks with an id, a title, a done flag and a due date",
    "insert three rows into a table pets(id, name, species, age)",
    "find the oldest pet of each species in a table pets(id, name, species, age)",
    "find cities with more than 100 customers from a table customers(id, name, city)",
    "compute the number of new users per day from a table users(id, email, created_at)",
    "find the second highest salary in a table employees(id, name, salary)",
    "list movies and their average rating from tables movies(id, title) and ratings(movie_id, stars)",
    "find users who logged in during the last 7 days from a table logins(user_id, login_time)",
    "show each department's highest salary along with the employee's name from employees(id, name, department, salary)",
    "rename the column 'fullname' to 'name' in a table people",
    "add an index on the email column of a table users(id, email, name)",
    "find all customers whose name starts with 'A' in a table customers(id, name, city)",
]

BASH_TASKS = [
    "find all .txt files in the current directory and its subfolders", "count the lines in a file",
    "rename all .jpeg files in a folder to .jpg", "show how much disk space a folder uses",
    "list the 10 largest files in a directory", "print the last 20 lines of a log file",
    "search for a word in all files in a folder recursively", "make a script executable",
    "create a backup of a folder with today's date in the file name", "delete files older than 7 days",
    "loop over all .csv files and print their names", "check if a file exists",
    "count how many files are in a directory", "replace every occurrence of a word in a file",
    "show the processes using the most memory", "download a file from a URL",
    "extract a .tar.gz archive", "compress a folder into a zip file", "add a directory to PATH",
    "read a file line by line", "sort a file and remove duplicate lines",
    "print the current date in YYYY-MM-DD format", "find which process is using port 8080",
    "follow a log file as new lines are written", "count how many times each word appears in a file",
    "print only the second column of a CSV file", "create ten empty files named file1.txt to file10.txt",
    "show the size of each subfolder sorted by size", "run a command every 5 seconds",
    "print the number of CPU cores", "find empty directories and delete them",
]

GIT_TASKS = [
    "undo the last commit but keep the changes", "create a new branch and switch to it",
    "see what changed in a file since the last commit", "discard local changes to one file",
    "rename the current branch", "merge a feature branch into main", "see the commit history in one line per commit",
    "delete a local branch", "stash my changes and bring them back later", "change the last commit message",
    "see which branch I am on", "pull the latest changes from the remote", "ignore all .log files",
    "find which commit introduced a bug", "list all remote branches",
]

HOWTOS = [
    "read a JSON file in Python", "sort a dictionary by value in Python", "make an HTTP GET request in JavaScript",
    "convert a string to an integer in C", "get the current date and time in Python",
    "remove an item from an array in JavaScript", "check if a key exists in a Python dictionary",
    "read user input in Java", "format a float to two decimal places in Python",
    "loop over a dictionary in Python", "split a string by commas in JavaScript",
    "write to a text file in Python", "create a virtual environment in Python",
    "copy a list in Python without changing the original", "join a list of strings in Python",
    "find the length of an array in C", "convert a list to a set in Python",
    "add an event listener to a button in JavaScript", "parse a date string in JavaScript",
    "handle an exception in Python", "declare a constant in JavaScript",
    "concatenate strings in Go", "reverse an array in JavaScript", "read a CSV file in Python",
    "generate a random number between 1 and 10 in Python", "sleep for one second in Python",
    "check the type of a variable in Python", "create a class in JavaScript",
    "round a number in JavaScript", "count occurrences of an item in a Python list",
    "install a package with pip", "print without a newline in Python", "make a deep copy of an object in JavaScript",
    "swap two variables in Python", "get the last element of a list in Python",
    "filter a list of numbers in JavaScript", "use map in JavaScript", "iterate with an index in Python",
    "merge two dictionaries in Python", "define a struct in C", "read command-line arguments in Python",
    "convert a number to a string in Java", "compare two strings in C",
]

HTML_TASKS = [
    "shows a heading and a list of three favorite foods", "has a form with name and email fields",
    "displays a simple table of three fruits and their prices", "has a button that shows an alert when clicked",
    "shows an image with a caption", "has a navigation bar with three links",
    "displays a personal profile card", "counts how many times a button has been clicked",
    "shows the current time and updates it every second", "has a dark mode toggle button",
    "has a simple contact form with a message box", "shows a to-do list where you can add items",
]

CSS_TASKS = [
    "center a div horizontally and vertically", "make a button change color when hovered",
    "create a simple two-column layout with flexbox", "make an image round",
    "add a shadow to a card", "make text bold and underlined", "create a sticky header",
    "make a responsive grid of cards", "style links so they are not underlined",
    "add a smooth fade-in animation", "give a box rounded corners and a border",
    "hide an element on small screens",
]

REGEX_TASKS = [
    "matches a five-digit US zip code", "finds all email addresses in a text",
    "matches dates in the format YYYY-MM-DD", "checks that a string contains only letters",
    "finds all hashtags in a tweet", "matches a phone number like 555-123-4567",
    "finds all numbers in a sentence", "matches words that start with a capital letter",
    "checks that a password contains a digit", "finds repeated words like 'the the'",
    "extracts the domain from a URL", "matches a time like 14:30",
]

CLASSES = [
    {"name": "BankAccount", "task": "supports deposit, withdraw and checking the balance"},
    {"name": "Stack", "task": "has push, pop, peek and is_empty methods"},
    {"name": "Queue", "task": "has enqueue and dequeue methods"},
    {"name": "Rectangle", "task": "can compute its area and perimeter"},
    {"name": "Student", "task": "stores a name and a list of grades and can compute the average"},
    {"name": "ShoppingCart", "task": "can add items, remove items and compute the total price"},
    {"name": "Counter", "task": "can increment, decrement and reset a count"},
    {"name": "Book", "task": "stores a title, an author and a year and prints a short description"},
    {"name": "Temperature", "task": "stores a value in Celsius and can convert it to Fahrenheit"},
    {"name": "TodoList", "task": "can add tasks, mark them done and list unfinished tasks"},
    {"name": "Timer", "task": "can start, stop and report the elapsed time"},
    {"name": "Point", "task": "represents a 2D point and can compute the distance to another point"},
    {"name": "Library", "task": "can add books, lend a book and return a book"},
    {"name": "Dice", "task": "can roll a die with any number of sides"},
    {"name": "Playlist", "task": "can add songs, remove songs and shuffle the order"},
]

RECURSIVE_TASKS = [
    "computes the factorial of n", "sums the digits of a number", "reverses a string",
    "computes the nth Fibonacci number", "counts down from n to 1", "computes x to the power n",
    "checks if a string is a palindrome", "flattens a nested list", "finds the maximum of a list",
    "computes the sum of a list", "counts the items in a nested list", "prints all subsets of a small list",
]

ERROR_MSGS = [
    "TypeError: can only concatenate str (not \"int\") to str", "IndexError: list index out of range",
    "KeyError: 'name'", "NameError: name 'total' is not defined", "SyntaxError: invalid syntax",
    "ZeroDivisionError: division by zero", "AttributeError: 'NoneType' object has no attribute 'split'",
    "ModuleNotFoundError: No module named 'requests'", "IndentationError: expected an indented block",
    "ValueError: invalid literal for int() with base 10: 'abc'",
    "RecursionError: maximum recursion depth exceeded", "TypeError: 'NoneType' object is not subscriptable",
    "FileNotFoundError: [Errno 2] No such file or directory: 'data.txt'",
    "Uncaught TypeError: Cannot read properties of undefined (reading 'length')",
    "ReferenceError: x is not defined", "SyntaxError: Unexpected token '}'", "Segmentation fault (core dumped)",
    "error: expected ';' before 'return'", "fatal: not a git repository", "bash: ./run.sh: Permission denied",
    "command not found: python", "TypeError: unsupported operand type(s) for +: 'int' and 'str'",
    "UnboundLocalError: local variable 'count' referenced before assignment",
    "java.lang.NullPointerException", "Uncaught SyntaxError: Unexpected end of input",
]

BUGGY = [
    {"lang": "Python", "issue": "returns the wrong answer for an empty list",
     "code": "```python\ndef average(nums):\n    return sum(nums) / len(nums)\n```"},
    {"lang": "Python", "issue": "is supposed to add two numbers but returns the wrong result",
     "code": "```python\ndef add(a, b):\n    return a - b\n```"},
    {"lang": "Python", "issue": "never stops running",
     "code": "```python\ni = 0\nwhile i < 10:\n    print(i)\n```"},
    {"lang": "Python", "issue": "skips the last number",
     "code": "```python\nfor i in range(1, 10):\n    print(i)  # should print 1 to 10\n```"},
    {"lang": "Python", "issue": "crashes with a TypeError",
     "code": "```python\nage = input(\"Age: \")\nprint(\"Next year you will be \" + age + 1)\n```"},
    {"lang": "Python", "issue": "keeps the old items between calls",
     "code": "```python\ndef add_item(item, items=[]):\n    items.append(item)\n    return items\n```"},
    {"lang": "Python", "issue": "says every number is prime",
     "code": "```python\ndef is_prime(n):\n    for i in range(2, n):\n        if n % i == 0:\n            return False\n        return True\n```"},
    {"lang": "Python", "issue": "prints the wrong maximum for negative numbers",
     "code": "```python\ndef largest(nums):\n    best = 0\n    for n in nums:\n        if n > best:\n            best = n\n    return best\n```"},
    {"lang": "Python", "issue": "raises an IndexError",
     "code": "```python\nnums = [3, 1, 4]\nfor i in range(len(nums) + 1):\n    print(nums[i])\n```"},
    {"lang": "Python", "issue": "does not reverse the string",
     "code": "```python\ndef reverse(s):\n    result = \"\"\n    for ch in s:\n        result = result + ch\n    return result\n```"},
    {"lang": "Python", "issue": "always prints 'odd'",
     "code": "```python\nn = int(input())\nif n % 2 == 1 or 0:\n    print(\"odd\")\nelse:\n    print(\"even\")\n```"},
    {"lang": "Python", "issue": "counts every word as 1",
     "code": "```python\ndef count_words(text):\n    counts = {}\n    for w in text.split():\n        counts[w] = 1\n    return counts\n```"},
    {"lang": "Python", "issue": "changes the original list too",
     "code": "```python\noriginal = [1, 2, 3]\ncopy = original\ncopy.append(4)\nprint(original)\n```"},
    {"lang": "Python", "issue": "computes the factorial incorrectly",
     "code": "```python\ndef factorial(n):\n    result = 0\n    for i in range(1, n + 1):\n        result *= i\n    return result\n```"},
    {"lang": "JavaScript", "issue": "prints 5 five times instead of 0 to 4",
     "code": "```javascript\nfor (var i = 0; i < 5; i++) {\n  setTimeout(() => console.log(i), 100);\n}\n```"},
    {"lang": "JavaScript", "issue": "prints false, but I expected true",
     "code": "```javascript\nfunction same(a, b) {\n  return a === b;\n}\nconsole.log(same(\"10\", 10));\n```"},
    {"lang": "JavaScript", "issue": "returns undefined",
     "code": "```javascript\nfunction double(x) {\n  x * 2;\n}\nconsole.log(double(4));\n```"},
    {"lang": "JavaScript", "issue": "sorts the numbers in the wrong order",
     "code": "```javascript\nconst nums = [10, 2, 33, 4];\nnums.sort();\nconsole.log(nums);\n```"},
    {"lang": "JavaScript", "issue": "adds the numbers as strings",
     "code": "```javascript\nconst a = prompt(\"First number\");\nconst b = prompt(\"Second number\");\nalert(a + b);\n```"},
    {"lang": "JavaScript", "issue": "throws an error about assignment to a constant",
     "code": "```javascript\nconst total = 0;\nfor (const n of [1, 2, 3]) {\n  total += n;\n}\n```"},
    {"lang": "C", "issue": "prints a strange number instead of the sum",
     "code": "```c\n#include <stdio.h>\nint main(void) {\n    int sum;\n    for (int i = 1; i <= 10; i++) sum += i;\n    printf(\"%d\\n\", sum);\n    return 0;\n}\n```"},
    {"lang": "C", "issue": "crashes or prints garbage",
     "code": "```c\n#include <stdio.h>\nint main(void) {\n    int a[5] = {1, 2, 3, 4, 5};\n    for (int i = 0; i <= 5; i++) printf(\"%d\\n\", a[i]);\n    return 0;\n}\n```"},
    {"lang": "C", "issue": "always says the numbers are equal",
     "code": "```c\nif (x = y) {\n    printf(\"equal\\n\");\n}\n```"},
    {"lang": "Java", "issue": "says two equal strings are different",
     "code": "```java\nString a = new String(\"hi\");\nString b = new String(\"hi\");\nSystem.out.println(a == b);\n```"},
    {"lang": "Java", "issue": "prints 2 instead of 2.5",
     "code": "```java\nint a = 5;\nint b = 2;\ndouble result = a / b;\nSystem.out.println(result);\n```"},
    {"lang": "SQL", "issue": "returns an error about GROUP BY",
     "code": "```sql\nSELECT department, name, AVG(salary)\nFROM employees\nGROUP BY department;\n```"},
    {"lang": "SQL", "issue": "returns no rows even though some emails are missing",
     "code": "```sql\nSELECT * FROM users WHERE email = NULL;\n```"},
    {"lang": "bash", "issue": "fails when a file name has spaces",
     "code": "```bash\nfor f in $(ls *.txt); do\n  wc -l $f\ndone\n```"},
    {"lang": "bash", "issue": "prints the literal text instead of the variable's value",
     "code": "```bash\nname=\"Ana\"\necho 'Hello, $name'\n```"},
    {"lang": "bash", "issue": "gives a 'command not found' error on the first line",
     "code": "```bash\ncount = 5\necho $count\n```"},
]

SNIPPETS = [
    {"lang": "Python", "code": "```python\nnums = [1, 2, 3, 4, 5]\nsquares = [n * n for n in nums if n % 2 == 1]\nprint(squares)\n```"},
    {"lang": "Python", "code": "```python\ndef mystery(s):\n    return s == s[::-1]\n\nprint(mystery(\"level\"))\n```"},
    {"lang": "Python", "code": "```python\ncounts = {}\nfor ch in \"banana\":\n    counts[ch] = counts.get(ch, 0) + 1\nprint(counts)\n```"},
    {"lang": "Python", "code": "```python\nx = 10\ny = 3\nprint(x // y, x % y, x / y)\n```"},
    {"lang": "Python", "code": "```python\nwords = [\"pear\", \"fig\", \"banana\"]\nprint(sorted(words, key=len))\n```"},
    {"lang": "Python", "code": "```python\ndef f(n):\n    if n <= 1:\n        return 1\n    return n * f(n - 1)\n\nprint(f(5))\n```"},
    {"lang": "Python", "code": "```python\ntotal = 0\nfor i in range(1, 101):\n    if i % 3 == 0 or i % 5 == 0:\n        total += i\nprint(total)\n```"},
    {"lang": "Python", "code": "```python\na, b = 0, 1\nfor _ in range(8):\n    print(a, end=\" \")\n    a, b = b, a + b\n```"},
    {"lang": "Python", "code": "```python\nnames = [\"Ann\", \"Bob\"]\nages = [31, 25]\nfor name, age in zip(names, ages):\n    print(f\"{name} is {age}\")\n```"},
    {"lang": "Python", "code": "```python\nwith open(\"notes.txt\") as f:\n    lines = [line.strip() for line in f if line.strip()]\nprint(len(lines))\n```"},
    {"lang": "Python", "code": "```python\nprices = {\"apple\": 0.5, \"bread\": 2.0}\ncheap = {k: v for k, v in prices.items() if v < 1}\nprint(cheap)\n```"},
    {"lang": "Python", "code": "```python\nimport random\nroll = random.randint(1, 6)\nprint(\"You rolled\", roll)\n```"},
    {"lang": "Python", "code": "```python\ndef gen():\n    for i in range(3):\n        yield i * 10\n\nprint(list(gen()))\n```"},
    {"lang": "Python", "code": "```python\ntry:\n    n = int(\"42a\")\nexcept ValueError:\n    n = 0\nprint(n)\n```"},
    {"lang": "JavaScript", "code": "```javascript\nconst nums = [1, 2, 3, 4];\nconst doubled = nums.map(n => n * 2).filter(n => n > 4);\nconsole.log(doubled);\n```"},
    {"lang": "JavaScript", "code": "```javascript\nconst total = [5, 10, 15].reduce((sum, x) => sum + x, 0);\nconsole.log(total);\n```"},
    {"lang": "JavaScript", "code": "```javascript\nconst user = { name: \"Ana\", age: 30 };\nconst { name, ...rest } = user;\nconsole.log(name, rest);\n```"},
    {"lang": "JavaScript", "code": "```javascript\ndocument.querySelector(\"#btn\").addEventListener(\"click\", () => {\n  document.body.classList.toggle(\"dark\");\n});\n```"},
    {"lang": "JavaScript", "code": "```javascript\nasync function load() {\n  const res = await fetch(\"/api/items\");\n  const data = await res.json();\n  console.log(data.length);\n}\n```"},
    {"lang": "JavaScript", "code": "```javascript\nconsole.log(typeof null, typeof [], typeof undefined);\n```"},
    {"lang": "C", "code": "```c\n#include <stdio.h>\nint main(void) {\n    int n = 5, result = 1;\n    while (n > 0) result *= n--;\n    printf(\"%d\\n\", result);\n    return 0;\n}\n```"},
    {"lang": "C", "code": "```c\nvoid swap(int *a, int *b) {\n    int t = *a;\n    *a = *b;\n    *b = t;\n}\n```"},
    {"lang": "C", "code": "```c\nint len(const char *s) {\n    int n = 0;\n    while (s[n] != '\\0') n++;\n    return n;\n}\n```"},
    {"lang": "SQL", "code": "```sql\nSELECT city, COUNT(*) AS n\nFROM customers\nGROUP BY city\nHAVING COUNT(*) > 10\nORDER BY n DESC;\n```"},
    {"lang": "SQL", "code": "```sql\nSELECT c.name, SUM(o.amount)\nFROM customers c\nLEFT JOIN orders o ON o.customer_id = c.id\nGROUP BY c.name;\n```"},
    {"lang": "bash", "code": "```bash\nfor f in *.log; do\n  echo \"$f: $(wc -l < \"$f\") lines\"\ndone\n```"},
    {"lang": "bash", "code": "```bash\ngrep -c \"ERROR\" app.log\n```"},
    {"lang": "bash", "code": "```bash\nfind . -name \"*.tmp\" -mtime +3 -delete\n```"},
    {"lang": "Java", "code": "```java\nint[] a = {4, 8, 15};\nint sum = 0;\nfor (int x : a) sum += x;\nSystem.out.println(sum / a.length);\n```"},
    {"lang": "Go", "code": "```go\nfor i := 0; i < 3; i++ {\n    fmt.Println(i * i)\n}\n```"},
]

PY_SNIPPETS = [s for s in SNIPPETS if s["lang"] == "Python"]

LOOP_SNIPPETS = [
    "```python\nresult = []\nfor x in range(10):\n    result.append(x * x)\n```",
    "```python\nevens = []\nfor n in numbers:\n    if n % 2 == 0:\n        evens.append(n)\n```",
    "```python\nupper = []\nfor word in words:\n    upper.append(word.upper())\n```",
    "```python\nlengths = []\nfor name in names:\n    lengths.append(len(name))\n```",
    "```python\npositives = []\nfor value in values:\n    if value > 0:\n        positives.append(value)\n```",
    "```python\npairs = []\nfor i in range(3):\n    for j in range(3):\n        pairs.append((i, j))\n```",
    "```python\nstripped = []\nfor line in lines:\n    if line.strip() != \"\":\n        stripped.append(line.strip())\n```",
]

CODE_TEMPLATES = [
    "Write a {lang} function that {code_task}.",
    "Write a Python function that {code_task}.",
    "How do I write a function in {lang} that {code_task}?",
    "Can you show me {lang} code that {code_task}?",
    "Write a short {lang} program that {code_task}, and explain how it works.",
    "You are an experienced programmer. Write clean, commented {lang} code that {code_task}.",
    "I'm learning {lang}. Write a beginner-friendly function that {code_task}.",
    "In JavaScript, how would I write a function that {code_task}?",
    "Write a {lang} function that {code_task}. Include a couple of test cases.",
    "Write a complete C program that {code_task}, with a main function that tests it.",
    "Write unit tests in Python for a function that {code_task}.",
    "What would be the time complexity of a function that {code_task}? Explain briefly.",
    "need a quick python snippet that {code_task}",
    "Write a SQL query to {sql_task}.",
    "How do I {sql_task} in SQL?",
    "Give me a SQL query that will {sql_task}, and explain each clause.",
    "Write a bash command to {bash_task}.",
    "How can I {bash_task} from the Linux command line?",
    "Write a small bash script to {bash_task}, with comments.",
    "What git command do I use to {git_task}?",
    "How do I {git_task} with git?",
    "Fix the bug in this code:\n\n{buggy.code}",
    "This {buggy.lang} code {buggy.issue}. What's wrong?\n\n{buggy.code}",
    "Can you find the bug?\n\n{buggy.code}\n\nIt {buggy.issue}.",
    "My {buggy.lang} code isn't working. It {buggy.issue}. Here it is:\n\n{buggy.code}\n\nHow do I fix it?",
    "What does this {snippet.lang} code do?\n\n{snippet.code}",
    "Explain this code line by line:\n\n{snippet.code}",
    "What will this {snippet.lang} code print or return, and why?\n\n{snippet.code}",
    "Add helpful comments to this code:\n\n{snippet.code}",
    "Rewrite this Python code in JavaScript:\n\n{py_snippet.code}",
    "How can I make this code shorter or more readable?\n\n{py_snippet.code}",
    "Convert this loop to a list comprehension:\n\n{loop_snippet}",
    "Explain {prog_concept} in {lang} with a small example.",
    "What is meant by {prog_concept}? Show a short example in {lang}.",
    "You are a patient programming tutor. Explain {prog_concept} to a beginner, with code.",
    "When should I care about {prog_concept} as a beginner programmer?",
    "Write a {lang} class called {cls.name} that {cls.task}.",
    "Create a simple {cls.name} class in Python that {cls.task}, and show how to use it.",
    "Write a recursive {lang} function that {rec_task}.",
    "Write a regular expression that {regex_task}, and show how to use it in {lang}.",
    "How do I {howto}?",
    "quick q: how do you {howto}?",
    "What's the simplest way to {howto}?",
    "Write a simple HTML page that {html_task}.",
    "Write CSS to {css_task}.",
    "Explain the error message `{error_msg}` and how to fix it.",
    "I got this error: {error_msg}. What does it mean?",
]

CODE_POOLS = {
    "lang": LANGS, "code_task": CODE_TASKS, "sql_task": SQL_TASKS, "bash_task": BASH_TASKS,
    "git_task": GIT_TASKS, "buggy": BUGGY, "snippet": SNIPPETS, "py_snippet": PY_SNIPPETS,
    "loop_snippet": LOOP_SNIPPETS, "prog_concept": PROG_CONCEPTS, "cls": CLASSES,
    "rec_task": RECURSIVE_TASKS, "regex_task": REGEX_TASKS, "howto": HOWTOS,
    "html_task": HTML_TASKS, "css_task": CSS_TASKS, "error_msg": ERROR_MSGS,
}

CODE_PREFACES = [
    "You are a senior software engineer who writes simple, readable code.",
    "You are a helpful coding assistant.",
    "You are a programming teacher. Keep explanations short.",
    "Act as a code reviewer.",
]
CODE_SUFFIXES = [
    "Keep the code short.", "Please add comments.", "Explain your answer briefly.",
    "Don't use any external libraries.", "Show an example of using it.",
    "Please use clear variable names.",
]

# =============================================================================
# math: word problems, algebra, step-by-step (numbers drawn from the seeded rng)
# =============================================================================

COUNTABLES = [
    "apples", "pencils", "stickers", "marbles", "cookies", "books", "stamps", "seashells",
    "trading cards", "cupcakes", "oranges", "balloons", "toy cars", "crayons", "eggs", "flowers",
    "coins", "beads", "postcards", "muffins",
]
SHOP_ITEMS = [
    ("notebook", 2, 6), ("sandwich", 4, 9), ("T-shirt", 8, 25), ("movie ticket", 7, 15),
    ("pen", 1, 3), ("pizza", 9, 18), ("book", 6, 20), ("coffee", 2, 5), ("plant", 5, 30),
    ("bus ticket", 2, 4), ("pair of socks", 3, 8), ("cake", 12, 30), ("water bottle", 1, 3),
]
CONTAINERS = [
    ("boxes", "pencils"), ("bags", "apples"), ("packs", "stickers"), ("crates", "oranges"),
    ("trays", "cupcakes"), ("jars", "cookies"), ("shelves", "books"), ("rows", "chairs"),
    ("baskets", "eggs"), ("cartons", "juice boxes"),
]
VEHICLES = ["car", "train", "bus", "cyclist", "truck", "boat", "runner", "plane"]


def _name(r, k=1):
    return r.sample(NAMES, k) if k > 1 else r.choice(NAMES)


def _money(x):
    return f"${x:,.2f}" if x != int(x) else f"${int(x):,}"


def m_add(r):
    n, item = _name(r), r.choice(COUNTABLES)
    a, b = r.randint(12, 95), r.randint(5, 60)
    return f"{n} has {a} {item}. A friend gives {n} {b} more. How many {item} does {n} have now?"


def m_sub(r):
    n, item = _name(r), r.choice(COUNTABLES)
    a = r.randint(30, 150)
    b = r.randint(5, a - 5)
    return f"{n} had {a} {item} and gave away {b}. How many are left?"


def m_mul_containers(r):
    cont, item = r.choice(CONTAINERS)
    a, b = r.randint(3, 15), r.randint(4, 24)
    return f"There are {a} {cont} with {b} {item} in each. How many {item} are there in total?"


def m_share(r):
    n = r.randint(2, 9)
    each = r.randint(3, 25)
    item = r.choice(COUNTABLES)
    return f"{n * each} {item} are shared equally among {n} children. How many does each child get?"


def m_remainder(r):
    n = r.randint(3, 9)
    total = n * r.randint(4, 20) + r.randint(1, n - 1)
    return (f"A teacher has {total} pencils and wants to put them into packs of {n}. "
            f"How many full packs can she make, and how many pencils are left over?")


def m_price_total(r):
    item, lo, hi = r.choice(SHOP_ITEMS)
    price = r.randint(lo * 4, hi * 4) / 4
    q = r.randint(2, 9)
    return f"One {item} costs {_money(price)}. How much do {q} of them cost?"


def _plural(item):
    return item.replace("pair of", "pairs of") if item.startswith("pair of") else item + "s"


def m_change(r):
    item, lo, hi = r.choice(SHOP_ITEMS)
    price = r.randint(lo * 4, hi * 4) / 4
    q = r.randint(2, 4)
    bill = 20 if price * q < 20 else (50 if price * q < 50 else 100)
    n = _name(r)
    return f"{n} buys {q} {_plural(item)} at {_money(price)} each and pays with a ${bill} bill. How much change does {n} get?"


def m_discount(r):
    item, lo, hi = r.choice(SHOP_ITEMS)
    price = r.randint(lo, hi) * r.choice([2, 4, 5])
    pct = r.choice([10, 15, 20, 25, 30, 40, 50])
    return f"A {item} normally costs ${price}. It is on sale for {pct}% off. What is the sale price?"


def m_percent_of(r):
    pct = r.choice([5, 10, 12, 15, 20, 25, 30, 40, 60, 75, 80])
    n = r.choice([40, 60, 80, 120, 150, 200, 240, 250, 300, 360, 400, 480, 500, 640, 800, 1200])
    return r.choice([f"What is {pct}% of {n}?", f"Calculate {pct} percent of {n}.", f"Find {pct}% of {n} and explain how you did it."])


def m_tip(r):
    bill = r.randint(18, 140)
    pct = r.choice([10, 15, 18, 20])
    return f"Our restaurant bill is ${bill}. How much is a {pct}% tip, and what is the total?"


def m_speed(r):
    v, t = r.randint(30, 120), r.randint(2, 6)
    veh = r.choice(VEHICLES[:6])
    return f"A {veh} travels {v * t} km in {t} hours. What is its average speed?"


def m_time(r):
    v, t = r.choice([40, 50, 60, 75, 80, 90, 100, 120]), r.randint(2, 7)
    return f"If you drive at {v} km/h, how long will it take to travel {v * t} km?"


def m_average(r):
    k = r.randint(4, 7)
    nums = [r.randint(50, 100) for _ in range(k)]
    return f"What is the average of these test scores: {', '.join(map(str, nums))}?"


def m_linear(r):
    a, x, b = r.randint(2, 12), r.randint(-9, 15), r.randint(1, 40)
    c = a * x + b
    return r.choice([f"Solve for x: {a}x + {b} = {c}", f"Solve {a}x + {b} = {c} step by step.", f"Find x if {a}x + {b} = {c}."])


def m_linear_paren(r):
    a, x, b = r.randint(2, 9), r.randint(1, 12), r.randint(1, 10)
    return f"Solve for x: {a}(x + {b}) = {a * (x + b)}"


def m_both_sides(r):
    x = r.randint(-6, 12)
    a, c = r.sample(range(2, 12), 2)
    b = r.randint(-20, 20)
    d = a * x + b - c * x
    sb = f"+ {b}" if b >= 0 else f"- {-b}"
    sd = f"+ {d}" if d >= 0 else f"- {-d}"
    return f"Solve the equation {a}x {sb} = {c}x {sd}."


def m_system(r):
    x, y = r.randint(-5, 10), r.randint(-5, 10)
    a, b = r.randint(1, 5), r.randint(1, 5)
    c, d = r.randint(1, 5), r.randint(-5, -1)
    return (f"Solve the system of equations: {a}x + {b}y = {a * x + b * y} and "
            f"{c}x - {-d}y = {c * x + d * y}.")


def m_quadratic(r):
    p, q = r.randint(-9, 9), r.randint(-9, 9)
    b, c = -(p + q), p * q
    sb = "" if b == 0 else (f" + {b}x" if b > 0 else f" - {-b}x")
    sc = "" if c == 0 else (f" + {c}" if c > 0 else f" - {-c}")
    return r.choice([f"Solve x^2{sb}{sc} = 0 by factoring.", f"Find the roots of x^2{sb}{sc} = 0."])


def m_frac_add(r):
    a, b = r.randint(1, 5), r.randint(2, 9)
    c, d = r.randint(1, 5), r.randint(2, 9)
    op = r.choice(["+", "-"])
    return f"What is {a}/{b} {op} {c}/{d}? Give the answer as a simplified fraction."


def m_frac_mul(r):
    a, b, c, d = r.randint(1, 7), r.randint(2, 9), r.randint(1, 7), r.randint(2, 9)
    op = r.choice(["times", "divided by"])
    return f"Calculate {a}/{b} {op} {c}/{d} and simplify the result."


def m_simplify(r):
    k = r.randint(2, 12)
    a, b = r.randint(1, 9), r.randint(2, 11)
    return f"Simplify the fraction {a * k}/{b * k}."


def m_decimal(r):
    a, b = r.randint(11, 99) / 10, r.randint(2, 9)
    return f"What is {a} multiplied by {b}?"


def m_rect_area(r):
    w, h = r.randint(3, 25), r.randint(3, 25)
    thing = r.choice(["garden", "room", "rug", "playground", "classroom floor", "field"])
    return f"A rectangular {thing} is {w} meters long and {h} meters wide. What is its area?"


def m_perimeter(r):
    w, h = r.randint(3, 40), r.randint(3, 40)
    return f"A farmer wants to fence a rectangular field that is {w} m by {h} m. How many meters of fence are needed?"


def m_triangle(r):
    b, h = r.randint(2, 20) * 2, r.randint(3, 20)
    return f"Find the area of a triangle with a base of {b} cm and a height of {h} cm."


def m_circle(r):
    rad = r.randint(2, 15)
    what = r.choice(["area", "circumference"])
    return f"What is the {what} of a circle with a radius of {rad} cm? Use 3.14 for pi."


def m_volume(r):
    a, b, c = r.randint(2, 12), r.randint(2, 12), r.randint(2, 12)
    return f"A box is {a} cm long, {b} cm wide and {c} cm tall. What is its volume?"


def m_pythag(r):
    a, b, c = r.choice([(3, 4, 5), (5, 12, 13), (8, 15, 17), (7, 24, 25), (6, 8, 10), (9, 12, 15), (20, 21, 29)])
    k = r.randint(1, 3)
    if r.random() < 0.5:
        return f"A right triangle has legs of {a * k} and {b * k}. How long is the hypotenuse?"
    return f"A {c * k}-foot ladder leans against a wall with its base {a * k} feet from the wall. How high up the wall does it reach?"


def m_convert(r):
    kind = r.randint(0, 5)
    if kind == 0:
        return f"How many meters are in {r.randint(2, 40) / 2} kilometers?"
    if kind == 1:
        return f"Convert {r.randint(75, 600)} minutes into hours and minutes."
    if kind == 2:
        return f"How many seconds are there in {r.randint(2, 12)} hours?"
    if kind == 3:
        return f"Convert {r.randint(1, 50) * 250} grams to kilograms."
    if kind == 4:
        return f"A recipe needs {r.randint(2, 9) * 250} ml of milk. How many liters is that?"
    return f"How many centimeters are in {r.randint(2, 30) / 2} meters?"


def m_ratio(r):
    a, b = r.choice([(1, 2), (1, 3), (2, 3), (3, 4), (2, 5), (3, 5), (4, 5), (1, 4), (5, 7), (3, 7), (2, 7), (4, 7)])
    if r.random() < 0.5:
        a, b = b, a
    total = (a + b) * r.randint(5, 40)
    n1, n2 = _name(r, 2)
    return f"{n1} and {n2} share ${total} in the ratio {a}:{b}. How much does each person get?"


def m_simple_interest(r):
    p = r.choice([500, 1000, 1500, 2000, 2500, 4000, 5000, 10000])
    rate, t = r.choice([2, 3, 4, 5, 6]), r.randint(2, 6)
    return f"How much simple interest do you earn on ${p:,} at {rate}% per year for {t} years?"


def m_compound(r):
    p = r.choice([1000, 2000, 5000])
    rate, t = r.choice([5, 10]), r.randint(2, 3)
    return f"You put ${p:,} in a savings account that pays {rate}% interest compounded yearly. How much will you have after {t} years?"


def m_gcd(r):
    g = r.randint(2, 15)
    a, b = g * r.randint(2, 9), g * r.randint(2, 9)
    return f"Find the greatest common divisor of {a} and {b}."


def m_lcm(r):
    a, b = r.sample(range(3, 16), 2)
    return r.choice([f"What is the least common multiple of {a} and {b}?",
                     f"One bus comes every {a} minutes and another every {b} minutes. If they leave together, after how many minutes will they next leave together?"])


def m_prime(r):
    n = r.randint(20, 200)
    return r.choice([f"Is {n} a prime number? Explain.", f"Find the prime factorization of {n}."])


def m_sequence(r):
    a, d = r.randint(1, 20), r.randint(2, 9)
    seq = [a + i * d for i in range(5)]
    return f"What is the next number in the sequence {', '.join(map(str, seq))}, ...? What is the 20th term?"


def m_sum_n(r):
    n = r.choice([10, 20, 50, 100, 200, 1000])
    return f"What is the sum of all whole numbers from 1 to {n}?"


def m_age(r):
    n1, n2 = _name(r, 2)
    y, diff = r.randint(5, 30), r.randint(2, 25)
    return f"{n1} is {diff} years older than {n2}. The sum of their ages is {2 * y + diff}. How old is each of them?"


def m_work(r):
    a, b = r.choice([(2, 3), (3, 6), (4, 12), (6, 3), (5, 20), (10, 15), (4, 6)])
    return f"One pipe can fill a tank in {a} hours and another can fill it in {b} hours. How long does it take if both pipes are used together?"


def m_consecutive(r):
    k = r.choice([2, 3])
    start = r.randint(5, 60)
    return f"The sum of {'two' if k == 2 else 'three'} consecutive integers is {sum(range(start, start + k))}. What are the integers?"


def m_pct_change(r):
    a = r.randint(20, 200)
    pct = r.choice([10, 20, 25, 50, -10, -20, -25, -40])
    b = a + a * pct // 100 if (a * pct) % 100 == 0 else None
    if b is None:
        a = 100 * r.randint(1, 9)
        b = a + a * pct // 100
    thing = r.choice(["The price of a bike", "A town's population", "The number of visitors to a website", "A worker's weekly pay"])
    return f"{thing} went from {a} to {b}. What is the percentage change?"


def m_recipe(r):
    s1 = r.choice([2, 4, 6])
    s2 = s1 * r.choice([2, 3]) if r.random() < 0.6 else s1 // 2
    ing = r.choice(["cups of flour", "eggs", "tablespoons of sugar", "cups of milk"])
    q = r.choice([2, 3, 4]) if ing == "eggs" else r.choice([1, 1.5, 2, 3])
    return f"A recipe for {s1} servings uses {q:g} {ing}. How much do you need for {s2} servings?"


def m_order_ops(r):
    a, b, c, d = r.randint(2, 20), r.randint(2, 9), r.randint(2, 9), r.randint(1, 15)
    return r.choice([f"Evaluate {a} + {b} × {c} - {d}.", f"What is ({a} + {b}) × {c} - {d}?", f"Compute {a} × {b} - {c}^2 + {d} using the order of operations."])


def m_exponent(r):
    base, e = r.randint(2, 9), r.randint(2, 5)
    return r.choice([f"What is {base} to the power of {e}?", f"Calculate {base}^{e} and explain what an exponent means."])


def m_sqrt(r):
    n = r.randint(4, 30)
    return r.choice([f"What is the square root of {n * n}?", f"Estimate the square root of {n * n + r.randint(3, n)} to one decimal place."])


def m_probability(r):
    red, blue, green = r.randint(1, 9), r.randint(1, 9), r.randint(0, 6)
    bag = f"{red} red, {blue} blue" + (f" and {green} green marbles" if green else " marbles")
    if not green:
        bag = f"{red} red and {blue} blue marbles"
    return f"A bag has {bag}. If you pick one at random, what is the probability that it is blue?"


def m_dice(r):
    return r.choice([
        "What is the probability of rolling a sum of 7 with two dice?",
        f"If you flip a fair coin {r.randint(2, 4)} times, what is the probability of getting all heads?",
        f"What is the probability of rolling a number greater than {r.randint(1, 5)} on a six-sided die?",
        f"A spinner has {r.randint(4, 10)} equal sections numbered from 1. What is the probability of landing on an even number?",
    ])


def m_stats(r):
    k = r.randint(5, 8)
    nums = [r.randint(1, 20) for _ in range(k)]
    return f"Find the mean, median and mode of: {', '.join(map(str, nums))}."


def m_clock(r):
    h, m = r.randint(6, 11), r.choice([0, 10, 15, 20, 25, 30, 40, 45, 50])
    dh, dm = r.randint(1, 4), r.choice([5, 15, 20, 35, 40, 50])
    return f"A train leaves at {h}:{m:02d} a.m. and the trip takes {dh} hours and {dm} minutes. What time does it arrive?"


def m_long_mul(r):
    a, b = r.randint(12, 99), r.randint(12, 99)
    return r.choice([f"Multiply {a} by {b} step by step.", f"Show me how to calculate {a} × {b} by hand."])


def m_long_div(r):
    d = r.randint(3, 19)
    q = r.randint(12, 99)
    return r.choice([f"Divide {d * q} by {d} using long division.", f"What is {d * q} ÷ {d}? Show the steps."])


def m_negative(r):
    t = r.randint(-12, 8)
    ch = r.randint(3, 15)
    up = r.random() < 0.5
    return f"The temperature was {t}°C in the morning and {'rose' if up else 'dropped'} by {ch} degrees. What is the temperature now?"


def m_frac_pct(r):
    a, b = r.choice([(1, 4), (3, 4), (2, 5), (3, 8), (7, 20), (1, 8), (9, 25), (3, 5), (7, 10), (1, 20)])
    return r.choice([f"Convert {a}/{b} to a percentage.", f"Write {a}/{b} as a decimal and as a percent."])


def m_round(r):
    n = r.randint(1000, 99999) + r.randint(0, 99) / 100
    place = r.choice(["the nearest ten", "the nearest hundred", "the nearest thousand", "one decimal place"])
    return f"Round {n} to {place}."


def m_slope(r):
    x1, y1, x2, y2 = r.randint(-5, 5), r.randint(-5, 5), r.randint(6, 12), r.randint(-8, 12)
    return f"Find the slope of the line through ({x1}, {y1}) and ({x2}, {y2})."


def m_func(r):
    a, b, x = r.randint(1, 5), r.randint(-9, 9), r.randint(-4, 6)
    sb = f"+ {b}" if b >= 0 else f"- {-b}"
    return f"If f(x) = {a}x^2 {sb}, what is f({x})?"


def m_inequality(r):
    a, x, b = r.randint(2, 9), r.randint(-5, 10), r.randint(1, 20)
    sym = r.choice(["<", ">", "≤", "≥"])
    return f"Solve the inequality {a}x + {b} {sym} {a * x + b}."


def m_angles(r):
    a = r.randint(20, 100)
    b = r.randint(20, 160 - a)
    return f"Two angles of a triangle are {a}° and {b}°. What is the third angle?"


def m_wage(r):
    w, h, wk = r.randint(12, 30), r.randint(10, 40), r.randint(2, 8)
    return f"Someone earns ${w} per hour and works {h} hours a week. How much do they earn in {wk} weeks?"


def m_savings(r):
    s = r.choice([5, 10, 15, 20, 25, 40, 50])
    goal = s * r.randint(6, 40) + r.choice([0, 0, s // 2])
    n = _name(r)
    thing = r.choice(["a bike", "a new phone", "a concert ticket", "a tablet", "a guitar", "a school trip"])
    return f"{n} saves ${s} every week to buy {thing} that costs ${goal}. How many weeks will it take?"


def m_fuel(r):
    l100 = r.choice([5, 6, 7, 8, 9])
    km = r.randint(2, 9) * 50
    price = r.choice([1.5, 1.6, 1.8, 2])
    return f"A car uses {l100} liters of fuel per 100 km. How much fuel is needed for a {km} km trip, and how much will it cost at ${price:g} per liter?"


def m_multi_step(r):
    n = _name(r)
    a, b = r.randint(3, 8), r.randint(2, 6)
    return (f"{n} buys {a} packs of juice with {b} bottles in each pack. {n} drinks {r.randint(1, 4)} bottles "
            f"and gives {r.randint(1, 5)} to friends. How many bottles are left? Solve it step by step.")


def m_mental(r):
    a, b = r.randint(100, 999), r.randint(100, 999)
    op = r.choice(["+", "-", "×"])
    if op == "×":
        b = r.randint(3, 12)
    return r.choice([f"What is {a} {op} {b}?", f"Calculate {a} {op} {b}.", f"what's {a} {op} {b}"])


def m_casual(r):
    total = r.randint(30, 180)
    k = r.randint(2, 6)
    return r.choice([
        f"ok quick one: if pizza for {k} people costs ${total}, how much does each person pay?",
        f"me and {k - 1} friends split a ${total} bill evenly. how much do we each pay?",
    ])


def m_tutor(r):
    a, x, b = r.randint(2, 9), r.randint(1, 12), r.randint(1, 30)
    return (f"You are a patient math tutor. A student is stuck on the equation {a}x - {b} = {a * x - b}. "
            f"Walk them through solving it, one step at a time.")


def m_word_eq(r):
    x, m, p = r.randint(3, 20), r.randint(2, 5), r.randint(1, 15)
    return f"I'm thinking of a number. If I multiply it by {m} and add {p}, I get {m * x + p}. What is the number?"


def m_tickets(r):
    a, c = r.randint(8, 20), r.randint(4, 10)
    na, nc = r.randint(1, 4), r.randint(1, 5)
    return f"Adult tickets cost ${a} and child tickets cost ${c}. How much does a family with {na} adults and {nc} children pay?"


MATH_TEMPLATES = [
    m_add, m_sub, m_mul_containers, m_share, m_remainder, m_price_total, m_change, m_discount,
    m_percent_of, m_tip, m_speed, m_time, m_average, m_linear, m_linear_paren, m_both_sides,
    m_system, m_quadratic, m_frac_add, m_frac_mul, m_simplify, m_decimal, m_rect_area,
    m_perimeter, m_triangle, m_circle, m_volume, m_pythag, m_convert, m_ratio, m_simple_interest,
    m_compound, m_gcd, m_lcm, m_prime, m_sequence, m_sum_n, m_age, m_work, m_consecutive,
    m_pct_change, m_recipe, m_order_ops, m_exponent, m_sqrt, m_probability, m_dice, m_stats,
    m_clock, m_long_mul, m_long_div, m_negative, m_frac_pct, m_round, m_slope, m_func,
    m_inequality, m_angles, m_wage, m_savings, m_fuel, m_multi_step, m_mental, m_casual,
    m_tutor, m_word_eq, m_tickets,
]
MATH_POOLS: dict = {}

MATH_PREFACES = [
    "You are a patient math tutor.",
    "You are a helpful teacher. Explain your reasoning.",
    "Act as a math teacher for middle school students.",
    "Solve the following problem.",
]
MATH_SUFFIXES = [
    "Show your work.", "Explain each step.", "Think step by step.", "Give the final answer at the end.",
    "Please explain your reasoning.", "Check your answer at the end.",
]

# =============================================================================
# lists: list N things, steps, pros/cons
# =============================================================================

LIST_THINGS = [
    "healthy breakfast ideas", "ways to save money on groceries", "indoor hobbies", "famous painters",
    "fruits that are high in vitamin C", "board games for families", "things to do on a rainy day",
    "tips for better sleep", "countries in South America", "classic novels everyone should read",
    "easy houseplants for beginners", "ways to reduce stress", "vegetables that grow well in pots",
    "famous scientists and what they discovered", "inventions that changed the world",
    "ways to be more productive", "cheap date ideas", "foods that are good for your brain",
    "fun facts about space", "ways to make new friends", "musical instruments that are easy to learn",
    "things to do in the summer", "good habits for students", "questions to get to know someone",
    "low-cost hobbies", "ways to reduce plastic waste", "quick lunch ideas", "outdoor games for kids",
    "famous landmarks in Europe", "types of clouds", "ways to stay cool without air conditioning",
    "things every kitchen should have", "snacks that are high in protein", "ways to practice a new language",
    "popular dog breeds", "famous mountains", "ways to improve your handwriting", "soups for cold days",
    "things to do in a small town", "uses for baking soda", "ways to be kind to your neighbors",
    "famous bridges", "ways to celebrate a birthday at home", "ingredients for a basic pantry",
    "spices every cook should have", "card games you can play with two people", "ways to exercise at home",
    "birds you might see in a city park", "reasons to learn history", "ways to relax after work",
    "kinds of pasta", "sources of renewable energy", "skills every adult should learn",
    "things to do before a long flight", "ways to use old jars", "summer fruits", "winter activities",
    "words that describe a good friend", "easy science experiments for kids", "healthy drinks besides water",
    "programming languages for beginners", "important inventions of the 20th century",
    "careers that involve working with animals", "ways to make a small room feel bigger",
    "common kitchen safety rules", "polite phrases in English", "animals that live in the desert",
    "animals that live in the ocean", "famous rivers of the world", "foods from Italy",
    "traditional dishes from Mexico", "team sports", "things to pack for a picnic",
    "ways to keep kids busy on a road trip", "good books for teenagers", "ways to stay safe online",
    "benefits of walking", "signs of spring", "gift ideas for teachers", "things to write in a journal",
    "ways to make coffee", "types of bread", "common English idioms", "yoga poses for beginners",
    "fun things to do in the snow", "ways to show gratitude", "ideas for a school science fair",
]

TIP_ACTIVITIES = [
    "studying for exams", "learning a new language", "running a first 5K", "public speaking",
    "keeping houseplants alive", "saving money", "cooking for one person", "working from home",
    "writing a resume", "taking better photos with a phone", "traveling on a budget",
    "staying healthy in winter", "starting a small garden", "learning to swim as an adult",
    "moving to a new city", "training a puppy", "getting along with roommates", "packing light",
    "writing a good essay", "memorizing vocabulary", "making friends at a new school",
    "staying focused during online classes", "baking bread", "camping for the first time",
    "driving in the rain", "keeping a tidy desk", "reading more books", "job interviews",
    "learning to play chess", "meal prepping for the week", "hiking in hot weather",
    "being a good team member", "managing screen time for kids", "taking care of a new cat",
    "writing emails that get answered", "decorating a small apartment", "riding a bike in the city",
]

PROS_CONS = [
    "working from home", "living in a big city", "owning a cat", "electric cars", "online shopping",
    "learning to code", "renting an apartment", "social media", "a four-day work week",
    "self-driving cars", "nuclear power", "homeschooling", "school uniforms", "public transport",
    "being self-employed", "living in the countryside", "e-books", "fast food", "video games for kids",
    "having a roommate", "studying abroad", "a vegetarian diet", "buying a house", "using a credit card",
    "solar panels on a house", "smartphones for young children", "online classes", "camping",
    "working night shifts", "living near the sea", "taking a gap year", "wind farms",
    "traveling alone", "having a big family", "owning a car in the city", "cash versus card payments",
]

PROCESSES = [
    "plant a tomato seedling", "change a flat bike tire", "make a cup of tea", "write a cover letter",
    "set up a new email account", "clean a laptop keyboard", "boil an egg", "tie a tie",
    "prepare for a job interview", "start a vegetable garden", "back up a phone", "make a paper airplane",
    "wash a wool sweater", "make a budget", "plan a birthday party", "write a short story",
    "make homemade pizza dough", "clean a bathroom", "jump-start a car", "brew coffee with a French press",
    "learn a song on the guitar", "repot a plant", "make a smoothie", "sew on a button",
    "write a thank-you card", "open a savings account", "paint a room", "bake chocolate chip cookies",
    "train for a 10K run", "set up a fish tank", "make a simple website", "wrap a present",
    "clean a cast iron pan", "study for a math test", "build a campfire safely", "make pancakes",
    "file a tax return for the first time", "change a light bulb safely", "assemble flat-pack furniture",
    "make a podcast", "write a haiku", "make a paper boat", "start a compost bin", "do laundry",
]

EVENTS = [
    "moving into a new apartment", "hosting a dinner party", "starting a new job", "adopting a puppy",
    "a job interview", "going back to school", "bringing a newborn baby home", "planning a wedding",
    "selling a used car", "preparing for a hurricane", "running a yard sale", "throwing a surprise party",
    "a first trip abroad", "starting university", "a family reunion", "a power outage",
    "a long road trip", "a winter storm", "a home renovation", "a kid's sleepover",
]

TRIPS = [
    "a weekend camping trip", "a beach vacation", "a business trip", "a ski holiday", "a week in Japan",
    "a long hike in the mountains", "a summer festival", "a cruise", "a trip with a baby",
    "a winter city break", "a backpacking trip in Europe", "a day at the lake", "a trip to a rainforest",
    "a two-week trip to Iceland", "a school field trip",
]

IDEAS_FOR = [
    "a rainy afternoon with kids", "a science fair project", "a first date", "a team-building activity",
    "a school fundraiser", "a birthday party theme", "a blog about cooking", "a YouTube channel",
    "a small side business", "a gift under 20 dollars", "a healthy lunch box", "a date night at home",
    "a family game night", "a New Year's resolution", "a short story", "a garden on a balcony",
    "a weekend project", "an art project with recycled materials", "a Halloween costume",
    "a podcast episode", "a holiday card", "a picnic menu", "a class presentation",
]

PLANS = [
    "workout plan for a beginner", "meal plan for a vegetarian", "study plan for a math exam",
    "cleaning schedule for a small apartment", "reading plan for someone who wants to read more",
    "practice schedule for learning guitar", "running plan for a first 5K", "budget plan for a student",
    "screen-time plan for a family", "stretching routine for office workers",
]

ASK_WHOM = [
    "at the end of a job interview", "a new roommate", "a doctor at a check-up", "when buying a used car",
    "when touring an apartment", "a teacher at a parent meeting", "on a first date",
    "a wedding photographer", "a personal trainer", "a new dentist", "a potential business partner",
    "a mentor", "when choosing a daycare", "a real estate agent",
]

SIGNS_OF = [
    "a plant needs more water", "a car needs new brakes", "you need a break from work",
    "a dog is happy", "bread dough has risen enough", "an egg is no longer fresh",
    "a computer has a virus", "you're dehydrated", "a friendship is healthy",
    "it's time to replace running shoes", "a cat is stressed", "a storm is coming",
    "a fruit is ripe", "you need more sleep",
]

WORD_PROPS = [
    "rhyme with 'cat'", "describe happiness", "start with 'sun'", "mean 'big'",
    "are related to the ocean", "describe the weather", "describe a person's personality",
    "rhyme with 'light'", "describe a sound", "mean 'tired'", "are related to cooking",
    "describe colors", "mean 'fast'", "are related to music",
]

COMPARISONS = [
    "tea and coffee", "cats and dogs as pets", "trains and planes for travel", "e-books and paper books",
    "living in the city and the countryside", "running and swimming for fitness",
    "Python and JavaScript for beginners", "renting and buying a home", "laptops and desktop computers",
    "baths and showers", "gas and electric stoves", "summer and winter vacations",
]

BENEFITS_OF = [
    "drinking water", "regular exercise", "reading every day", "learning a second language",
    "getting enough sleep", "walking to work", "meditation", "cooking at home", "volunteering",
    "keeping a journal", "spending time in nature", "learning to play an instrument",
    "eating breakfast", "having a pet", "stretching", "saving money early", "gardening",
]

REASONS_TO = [
    "learn to cook", "visit a museum", "start journaling", "adopt a shelter pet", "ride a bike to work",
    "learn a musical instrument", "plant a tree", "go to bed earlier", "learn to code",
    "travel solo at least once", "read the news less often", "take up gardening", "learn first aid",
    "join a library",
]

MAIN_PARTS = [
    "parts of a flower", "parts of a cell", "parts of a computer", "parts of the human eye",
    "layers of the Earth", "parts of a bicycle", "organs of the digestive system", "parts of a plant",
    "parts of speech in English", "elements of a short story", "steps of the scientific method",
    "parts of a business plan", "components of a healthy diet", "stages of the water cycle",
    "phases of the Moon", "parts of a volcano", "sections of an orchestra", "types of rock",
    "layers of the atmosphere", "stages of a butterfly's life cycle", "parts of a car engine",
    "parts of a castle", "parts of a guitar", "bones of the human arm",
]

RANKABLES = [
    "musical instruments", "programming languages", "languages for English speakers to learn",
    "sports", "houseplants to care for", "card games", "cooking techniques", "swimming strokes",
    "yoga poses", "martial arts",
]

LISTS_TEMPLATES = [
    "List {n} {list_thing}.",
    "Give me {n} {list_thing}.",
    "What are {n} {list_thing}?",
    "Can you list {n} {list_thing}? Just the list, please.",
    "Name {n} {list_thing} and add one sentence about each.",
    "I need {n} {list_thing}. Put them in a numbered list.",
    "Give me a bulleted list of {n} {list_thing}.",
    "You are a helpful assistant. List {n} {list_thing} as short bullet points.",
    "Can you give me a quick list of {n} {list_thing}?",
    "What are some {list_thing}? Give me at least {n}.",
    "list {n} {list_thing} pls",
    "Give me {n} tips for {tip_activity}.",
    "What are your top {n} tips for {tip_activity}?",
    "What are {n} common beginner mistakes in {tip_activity}?",
    "What are the pros and cons of {pros_cons}?",
    "Make a pros and cons list for {pros_cons}.",
    "List three advantages and three disadvantages of {pros_cons}.",
    "What are the steps to {process}?",
    "List the steps to {process}.",
    "Give me step-by-step instructions to {process}.",
    "How do I {process}? Please answer as a numbered list of steps.",
    "Make a checklist for {event}.",
    "What should I do to get ready for {event}? Give me a list.",
    "Create a packing list for {trip}.",
    "What should I bring on {trip}? Make a list.",
    "List {n} interesting facts about {animal}.",
    "Tell me {n} fun facts about {animal}.",
    "List {n} interesting facts about {country}.",
    "Give me {n} things to do in {city}.",
    "List {n} dishes you can make with {ingredient}.",
    "What are {n} ways to use up leftover {ingredient}?",
    "Rank {n} {rankable} from easiest to hardest for a beginner.",
    "List the main {main_parts} and briefly describe each.",
    "What are the {main_parts}? Give a short list.",
    "Give me {n} ideas for {idea_for}.",
    "Brainstorm {n} ideas for {idea_for}.",
    "Make a simple weekly {plan} as a list.",
    "List {n} good questions to ask {ask_whom}.",
    "What are {n} signs that {signs_of}?",
    "List {n} words that {word_prop}.",
    "Compare {comparison} in a bulleted list.",
    "List the main benefits of {benefit_of}.",
    "Give me {n} reasons to {reason_to}.",
    "I'm making a list of {list_thing} for a class project. Can you suggest {n}?",
    "Quick list: {n} {list_thing}, one line each.",
]

LISTS_POOLS = {
    "n": COUNT_WORDS, "list_thing": LIST_THINGS, "tip_activity": TIP_ACTIVITIES, "pros_cons": PROS_CONS,
    "process": PROCESSES, "event": EVENTS, "trip": TRIPS, "animal": ANIMALS_PL, "country": COUNTRIES,
    "city": CITIES, "ingredient": INGREDIENTS, "rankable": RANKABLES, "main_parts": MAIN_PARTS,
    "idea_for": IDEAS_FOR, "plan": PLANS, "ask_whom": ASK_WHOM, "signs_of": SIGNS_OF,
    "word_prop": WORD_PROPS, "comparison": COMPARISONS, "benefit_of": BENEFITS_OF, "reason_to": REASONS_TO,
}

LISTS_PREFACES = [
    "You are an organized assistant who answers with clear lists.",
    "You are a helpful assistant.",
    "Answer with a numbered list.",
    "You are a practical planner.",
]
LISTS_SUFFIXES = [
    "Keep each item short.", "Use bullet points.", "Number the items.",
    "One sentence per item, please.", "No long explanations.", "Put the most important one first.",
]

# =============================================================================
# creative: stories, poems, descriptions, emails, slogans
# =============================================================================

CHARACTERS = [
    "a lonely robot", "a curious cat", "an old lighthouse keeper", "a young wizard", "a brave little mouse",
    "a retired astronaut", "a talking tree", "a shy dragon", "a detective dog", "a girl with the gift of talking to birds",
    "a baker in a small village", "a lost penguin", "a grumpy old man", "a kid inventor", "a friendly ghost",
    "a clumsy knight", "a snowman", "a pirate afraid of water", "a tiny turtle", "a school janitor",
    "a street musician", "a time-traveling librarian", "a honey-loving bear", "a mail carrier",
    "a fox dreaming of becoming a chef", "a sleepy owl", "a new student", "a lighthouse cat", "a forgetful genie",
    "an ant with big dreams", "a grandmother with a secret skateboard", "a boy obsessed with collecting clouds",
    "a robot gardener", "a kind giant", "a spaceship captain", "a homesick alien", "a puppy at a shelter",
    "a magical umbrella", "a painter with no colors left", "a train conductor",
]

PLOTS = [
    "finds a mysterious map", "learns to fly", "makes an unlikely friend", "gets lost in a big city",
    "discovers a hidden door", "has to save the village from a storm", "enters a cooking contest",
    "travels back in time for one day", "finds a message in a bottle", "loses something very important",
    "has to keep a big secret", "wakes up with a strange new power", "goes on a trip to the Moon",
    "tries to win a race", "helps a stranger on a cold night", "finds a lost puppy",
    "discovers the stars have gone missing", "starts a small business", "learns an important lesson about sharing",
    "gets stuck in an elevator with a stranger", "receives a letter from the future",
    "has one day to fix a big mistake", "moves to a new town", "meets a talking animal",
    "finds a garden that grows candy", "must deliver a package across the desert",
    "wants to be a famous singer", "discovers a city under the sea",
]

OPENINGS = [
    "The door had been locked for fifty years, until this morning.",
    "Nobody in town had ever seen snow in July.",
    "The robot opened its eyes and saw a field of sunflowers.",
    "It was the last train of the night, and I was the only passenger.",
    "My grandmother's old radio started talking to me.",
    "The map was drawn on the back of a cereal box.",
    "Every morning, the same blue bird tapped on my window.",
    "The lights went out exactly at midnight.",
    "There was a small house at the end of the road that nobody talked about.",
    "On her tenth birthday, Lina received a key with no lock.",
    "The cat came back with a note tied to its collar.",
    "The bakery smelled of cinnamon, but the baker was gone.",
    "When the tide went out, it revealed a staircase.",
    "The spaceship landed quietly in the school parking lot.",
    "I found a book in the library that had my name on the cover.",
    "The old clock in the hallway began to run backwards.",
    "The first thing I noticed was that my shadow was missing.",
    "Our village had only one rule: never whistle after dark.",
]

POEM_FORMS = [
    "a haiku", "a short poem", "a limerick", "a four-line rhyming poem", "a free-verse poem",
    "a poem with three short stanzas", "a short rhyming poem for kids", "a sonnet",
]

POEM_SUBJECTS = [
    "the ocean", "autumn leaves", "a rainy morning", "friendship", "coffee", "the Moon", "a city at night",
    "a cat sleeping in the sun", "winter", "hope", "mountains", "an old book", "the first day of spring",
    "a summer thunderstorm", "a grandmother's kitchen", "a lighthouse", "the stars", "a busy train station",
    "a garden in bloom", "homesickness", "a quiet forest", "a snowy night", "growing up", "the wind",
    "a bicycle ride", "the sunrise", "a river", "learning something new", "a faithful dog",
    "a rainy Sunday", "a forgotten toy", "a farmer's market", "the desert at night", "a cup of tea",
    "the end of summer", "a kite", "time", "an empty playground", "fireflies", "the sea at dawn",
]

MOODS = ["hopeful", "calm", "nostalgic", "joyful", "a little sad", "playful", "mysterious", "peaceful"]

EMAILS = [
    "your manager asking for a day off next Friday", "a landlord reporting a leaking faucet",
    "a teacher explaining that your child was sick yesterday", "a customer apologizing for a late delivery",
    "a colleague thanking them for their help on a project", "a company asking about a job opening",
    "a neighbor inviting them to a barbecue", "a hotel asking to change a reservation",
    "a professor asking for an extension on an assignment", "a client following up on an unpaid invoice",
    "your team announcing a new meeting time", "a friend you haven't talked to in years",
    "a store asking for a refund on a broken blender", "a new coworker welcoming them to the team",
    "a gym canceling your membership", "a recruiter declining a job offer politely",
    "your team sharing the results of a project", "a plumber asking for a quote",
    "a club announcing the next monthly meeting", "a host thanking them for a lovely dinner",
    "your boss asking to work from home two days a week", "a school asking about after-school programs",
    "a volunteer group signing up to help", "a supplier asking about a delayed order",
]

BUSINESSES = [
    "a small coffee shop", "an eco-friendly cleaning company", "a dog-walking service",
    "a bakery that sells gluten-free bread", "a bike repair shop", "a children's bookstore",
    "a yoga studio", "a food truck that sells tacos", "a local farmers market", "a math tutoring service",
    "a recycling program", "a pizza place", "a plant nursery", "a moving company", "a car wash",
    "a neighborhood library", "a summer camp", "a photography studio", "an ice cream shop",
    "a hiking club", "a second-hand clothing store", "a mobile phone repair shop", "a community garden",
    "a language school", "a pet grooming salon",
]

PRODUCTS = [
    "a reusable water bottle", "noise-cancelling headphones", "a handmade wooden chair",
    "a solar-powered phone charger", "a cozy wool blanket", "an alarm clock that wakes you with light",
    "a foldable bike", "a smart plant pot", "organic honey", "a backpack for hikers", "a scented candle",
    "a pair of running shoes", "a kids' science kit", "a travel mug", "a board game about space",
    "a lightweight tent", "a handmade ceramic mug", "a waterproof notebook", "a desk lamp",
    "a set of kitchen knives", "a pet bed", "a bamboo toothbrush", "a mechanical keyboard",
    "a picnic basket", "homemade strawberry jam",
]

SCENES = [
    "a busy market in the morning", "a quiet library", "a beach at sunset", "a forest after rain",
    "a snowy mountain village", "a crowded train station", "a kitchen during a holiday dinner",
    "a city street at midnight", "a school playground at recess", "a farm at sunrise",
    "an old attic", "a rainy café", "a desert at noon", "a harbor full of fishing boats",
    "a summer fair", "a hospital waiting room", "a bakery before it opens", "a lake in winter",
    "a football stadium before a big game", "a garden in spring", "a thunderstorm over a field",
    "an empty theater", "a night sky far from the city", "a small bookshop on a rainy day",
]

MSG_PEOPLE = [
    "my best friend", "my mom", "my dad", "a coworker", "my grandfather", "my little sister",
    "my teacher", "my neighbor", "an old friend", "my boss", "my partner", "my son who is turning 10",
]

THANKS = [
    "your neighbor for watering your plants while you were away", "a teacher for a great school year",
    "a friend for helping you move", "a coworker for covering your shift", "a nurse for their care",
    "your grandparents for a birthday gift", "a mentor for their advice", "a host for a lovely weekend",
    "a volunteer for helping at an event", "a stranger who returned your lost wallet",
]

SPEECHES = [
    "a best friend's wedding", "a retirement party for a coworker", "a high school graduation",
    "a team that just finished a big project", "the opening of a community garden",
    "a grandparent's 90th birthday", "the first day of a summer camp", "a farewell party for a colleague",
    "a school sports awards night", "a family reunion",
]

CHAR_PAIRS = [
    "a cat and a dog", "a teacher and a student", "a robot and a child", "a tourist and a local",
    "two astronauts", "a customer and a waiter", "a grandmother and her grandson", "a detective and a witness",
    "the Sun and the Moon", "a coffee cup and a teapot", "two squirrels", "a knight and a dragon",
]

DIALOGUE_TOPICS = [
    "what to eat for dinner", "the best season of the year", "a lost umbrella", "a strange noise at night",
    "planning a surprise party", "who should do the dishes", "a trip to the beach", "learning to ride a bike",
    "a missing sandwich", "the weather", "a new neighbor", "a broken vase",
]

SCENE_PROMPTS = [
    "two old friends meet by chance at a train station", "a child sees the ocean for the first time",
    "a chef burns the main dish right before a big dinner", "a robot learns to tell a joke",
    "a family's car breaks down in the middle of nowhere", "a student finds a note in a library book",
    "a dog waits for its owner at the door", "two strangers share an umbrella",
    "a shopkeeper closes the store for the last time", "a kid tries to hide a pet from their parents",
]

LIMERICK_SUBJECTS = [
    "a cat who loves cheese", "a forgetful wizard", "a dog who can't swim", "a chef who hates onions",
    "a very tall giraffe", "a snail in a hurry", "a pirate with a parrot", "a cow who wants to dance",
    "a teacher who loves puns", "a frog who sings opera",
]

LESSONS = ["honesty", "patience", "kindness", "sharing", "hard work", "courage", "listening to others", "gratitude", "forgiveness", "teamwork"]

POVS = [
    "a house cat on a rainy day", "an old tree in a park", "a sock lost in the dryer",
    "the last cookie in the jar", "a lighthouse", "a snowman on the first warm day", "a goldfish in a bowl",
    "a backpack on the first day of school", "a city pigeon", "a bicycle left in the garage",
    "a teddy bear", "a library book nobody borrows",
]

QUOTE_TOPICS = ["perseverance", "learning", "teamwork", "change", "failure", "kindness", "starting over", "curiosity", "patience", "courage"]

ANNOUNCEMENTS = [
    "the opening of a new bakery", "a free community concert", "a library book sale", "a new podcast episode",
    "a charity fun run", "a small art exhibition", "a new flavor of ice cream", "a neighborhood cleanup day",
    "a summer reading challenge", "a local farmers market opening for the season",
]

INVITES = [
    "a summer barbecue in my backyard", "my son's 7th birthday party", "a book club meeting",
    "a housewarming party", "a retirement lunch for a colleague", "a game night", "a potluck dinner",
    "a baby shower", "a garden tea party", "a holiday cookie swap",
]

REVIEWS = [
    "a cozy Italian restaurant", "a new pair of running shoes", "a small family-run hotel",
    "a neighborhood coffee shop", "a museum visit", "a camping trip to a national park",
    "a simple board game", "a yoga class", "a local bakery's croissants", "a long train journey",
]

TEXTS_TO = [
    "a friend to cancel plans politely", "your partner reminding them to buy milk",
    "a neighbor saying their package was delivered to you", "your team saying you are running late",
    "a friend congratulating them on a new job", "your sister wishing her good luck on an exam",
    "a friend to ask if they want to go hiking on Saturday", "your parents saying you arrived safely",
]

JOB_APPS = [
    "a part-time job at a bookstore", "a summer internship at a zoo", "a barista position",
    "a junior web developer role", "a job as a camp counselor", "a receptionist position at a clinic",
    "a library assistant job", "a volunteer role at an animal shelter",
]

INVENTIONS = ["holiday", "sport", "ice cream flavor", "board game", "animal", "kitchen gadget", "superpower", "planet", "musical instrument", "school subject"]
GENRES = ["mystery", "science fiction", "fantasy", "adventure", "historical", "cozy mystery", "romantic comedy", "ghost"]
SETTINGS = [
    "a small bakery", "a moving train", "a school library", "a snowed-in mountain hotel", "a museum at night",
    "a fishing village", "a space station", "a summer camp", "an old theater", "a ferry in the fog",
]
RIDDLE_THINGS = ["the moon", "a clock", "an umbrella", "a shadow", "a candle", "a key", "an echo", "a map", "a river", "a pencil", "a mirror", "a cloud"]

CREATIVE_TEMPLATES = [
    "Write a short story about {character} who {plot}.",
    "Tell me a bedtime story about {character} who {plot}.",
    "Write a 100-word story about {character} who {plot}.",
    "Write a funny short story about {character}.",
    "You are a children's book author. Write a short story about {character} who {plot}.",
    "Write a story that begins with the sentence: \"{opening}\"",
    "Continue this story in a few paragraphs: \"{opening}\"",
    "Write {poem_form} about {poem_subject}.",
    "Can you write me {poem_form} about {poem_subject}?",
    "Write {poem_form} about {poem_subject} that feels {mood}.",
    "You are a poet. Write {poem_form} about {poem_subject}.",
    "Write a haiku about {poem_subject}.",
    "hey can u write a cute little poem about {poem_subject} for my friend",
    "Write the chorus of a pop song about {poem_subject}.",
    "Write an email to {email}.",
    "Draft a polite email to {email}.",
    "Write a short, friendly email to {email}.",
    "Help me write an email to {email}. Keep it professional.",
    "Write a catchy slogan for {business}.",
    "Come up with {n} slogans for {business}.",
    "I'm opening {business}. Can you suggest a name and a slogan?",
    "Write a product description for {product}.",
    "Write a short advertisement for {product}.",
    "You are a copywriter. Write a two-sentence description of {product} for an online store.",
    "Describe {scene} using all five senses.",
    "Write a vivid description of {scene}.",
    "Describe {scene} in one paragraph.",
    "Write a birthday message for {msg_person}.",
    "Write a warm birthday card message for {msg_person}. Keep it under 50 words.",
    "Write a thank-you note to {thanks}.",
    "Write a short speech for {speech}.",
    "Write a dialogue between {char_pair} about {dialogue_topic}.",
    "Write a short scene where {scene_prompt}.",
    "Write a limerick about {limerick_subject}.",
    "Write a short fairy tale that teaches a lesson about {lesson}.",
    "Write a fable with animals that teaches a lesson about {lesson}.",
    "Write a diary entry from the point of view of {pov}.",
    "Write a short monologue from the perspective of {pov}.",
    "Write a motivational quote about {quote_topic}.",
    "Write a short social media post announcing {announcement}.",
    "Write an invitation to {invite}.",
    "Write a short review of {review}.",
    "Write a text message to {text_to}.",
    "Write a short cover letter for {job_app}.",
    "Invent a new {invention} and describe it in a paragraph.",
    "Write the opening paragraph of a {genre} novel.",
    "Write a short mystery story set in {setting}.",
    "Make up a riddle about {riddle_thing}, and give the answer.",
    "Write a short story set in {setting} about {character}.",
]

CREATIVE_POOLS = {
    "character": CHARACTERS, "plot": PLOTS, "opening": OPENINGS, "poem_form": POEM_FORMS,
    "poem_subject": POEM_SUBJECTS, "mood": MOODS, "email": EMAILS, "business": BUSINESSES,
    "n": COUNT_WORDS[:7], "product": PRODUCTS, "scene": SCENES, "msg_person": MSG_PEOPLE,
    "thanks": THANKS, "speech": SPEECHES, "char_pair": CHAR_PAIRS, "dialogue_topic": DIALOGUE_TOPICS,
    "scene_prompt": SCENE_PROMPTS, "limerick_subject": LIMERICK_SUBJECTS, "lesson": LESSONS,
    "pov": POVS, "quote_topic": QUOTE_TOPICS, "announcement": ANNOUNCEMENTS, "invite": INVITES,
    "review": REVIEWS, "text_to": TEXTS_TO, "job_app": JOB_APPS, "invention": INVENTIONS,
    "genre": GENRES, "setting": SETTINGS, "riddle_thing": RIDDLE_THINGS,
}

CREATIVE_PREFACES = [
    "You are a creative writer.",
    "You are a helpful writing assistant.",
    "Act as a professional copywriter.",
    "You are a storyteller for young children.",
]
CREATIVE_SUFFIXES = [
    "Keep it short.", "Make it funny.", "Use simple words.", "Make it heartwarming.",
    "Keep it under 150 words.", "Give it a title.", "Make it suitable for kids.",
]

# =============================================================================
# Engine
# =============================================================================

TEMPLATES = {
    "chat": CHAT_TEMPLATES, "explanation": EXPLANATION_TEMPLATES, "code": CODE_TEMPLATES,
    "math": MATH_TEMPLATES, "lists": LISTS_TEMPLATES, "creative": CREATIVE_TEMPLATES,
}
POOLS = {
    "chat": CHAT_POOLS, "explanation": EXPLANATION_POOLS, "code": CODE_POOLS,
    "math": MATH_POOLS, "lists": LISTS_POOLS, "creative": CREATIVE_POOLS,
}
PREFACES = {
    "chat": CHAT_PREFACES, "explanation": EXPLANATION_PREFACES, "code": CODE_PREFACES,
    "math": MATH_PREFACES, "lists": LISTS_PREFACES, "creative": CREATIVE_PREFACES,
}
SUFFIXES = {
    "chat": CHAT_SUFFIXES, "explanation": EXPLANATION_SUFFIXES, "code": CODE_SUFFIXES,
    "math": MATH_SUFFIXES, "lists": LISTS_SUFFIXES, "creative": CREATIVE_SUFFIXES,
}

_SLOT = re.compile(r"\{([a-z_]+)(?::(\d))?(?:\.([a-z]+))?(?:\|([a-z]+))?\}")


def fill(template: str, pools: dict, rng: random.Random) -> str:
    """Fill one string template (see the module docstring for the syntax)."""
    chosen: dict = {}   # (pool, index) -> item
    used: dict = {}     # pool -> list of items already used in this prompt

    def sub(m: re.Match) -> str:
        pool, idx, attr, mod = m.group(1), m.group(2) or "1", m.group(3), m.group(4)
        key = (pool, idx)
        if key not in chosen:
            items = pools[pool]
            taken = used.setdefault(pool, [])
            item = rng.choice(items)
            while item in taken:
                item = rng.choice(items)
            taken.append(item)
            chosen[key] = item
        value = chosen[key]
        if attr is not None:
            value = value[attr]
        if mod in ("lc", "lcs"):
            value = value[:1].lower() + value[1:]
        if mod == "lcs":
            value = value.rstrip(".?!")
        return value

    return _SLOT.sub(sub, template)


def decorate(prompt: str, category: str, rng: random.Random) -> str:
    """Sometimes add a system-like preface and/or a style suffix (not to casual prompts)."""
    casual = prompt[:1].islower()
    has_preface = prompt.startswith(("You are", "Act as", "Solve the following"))
    if not casual and not has_preface and rng.random() < P_PREFACE:
        prompt = rng.choice(PREFACES[category]) + " " + prompt
    if not casual and rng.random() < P_SUFFIX:
        suffix = rng.choice(SUFFIXES[category])
        # Avoid redundant/contradictory suffixes ("step by step ... Think step by step", "100-word ... under 150 words").
        clash = any(w in prompt.lower() and w in suffix.lower() for w in ("step", "word", "short", "comment"))
        if not clash:
            prompt = prompt + ("\n\n" if "```" in prompt else " ") + suffix
    return prompt


def generate(seed: int = SEED, per_category: int = TARGET_PER_CATEGORY) -> list[dict]:
    """Return the list of {"category", "prompt"} records (deterministic for a given seed)."""
    rng = random.Random(seed)
    seen: set = set()
    records: list[dict] = []
    for category in CATEGORIES:
        templates, pools = TEMPLATES[category], POOLS[category]
        got, attempts = 0, 0
        while got < per_category:
            attempts += 1
            if attempts > per_category * 50:
                raise RuntimeError(f"{category}: only {got} unique prompts after {attempts} attempts")
            template = rng.choice(templates)
            text = template(rng) if callable(template) else fill(template, pools, rng)
            text = decorate(text, category, rng)
            key = normalize(text)
            if key in seen:
                continue
            seen.add(key)
            records.append({"category": category, "prompt": text})
            got += 1
    rng.shuffle(records)
    return records


def natural(seed: int = SEED, variants: int = 3) -> list[dict]:
    """The hand-written prompts of natural/*.jsonl, each as written plus `variants - 1` decorated
    copies (a preface and/or a style suffix of its category): a different request gets a
    different answer, so one hand-written line yields several training answers."""
    rng = random.Random(seed)
    seen: set = set()
    records: list[dict] = []
    for category in CATEGORIES:
        for line in (NATURAL_DIR / f"{category}.jsonl").read_text(encoding="utf-8").splitlines():
            text = json.loads(line)["prompt"]
            forms = [text]
            for v in range(1, variants):
                preface = rng.choice(PREFACES[category]) + " " if v % 2 == 0 else ""
                suffix = rng.choice(SUFFIXES[category])
                forms.append(preface + text + ("\n\n" if "```" in text else " ") + suffix)
            for form in forms:
                if normalize(form) not in seen:
                    seen.add(normalize(form))
                    records.append({"category": category, "prompt": form})
    rng.shuffle(records)
    return records


def write_jsonl(records: list[dict], out: Path) -> None:
    """One JSON object a line; xz-compressed when out ends in .xz (the tree's copies are)."""
    out.parent.mkdir(parents=True, exist_ok=True)
    text = "".join(json.dumps(rec, ensure_ascii=False) + "\n" for rec in records).encode("utf-8")
    out.write_bytes(lzma.compress(text) if out.suffix == ".xz" else text)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, default=DEFAULT_OUT, help="output JSONL path (default: %(default)s)")
    ap.add_argument("--seed", type=int, default=SEED)
    ap.add_argument("--per-category", type=int, default=TARGET_PER_CATEGORY)
    ap.add_argument("--natural", action="store_true",
                    help=f"write the hand-written prompts of {NATURAL_DIR.name}/ and their variants "
                         f"(default out: {NATURAL_OUT.name})")
    args = ap.parse_args(argv)
    if args.natural:
        args.out = NATURAL_OUT if args.out == DEFAULT_OUT else args.out
        records = natural(args.seed)
    else:
        records = generate(args.seed, args.per_category)
    write_jsonl(records, args.out)
    counts: dict = {}
    for rec in records:
        counts[rec["category"]] = counts.get(rec["category"], 0) + 1
    print(f"wrote {len(records)} prompts to {args.out}: " + ", ".join(f"{c}={counts[c]}" for c in CATEGORIES),
          file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
