"""The one insert pipeline: rows in batches are chunked, embedded and stored, in row order.

Both doors use it, with their transaction policy as a parameter (`Policy`):

- the REST insert (`PUT .../knowledge_bases/{kb}`, `client.knowledge_bases.insert`,
  embedded or one HTTP batch): `Policy.ONE_TRANSACTION`. All its batches are written in one
  write transaction: a failure or a kill anywhere leaves the state before the call (memory
  stays flat: batches are embedded one at a time inside it). Row positions
  (`original_row_index`) count across the call: the 300th row of a call is row 299 even in
  its second batch;
- `INSERT INTO kb SELECT ... USING batch_size, threads, error`: `Policy.per_batch(threads,
  skip)`. Each batch is stored in its own transaction, so a failure keeps the batches
  before it (as the reference's partitions do); positions count from 0 in each batch, as
  when that batch is inserted alone.

Why threads: nearly all the time of an insert against a remote embedding provider is
network wait, and ONNX Runtime releases the GIL too, so `threads = N` runs the embedding of
up to N batches at once (a ThreadPoolExecutor). Storing stays in the calling thread, batch
after batch in the order of the rows: the store never sees two writers, and every batch is
written exactly once, in the same order as with `threads = 1`. So ids, upserts (a later
batch replaces an earlier batch's document of the same id), the order `track_column` sets,
and what a failure leaves are those of the sequential run:

- `error = 'raise'` (the default): the first failing batch *in batch order* stops the insert
  with its error. The batches before it are stored (each was committed); it and every batch
  after it are not, even those already embedded (their vectors are dropped; batches not yet
  started are cancelled, batches embedding at that moment finish their embedding calls
  before the error is returned, and are dropped too). This is exactly what kbsql stored when
  it ran the batches one after another; MindsDB's docs only say `raise` raises "errors as
  they come" and that stopping an insert "will not remove the already inserted data".
- `error = 'skip'`: a failing batch is retried row by row (in its worker thread); rows that
  still fail are left out, counted and logged as a warning, and every other row is stored.
  A batch that fails while being *stored* (not embedded) is retried row by row in the
  calling thread. The statement's affected rows are the rows stored.

Rows whose content columns are all null/NaN/blank are skipped (logged; the client warns):
they leave any stored document of their id untouched and are not counted.

Progress: one task for the whole insert, reported to the caller's `OnProgress` only from
the calling thread (a notebook's display is never touched from worker threads): reading,
then per batch chunking (sequential runs), embedding by chunk within a batch, storing.
Each event's `committed` counts the input rows whose batch is committed: per batch, it
moves after every batch's transaction (a background insert records its PROCESSED_ROWS and
tracked value there, sql/kb/kb_background.py); in one transaction, at the end. What the
callback raises stops the insert there, as a failure of the next batch would (a cancelled
background insert stops after the batch just stored).

Model calls: the embeddings of an insert belong to no statement or request
(`interface.control.bound(None)`): a call is never cut in the middle. Before, the embedding
calls of the calling thread took the request's deadline and client (issue 39, the reverted
f2ddee7), and with `threads = N` its pool threads did not, so what an insert did depended on
its threads.

Deadline and cancellation: the caller's `watch` (the statement's or the request's `Control`)
is checked by the calling thread between batches, before each batch is stored, whatever the
threads. An insert in one transaction that must stop rolls back and stores nothing (the
statement is all or nothing: a 1.1 M-row `INSERT ... SELECT` ran 56 s past a 3 s deadline and
stored it all, issue 39); per batch, the batches committed before stay. Either way the error
(`Stopped`) says what was kept. A background insert passes its own `Control`, whose deadline
is renewed when a batch is stored (sql/kb/kb_background.py): each batch runs under the
statement deadline, and a cancel stops it before the next batch is stored.
"""

from __future__ import annotations

import logging
import threading
from collections import deque
from collections.abc import Callable, Generator, Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor, wait
from contextlib import closing, contextmanager
from dataclasses import dataclass, field
from typing import Any, ClassVar

from kbsql.engine.catalog import KbRecord, now
from kbsql.engine.faults import disk_full, kb_faults
from kbsql.engine.knowledge.service import Embedded, KnowledgeService
from kbsql.interface import progress as progress_mod
from kbsql.interface.control import Control, Stopped, bound
from kbsql.interface.errors import InsufficientStorage, Interrupted, KbsqlError
from kbsql.interface.progress import OnProgress, Reporter

