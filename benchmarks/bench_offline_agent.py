"""How often the offline agent (no LLM) answers right, refuses wrongly, answers wrongly
(issue #36 item 2), over the question set of benchmarks/offline_agent/: tune.json (the rules
may be set on it; heldout2.json to heldout8.json became tuning data once seen), heldout.json
and heldout27.json (each written before a round of tuning, never tuned on, reported apart;
heldout9.json to heldout26.json became tuning data once seen). A run of every part also
reports `seen`, the rates over the union of all parts but heldout27.json
(heldout.json, measured every round, among them): the figure a round's tuning moves, beside
the one set it has not seen.

An answerable item is *answered right* when the answer quotes a sentence holding one of its
`expect` strings (and, with `"first": true`, that sentence comes first), *wrongly refused*
when the agent says nothing answers; an unanswerable item is *wrongly answered* when the
agent quotes anything. The Python questions are asked of two knowledge bases of the same
topics, one embedded with the bundled model and one with hash-384: the agent's judgement must
not depend on which model embedded the data; the thermostat manual of heldout2 is embedded with
multilingual-e5-small (hash-384 where its package is not installed), and so is heldout3's e-bike
guide and heldout4's camera guide; the staff handbook (heldout3), the library guide
(heldout4) and the gym's member guide (heldout5) are embedded with hash-384, heldout5's espresso
machine manual with the bundled model; heldout6's parcel-locker FAQ with multilingual-e5-small
(hash-384 where its package is not installed), its travel guide with the bundled model;
heldout7's recipe collection with hash-384, its release notes with the bundled model; heldout8's
council waste rules with hash-384, its insurance policy with the bundled model; heldout9's museum
visitor information with hash-384, its SaaS billing help pages with the bundled model; heldout10's
dental practice patient information with the bundled model, its co-working space's house rules and
prices (bullet lines) with hash-384; heldout11's airline FAQ (Q:/A: lines) with hash-384, its
campsite's prices and rules (table-like '|' rows) with the bundled model; heldout12's vet
price list ('Item: price' lines) with hash-384, its fitness studio's timetable and terms ('Day -
Time - Class' lines, numbered clauses) with the bundled model; heldout13's bike-hire shop ('Item - price' and
'Item: price' lines under short headings) with hash-384, its community centre (rooms, rates and term
dates as short unpunctuated lines) with the bundled model; heldout14's car garage (a FAQ of
unlabelled question lines, one-line answers and 'Note:' lines) with hash-384, its school's rules
(numbered clauses '3.2 A phone ...') with the bundled model; heldout15's washing machine
troubleshooting guide ('Symptom: / Cause: / Fix:' lines, an error-code list) with hash-384, its
apartment building's house rules (short unpunctuated lines) and landlord's email replies with the
bundled model; heldout16's budgeting app release notes ('Added: / Fixed: / Changed:' lines, 'Problem: /
Workaround:' pairs) with hash-384, its cataract patient leaflet (question headings restating a symptom, a
paragraph answering each) with the bundled model; heldout17's bicycle repair shop FAQ (casual first-person
prose paragraphs) with hash-384, its swimming pool's membership terms (legal wording, capitalised defined
terms) and timetable (one line a day of comma-separated 'time activity' entries) with the bundled model;
heldout18's university library loan rules (a pipe-separated entitlements table, rules with limits as ranges)
with hash-384, its weather API's pricing and rate-limit page (Markdown bullets, headers in backticks) with the
bundled model; heldout19's self-hosted app README (Markdown headings, a fenced code block, bold-labelled
bullets, a pipe table of settings) with hash-384, its climbing wall's prices and FAQ page (a pipe price table,
'### ' question headings, bullets) with the bundled model; heldout20's school trip permission letter (long
prose paragraphs, no headings) with hash-384, its pharmacy's repeat-prescription page (Markdown: a numbered
list, a pipe table without outer pipes, a '> ' note) with the bundled model; heldout21's community garden plot
rules (CAPITALS heading lines, prose paragraphs, a 'date - event' list) with hash-384, its tool library's
borrowing rules (Markdown: setext headings, a pipe table with alignment colons, a '1)' list) with the bundled
model; heldout22's language school terms ('(a)' / '(b)' clauses inside sentences, '[1]' notes) with hash-384,
its vet's vaccination guide (Markdown: closed ATX headings, pipe tables, nested bullets, a footnote) with the
bundled model; heldout23's bike-share terms (';'-joined clauses, a fare list in space-aligned
columns) with hash-384, its library's printing and Maker Lab policy (Markdown: a pipe price table,
'*' bullets with sub-bullets indented four spaces, a '1.' list with nested bullets, a '> ' note)
with the bundled model; heldout24's car-hire rental agreement (run-in CAPITALS headings, a charges list
joined by dot leaders) with hash-384, its school's term dates and uniform policy (Markdown: a pipe table
of dates, '- ' bullets, bold run-in labels, bold question lines) with the bundled model; heldout25's
hotel guest directory (A-to-Z 'Term - text' lines, a tab-separated hours table) with hash-384, its dog
day care's handbook (Markdown: a '- [ ]' task list, a pipe price table, 'Term' / ': definition' lines)
with the bundled model; heldout26's holiday cottage house book (underlined headings, an ASCII grid table,
'o ' bullets) with hash-384, its bakery's cake ordering page (Markdown: a pipe price table, bold run-in
terms, '✅' / '❌' check lists) with the bundled model; heldout27's self-storage FAQ (reStructuredText:
over- and underlined titles, a field list, a simple table with '=====  =====' borders, a '.. note::'
directive) with the bundled model, its children's football club's pinned group chat ('[dd/mm hh:mm] Name:
message' lines) with hash-384. Each part
also reports the seconds one answer takes (the agent's whole stream, median and slowest); `--cost`
measures only that, in wall and process CPU seconds (CPU is what the method costs; wall moves with the
machine's load), over tune.json's single-turn Python questions asked of python_docs.

    PYTHONPATH=src python benchmarks/bench_offline_agent.py [--label before] [--tickets 1000]

writes benchmarks/results/offline_agent.json (one entry per label).
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import kbsql
from kbsql import quickstart
from kbsql.engine.models import e5
from kbsql.engine.models.chat.offline import SWITCH_HINT
from kbsql.interface.stream import chunk_kind

HERE = Path(__file__).resolve().parent
SET = HERE / "offline_agent"
RESULTS = HERE / "results" / "offline_agent.json"
NOTHING = "answers this question"
HASH = '{"provider": "kbsql", "model_name": "hash-384"}'
E5 = '{"provider": "kbsql", "model_name": "multilingual-e5-small"}'
AGENTS = {"python": ["python_docs", "python_hash"], "tickets": ["tickets_kb"], "orders": ["orders"],
          "manual": ["manual"], "handbook": ["handbook"], "bike": ["bike"],
          "library": ["library"], "camera": ["camera"], "gym": ["gym"], "espresso": ["espresso"],
          "parcels": ["parcels"], "travel": ["travel"],
          "recipes": ["recipes"], "changelog": ["changelog"],
          "waste": ["waste"], "insurance": ["insurance"],
          "museum": ["museum"], "billing": ["billing"],
          "dental": ["dental"], "cowork": ["cowork"],
          "airline": ["airline"], "campsite": ["campsite"],
          "vets": ["vets"], "studio": ["studio"],
          "cyclehire": ["cyclehire"], "centre": ["centre"],
          "garage": ["garage"], "school": ["school"],
          "washer": ["washer"], "flats": ["flats"],
          "budget": ["budget"], "eyeclinic": ["eyeclinic"],
          "bikefix": ["bikefix"], "pool": ["pool"],
          "unilib": ["unilib"], "skyapi": ["skyapi"],
          "pagekeep": ["pagekeep"], "cragwall": ["cragwall"],
          "schooltrip": ["schooltrip"], "pharmacy": ["pharmacy"],
          "allotments": ["allotments"], "toollib": ["toollib"],
          "langschool": ["langschool"], "petjabs": ["petjabs"],
          "bikeshare": ["bikeshare"], "printlab": ["printlab"],
          "carhire": ["carhire"], "termdates": ["termdates"],
          "hotel": ["hotel"], "doggydays": ["doggydays"],
          "cottage": ["cottage"], "cakes": ["cakes"],
          "storage": ["storage"], "juniors": ["juniors"]}
"""Which knowledge bases (one agent each) an item's `kb` is asked of."""


