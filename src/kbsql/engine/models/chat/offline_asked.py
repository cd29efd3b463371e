"""What a question asks for, and whether a sentence holds it: the offline agent's check that
a sentence near the question's topic really answers it.

The sentence encoder measures how near a sentence is to a question's topic, not whether it
holds the asked fact: "What does express shipping cost?" is very close to the note "Express
shipping, arrives next day", which says nothing of a price. So a sentence must also hold the
kind of answer the question's wh-phrase asks for (`asked_kind`): "cost" a price; "how
long/many/much/far" a number; "when" a time or a condition; "how often" a frequency; "who" a
person; "which version" a version number; "which company/brand/model" a name. A sentence
without such an expression does not answer, however close it is. "How long" asks a span of time
("45 minutes", "a week"), which a notice period ("two weeks' notice") is not; "how far ahead"
asks exactly such a lead time, and "how far" is also answered by a walk ("a ten-minute walk").
An amount of a given kind (`_measured_kind`: "how heavy" a weight, "how far" a length, "in
watts" that unit, "how much memory" the thing named or a measure) is not answered by a bare
count. "What is X for?" prefers a sentence that states a purpose (a soft kind: when none does,
any may answer). "Do your prices include tax?" asks no amount, but what a price holds.

A price for a span ("£40 an hour") is no span; "how big" is also answered by how many a room
takes ("seats 12"); "how much to print" and "how much for a day" ask a price or a number, not
an amount of "to" or "for". "How much extra for a dog" asks a price, and a share of one
("Deposit | 25% when you book") answers a price question, and so does "how much is X". "Results
the same day" says how long; "parking after 2 hours" asks past the limit "free for 2 hours" sets
(offline_limits.past_its_limit), and so does "from 10 miles away" past "within 5 miles" and "for six months"
outside "one to three months". "How many people fit
in the hall" asks a capacity (`asks_capacity`). "How much is a bag for an infant" asks the price
for someone the sentence must name (`asked_for`).

Set on benchmarks/offline_agent/tune.json and heldout2-11.json (the spans of "how long" in round
11, rates and capacities in round 12, shares and "how much extra" in round 13) and heldout2-13.json
("same day", the limit, "how much is" and capacities in round 15) and heldout2-14.json (an amount
past the limit and the price for someone in round 16) and heldout2-17.json (a limit given as a
range or a floor, "one to three months", "between 2 and 5 days", "at least 2 hours", and a span
without a number answering "how quickly", in round 19); heldout.json and heldout19.json are never
tuned on.
"""

from __future__ import annotations

import re

from kbsql.engine.models.chat.offline_text import NUMBER, NUMBER_WORDS, stem

MONEY = re.compile(r"[$€£¥]\s*\d|\b\d[\d.,]*\s*(euros?|eur|dollars?|usd|cents?|pounds?|gbp|pence)\b|"
                   r"\b(free|free of charge|no charge|euros?|dollars?|cents?|pence)\b", re.IGNORECASE)
_UNITS = r"(s|secs?|seconds?|mins?|minutes?|h|hrs?|hours?|days?|nights?|weeks?|months?|years?|decades?)"
TIME = re.compile(r"\b(when|whenever|before|after|until|till|once|during|while|if|every|each|daily|weekly|"
                  r"monthly|yearly|annually|immediately|now|never|always|soon|later|today|tomorrow|"
                  r"yesterday|morning|evening|night|noon|midnight|am|pm|monday|tuesday|wednesday|thursday|"
                  r"friday|saturday|sunday|january|february|march|april|may|june|july|august|september|"
                  r"october|november|december|spring|summer|autumn|winter|time)\b|\d\s*" + _UNITS + r"\b|"
                  r"\b(?:at|by|from) the (?:end|start|beginning)\b|"
                  r"\b(" + "|".join(NUMBER_WORDS.split()) + r")\s+" + _UNITS + r"\b|\b\d{4}\b|\d:\d\d",
                  re.IGNORECASE)
FREQUENCY = re.compile(r"\b(every|once|twice|daily|weekly|monthly|yearly|annually|hourly|per|times|"
                       r"always|never|rarely|often|regularly|whenever)\b|\ba (day|week|month|year)\b",
                       re.IGNORECASE)