log = logging.getLogger(__name__)
POLL_SECONDS = 0.1
"""How often the calling thread redraws the bar while it waits for the next batch."""
RETRYABLE = (KbsqlError, ValueError)
"""Failures `error = 'skip'` retries row by row (anything else, e.g. Ctrl-C, always stops)."""


def kept_rows(stored: int, total: int, *, whole: bool) -> str:
    """What a stopped insert left: `stored` of `total` rows. `whole`: the insert was one
    transaction (all or nothing); else batches were stored one by one."""
    if whole:
        return ("nothing stored (an insert is stored whole or not at all)" if not stored else
                f"all {stored:,} rows were stored (it stopped as they were committed)")
    if not stored:
        return "nothing stored"
    if stored < total:
        return (f"{stored:,} of {total:,} rows stored (each batch is stored on its own; run the "
                "INSERT again with USING kb_skip_existing = true to add the rest)")
    return f"all {stored:,} rows were stored"


def stopped_insert(name: str, stored: int, total: int, stop: Stopped, *, whole: bool) -> Stopped:
    """What a deadline, a client that left or a cancel left of an insert into `name`: the
    stop's reason, then `kept_rows`."""
    error = Stopped(f"{stop.reason}: insert into {name}: {kept_rows(stored, total, whole=whole)}")
    error.stored = stored
    return error


def interrupted_insert(name: str, stored: int, total: int, *, whole: bool) -> Interrupted:
    """What Ctrl-C left of an insert into `name` (`kept_rows`)."""
    return Interrupted(f"insert into {name}: {kept_rows(stored, total, whole=whole)}", stored=stored)


def full_insert(name: str, stored: int, total: int) -> InsufficientStorage:
    """A full disk stopped an insert whose batches are stored one by one: the 507 says
    exactly which rows are in (the batches before the one refused), never just "not
    stored" while earlier batches are."""
    error = InsufficientStorage(f"The disk is full: insert into {name}: "
                                f"{kept_rows(stored, total, whole=False)}. Free some space on the server")
    error.stored = stored  # information_schema.queries counts them
    return error


@dataclass(frozen=True)
class Policy:
    """How an insert commits and counts: `one_transaction` (every batch in one write
    transaction, row positions counted across the call) or per batch (a transaction and
    positions from 0 each); `threads` embedding at once; `skip` rows that keep failing."""

    one_transaction: bool = False
    threads: int = 1
    skip: bool = False

    ONE_TRANSACTION: ClassVar[Policy]

    @classmethod
    def per_batch(cls, threads: int = 1, skip: bool = False) -> Policy:
        return cls(False, threads, skip)


Policy.ONE_TRANSACTION = Policy(one_transaction=True)


@dataclass
class _Part:
    rows: list[dict[str, Any]]
    embedded: Embedded


@dataclass
class _Done:
    """What a worker made of one batch: parts to store in order, rows it had to leave out."""

    parts: list[_Part]
    failed: int = 0
    error: BaseException | None = None


@dataclass
class _Tally:
    stored: int = 0
    empty: int = 0  # rows without content (skipped by the chunker)
    failed: int = 0
    first_error: BaseException | None = None
    embedded: dict[int, float] = field(default_factory=dict)  # batch -> rows embedded so far
    committing: bool = False  # one transaction: every batch is in it, it commits now


