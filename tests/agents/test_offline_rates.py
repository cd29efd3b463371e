"""The offline agent over knowledge bases embedded by other models (issue #36): it judges
passages with its own sentence model, so a hash-384 knowledge base's right answer is quoted;
the best-answering sentence comes first; a follow-up borrows the conversation's subject; and
over the HELD-OUT question set (benchmarks/offline_agent/heldout.json, never tuned on) it
keeps its measured rates. The knowledge bases are the benchmark's own
(benchmarks/bench_offline_agent.py), with 128 of the notebook's tickets (every product and
complaint)."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

import kbsql
from kbsql.engine.models import minilm

pytestmark = pytest.mark.skipif(not minilm.available(), reason="the bundled sentence model is not installed")

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
import bench_offline_agent as bench  # noqa: E402

sys.path.pop(0)


@pytest.fixture(scope="module")
def client(tmp_path_factory: pytest.TempPathFactory) -> Iterator[kbsql.Client]:
    client = kbsql.connect(data_dir=tmp_path_factory.mktemp("rates"))
    bench.build(client, tickets=128, skip=bench.NEWEST)  # heldout6's: the benchmark measures them
    yield client
    client.close()


def cited(answer: str) -> list[str]:
    """The chunk ids an answer cites, in the order it quotes them."""
    body = answer.split("\n\nSources:", 1)[0]
    return [part.split("]", 1)[0] for part in body.split("[")[1:]]


def test_a_hash_384_knowledge_base_right_answer_is_quoted(client) -> None:
    """Its top hit "Gift wrap requested" (relevance 0.65 under hash-384) used to be refused as
    as nothing that answers; the note is the answer, quoted with its row's citation."""
    answer = bench.ask(client, "orders_agent", ["Which order asked for gift wrap?"])
    assert answer.startswith("Gift wrap requested [1:content:"), answer
    assert "Nothing in" not in answer


def test_the_answering_sentence_comes_first(client) -> None:
    """The quickstart's question: `break` answers it, `continue` only looks like it; and its
    answer "It terminates the nearest enclosing loop" comes after the sentence that says what
    "it" is (it used to open the answer alone)."""
    for agent in ("python_docs_agent", "python_hash_agent"):
        answer = bench.ask(client, agent, ["how do I leave a loop early?"])
        assert cited(answer)[0].startswith("break:content:"), answer
        first = answer.split(" [", 1)[0]
        assert first.startswith('"break" may only occur') and \
            'loop. It terminates the nearest enclosing loop' in first, answer


def test_a_follow_up_borrows_the_subject_and_still_refuses_what_nothing_answers(client) -> None:
    """The CSV notebook's conversation: the follow-up names only the product, the refunds come
    from the first question; a follow-up the tickets do not answer is refused, not answered
    with the first question's refunds."""
    first = "What do customers say about refunds?"
    answer = bench.ask(client, "tickets_kb_agent", [first, "And which of them are about a coffee machine?"])
    quoted = answer.split("\n\nSources:", 1)[0]
    assert "coffee machine" in quoted and "refund" in quoted.lower(), answer
    refused = bench.ask(client, "tickets_kb_agent", [first, "And what is the shop's phone number?"])
    assert refused.startswith("Nothing in tickets_kb answers this question"), refused


def test_a_sentence_near_the_topic_without_the_asked_fact_is_not_an_answer(client) -> None:
    """A price is asked, the note only names the shipping; a person is asked, the sentence only
    names Python, a weight is asked, the sentences give only a charger's amps and a range: the
agent refuses (it used to quote them). The same knowledge bases still
    answer what they hold, a number for "how long" among them."""
    refused = bench.ask(client, "orders_agent", ["What does express shipping cost?"])
    assert refused.startswith("Nothing in orders answers this question"), refused
    assert bench.ask(client, "orders_agent", ["Which order arrives the next day?"]).startswith(
        "Express shipping, arrives next day [5:content:")
    who = bench.ask(client, "python_hash_agent", ["who created the Python language?"])
    assert who.startswith("Nothing in python_hash answers this question"), who
    lasts = bench.ask(client, "manual_agent", ["How long do the batteries last?"])
    assert "eighteen months" in lasts.split("\n\nSources:", 1)[0], lasts
    heavy = bench.ask(client, "bike_agent", ["How heavy is the Volta C2?"])  # a weight, not "4 A"
    assert heavy.startswith("Nothing in bike answers this question"), heavy