def notebook_tickets(count: int = 1000) -> list[dict[str, Any]]:
    """The tickets notebooks/search-your-own-csv.ipynb writes, read from the notebook itself
    (its first code cell builds `rows`), so the set asks about the data the notebook shows."""
    cell = json.loads((HERE.parent / "notebooks" / "search-your-own-csv.ipynb").read_text())["cells"][1]
    source = "".join(cell["source"])
    code = source[source.index("products = "):source.index("pd.DataFrame(rows)")]
    scope: dict[str, Any] = {}
    exec(code.replace("range(1000)", f"range({count})"), scope)  # our own notebook's code
    return scope["rows"]


NEWEST = ("parcels", "travel", "recipes", "changelog", "waste", "insurance", "museum", "billing",
          "dental", "cowork", "airline", "campsite", "vets", "studio", "cyclehire", "centre",
          "garage", "school", "washer", "flats", "budget", "eyeclinic", "bikefix", "pool", "unilib", "skyapi",
          "pagekeep", "cragwall", "schooltrip", "pharmacy", "allotments", "toollib", "langschool", "petjabs",
          "bikeshare", "printlab", "carhire", "termdates", "hotel", "doggydays", "cottage", "cakes",
          "storage", "juniors")
"""The knowledge bases only heldout6.json to heldout27.json ask: the rates tests build the
others alone, so the newest sets cost them no time (the benchmark alone measures them)."""


