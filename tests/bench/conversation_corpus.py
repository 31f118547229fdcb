"""A conversational memory corpus, generated deterministically (written here, copied from
no public benchmark): sessions of user/assistant turns in which facts about the people
in the user's life are mentioned once, and questions whose answer sits in one turn.

A fact is told in one of two ways: in a single turn ("My sister moved to Lisbon for
work."), or split over three, where the turn holding the answer barely names the topic
("My sister is relocating for work." / "Oh, where to?" / "To Lisbon, of all places!").
Around them: filler that reuses the same people and topic words without the fact, as
real chat does. The evidence of a question is the turn that holds its answer.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

WHOS = (
    "my sister",
    "my brother",
    "my mum",
    "my dad",
    "my friend Priya",
    "my colleague Marco",
    "my neighbour Joan",
    "my cousin Felix",
    "my son",
    "my daughter",
    "my partner",
    "my grandmother",
)


@dataclass(frozen=True)
class FactKind:
    """How a kind of fact is told, split, asked about, and chatted around."""

    name: str
    values: tuple[str, ...]
    said: tuple[str, ...]  # single-turn statements: {who}, {Who}, {v}
    setup: str  # split form: the turn naming the topic, without the answer
    reply: str  # the assistant's prompt for the answer
    answer: str  # the turn holding the answer, barely naming the topic
    question: str  # {who}
    chatter: tuple[str, ...]  # topic talk without the fact


KINDS = (
    FactKind(
        "move",
        ("Lisbon", "Osaka", "Calgary", "Tallinn", "Cape Town", "Valparaiso", "Bergen", "Hanoi"),
        ("{Who} moved to {v} for a new job.", "{Who} has relocated to {v}, it happened fast."),
        "{Who} is relocating for work, can you believe it.",
        "Oh wow, where to?",
        "To {v}, of all places!",
        "Which city did {who} move to?",
        ("Moving house is exhausting, all those boxes.", "{Who} hates packing."),
    ),
    FactKind(
        "allergy",
        ("peanuts", "shellfish", "penicillin", "cats", "birch pollen", "sesame", "latex", "kiwi"),
        ("The doctor confirmed {who} is allergic to {v}.", "Turns out {who} reacts badly to {v}."),
        "{Who} finally got the results of the allergy test.",
        "And what did it show?",
        "It's {v}. We have to check every label now.",
        "What is {who} allergic to?",
        ("Spring is rough for anyone with allergies.", "{Who} sneezed all through dinner."),
    ),
    FactKind(
        "car",
        ("Volvo estate", "red Mini", "Tesla Model 3", "Toyota hybrid", "camper van", "Fiat Panda"),
        ("{Who} traded the old sedan for a {v}.", "{Who} just bought a {v}."),
        "{Who} went to the dealership on Saturday and signed the papers.",
        "What did they end up choosing?",
        "A {v}, second hand but spotless.",
        "What car did {who} buy?",
        ("Car insurance keeps getting pricier.", "{Who} still can't parallel park."),
    ),
    FactKind(
        "instrument",
        ("cello", "banjo", "piano", "trumpet", "ukulele", "drums", "violin", "harp"),
        ("{Who} started {v} lessons on Tuesday evenings.", "{Who} is learning to play the {v}."),
        "{Who} signed up for music lessons at the community school.",
        "Nice! Which one?",
        "The {v}. The neighbours will love it.",
        "Which instrument is {who} learning?",
        ("Music lessons are so expensive these days.", "{Who} practises scales at night."),
    ),
    FactKind(
        "book",
        ("Middlemarch", "Dune", "The Overstory", "Piranesi", "Beloved", "Moby-Dick", "Kindred"),
        ("{Who} is halfway through {v} and loves it.", "{Who} can't put down {v}."),
        "{Who} picked up a novel at the library and has been reading every night.",
        "Which one was it?",
        "{v}. Apparently it's a slow start but worth it.",
        "What novel is {who} reading?",
        ("I never finish the books I start.", "{Who} reads on the train every morning."),
    ),
    FactKind(
        "trip",
        ("Iceland", "Sicily", "Patagonia", "Kyoto", "the Dolomites", "Morocco", "Crete"),
        ("{Who} booked flights to {v} for the spring holiday.", "{Who} is off to {v} in April."),
        "{Who} finally booked the spring holiday.",
        "Where are they going?",
        "{v}! Two whole weeks.",
        "Where is {who} going on holiday?",
        ("Flights are so expensive this year.", "{Who} never takes real time off."),
    ),
    FactKind(
        "boss",
        ("Helena", "Rashid", "Marguerite", "Tobias", "Ingrid", "Dev", "Carmen", "Yusuf"),
        ("{Who}'s new manager is called {v}.", "{Who} reports to {v} since the reorganisation."),
        "{Who} got a new manager after the reorganisation.",
        "Oh? Who is it?",
        "Someone called {v}. Seems fair so far.",
        "Who is {who}'s new boss?",
        ("Reorganisations always make everyone nervous.", "{Who} works long hours."),
    ),
    FactKind(
        "sport",
        ("volleyball", "curling", "badminton", "water polo", "rugby", "table tennis", "netball"),
        ("{Who} joined a {v} league at the sports centre.", "{Who} plays {v} on Thursdays."),
        "{Who} joined a league at the sports centre to get fit.",
        "What do they play?",
        "{v}, of all things. Came home bruised.",
        "Which sport does {who} play in a league?",
        ("I should really exercise more.", "{Who} pulled a muscle last winter."),
    ),
    FactKind(
        "gift",
        ("a telescope", "a espresso machine", "hiking boots", "a sourdough kit", "a kayak"),
        ("For the birthday we're getting {who} {v}.", "We bought {v} as a present for {who}."),
        "We finally settled on a birthday present for {who}.",
        "What did you choose?",
        "{v}. Don't tell anyone.",
        "What birthday present did we get for {who}?",
        ("Birthdays sneak up on me every year.", "{Who} is impossible to shop for."),
    ),
    FactKind(
        "medication",
        ("metformin", "levothyroxine", "iron tablets", "vitamin D", "an inhaler", "statins"),
        ("{Who} has to take {v} every morning now.", "The GP put {who} on {v}."),
        "{Who} came back from the GP with a new prescription.",
        "What did the doctor prescribe?",
        "{v}, every morning from now on.",
        "What medication was {who} prescribed?",
        ("The pharmacy queue was endless today.", "{Who} forgets appointments a lot."),
    ),
    FactKind(
        "hobby",
        ("pottery", "bouldering", "birdwatching", "woodturning", "salsa dancing", "beekeeping"),
        ("{Who} has taken up {v} on weekends.", "{Who} spends every Saturday doing {v}."),
        "{Who} has a new weekend hobby and won't stop talking about it.",
        "What is it this time?",
        "{v}. There's already gear all over the hallway.",
        "What hobby has {who} taken up?",
        ("Weekends go by far too quickly.", "{Who} gets bored easily."),
    ),
    FactKind(
        "language",
        ("Portuguese", "Korean", "Welsh", "Turkish", "Swahili", "Finnish", "Greek", "Polish"),
        ("{Who} is practising {v} with an app every day.", "{Who} is studying {v} at night."),
        "{Who} is learning a new language before the big trip.",
        "Which language?",
        "{v}. The grammar is brutal, apparently.",
        "Which language is {who} studying?",
        ("Language apps nag you constantly.", "{Who} was always good at school."),
    ),
    FactKind(
        "pet",
        ("Biscuit", "Pepper", "Mochi", "Juniper", "Waffles", "Ziggy", "Clementine", "Otto"),
        ("{Who} adopted a puppy and named it {v}.", "{Who}'s new kitten is called {v}."),
        "{Who} brought home a rescue puppy from the shelter.",
        "Aww! What's its name?",
        "{v}. It suits the little thing.",
        "What is the name of {who}'s new pet?",
        ("Shelters are full this time of year.", "{Who} always wanted a dog."),
    ),
    FactKind(
        "restaurant",
        ("Casa Lupita", "the Blue Heron", "Sakura House", "Le Petit Jardin", "Trattoria Nonna"),
        ("{Who} booked {v} for the anniversary dinner.", "The anniversary dinner is at {v}."),
        "{Who} organised the anniversary dinner, a proper fancy one.",
        "Where did they book?",
        "{v}. I hear the desserts are incredible.",
        "Where is {who}'s anniversary dinner?",
        ("Eating out has become so expensive.", "{Who} never remembers dates."),
    ),
    FactKind(
        "appliance",
        ("washing machine", "dishwasher", "fridge", "boiler", "oven", "tumble dryer"),
        ("{Who}'s {v} broke down again.", "The {v} at {who}'s place stopped working."),
        "Something broke at {who}'s place again this morning.",
        "Oh no, what was it?",
        "The {v}. Third time this year.",
        "Which appliance broke at {who}'s place?",
        ("Repairs always take forever to schedule.", "{Who} is terrible with tools."),
    ),
    FactKind(
        "course",
        ("astronomy", "accounting", "Renaissance art", "first aid", "web design", "geology"),
        ("{Who} enrolled in an evening course on {v}.", "{Who} takes a night class in {v}."),
        "{Who} signed up for an evening course at the college.",
        "What's the subject?",
        "{v}. Homework every week!",
        "What subject is {who}'s evening course about?",
        ("Evening classes are hard after a long day.", "{Who} loves learning new things."),
    ),
    FactKind(
        "job",
        ("paramedic", "architect", "baker", "park ranger", "translator", "electrician"),
        ("{Who} got a job as a {v}.", "{Who} is retraining to become a {v}."),
        "{Who} got the job offer they were hoping for.",
        "Congratulations! Doing what?",
        "Working as a {v}. Starts next month.",
        "What job did {who} get?",
        ("The job market is tough right now.", "{Who} hated the old office."),
    ),
    FactKind(
        "garden",
        ("tomatoes", "sunflowers", "strawberries", "lavender", "courgettes", "chillies"),
        ("{Who} is growing {v} in the garden this year.", "{Who} planted {v} by the fence."),
        "{Who} finally planted the vegetable patch at the weekend.",
        "What went in?",
        "Mostly {v}. Fingers crossed for sun.",
        "What is {who} growing in the garden?",
        ("Slugs ate everything last summer.", "{Who} waters the garden at dawn."),
    ),
)

FILLER = (
    "How was your weekend?",
    "Pretty quiet, mostly chores and a long walk.",
    "Remind me to call the bank tomorrow.",
    "Noted. Anything else for tomorrow?",
    "The weather has been miserable all week.",
    "Let's hope it clears up before the weekend.",
    "I'm so tired today, work was relentless.",
    "That sounds draining. Maybe an early night?",
    "Can you add milk and eggs to the shopping list?",
    "Added milk and eggs.",
    "I keep forgetting where I put my keys.",
    "Maybe a hook by the door would help.",
    "What should I cook tonight?",
    "Something quick, like a stir fry?",
)


@dataclass(frozen=True)
class Turn:
    """One dialogue turn: a document of its own."""

    session: int
    speaker: str
    text: str


@dataclass(frozen=True)
class Question:
    """A question and the index (into the turn list) of the turn that answers it."""

    text: str
    evidence: int
    split: bool


def _cap(who: str) -> str:
    return who[0].upper() + who[1:]


def build(
    seed: int = 24, sessions: int = 40, facts_per_session: int = 6
) -> tuple[list[Turn], list[Question]]:
    """The turns of every session, in order, and one question per fact."""
    rng = random.Random(seed)
    combos = [(kind, who) for kind in KINDS for who in WHOS]
    rng.shuffle(combos)
    turns: list[Turn] = []
    questions: list[Question] = []
    for session in range(sessions):
        facts = combos[session * facts_per_session : (session + 1) * facts_per_session]
        for kind, who in facts:
            fill = rng.randrange(0, len(FILLER) - 1, 2)
            turns.append(Turn(session, "user", FILLER[fill]))
            turns.append(Turn(session, "assistant", FILLER[fill + 1]))
            other = rng.choice(WHOS)
            chat = rng.choice(kind.chatter).format(who=other, Who=_cap(other))
            turns.append(Turn(session, "user", chat))
            value = rng.choice(kind.values)
            split = rng.random() < 0.5
            if split:
                turns.append(Turn(session, "user", kind.setup.format(who=who, Who=_cap(who))))
                turns.append(Turn(session, "assistant", kind.reply))
                text = kind.answer.format(v=value)
            else:
                text = rng.choice(kind.said).format(who=who, Who=_cap(who), v=value)
            questions.append(Question(kind.question.format(who=who), len(turns), split))
            turns.append(Turn(session, "user", _cap(text)))
            turns.append(Turn(session, "assistant", "Thanks for telling me, I'll remember that."))
    return turns, questions