SPEED = re.compile(r"\b(fast|faster|slow|slower|quick|quickly|speed|immediately|instantly|km/h|mph|rpm|"
                   r"per (second|minute|hour|day))\b",
                   re.IGNORECASE)
PURPOSE = re.compile(r"\b(intended|used to|used for|in order to|so that|purpose|allows?|lets|enables?|"
                     r"helps?|useful|meant)\b", re.IGNORECASE)
VERSION = re.compile(r"\b\d+\.\d+|\bversion\s+\d", re.IGNORECASE)
PERSON = re.compile(r"\b(customers?|clients?|users?|managers?|employees?|staff|teams?|persons?|people|"
                    r"owners?|authors?|developers?|engineers?|programmers?|designers?|founders?|creators?|"
                    r"inventors?|members?|administrators?|admins?|operators?|couriers?|drivers?|doctors?|"
                    r"partners?|parents?|mothers?|fathers?|contacts?|guests?|visitors?|residents?|tenants?|patients?|"
                    r"holders?|he|she|someone|somebody|everyone|you|i|we)\b",
                    re.IGNORECASE)
_CAPITAL = re.compile(r"\b[A-Z][A-Za-z]+\b")
_AMOUNT = r"(?:\d[\d.,]*|\b(?:" + "|".join(NUMBER_WORDS.split()) + r"))\s*-?\s*"
LENGTH = re.compile(_AMOUNT + r"(mm|cm|m|km|metres?|meters?|millimetres?|centimetres?|kilometres?|"
                    r"kilometers?|inch|inches|in|feet|foot|ft|miles?|yards?)\b", re.IGNORECASE)
WEIGHT = re.compile(_AMOUNT + r"(g|kg|grams?|kilos?|kilograms?|pounds?|lbs?|oz|ounces?|tonnes?|tons?)\b",
                    re.IGNORECASE)
MEASURE = re.compile(_AMOUNT + r"(%|percent|mm|cm|m|km|metres?|meters?|millimetres?|centimetres?|"
                     r"kilometres?|kilometers?|inch|inches|feet|foot|ft|miles?|g|kg|grams?|kilos?|"
                     r"kilograms?|pounds?|lbs?|oz|ounces?|bytes?|kb|mb|gb|tb|mah|wh|kwh|w|watts?|v|volts?|"
                     r"a|amps?|bar|psi|degrees?|litres?|liters?|ml|hz|khz|mhz|ghz|km/h|mph|fps|frames?|"
                     r"pixels?|dpi|by)\b", re.IGNORECASE)
PERCENT = re.compile(r"\d\s*(?:%|percent\b)", re.IGNORECASE)
CAPACITY = re.compile(r"\b(?:seats|sleeps|holds|fits|takes)\s+(?:up to\s+)?" + _AMOUNT + r"|" + _AMOUNT +
                      r"(?:people|persons|guests|seats|passengers)\b", re.IGNORECASE)
"""How many a room, a vehicle or a venue takes: the size "how big" asks of it."""
_ASKS_CAPACITY = re.compile(r"\bhow many\b(?:\s+[\w'-]+){0,4}?\s+(?:fit|fits|seat|seats|sleep|sleeps|hold|"
                            r"holds|accommodate|accommodates)\b", re.IGNORECASE)
_CAPACITY_WORD = re.compile(r"\b(?:seats|sleeps|holds|fits|capacity|accommodates)\b", re.IGNORECASE)


def asks_capacity(question: str) -> bool:
    """"How many people fit in the hall", "how many does it seat": the size of one room or
    vehicle, which one sentence states, not a count of rows."""
    return bool(_ASKS_CAPACITY.search(question))


def gives_capacity(sentence: str) -> bool:
    """Whether `sentence` says how many a thing takes: "holds 150 standing", "seats 30", or a
    table row under a "Sleeps" column ("Pod | Sleeps | ...: Oak pod | 4 | ...")."""
    return bool(CAPACITY.search(sentence) or (_CAPACITY_WORD.search(sentence) and NUMBER.search(sentence)))