def build(client: kbsql.Client, tickets: int = 1000, skip: tuple[str, ...] = ()) -> None:
    """The knowledge bases of offline_agent/kbs.json and one offline agent over each, but those
    in `skip`."""
    docs = quickstart.documents()
    client.sql("CREATE KNOWLEDGE_BASE python_docs USING metadata_columns = ['topic']")
    client.knowledge_bases.insert("python_docs", docs, progress=False)
    client.sql(f"CREATE KNOWLEDGE_BASE python_hash USING embedding_model = {HASH}, "
               "metadata_columns = ['topic']")
    client.knowledge_bases.insert("python_hash", docs, progress=False)
    client.sql("CREATE KNOWLEDGE_BASE tickets_kb USING content_columns = ['text'], "
               "metadata_columns = ['category', 'priority'], id_column = 'ticket_id'")
    client.knowledge_bases.insert("tickets_kb", notebook_tickets(tickets), progress=False)
    client.sql(f"CREATE KNOWLEDGE_BASE orders USING embedding_model = {HASH}, "
               "metadata_columns = ['customer']")
    data = json.loads((SET / "kbs.json").read_text())
    client.knowledge_bases.insert("orders", data["orders"], progress=False)
    model = E5 if e5.available() and e5.cpu_can_run() else HASH
    # the written knowledge bases, all but the espresso manual embedded by a model other than the default
    for name, embedder in (("manual", model), ("handbook", HASH), ("bike", model), ("library", HASH),
                           ("camera", model), ("gym", HASH), ("espresso", None), ("parcels", model),
                           ("travel", None), ("recipes", HASH), ("changelog", None), ("waste", HASH),
                           ("insurance", None), ("museum", HASH), ("billing", None),
                           ("dental", None), ("cowork", HASH),
                           ("airline", HASH), ("campsite", None), ("vets", HASH), ("studio", None),
                           ("cyclehire", HASH), ("centre", None), ("garage", HASH), ("school", None),
                           ("washer", HASH), ("flats", None), ("budget", HASH), ("eyeclinic", None),
                           ("bikefix", HASH), ("pool", None), ("unilib", HASH), ("skyapi", None),
                           ("pagekeep", HASH), ("cragwall", None),
                           ("schooltrip", HASH), ("pharmacy", None),
                           ("allotments", HASH), ("toollib", None),
                           ("langschool", HASH), ("petjabs", None),
                           ("bikeshare", HASH), ("printlab", None),
                           ("carhire", HASH), ("termdates", None),
                           ("hotel", HASH), ("doggydays", None),
                           ("cottage", HASH), ("cakes", None),
                           ("storage", None), ("juniors", HASH)):
        if name in skip:
            continue
        using = f"embedding_model = {embedder}, " if embedder else ""  # None: the bundled model
        client.sql(f"CREATE KNOWLEDGE_BASE {name} USING {using}metadata_columns = ['section']")
        client.knowledge_bases.insert(name, data[name], progress=False)
    for kbs in AGENTS.values():
        for kb in (k for k in kbs if k not in skip):
            client.agents.create(f"{kb}_agent", data={"knowledge_bases": [f"mindsdb.{kb}"]})


