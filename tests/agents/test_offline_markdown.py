"""The offline agent reads Markdown as users paste it (a README, a docs page): a bullet or
sentence opening in bold, a pipe table with outer pipes and a `|---|` row, a fenced code block
and short bullets that are no sentence were unread or glued to other text (heldout18.json's
`skyapi` plans were never quoted), so questions they answer were refused."""

from __future__ import annotations

from kbsql.engine.models.chat.offline_markdown import plain
from kbsql.engine.models.chat.offline_text import sentences
from tests.agents.offline_desk import answer, cited, desk

README = [
    ("plans", "## Plans\n\n"
              "- **Free**: 1,000 calls per day, current conditions only.\n"
              "- **Developer**: $29 per month, 50,000 calls per day, adds 7-day forecasts.\n"),
    ("prices", "## Prices\n\n"
               "| Ticket | Adult | Child |\n"
               "|---|---|---|\n"
               "| Day pass | £14 | £8 |\n"
               "| Season pass | £120 | £70 |\n\n"
               "Children under 5 go free."),
    ("install", "## Install\n\n"
                "Run the installer first.\n\n"
                "```\n"
                "curl -sSL get.example.sh | sh\n"
                "```\n\n"
                "**Tip.** The installer needs no root access."),
    ("hours", "## Opening hours\n\n"
              "- **Mon-Fri:** 08:00-21:00\n"
              "- **Sat:** 09:00-17:00\n"),
]


def _read(content: str) -> list[str]:
    return [s.text for s in sentences([(content, "x")])]


def test_markdown_is_read_as_its_text():
    """A sentence may open in bold (and keeps it, as the text has it); a table's rows are read
    under its header, its `|---|` row dropped; a code block is left out and ends the paragraph
    before it; a short bullet that is no sentence is read as an item under its heading. Piped
    lines without a `|---|` row under the first are left as they are."""
    assert "**Free**: 1,000 calls per day, current conditions only." in _read(README[0][1])
    rows = {s.text: s.lead for s in sentences([(README[1][1], "x")])}
    assert rows["Day pass | £14 | £8."] == ("Ticket | Adult | Child:",)
    assert not any("---" in t for t in rows)
    install = _read(README[2][1])
    assert install[0] == "Run the installer first."
    assert "**Tip.** The installer needs no root access." in install
    assert not any("curl" in t for t in install)
    first = sentences([(README[3][1], "x")])[0]
    assert (first.text, first.lead, first.item) == ("**Mon-Fri:** 08:00-21:00.", ("Opening hours:",), True)
    assert plain("| a | b |\n| c | d |") == "| a | b |\n| c | d |"
    assert plain("Oak pod | 4 | £85") == "Oak pod | 4 | £85"


def test_answers_from_a_bold_bullet_and_a_table_row(client):
    """Through the agent over a Markdown knowledge base: the plan's bold bullet and the table's
    row are quoted; before, the bullet never was and the table was dropped as debris."""
    agent = desk(client, "readme", README)
    plan = answer(client, agent, "how many calls a day do I get on the free plan")
    assert "**Free**: 1,000 calls per day" in " ".join(cited(plan)), plan
    price = answer(client, agent, "how much is a season pass for a child")
    assert "Season pass | £120 | £70" in " ".join(cited(price)), price


BOOSTERS = [
    ("boosters", "## Boosters ##\n\n"
                 "- Dogs need a booster every year; the leptospirosis part is given yearly, the rest "
                 "every 3 years.\n"
                 "- Rabbits:\n"
                 "  - myxomatosis and RHD2 in one combined jab, from 5 weeks old\n"
                 "  - then once a year, £39\n\n"
                 "If a booster is more than 3 months late, the course has to be restarted with two jabs."),
    ("intro", "# Vaccination guide #\n\n"
              "Vaccines protect your pet from diseases that are common, serious and sometimes fatal."),
]