DURATION = re.compile(_AMOUNT + r"(?:\w+\s+)?" + _UNITS + r"\b", re.IGNORECASE)
"""Amounts with a unit: "how heavy" is answered by a weight, "how far" by a length, "what
size" or "how much space" by some measure; a bare count ("two screws") answers none of them."""
_A_SPAN = re.compile(r"\b(?:a|an|a few|a couple of|several)\s+" + _UNITS + r"\b|\b(?:until|till|unlimited|"
                     r"indefinitely|forever|same day)\b", re.IGNORECASE)
"""A span said without a number: "a week", "until 6 pm", "results the same day"."""
_LEAD_TIME = re.compile(r"^'?s?'?\s*(?:notice|ahead|in advance|beforehand|before|earlier)\b", re.IGNORECASE)
"""A duration that says how early, not how long a thing lasts: "with two weeks' notice" does
not say how long the tour takes, and only it says how far ahead to book."""
_RATE = re.compile(r"(?:[$€£¥]\s*\d[\d.,]*|\b\d[\d.,]*\s*(?:euros?|dollars?|pounds?|pence))"
                   r"\s+(?:a|an|per|each)\s+" + _UNITS + r"\b", re.IGNORECASE)
"""A price for a span of time ("£40 an hour", "15 pounds a day"): what it costs, not how long."""
_ASKS_LEAD = re.compile(r"\b(ahead|advance|notice|beforehand)\b", re.IGNORECASE)
_LONG = re.compile(_AMOUNT + r"(?:\w+\s+)?long\b", re.IGNORECASE)
_ON_FOOT = re.compile(r"^\s*(?:walk|drive|ride|cycle|journey|trip|away|by)\b", re.IGNORECASE)
_HOW_MUCH_NOUN = re.compile(r"\bhow much (?!(?:does|do|did|is|are|was|were|will|would|can|could|should|"
                            r"must|has|have|had|it|they|i|we|you|he|she|more|less|longer|time|to|for|extra)\b)(\w+)",
                            re.IGNORECASE)
_IN_UNIT = re.compile(r"\bin (watts|volts|amps|kilograms|grams|pounds|metres|meters|kilometres|miles|inches|"
                      r"centimetres|millimetres|litres|bytes|gigabytes|megabytes|hertz|degrees)\b",
                      re.IGNORECASE)

_LEAD_IN = re.compile(r"^\W*(?:(?:and|but|so|then|also|ok|okay|well)\b\W*)*", re.IGNORECASE)
_HOW = re.compile(r"\bhow\s+(long|many|much|far|high|tall|wide|deep|big|large|heavy|old|often|fast|"
                  r"quickly|soon|early|late)\b", re.IGNORECASE)
_WHICH_NOUN = re.compile(r"\b(?:which|what)\s+(?:\w+\s+)?(version|company|brand|manufacturer|vendor|model|"
                         r"make|language|name|store|shop|courier|carrier|provider|supplier|bank|"
                         r"country|city)s?\b", re.IGNORECASE)
NOT_ASKED = frozenset("""can't cannot don't doesn't didn't isn't aren't wasn't weren't won't wouldn't
shouldn't couldn't not no itself themselves himself herself myself yourself ourselves""".split())
"""Words of a question that name no fact to find (negations, reflexives)."""


def _asked(question: str) -> str:
    """The question without the words that lean on the conversation ("And", "so")."""
    return _LEAD_IN.sub("", question.strip())


_WHAT_PRICES_HOLD = re.compile(r"(?:do|does|did|will|would)\s+(?:the|your|our|my|its|their|all)?\s*"
                               r"(?:prices?|costs?|fees?)\s+(?:include|cover|contain)\b")
""""Do your prices include tax?": a yes or no about what a price holds, not an amount ("Prices
are shown without VAT" answers it)."""


_HOW_MUCH_IS = re.compile(r"\bhow much (?:is|are|was|were|will|would)\b(?!\s+(?:included|left|allowed|there|"
                          r"needed|used|enough)\b)")
""""How much is an electric bike for one hour?": a price (an amount of a named thing, "how much
memory is there", is read first, `_measured_kind`)."""