def ask(client: kbsql.Client, agent: str, turns: list[str], seconds: list[float] | None = None) -> str:
    """The answer to the last of `turns`, the earlier ones asked first as the conversation;
    each answer's wall time is appended to `seconds`."""
    history: list[dict[str, str]] = []
    text = ""
    for question in turns:
        started = time.perf_counter()
        out = [c["output"] for c in client.agents.stream(agent, question, history=history)
               if chunk_kind(c) == "output"]
        if seconds is not None:
            seconds.append(time.perf_counter() - started)
        text = out[-1].split(SWITCH_HINT)[0].strip() if out else ""
        history.append({"question": question, "answer": text})
    return text


def judge(item: dict[str, Any], answer: str) -> str:
    """One of right, refused, wrong (answerable); right, wrong (unanswerable)."""
    refused = NOTHING in answer or "Sources:" not in answer
    expect = item.get("expect")
    if not expect:
        return "right" if refused else "wrong"
    if refused:
        return "refused"
    body = answer.split("\n\nSources:", 1)[0].lower()
    hits = [body.find(e.lower()) for e in expect if e.lower() in body]
    if not hits:
        return "wrong"
    if item.get("first") and min(hits) > body.find("[") >= 0:  # the answer is not the first sentence
        return "wrong"
    return "right"


