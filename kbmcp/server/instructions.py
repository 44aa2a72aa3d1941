"""The server's instructions: the workflow agents read at connection, for the tools they see.

A token sees only the tools its scopes cover (kbmcp/server/scope_guard.py), and the instructions
it receives mention only those: a read-only token is not told to call remember, a memory-only
token not to call list_knowledge_bases. Each sentence belongs to the tools it names; the full
text (every tool visible) is the workflow scope first, then search, then read.
"""

from __future__ import annotations

from collections.abc import Collection

INTRO_KNOWLEDGE = (
    "kbmcp is a local knowledge base of documents (notes, docs, runbooks, code) split into "
    "chunks and searchable by keyword and meaning."
)
INTRO_MEMORIES = (
    "kbmcp keeps memories: facts remembered during earlier work, searchable by keyword and meaning."
)
SCOPE_STEP = (
    "Scope first. Call list_knowledge_bases once to see what exists; if the question concerns "
    "one knowledge base, folder or document, pass knowledge_base_ids, document_paths or "
    "document_ids to search_knowledge. Scoping is exact (filters apply before ranking), so a "
    "narrow scope finds passages a broad search would rank too low."
)
SEARCH_STEP = (
    "Search. Call search_knowledge with a query; the default hybrid mode suits most questions. "
    'Use mode="lexical" for exact names, error messages and identifiers; mode="semantic" for '
    "paraphrases."
)
READ_STEP = (
    "Then read. Results are short excerpts with ids and a citation (path, line range, "
    "revision). Fetch full chunks with chunk_ids, or read around a hit with document_id + "
    "offset/limit_chars. For a long document, ask for outline=true first and read only the "
    "section you need."
)
LIST_DOCUMENTS = "list_documents finds a document's id by path and shows what a folder holds."
LIST_MEMORY_STORES = "list_memory_stores shows your memory stores (for memory_store_ids)."
REMEMBER = "call remember to keep a fact you learned"
REMEMBER_FOUND = ' (search_knowledge then finds it{beside}, kind="memory")'
FORGET = "forget to retract one"
CITE = (
    "Cite sources by each result's reference (knowledge base:path#lines@revision), which reads "
    "and fetched chunks carry too. Without a query, search_knowledge lists what was "
    "updated most recently (since/until narrow the time window)."
)
INTRO_NO_TOOLS = (
    "kbmcp is a local knowledge base; this caller's token reaches none of its tools (a token "
    "needs knowledge:read, memory:read or memory:write)."
)
ERRORS = (
    'Errors are JSON {"error": {"code", "message", "details"}}; details.argument names the '
    "argument to fix."
)


def instructions_for(tools: Collection[str]) -> str:
    """The instructions for a caller who sees `tools` (tool names)."""
    steps = []
    if "list_knowledge_bases" in tools:
        steps.append(SCOPE_STEP)
    if "search_knowledge" in tools:
        steps += [SEARCH_STEP, READ_STEP]
    documents = "list_knowledge_bases" in tools  # the caller reads documents
    intro = INTRO_KNOWLEDGE if documents else INTRO_MEMORIES if tools else INTRO_NO_TOOLS
    lines = [f"{intro} Work in this order:" if steps else intro]
    lines += [f"{number}. {step}" for number, step in enumerate(steps, start=1)]
    extras = []
    if "list_documents" in tools:
        extras.append(LIST_DOCUMENTS)
    if "list_memory_stores" in tools:
        extras.append(LIST_MEMORY_STORES)
    memory = []
    if "remember" in tools:
        found = REMEMBER_FOUND.format(beside=" with documents" if documents else "")
        memory.append(REMEMBER + (found if "search_knowledge" in tools else ""))
    if "forget" in tools:
        memory.append(FORGET if memory else f"call {FORGET}")
    if memory:
        extras.append(f"Memories: {', and '.join(memory)}.")
    if "search_knowledge" in tools:
        extras.append(CITE)
    extras.append(ERRORS)
    return "\n".join(lines) + "\n" + " ".join(extras)