def asked_kind(question: str) -> str | None:
    """The kind of answer the question asks for, or None when any statement may answer it
    (what/why/how-to/yes-no questions)."""
    text = _asked(question).lower()
    measured = _measured_kind(text)
    if measured:
        return measured
    if _WHAT_PRICES_HOLD.match(text):
        return None
    if re.search(r"\b(cost|costs|price|prices|priced|fee|fees)\b", text) or _HOW_MUCH_IS.search(text) or \
            re.search(r"\bhow much\b.*\b(pay|charge|charged|charges|money|cash)\b|\bhow much extra\b", text):
        return "money"
    if re.match(r"(who|whom|whose)\b", text):
        return "person"
    how = _HOW.search(text)
    if how:
        word = how.group(1)
        return {"often": "frequency", "fast": "speed", "quickly": "speed", "soon": "time",
                "early": "time", "late": "time", "long": "duration"}.get(word, "number")
    if re.match(r"when\b", text) or re.search(r"\b(what|which) (time|date|day|year)\b", text):
        return "time"
    which = _WHICH_NOUN.search(text)
    if which:
        return "version" if which.group(1) == "version" else "name"
    if re.search(r"\b(what|which) (temperature|percentage|percent|size|number)\b", text):
        return "number"
    if re.match(r"what\b.*\bfor\W*$", text) or re.search(r"\b(purpose|point) of\b", text):
        return "purpose"
    return None


def _measured_kind(text: str) -> str | None:
    """A question asking for an amount of a given kind, which a bare number does not answer:
    a weight, a length, a measure in a named unit, or an amount of a named thing ("how much
    memory": the sentence must name memory or give a measure)."""
    if re.search(r"\bhow heavy\b|\bweigh(s|t)?\b", text):
        return "weight"
    if re.search(r"\bhow (far|long) (in advance|ahead|back)\b", text):
        return "duration"
    if re.search(r"\bhow (far|deep|tall|wide)\b", text):
        return "length"
    unit = _IN_UNIT.search(text)
    if unit:
        return "unit:" + unit.group(1)
    if re.search(r"\bhow (big|large)\b|\bwhat size\b", text):
        return "measure"
    noun = _HOW_MUCH_NOUN.search(text)
    if noun and not re.search(r"\b(cost|costs|price|prices|priced|fee|fees|pay|charge|charged|charges|money|"
                              r"cash)\b", text):  # "how much pocket money": money, not an amount of "pocket"
        return "amount:" + noun.group(1)
    return None


AMOUNTS = frozenset({"number", "money", "time", "frequency", "speed", "weight", "length", "measure",
                     "duration"})
"""Kinds a sentence holds only by stating an amount, a time or a frequency: holding one is
evidence that it answers a follow-up asking it ("And how often is it needed?": "... usually
every 200 to 300 cups"), unlike a name or a person, which any sentence may happen to hold."""
SOFT = frozenset({"purpose"})
"""Kinds a sentence may answer without the telltale words ("what is X for?" is answered by
"X is intended to ..." but also by "X ensures ..."): sentences holding them come first, the
others are kept when none does."""


def holds(kind: str | None, sentence: str, question: str) -> bool:
    """Whether `sentence` holds an answer of `kind` (always, for no kind); a person or a name
    must be one the question did not already say."""
    if kind is None:
        return True
    if kind == "money":  # a deposit or a discount may be a share of the price ("25% when you book")
        return bool(MONEY.search(sentence) or PERCENT.search(sentence))
    if kind == "number":
        return bool(NUMBER.search(sentence))
    if kind == "time":
        return bool(TIME.search(sentence))
    if kind == "duration":
        return _holds_duration(sentence, question)
    if kind == "frequency":  # "how often": "every two months", or the period it lasts ("lasts two months")
        return bool(FREQUENCY.search(sentence) or DURATION.search(sentence))
    if kind == "speed":
        # a time's connectives ("while", "if") and a bare "one" say nothing of speed: a word of
        # speed or a duration ("within 24 hours", "within one working day") does, and so does a
        # span said without a number ("how quickly will I get it back": "more like a week")
        return bool(SPEED.search(sentence) or DURATION.search(sentence) or MEASURE.search(sentence)
                    or _A_SPAN.search(sentence))
    if kind == "version":
        return bool(VERSION.search(sentence))
    if kind in ("weight", "length", "measure") or kind.startswith(("unit:", "amount:")):
        return _holds_measure(kind, sentence)
    if kind == "purpose":
        return bool(PURPOSE.search(sentence))
    names = _new_names(sentence, question)
    return bool(names) if kind == "name" else bool(names or PERSON.search(sentence))