def run(client: kbsql.Client, items: list[dict[str, Any]],
        agents: dict[str, list[str]] = AGENTS) -> dict[str, Any]:
    """The rates over `items`, and each miss (question, knowledge base, verdict, answer);
    `agents`: which knowledge bases each item's `kb` is asked of."""
    counts = {"answerable": 0, "right": 0, "refused": 0, "unanswerable": 0, "wrong_answered": 0}
    misses = []
    seconds: list[float] = []
    for item in items:
        for kb in agents[item["kb"]]:
            answer = ask(client, f"{kb}_agent", item["turns"], seconds)
            verdict = judge(item, answer)
            if item.get("expect"):
                counts["answerable"] += 1
                counts["right"] += verdict == "right"
                counts["refused"] += verdict == "refused"
            else:
                counts["unanswerable"] += 1
                counts["wrong_answered"] += verdict == "wrong"
            if verdict != "right":
                misses.append({"kb": kb, "turns": item["turns"], "verdict": verdict, "answer": answer[:400]})
    seconds.sort()
    timing = {"answers": len(seconds), "median": round(seconds[len(seconds) // 2], 2) if seconds else 0.0,
              "slowest": round(seconds[-1], 2) if seconds else 0.0}
    return {**rates(counts), "answer_seconds": timing, "counts": counts, "misses": misses}


def cost(client: kbsql.Client) -> dict[str, Any]:
    """Median wall and process-CPU seconds per answer, the models loaded by one answer first."""
    questions = [i["turns"] for i in items("tune") if i["kb"] == "python" and len(i["turns"]) == 1]
    ask(client, "python_docs_agent", questions[0])
    wall, cpu = [], []
    for turns in questions:
        started, used = time.perf_counter(), time.process_time()
        ask(client, "python_docs_agent", turns)
        wall.append(time.perf_counter() - started)
        cpu.append(time.process_time() - used)
    return {"answers": len(questions), "wall_median": round(statistics.median(wall), 2),
            "cpu_median": round(statistics.median(cpu), 2)}


def rates(counts: dict[str, int]) -> dict[str, float]:
    answerable, unanswerable = max(counts["answerable"], 1), max(counts["unanswerable"], 1)
    return {"answered_right": round(counts["right"] / answerable, 3),
            "wrongly_refused": round(counts["refused"] / answerable, 3),
            "wrongly_answered": round(counts["wrong_answered"] / unanswerable, 3)}


PARTS = ("tune", "heldout", "heldout2", "heldout3", "heldout4", "heldout5", "heldout6", "heldout7",
         "heldout8", "heldout9", "heldout10", "heldout11", "heldout12",
         "heldout13", "heldout14", "heldout15", "heldout16", "heldout17", "heldout18",
         "heldout19", "heldout20", "heldout21", "heldout22", "heldout23", "heldout24",
         "heldout25", "heldout26", "heldout27")
UNSEEN = ("heldout27",)
"""The parts never measured before the round that tunes on the others: kept out of `seen`."""


def seen(result: dict[str, Any]) -> dict[str, Any] | None:
    """The rates over the union of every seen part (all of PARTS but UNSEEN), None unless
    the run measured them all."""
    parts = [p for p in PARTS if p not in UNSEEN]
    if not all(p in result for p in parts):
        return None
    counts = {k: sum(result[p]["counts"][k] for p in parts) for k in result[parts[0]]["counts"]}
    return {**rates(counts), "counts": counts}


def items(part: str) -> list[dict[str, Any]]:
    return json.loads((SET / f"{part}.json").read_text())["items"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--label", default="after", help="the entry of the results file to write")
    parser.add_argument("--tickets", type=int, default=1000, help="tickets in tickets_kb")
    parser.add_argument("--part", choices=PARTS, action="append", help="only these parts (default all)")
    parser.add_argument("--cost", action="store_true", help="only the seconds per answer (wall, CPU)")
    parser.add_argument("--data-dir", help="keep the knowledge bases here and reuse them on the next run")
    args = parser.parse_args()
    parts = args.part or list(PARTS)
    with tempfile.TemporaryDirectory(prefix="kbsql-bench-offline-") as home:
        client = kbsql.connect(data_dir=args.data_dir or home)
        try:
            if "juniors" not in [kb.name for kb in client.knowledge_bases.list()]:
                build(client, args.tickets)
            started = time.perf_counter()
            if args.cost:
                result: dict[str, Any] = {"cost": cost(client)}
                parts = []
            else:
                result = {part: run(client, items(part)) for part in parts}
                union = seen(result)
                if union:
                    result["seen"] = union
                result["seconds"] = round(time.perf_counter() - started, 1)
        finally:
            client.close()
    saved = json.loads(RESULTS.read_text()) if RESULTS.exists() else {}
    saved[args.label] = {**saved.get(args.label, {}), **result}
    RESULTS.write_text(json.dumps(saved, indent=1) + "\n")
    if args.cost:
        print(result["cost"])
    for part in parts:
        summary = {k: v for k, v in result[part].items() if k not in ("misses", "counts")}
        print(part, summary, result[part]["counts"])
        for miss in result[part]["misses"]:
            shown = miss["answer"][:160].replace("\n", " ")
            print("  ", miss["verdict"], miss["kb"], miss["turns"], "->", shown)
    if "seen" in result:
        print("seen (every part but " + ", ".join(UNSEEN) + ")",
              {k: v for k, v in result["seen"].items() if k != "counts"}, result["seen"]["counts"])


if __name__ == "__main__":
    main()
