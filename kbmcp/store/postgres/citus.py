"""kbmcp on a Citus cluster: its tables distributed by store, and what a search does there.

When the database kbmcp migrates has the `citus` extension (a Citus coordinator: Citus is a
distributed PostgreSQL, self-hosted or managed, e.g. Azure Cosmos DB for PostgreSQL), the
migration that brings the schema up to date also distributes it, in the same transaction
(`distribute`, called by migrations.py):

- the small tables every request reads become reference tables (a copy on every node):
  tenants, knowledge bases, shares, tokens, the model record, the id key, the schema version;
- every table holding a store's data is distributed by `knowledge_base_id` (the store: a
  knowledge base or a memory store), all co-located, so one store's documents, revisions,
  chunks, vectors and postings are on one shard and every join between them stays there
  (migration 9 put the store in every key and foreign key);
- the audit trail (`audit_event`, keyed by tenant) stays a table of the coordinator: every
  request reaches the cluster through it, an event is one short insert, and `kbmcp audit`
  reads one tenant's recent rows; distributing it by tenant would make every audited write a
  transaction over two shards (the store's and the tenant's) for no gain in reads.

Traps, each handled below:
- a table with an identity column cannot be distributed while a foreign key names it
  ("cannot complete operation on a table with identity column"): the foreign keys are
  dropped first and made again once every table is distributed;
- a transaction that created the tables must distribute them over one connection per node
  (`citus.multi_shard_modify_mode = 'sequential'`);
- triggers on distributed tables run on the shards, and Citus allows them only when told to
  (`citus.enable_unsafe_triggers`): kbmcp's triggers write rows of the row's own store only
  (co-located), the case that is safe.
"""

from __future__ import annotations

import weakref
from typing import Any

import psycopg

PgConnection = psycopg.Connection[Any]

DISTRIBUTION_COLUMN = "knowledge_base_id"
REFERENCE_TABLES = (
    "tenant", "knowledge_base", "share", "token", "embedding_model", "id_key", "kbmcp_schema",
)  # fmt: skip
# The first is the co-location group every other one joins.
DISTRIBUTED_TABLES = (
    "document", "document_tag", "document_metadata", "revision", "chunk", "chunk_vector",
    "chunk_vec", "chunk_keyword", "chunk_term", "keyword_total", "keyword_token", "source_file",
    "staged_revision",
)  # fmt: skip

SELECT_CITUS_VERSION = "SELECT extversion FROM pg_extension WHERE extname = 'citus'"
IS_DISTRIBUTED = """
SELECT EXISTS (SELECT 1 FROM pg_dist_partition WHERE logicalrelid = 'document'::regclass)
"""
SEQUENTIAL = "SET LOCAL citus.multi_shard_modify_mode TO 'sequential'"
ALLOW_TRIGGERS = "SET LOCAL citus.enable_unsafe_triggers TO on"
SELECT_FOREIGN_KEYS = """
SELECT conrelid::regclass::text, conname, pg_get_constraintdef(oid)
FROM pg_constraint
WHERE contype = 'f' AND connamespace = current_schema()::regnamespace
ORDER BY 1, 2
"""
CREATE_REFERENCE_TABLE = "SELECT create_reference_table(%(table)s)"
CREATE_DISTRIBUTED_TABLE = """
SELECT create_distributed_table(%(table)s, %(column)s, colocate_with => %(colocate_with)s)
"""


# The search's settings on the workers too. set_config() in a query (prelude.py's PRELUDE) sets
# them on the coordinator only, and a plain SET LOCAL is not sent to the workers either: with
# `citus.propagate_set_commands = 'local'` first, Citus sends the SET LOCALs of the transaction to
# every worker it opens a connection to in it (without them, a filtered HNSW search on a shard
# stops at ef_search candidates and can return fewer than k rows). One round trip: a simple
# query of several statements (no parameters: {ef_search} is an int).
SEARCH_SETTINGS = """SET LOCAL citus.propagate_set_commands = 'local';
SET LOCAL enable_mergejoin = off;
SET LOCAL hnsw.iterative_scan = relaxed_order;
SET LOCAL hnsw.ef_search = {ef_search}"""