@kb_faults  # the one transaction commits here: a full disk at COMMIT is a 507, not a fault
def insert(service: KnowledgeService, record: KbRecord, batches: Iterable[list[dict[str, Any]]],
           total_rows: int, policy: Policy, progress: OnProgress | None = None,
           before_commit: Callable[[], Any] | None = None, watch: Control | None = None) -> int:
    """Insert `batches` (lists of row dicts, `total_rows` in all) as the module docstring
    describes; returns the rows stored. Each batch is read once, when its turn to embed
    comes (an iterable that builds batches on access holds only those in flight). Ctrl-C
    raises `Interrupted` saying what was kept: in one transaction nothing (all, when it came
    as the transaction committed), per batch the batches committed before it; a full disk
    per batch raises the 507 of `full_insert`.

    `before_commit` (one transaction only) runs after the last batch is written, before the
    transaction commits: the caller's bookkeeping elsewhere (the catalog's updated_at). If
    it fails, nothing of the insert is stored; it ran after the chunks committed and a full
    catalog disk answered 507 "not stored" with every row stored.

    `watch`: the work whose deadline and cancellation stop the insert between batches (see
    the module docstring); its `Stopped` says what was kept (`stopped_insert`)."""
    if total_rows == 0:
        return 0
    if policy.skip and policy.one_transaction:
        raise ValueError("error = 'skip' retries rows in transactions of their own")
    if before_commit is not None and not policy.one_transaction:
        raise ValueError("before_commit is for an insert in one transaction")
    tally = _Tally()
    try:
        with bound(None):  # see "Model calls" above
            return _insert(service, record, batches, total_rows, policy, progress, tally, before_commit,
                           watch)
    except Stopped as exc:  # only `watch` stops it (the embedding calls belong to no work)
        stored = 0 if policy.one_transaction else tally.stored
        raise stopped_insert(record.name, stored, total_rows, exc, whole=policy.one_transaction) from None
    except Exception as exc:
        if policy.one_transaction or not (disk_full(exc) or isinstance(exc, InsufficientStorage)):
            raise
        raise full_insert(f"{record.project_name}.{record.name}", tally.stored, total_rows) from exc
    except KeyboardInterrupt as exc:
        if policy.one_transaction:
            stored = tally.stored if tally.committing else 0
        else:  # a batch interrupted as it committed counts as stored
            stored = tally.stored + (exc.stored if isinstance(exc, Interrupted) and exc.stored else 0)
        raise interrupted_insert(record.name, stored, total_rows, whole=policy.one_transaction) from exc


def _insert(service: KnowledgeService, record: KbRecord, batches: Iterable[list[dict[str, Any]]],
            total_rows: int, policy: Policy, progress: OnProgress | None, tally: _Tally,
            before_commit: Callable[[], Any] | None, watch: Control | None) -> int:
    lock = threading.Lock()
    caller = threading.get_ident()
    with Reporter(progress, f"insert into {record.name}", total_rows,
                  min_total=progress_mod.PROGRESS_MIN_ROWS) as report:
        report.update(progress_mod.READING, 0)

        def redraw(phase: str) -> None:
            if report.listening and threading.get_ident() == caller:
                with lock:  # a worker only writes a number; the calling thread reports
                    done = sum(tally.embedded.values())
                report.update(phase, done)

        def embed(index: int, rows: list[dict[str, Any]], first: int) -> _Done:
            on_embedded = None
            if report.listening:
                redraw(progress_mod.CHUNKING)

                def on_embedded(done: int, count: int) -> None:
                    with lock:
                        tally.embedded[index] = len(rows) * done / max(count, 1)
                    redraw(progress_mod.EMBEDDING)
            return _embed_batch(service, record, rows, policy, first, on_embedded)

        committed = 0  # input rows whose batch is committed
        with _writer(service, record, policy) as (writer, stamp), \
                closing(_in_order(batches, embed, policy, redraw)) as ordered:
            for index, rows, done in ordered:
                if watch is not None:  # before the batch goes in: a stop rolls back, or keeps
                    watch.check()      # the batches committed before it
                with lock:
                    tally.embedded[index] = len(rows)
                redraw(progress_mod.STORING)
                _store(service, record, done, policy.skip, tally, writer, stamp)
                committed += len(rows)
                if report.listening and not policy.one_transaction:  # this batch is in for good
                    with lock:
                        embedded = sum(tally.embedded.values())
                    report.update(progress_mod.STORING, embedded, committed)
            if before_commit is not None:
                before_commit()
            tally.committing = True
        report.update(progress_mod.STORING, total_rows, committed)  # committed
    _log(record, tally, total_rows)
    return tally.stored


@contextmanager
def _writer(service: KnowledgeService, record: KbRecord, policy: Policy) -> Iterator[tuple[Any, str | None]]:
    """(the call's open write transaction, its timestamp) with `one_transaction`, else
    (None, None): each batch then opens its own, stamped when it is stored."""
    if not policy.one_transaction:
        yield None, None
        return
    with service.handle(record).write() as writer:
        yield writer, now()


