"""START, END and EVERY of a job, as MindsDB reads them (interfaces/jobs/jobs_controller.py).

Dates are `'%Y-%m-%d %H:%M:%S'` or `'%Y-%m-%d'` (or NOW), in UTC; a period is `[n] minute |
hour | day | week | month` (plural and `min` too). `time_scale` (the `jobs_time_scale`
setting, for tests) shrinks every period: 1/60 makes a minute last one second.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

from kbsql.interface.errors import SqlError

_SECONDS = {"minute": 60, "minutes": 60, "min": 60, "hour": 3600, "hours": 3600,
            "day": 86400, "days": 86400, "week": 604800, "weeks": 604800,
            "month": 0, "months": 0}
_DATE_FORMATS = ("%Y-%m-%d %H:%M:%S", "%Y-%m-%d")
STORED = "%Y-%m-%d %H:%M:%S.%f"
MAX_EVERY_SECONDS = 100 * 366 * 86400
"""Why: `EVERY 99999999999999999999 minute` was stored, and its next run, past the calendar,
failed at every poll before the run was claimed (no history row, one server log line), while
the job stayed due and took its creator's job worker, so none of that credential's other
jobs ran again."""


def utcnow() -> datetime:
    """Now in UTC, naive (the catalog stores UTC text)."""
    return datetime.now(UTC).replace(tzinfo=None)


def stamp(moment: datetime | None) -> str | None:
    """A moment as the catalog stores it: text that sorts as time does."""
    return None if moment is None else moment.strftime(STORED)


def moment(text: str | None) -> datetime | None:
    return None if text is None else datetime.strptime(text, STORED)


def fill_templates(text: str, start: datetime, previous: datetime | None, created: datetime) -> str:
    """MindsDB's job variables (jobs_controller.__fill_variables), replaced in the text before it
    is parsed: `{{START_DATETIME}}` / `{{START_DATE}}` this run's start, and
    `{{PREVIOUS_START_DATETIME}}` the previous run's start less 60 s (MindsDB's margin for
    rows stamped late) or, on the first run, when the job was made. Left as written, a
    `created_at > '{{PREVIOUS_START_DATETIME}}'` compared text with text on SQLite: no row, silently."""
    if "{{" not in text:
        return text
    before = created if previous is None else previous - timedelta(seconds=60)
    return (text.replace("{{PREVIOUS_START_DATETIME}}", before.strftime(_DATE_FORMATS[0]))
            .replace("{{START_DATE}}", start.strftime(_DATE_FORMATS[1]))
            .replace("{{START_DATETIME}}", start.strftime(_DATE_FORMATS[0])))


def parse_date(text: str) -> datetime:
    """A START or END date: MindsDB's two forms, or ISO 8601 as MindsDB's docs/openapi.yml
    types a job's start_at / end_at (`format: date-time`, '2030-01-01T00:00:00Z'; an offset
    is turned into UTC, the time the catalog keeps). One clear line for any other form."""
    if text.strip().upper() == "NOW":
        return utcnow()
    for fmt in _DATE_FORMATS:
        try:
            return datetime.strptime(text.strip(), fmt)
        except ValueError:
            continue
    try:
        moment = datetime.fromisoformat(text.strip())
    except ValueError:
        raise SqlError(f"Can't parse date: {text!r} (use 'YYYY-MM-DD', 'YYYY-MM-DD HH:MM:SS' (UTC) or "
                       "ISO 8601 such as '2030-01-01T00:00:00Z')") from None
    return moment if moment.tzinfo is None else moment.astimezone(UTC).replace(tzinfo=None)


def parse_every(text: str) -> tuple[int, str]:
    """`[n] period` -> (n, period); the refusal names the periods MindsDB knows."""
    words = text.lower().split()
    if len(words) == 1:
        words = ["1", *words]
    if len(words) != 2 or not re.fullmatch(r"\d+", words[0]) or words[1] not in _SECONDS:
        raise SqlError(f"Can't parse EVERY {text!r}: write EVERY [number] minute | hour | day | "
                       "week | month")
    if int(words[0]) < 1:
        raise SqlError(f"EVERY {text!r}: the number must be at least 1")
    if int(words[0]) * (_SECONDS[words[1]] or 31 * 86400) > MAX_EVERY_SECONDS:
        raise SqlError(f"EVERY {text!r}: a job's period is at most 100 years")
    return int(words[0]), words[1]


def next_run(every: str, base: datetime, time_scale: float = 1.0) -> datetime:
    """The run after `base`: `base` + the period (a month is a calendar month)."""
    count, period = parse_every(every)
    seconds = _SECONDS[period]
    if seconds == 0:  # months: the calendar's, unless scaled for a test
        if time_scale == 1.0:
            from dateutil.relativedelta import relativedelta

            return base + relativedelta(months=count)
        seconds = 30 * 86400
    return base + timedelta(seconds=count * seconds * time_scale)