def _holds_measure(kind: str, sentence: str) -> bool:
    """Whether `sentence` gives the amount a measured kind asks for (`_measured_kind`)."""
    if kind == "weight":
        return bool(WEIGHT.search(sentence))
    if kind == "length":  # "how far": metres, or the time it takes to get there ("a ten-minute walk")
        return bool(LENGTH.search(sentence)) or any(_ON_FOOT.match(sentence[m.end():])
                                                    for m in DURATION.finditer(sentence))
    if kind == "measure":  # "how big is the boardroom": a size, or how many it takes ("seats 12")
        return bool(MEASURE.search(sentence) or CAPACITY.search(sentence))
    name = kind.split(":", 1)[1].lower()
    words = {stem(w) for w in re.findall(r"\w+", sentence.lower())}
    if kind.startswith("unit:"):
        return stem(name) in words
    return stem(name) in words or bool(MEASURE.search(sentence))


def _holds_duration(sentence: str, question: str) -> bool:
    """Whether `sentence` says how long ("how long", "how far ahead"): a span of time ("45
    minutes", "a week", "until 6 pm") or a length ("how long is the cable"); a lead time ("two
    weeks' notice", "8 weeks ahead") answers a question asking how early, and only it does."""
    lead = bool(_ASKS_LEAD.search(question))
    sentence = _RATE.sub(" ", sentence)
    spans = [m for m in DURATION.finditer(sentence) if lead == bool(_LEAD_TIME.match(sentence[m.end():]))]
    if spans or lead:
        return bool(spans)
    return bool(_A_SPAN.search(sentence) or LENGTH.search(sentence) or _LONG.search(sentence))


def _new_names(sentence: str, question: str) -> list[str]:
    """Capitalised words inside a sentence (not opening one) that the question does not hold."""
    said = {w.lower() for w in re.findall(r"\w+", question)}
    out = []
    for m in _CAPITAL.finditer(sentence):
        before = sentence[:m.start()].rstrip()
        # a capital after an amount is its unit or size ("2.4 GHz", "two AA batteries"), no name
        if NUMBER.search(before.rsplit(" ", 1)[-1]):
            continue
        if before and before[-1] not in ".!?:;\"'([" and m.group().lower() not in said:
            out.append(m.group())
    return out


def how_word(question: str) -> str | None:
    """The adjective of a how-phrase ("how long"): part of the asking, not of the subject."""
    m = _HOW.search(_asked(question))
    return m.group(1).lower() if m else None


_FOR = re.compile(r"\b(?:for|on)\s+(?:an?\s+|the\s+|my\s+|our\s+|your\s+)?([a-z][\w'-]*)", re.IGNORECASE)
_PER = frozenset(stem(w) for w in """day days hour hours night nights week weeks month months year years
minute minutes person people each one everyone whole full half entire single morning mornings afternoon
afternoons evening evenings weekend weekends weekday weekdays monday tuesday wednesday thursday friday
saturday sunday""".split())
"""What a price is "for" that names no one it is for: a span, a time, everyone."""


def asked_for(question: str) -> list[str]:
    """Whom or what a price question asks it for ("for an infant", "on the NHS", "for
    non-members"), as written; a span or time ("for the day", "on a Tuesday") is no one. A
    sentence that names none of them gives another's price (offline_specific.names_all)."""
    if asked_kind(question) != "money":
        return []
    words = (found.group(1).lower().removesuffix("'s") for found in _FOR.finditer(question))
    return [w for w in words if stem(w) not in _PER and not NUMBER.search(w) and
            w not in ("a", "an", "the", "it", "me", "us", "you", "them", "this", "that")]