# Whether each open connection's database has Citus, asked once per connection.
_ON_CITUS: weakref.WeakKeyDictionary[PgConnection, bool] = weakref.WeakKeyDictionary()


def is_citus(conn: PgConnection) -> bool:
    """Whether `conn`'s database is a Citus coordinator's (the citus extension exists)."""
    known = _ON_CITUS.get(conn)
    if known is None:
        known = _ON_CITUS[conn] = citus_version(conn) is not None
    return known


def set_search_settings(conn: PgConnection, ef_search: int) -> None:
    """On Citus, inside a search's transaction: its settings on every node (SEARCH_SETTINGS)."""
    if is_citus(conn):
        conn.execute(SEARCH_SETTINGS.format(ef_search=int(ef_search)))


def citus_version(conn: PgConnection) -> str | None:
    """The citus extension's version in this database, None without it."""
    row = conn.execute(SELECT_CITUS_VERSION).fetchone()
    return None if row is None else str(row[0])


def needs_distribution(conn: PgConnection) -> bool:
    """A Citus database whose kbmcp tables are not distributed yet (they exist)."""
    if citus_version(conn) is None:
        return False
    if conn.execute("SELECT to_regclass('document') IS NULL").fetchone()[0]:
        return False
    return not conn.execute(IS_DISTRIBUTED).fetchone()[0]


def distribute(conn: PgConnection) -> None:
    """Make the reference tables and distribute the rest (inside the migration's transaction;
    the module docstring says how and why)."""
    conn.execute(SEQUENTIAL)
    conn.execute(ALLOW_TRIGGERS)
    foreign_keys = conn.execute(SELECT_FOREIGN_KEYS).fetchall()
    for table, name, _definition in foreign_keys:
        conn.execute(f"ALTER TABLE {table} DROP CONSTRAINT {_quoted(name)}")
    for table in REFERENCE_TABLES:
        conn.execute(CREATE_REFERENCE_TABLE, {"table": table})
    for i, table in enumerate(DISTRIBUTED_TABLES):
        conn.execute(
            CREATE_DISTRIBUTED_TABLE,
            {
                "table": table,
                "column": DISTRIBUTION_COLUMN,
                "colocate_with": "none" if i == 0 else DISTRIBUTED_TABLES[0],
            },
        )
    for table, name, definition in foreign_keys:
        conn.execute(f"ALTER TABLE {table} ADD CONSTRAINT {_quoted(name)} {definition}")


def _quoted(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


# ------------------------------------------------------------------ what each node holds

SELECT_NODES = """
SELECT groupid, nodename, nodeport, groupid = 0 AS coordinator
FROM pg_dist_node
WHERE noderole = 'primary' AND isactive
ORDER BY groupid
"""
# Each store's shard (the shard of its id in document's co-location group) and the node group
# holding the shard; reference tables only, read on the coordinator.
SELECT_STORE_GROUPS = """
SELECT s.store, p.groupid
FROM (SELECT kb.id AS store,
             get_shard_id_for_distribution_column('document', kb.id) AS shardid
      FROM knowledge_base AS kb) AS s
JOIN pg_dist_placement AS p ON p.shardid = s.shardid
"""
# Chunks per store, counted on the shards and added up by Citus.
SELECT_STORE_CHUNKS = "SELECT knowledge_base_id, count(*) FROM chunk GROUP BY knowledge_base_id"


def nodes(conn: PgConnection) -> list[dict[str, Any]]:
    """Every active node of the cluster, coordinator first: where it is, and how many stores
    and chunks its shards hold (`kbmcp doctor`)."""
    stores: dict[int, int] = {}
    chunks: dict[int, int] = {}
    per_store = dict(conn.execute(SELECT_STORE_CHUNKS).fetchall())
    for store, group in conn.execute(SELECT_STORE_GROUPS):
        stores[group] = stores.get(group, 0) + 1
        chunks[group] = chunks.get(group, 0) + int(per_store.get(store, 0))
    return [
        {
            "node": f"{host}:{port}",
            "role": "coordinator" if coordinator else "worker",
            "stores": stores.get(group, 0),
            "chunks": chunks.get(group, 0),
        }
        for group, host, port, coordinator in conn.execute(SELECT_NODES)
    ]