def _log(record: KbRecord, tally: _Tally, total: int) -> None:
    if tally.empty:  # the client tells its user
        log.info("insert into %s: %d of %d rows had no content and were skipped; stored documents "
                 "with their ids were kept", record.name, tally.empty, total)
    if tally.failed:
        log.warning("insert into %s with error = 'skip': %d of %d rows failed and were left out "
                    "(first error: %s); %d rows stored", record.name, tally.failed, total,
                    tally.first_error, tally.stored)


Embed = Callable[[int, list[dict[str, Any]], int], _Done]
"""(batch index, its rows, the position of its first row) -> the batch embedded."""


Ordered = Generator[tuple[int, list[dict[str, Any]], _Done], None, None]


def _in_order(batches: Iterable[list[dict[str, Any]]], embed: Embed, policy: Policy,
              redraw: Callable[[str], None]) -> Ordered:
    """(index, rows, embedded batch) in batch order; at most `threads` batches embed at once
    and at most 2 x `threads` wait to be stored (memory stays bounded). An error of a batch
    is raised when its turn comes, after every batch before it was handed out; once a batch
    has failed no new batch is started, and pending ones are cancelled when it is raised."""
    positions = _positions(batches, policy.one_transaction)
    if policy.threads <= 1:
        for index, rows, first in positions:
            redraw(progress_mod.EMBEDDING)
            yield index, rows, embed(index, rows, first)
        return
    pool = ThreadPoolExecutor(max_workers=policy.threads, thread_name_prefix="kbsql-embed")
    pending: deque[tuple[int, list[dict[str, Any]], Future[_Done]]] = deque()
    try:
        for index, rows, first in positions:
            pending.append((index, rows, pool.submit(embed, index, rows, first)))
            if len(pending) >= 2 * policy.threads:
                break
        while pending:
            index, rows, future = pending.popleft()
            redraw(progress_mod.EMBEDDING)
            while not wait([future], timeout=POLL_SECONDS).done:
                redraw(progress_mod.EMBEDDING)
            done = future.result()  # raises the batch's error (error = 'raise')
            doomed = any(f.done() and not f.cancelled() and f.exception() is not None for *_, f in pending)
            for index2, rows2, first2 in positions if not doomed else ():  # keep the pool busy meanwhile
                pending.append((index2, rows2, pool.submit(embed, index2, rows2, first2)))
                break
            yield index, rows, done
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


def _positions(batches: Iterable[list[dict[str, Any]]],
               across: bool) -> Iterator[tuple[int, list[dict[str, Any]], int]]:
    """(index, rows, position of its first row): counted across the call, or 0 per batch."""
    first = 0
    for index, rows in enumerate(batches):
        yield index, rows, first if across else 0
        first += len(rows)


def _embed_batch(service: KnowledgeService, record: KbRecord, rows: list[dict[str, Any]], policy: Policy,
                 first: int, on_embedded: Callable[[int, int], None] | None) -> _Done:
    try:
        return _Done([_Part(rows, service.embed_rows(record, rows, on_embedded, first))])
    except RETRYABLE as exc:
        if not policy.skip:
            raise
        log.info("insert batch failed (%s); retrying its rows one by one", type(exc).__name__)
        done = _Done([], 0, exc)
        for row in rows:
            try:
                done.parts.append(_Part([row], service.embed_rows(record, [row])))
            except RETRYABLE as row_exc:
                done.failed += 1
                done.error = done.error or row_exc
        return done


def _store(service: KnowledgeService, record: KbRecord, done: _Done, skip: bool, tally: _Tally,
           writer: Any, stamp: str | None) -> None:
    """Store a worker's parts in order (calling thread only), into the call's transaction
    (`writer`) or each in its own; with `error = 'skip'` a part the store refuses is retried
    row by row."""
    tally.failed += done.failed
    if done.failed:
        tally.first_error = tally.first_error or done.error
    for part in done.parts:
        try:
            tally.stored += service.store_embedded(record, part.embedded, writer, stamp)
            tally.empty += part.embedded.skipped
            continue
        except RETRYABLE as exc:
            if not skip:
                raise
            if len(part.rows) == 1:
                tally.failed += 1
                tally.first_error = tally.first_error or exc
                continue
        for row in part.rows:
            try:
                one = service.embed_rows(record, [row])
                tally.stored += service.store_embedded(record, one)
                tally.empty += one.skipped
            except RETRYABLE as row_exc:
                tally.failed += 1
                tally.first_error = tally.first_error or row_exc
