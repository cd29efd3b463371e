"""Scripted completion streams in the contract's chunk shapes (built with the interface
helpers, as the engine builds them) for tests that need exact, repeatable chunks."""

from __future__ import annotations

from typing import Any

from kbsql.interface import stream as s

TRACE = "trace-123"
KB_SQL = "SELECT * FROM mindsdb.docs WHERE content = 'refund policy' LIMIT 3"
KB_OBSERVATION = (
    "Output columns: 'id', 'chunk_id', 'chunk_content', 'metadata', 'relevance', 'distance'\n"
    "id,chunk_id,chunk_content,metadata,relevance,distance\n"
    "1,1:content:1of1:0to40,Refunds are accepted within 30 days,{},0.8,0.25\n"
    "2,2:content:1of1:0to33,\"Shipping, handling <b>fees</b>\",{},0.6,0.66\n"
)


def scripted_chunks(*, answer: str = "Refunds: **30 days**.", error: str | None = None,
                    trace: str = TRACE) -> list[dict[str, Any]]:
    """start, kb_list_tool action+step, kb_query_tool action+step, output (or error), end."""
    list_act = s.action("kb_list_tool", "", "I should list the knowledge bases")
    query_act = s.action("kb_query_tool", KB_SQL, "Now search docs")
    chunks = [s.start_chunk("What is the refund policy?", trace),
              s.actions_chunk([list_act], trace),
              s.steps_chunk(list_act, '["docs"]', trace),
              s.actions_chunk([query_act], trace),
              s.steps_chunk(query_act, KB_OBSERVATION, trace)]
    chunks.append(s.error_chunk(error, trace) if error else s.output_chunk(answer, trace))
    chunks.append(s.end_chunk())
    return chunks