def test_nested_bullets_carry_their_parent(client):
    """heldout22.json's "what vaccine do rabbits get" quoted the bare parent bullet "Rabbits:":
    its sub-bullets (no sentences alone, in lower case) were items under the passage's heading,
    which must name the asked thing themselves. Each sub-bullet now says its parent ("Rabbits:
    myxomatosis ..."), the parent is never quoted alone, and a bullet after the nested ones, back
    at the parent's depth, carries nothing."""
    read = _read(BOOSTERS[0][1])
    assert "Rabbits: myxomatosis and RHD2 in one combined jab, from 5 weeks old." in read
    assert "Rabbits: then once a year, £39." in read
    assert not any(t.rstrip(":.") == "Rabbits" for t in read)
    after = _read("* Files we accept:\n    * STL or OBJ, up to 50 MB\n* Collect your print within 14 days.")
    assert after == ["Files we accept: STL or OBJ, up to 50 MB.", "Collect your print within 14 days."]
    agent = desk(client, "jabs", BOOSTERS, model=None)
    reply = answer(client, agent, "what vaccine do rabbits get")
    assert "Rabbits: myxomatosis and RHD2 in one combined jab" in " ".join(cited(reply)), reply


HOURS = [
    ("hours", "Opening hours\n"
              "Facility\tDays\tHours\n"
              "Restaurant breakfast\tMonday to Friday\t7:00 to 10:00\n"
              "Harbour Bar\tEvery day\t12:00 to midnight\n"
              "Pool and sauna\tEvery day\t6:30 to 21:00"),
    ("parking", "Parking - Our car park has 40 spaces at £12 per 24 hours."),
]


def test_a_table_copied_from_a_spreadsheet_is_read_as_rows(client):
    """heldout25.json's hotel hours were tab-separated cells: the lines were joined into one
    "sentence" of every cell, so "how late is the bar open" quoted the whole table. Each line is
    now a row read under its header, and the bar's row alone is quoted."""
    rows = {s.text: s.lead for s in sentences([(HOURS[0][1], "x")])}
    assert rows["Harbour Bar | Every day | 12:00 to midnight."] == ("Facility | Days | Hours:",)
    agent = desk(client, "hours", HOURS, model="hash-384")
    reply = answer(client, agent, "how late is the bar open")
    quoted = " ".join(cited(reply))
    assert "Harbour Bar | Every day | 12:00 to midnight" in quoted and "Pool and sauna" not in quoted, reply


BINS = [
    ("bins", "Bins and recycling\n------------------\n\n"
             "+--------------------+-----------------+-------------------------+\n"
             "| Bin                | What goes in it | Collected               |\n"
             "+--------------------+-----------------+-------------------------+\n"
             "| Green wheelie bin  | General rubbish | Tuesday, every week     |\n"
             "| Blue box           | Glass and cans  | Friday, every two weeks |\n"
             "+--------------------+-----------------+-------------------------+\n\n"
             "Put the bins out at the end of the lane by 7am on collection day."),
    ("pets", "Pets\n----\n\nOne well-behaved dog is welcome for a charge of £25 per stay."),
]


def test_a_grid_table_is_read_as_rows(client):
    """heldout26.json's cottage drew its bin table as a plain-text grid (`+---+` borders round
    `| a | b |` rows): the rows were dropped as debris, so "and the glass?" quoted the sentence
    under the table. Each row is now read under its header, as a pipe table's is."""
    rows = {s.text: s.lead for s in sentences([(BINS[0][1], "x")])}
    header = ("Bin | What goes in it | Collected:",)
    assert rows["Blue box | Glass and cans | Friday, every two weeks."] == header
    assert "Bin | What goes in it | Collected." not in rows  # the header is no row
    agent = desk(client, "bins", BINS, model="hash-384")
    reply = answer(client, agent, "when are the glass and cans collected")
    assert "Blue box | Glass and cans | Friday, every two weeks" in " ".join(cited(reply)), reply
