"""`INSERT INTO kb SELECT ... USING batch_size, threads, error`: batches embedded in parallel,
stored one at a time in batch order.

Why split: nearly all the time of an insert against a remote embedding provider is network
wait, and ONNX Runtime releases the GIL too, so `threads = N` runs the embedding of up to N
batches at once (a ThreadPoolExecutor). Storing stays in the calling thread, batch after
batch in the order of the rows, each batch in its own transaction: the store never sees two
writers, and every batch is written exactly once, in the same order as with `threads = 1`.
So ids, upserts (a later batch replaces an earlier batch's document of the same id), the
order `track_column` sets, and what a failure leaves are those of the sequential run:

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

Progress: one bar for the whole insert (`interface.progress`), updated only from the calling
thread (a notebook's display is not touched from worker threads): it moves as batches are
embedded, by chunk within a batch, and says `storing` while a batch is written.
"""

from __future__ import annotations

import logging
import threading
from collections import deque
from collections.abc import Callable, Generator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor, wait
from contextlib import closing
from dataclasses import dataclass, field
from typing import Any

from kbsql.engine.catalog import KbRecord
from kbsql.engine.knowledge.service import Embedded, KnowledgeService
from kbsql.interface import progress as progress_mod
from kbsql.interface.errors import KbsqlError

log = logging.getLogger(__name__)
POLL_SECONDS = 0.1
"""How often the calling thread redraws the bar while it waits for the next batch."""
RETRYABLE = (KbsqlError, ValueError)
"""Failures `error = 'skip'` retries row by row (anything else, e.g. Ctrl-C, always stops)."""


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
    empty: int = 0  # rows without content (skipped by the chunker, as `insert` does)
    failed: int = 0
    first_error: BaseException | None = None
    embedded: dict[int, float] = field(default_factory=dict)  # batch -> rows embedded so far


def insert_batches(service: KnowledgeService, record: KbRecord, batches: Sequence[list[dict[str, Any]]],
                   *, threads: int = 1, skip: bool = False,
                   progress: bool | progress_mod.ProgressFactory | None = None,
                   total_rows: int | None = None,
                   on_stored: Callable[[int], None] | None = None) -> int:
    """Insert `batches` (lists of row dicts) as described in the module docstring; returns the
    rows stored. `threads` workers embed (1: no pool, everything in the calling thread).
    Each batch is read once, when its turn to embed comes (a sequence that builds batches on
    access then holds only those in flight); `total_rows`, when known, saves counting them.
    `on_stored(i)` runs in the calling thread once batch i is committed; what it raises
    stops the insert there (a background insert's progress and cancel, kb_background.py)."""
    total = total_rows if total_rows is not None else sum(len(b) for b in batches)
    if total == 0:
        return 0
    tally = _Tally()
    bar = progress_mod.open_progress(f"insert into {record.name}", total, progress=progress)
    lock = threading.Lock()
    with progress_mod.Finishing(bar):
        if bar is not None:
            bar.update(progress_mod.READING, 0, total)
        caller = threading.get_ident()

        sizes: dict[int, int] = {}

        def embed(index: int, rows: list[dict[str, Any]]) -> _Done:
            sizes[index] = len(rows)
            on_embedded = None
            if bar is not None:
                def on_embedded(done: int, count: int) -> None:
                    with lock:  # a worker only writes a number; the calling thread draws
                        tally.embedded[index] = len(rows) * done / max(count, 1)
                    if threading.get_ident() == caller:
                        redraw(progress_mod.EMBEDDING)
            return _embed_batch(service, record, rows, skip, on_embedded)

        def redraw(phase: str) -> None:
            if bar is not None:
                with lock:
                    done = sum(tally.embedded.values())
                bar.update(phase, done, total)

        with closing(_in_order(batches, embed, threads, redraw)) as ordered:
            for index, done in ordered:
                with lock:
                    tally.embedded[index] = sizes[index]
                redraw(progress_mod.STORING)
                _store(service, record, done, skip, tally)
                if on_stored is not None:
                    on_stored(index)
        if bar is not None:
            bar.update(progress_mod.STORING, total, total)
    if tally.empty:
        log.info("insert into %s: %d of %d rows had no content and were skipped; stored documents "
                 "with their ids were kept", record.name, tally.empty, total)
    if tally.failed:
        log.warning("insert into %s with error = 'skip': %d of %d rows failed and were left out "
                    "(first error: %s); %d rows stored", record.name, tally.failed, total,
                    tally.first_error, tally.stored)
    return tally.stored


def _in_order(batches: Sequence[list[dict[str, Any]]], embed: Callable[[int, list[dict[str, Any]]], _Done],
              threads: int, redraw: Callable[[str], None]) -> Generator[tuple[int, _Done], None, None]:
    """(index, embedded batch) in batch order; at most `threads` batches embed at once and at
    most 2 x `threads` wait to be stored (memory stays bounded). An error of a batch is
    raised when its turn comes, after every batch before it was handed out; once a batch
    has failed no new batch is started, and pending ones are cancelled when it is raised."""
    if threads <= 1 or len(batches) <= 1:
        for index, rows in enumerate(batches):
            redraw(progress_mod.EMBEDDING)
            yield index, embed(index, rows)
        return
    pool = ThreadPoolExecutor(max_workers=threads, thread_name_prefix="kbsql-embed")
    pending: deque[tuple[int, Future[_Done]]] = deque()
    upcoming = iter(enumerate(batches))
    try:
        for index, rows in upcoming:
            pending.append((index, pool.submit(embed, index, rows)))
            if len(pending) >= 2 * threads:
                break
        while pending:
            index, future = pending.popleft()
            redraw(progress_mod.EMBEDDING)
            while not wait([future], timeout=POLL_SECONDS).done:
                redraw(progress_mod.EMBEDDING)
            done = future.result()  # raises the batch's error (error = 'raise')
            doomed = any(f.done() and not f.cancelled() and f.exception() is not None for _, f in pending)
            for index2, rows in upcoming if not doomed else ():  # keep the pool busy meanwhile
                pending.append((index2, pool.submit(embed, index2, rows)))
                break
            yield index, done
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


def _embed_batch(service: KnowledgeService, record: KbRecord, rows: list[dict[str, Any]], skip: bool,
                 on_embedded: Callable[[int, int], None] | None) -> _Done:
    try:
        return _Done([_Part(rows, service.embed_rows(record, rows, on_embedded))])
    except RETRYABLE as exc:
        if not skip:
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


def _store(service: KnowledgeService, record: KbRecord, done: _Done, skip: bool, tally: _Tally) -> None:
    """Store a worker's parts in order (calling thread only); with `error = 'skip'` a part the
    store refuses is retried row by row."""
    tally.failed += done.failed
    if done.failed:
        tally.first_error = tally.first_error or done.error
    for part in done.parts:
        try:
            tally.stored += service.store_embedded(record, part.embedded)
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