def test_an_amount_quoted_for_another_thing_is_not_an_answer(client) -> None:
    """A price asked of one thing, the passages giving another thing's: "a replacement library
    card" was answered with a lost item's 5-euro fee, "the Standard plan" with a guest pass's
    price (heldout4/5.json). Both are refused; an amount asked of what the sentence or its
    passage names is still quoted, the knowledge base's own subject ("the gym" of `gym`)
    needing no sentence to name it (offline_subject.py)."""
    card = bench.ask(client, "library_agent", ["How much does a replacement library card cost?"])
    assert card.startswith("Nothing in library answers this question"), card
    plan = bench.ask(client, "gym_agent", ["How much does the Standard plan cost per month?"])
    assert plan.startswith("Nothing in gym answers this question"), plan
    lost = bench.ask(client, "library_agent", ["How much is charged for a lost book?"])
    assert "replacement price" in lost.split("\n\nSources:", 1)[0], lost
    close = bench.ask(client, "gym_agent", ["When does the gym close on weekdays?"])
    assert "10 pm" in close.split("\n\nSources:", 1)[0], close


def test_a_question_in_other_words_than_its_answer_is_answered(client) -> None:
    """A user asks in their own words: "bike" for the guide's "Bicycle racks", "too fast" for
    "If it runs faster"; both were refused as nothing that answers (heldout5.json), since a
    sentence near the question counts the words it names by a near-synonym."""
    bike = bench.ask(client, "gym_agent", ["Where can I leave my bike?"])
    assert bike.startswith("Bicycle racks are by the main entrance."), bike
    fast = bench.ask(client, "espresso_agent", ["My espresso runs through too fast, what do I do?"])
    assert "If it runs faster, grind finer" in fast.split("\n\nSources:", 1)[0], fast


def test_a_question_whose_words_no_passage_holds_is_answered_when_a_close_sentence_says_them(client) -> None:
    """"miss a class I booked": no retrieved passage says "miss", and no single word of the
    sentence is a near-synonym of it, so it was refused (heldout5.json); the no-show sentence is
    close to the question, and the question without "miss" is no closer to it, so it is
    quoted. A word that names a thing the text lacks still refuses: "8K" (a number-like word is
    never said otherwise) and "GPS" (dropping it brings the question nearer the battery's
    sentence); offline_evidence._said_otherwise."""
    miss = bench.ask(client, "gym_agent", ["What happens if I miss a class I booked?"])
    assert "no-show" in miss.split("\n\nSources:", 1)[0], miss
    for question in ("Can the K5 record in 8K?", "Does the K5 have GPS?"):
        answer = bench.ask(client, "camera_agent", [question])
        assert answer.startswith("Nothing in camera answers this question"), answer


def rates_of(client: kbsql.Client, items: list[dict]) -> tuple[dict, str]:
    """The rates over held-out items, the Python questions asked of the hash-384 knowledge
    base only (the other model's case, and half the time), and its misses as text."""
    result = bench.run(client, items, {**bench.AGENTS, "python": ["python_hash"]})
    misses = "\n".join(f"{m['verdict']} {m['kb']} {m['turns']}: {m['answer'][:200]}"
                       for m in result["misses"])
    return result, misses


@pytest.mark.slow  # about 40 conversations: a minute on an idle machine
def test_the_held_out_rates(client) -> None:
    """Over the held-out set, the Python questions asked of the hash-384 knowledge base only
    (the other model's case, and half the time): the issue's targets, answered-right >= 0.9,
    wrongly-refused <= 0.05 and wrongly-answered <= 0.1 (0.938 / 0.0 / 0.0 on the whole set
    with 1,000 tickets since a referring sentence brings the one before it, 0.875 before:
    benchmarks/results/offline_agent.json)."""
    result, misses = rates_of(client, bench.items("heldout"))
    assert result["answered_right"] >= 0.9, misses
    assert result["wrongly_refused"] <= 0.05, misses
    assert result["wrongly_answered"] <= 0.1, misses


@pytest.mark.slow  # about 30 conversations
def test_the_fourth_held_out_rates(client) -> None:
    """Every other item of the fourth held-out set (benchmarks/offline_agent/heldout4.json,
    tuning data since heldout5.json was written, which the benchmark alone measures), "Does
    the K5 have GPS?" (refused: no passage names GPS, and "The K5 has a removable battery"
    used to be quoted) and "How many languages does voice control understand?" (answered by
    "eleven languages", it used to be refused as a count) among them: the issue's targets,
    answered-right >= 0.9, wrongly-refused <= 0.05, wrongly-answered <= 0.1 (the whole set:
    0.964 / 0.0 / 0.042 since the specific-words check of offline_specific.py, 0.821 / 0.107
    / 0.5 before; benchmarks/results/offline_agent.json)."""
    sample = bench.items("heldout4")[::2]
    assert {"Does the K5 have GPS?", "How many languages does voice control understand?"} <= \
        {i["turns"][-1] for i in sample}
    result, misses = rates_of(client, sample)
    assert result["answered_right"] >= 0.9, misses
    assert result["wrongly_refused"] <= 0.05, misses
    assert result["wrongly_answered"] <= 0.1, misses
