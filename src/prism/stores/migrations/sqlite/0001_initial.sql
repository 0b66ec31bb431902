-- prism-runtime store schema, version 1, SQLite (DB-4..DB-8).
-- Applied once, inside the opening transaction; recorded in prism_schema_migrations with the
-- SHA-256 of this file. Never edit a shipped migration: add a new numbered file instead.

-- Session entries (DB-5, STORE-1..3). seq is the rowid: append order for list().
CREATE TABLE prism_session_entries (
    seq INTEGER PRIMARY KEY,
    session_id TEXT NOT NULL,
    id TEXT NOT NULL,
    parent_id TEXT,
    kind TEXT NOT NULL,
    run_id TEXT,
    "timestamp" TEXT NOT NULL,
    idempotency_key TEXT,
    expected_parent_id TEXT,
    body TEXT NOT NULL,
    UNIQUE (session_id, id)
);

-- Branch-tip checks: does this parent have a child yet?
CREATE INDEX prism_session_entries_children
    ON prism_session_entries (session_id, parent_id);

-- One append per (session_id, idempotency_key, expected_parent_id); a NULL expected parent is
-- one value of its own (STORE-3).
CREATE UNIQUE INDEX prism_session_entries_idempotency
    ON prism_session_entries (
        session_id, idempotency_key, coalesce(expected_parent_id, ''), expected_parent_id IS NULL
    )
    WHERE idempotency_key IS NOT NULL;

-- Checkpoints (DB-6, DUR-3): compare-and-set on (namespace, key).
CREATE TABLE prism_checkpoints (
    namespace TEXT NOT NULL,
    key TEXT NOT NULL,
    version INTEGER NOT NULL,
    value TEXT NOT NULL,
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL,
    fencing_token INTEGER,
    tenant_id TEXT,
    account_id TEXT,
    user_id TEXT,
    PRIMARY KEY (namespace, key)
) WITHOUT ROWID;

-- Run ledger (DB-7, REC-1): four append-only tables; seq keeps append (= emission) order.
CREATE TABLE prism_runs (
    seq INTEGER PRIMARY KEY,
    id TEXT NOT NULL,
    session_id TEXT NOT NULL,
    status TEXT NOT NULL,
    body TEXT NOT NULL
);
CREATE INDEX prism_runs_session ON prism_runs (session_id, id);
CREATE INDEX prism_runs_id ON prism_runs (id);

CREATE TABLE prism_run_events (
    seq INTEGER PRIMARY KEY,
    id TEXT NOT NULL,
    session_id TEXT NOT NULL,
    run_id TEXT NOT NULL,
    type TEXT NOT NULL,
    body TEXT NOT NULL
);
CREATE INDEX prism_run_events_run ON prism_run_events (session_id, run_id);

CREATE TABLE prism_tool_calls (
    seq INTEGER PRIMARY KEY,
    id TEXT NOT NULL,
    session_id TEXT NOT NULL,
    run_id TEXT NOT NULL,
    tool_call_id TEXT NOT NULL,
    status TEXT NOT NULL,
    body TEXT NOT NULL
);
CREATE INDEX prism_tool_calls_run ON prism_tool_calls (session_id, run_id);

CREATE TABLE prism_usage (
    seq INTEGER PRIMARY KEY,
    id TEXT NOT NULL,
    session_id TEXT NOT NULL,
    run_id TEXT NOT NULL,
    scope TEXT NOT NULL,
    body TEXT NOT NULL
);
CREATE INDEX prism_usage_run ON prism_usage (session_id, run_id);
