-- prism-runtime store schema, version 1, PostgreSQL (DB-4..DB-8).
-- {schema} is replaced by the store's quoted schema name. Applied once, inside the opening
-- transaction under an advisory lock; recorded in prism_schema_migrations with the SHA-256 of
-- this file. Never edit a shipped migration: add a new numbered file instead.

-- Session entries (DB-5, STORE-1..3). seq gives append order for list().
-- entry_key / parent_key encode (session_id, id) / (session_id, parent_id) as one text value
-- ("<len(session_id)>:<session_id>/<id>", built by the store). Every hot lookup then has exactly
-- one usable single-column index, so the plans stay index lookups even before the table has
-- statistics (two-column indexes that share a leading session_id column look alike to the
-- planner on a fresh table, which may then scan a whole session per append).
CREATE TABLE {schema}.prism_session_entries (
    seq BIGINT GENERATED ALWAYS AS IDENTITY,
    entry_key TEXT NOT NULL,
    parent_key TEXT,
    session_id TEXT NOT NULL,
    id TEXT NOT NULL,
    parent_id TEXT,
    kind TEXT NOT NULL,
    run_id TEXT,
    "timestamp" TEXT NOT NULL,
    idempotency_key TEXT,
    expected_parent_id TEXT,
    body JSONB NOT NULL,
    CONSTRAINT prism_session_entries_pkey PRIMARY KEY (entry_key)
);

-- list(): one session in append order.
CREATE INDEX prism_session_entries_seq
    ON {schema}.prism_session_entries (session_id, seq);

-- Branch-tip checks (does this parent have a child yet?) and read_branch's parent walk.
CREATE INDEX prism_session_entries_children
    ON {schema}.prism_session_entries (parent_key);

-- One append per (session_id, idempotency_key, expected_parent_id); a NULL expected parent is
-- one value of its own (STORE-3). Also the backstop for concurrent duplicate appends.
CREATE UNIQUE INDEX prism_session_entries_idempotency
    ON {schema}.prism_session_entries (
        session_id, idempotency_key, coalesce(expected_parent_id, ''), (expected_parent_id IS NULL)
    )
    WHERE idempotency_key IS NOT NULL;

-- The append as one statement (DB-5): returns 'ok', 'missing_parent', 'not_tip',
-- 'duplicate_idempotent' or 'duplicate_id' (checked in that order, as the memory store does).
-- For a tip append (expected parent, no fork) the parent row is locked before the child check,
-- so of two writers on different machines racing for one tip the second waits, then (each
-- statement of a VOLATILE function reads a fresh snapshot under READ COMMITTED) sees the first
-- one's child and gets 'not_tip'. The insert itself is ON CONFLICT DO NOTHING over both unique
-- indexes, so a concurrent duplicate id or idempotent append waits for the other writer and
-- then reports the duplicate instead of failing.
CREATE FUNCTION {schema}.prism_append_entry(
    p_entry_key TEXT,
    p_parent_key TEXT,
    p_expected_key TEXT,
    p_session_id TEXT,
    p_id TEXT,
    p_parent_id TEXT,
    p_kind TEXT,
    p_run_id TEXT,
    p_timestamp TEXT,
    p_body JSONB,
    p_expected_parent_id TEXT,
    p_idempotency_key TEXT,
    p_fork BOOLEAN
) RETURNS TEXT
LANGUAGE plpgsql VOLATILE
AS $fn$
DECLARE
    inserted INTEGER;
BEGIN
    IF p_expected_key IS NOT NULL THEN
        IF p_fork THEN
            PERFORM 1 FROM {schema}.prism_session_entries WHERE entry_key = p_expected_key;
        ELSE
            PERFORM 1 FROM {schema}.prism_session_entries WHERE entry_key = p_expected_key
               FOR UPDATE;
        END IF;
        IF NOT FOUND THEN
            RETURN 'missing_parent';
        END IF;
        IF NOT p_fork AND EXISTS (
            SELECT 1 FROM {schema}.prism_session_entries WHERE parent_key = p_expected_key
        ) THEN
            RETURN 'not_tip';
        END IF;
    END IF;
    INSERT INTO {schema}.prism_session_entries (
        entry_key, parent_key, session_id, id, parent_id, kind, run_id, "timestamp",
        idempotency_key, expected_parent_id, body
    ) VALUES (
        p_entry_key, p_parent_key, p_session_id, p_id, p_parent_id, p_kind, p_run_id,
        p_timestamp, p_idempotency_key, p_expected_parent_id, p_body
    )
    ON CONFLICT DO NOTHING;
    GET DIAGNOSTICS inserted = ROW_COUNT;
    IF inserted = 1 THEN
        RETURN 'ok';
    END IF;
    IF p_idempotency_key IS NOT NULL AND EXISTS (
        SELECT 1 FROM {schema}.prism_session_entries
         WHERE session_id = p_session_id
           AND idempotency_key = p_idempotency_key
           AND coalesce(expected_parent_id, '') = coalesce(p_expected_parent_id, '')
           AND (expected_parent_id IS NULL) = (p_expected_parent_id IS NULL)
    ) THEN
        RETURN 'duplicate_idempotent';
    END IF;
    RETURN 'duplicate_id';
END
$fn$;

-- Checkpoints (DB-6, DUR-3): compare-and-set on (namespace, key).
CREATE TABLE {schema}.prism_checkpoints (
    namespace TEXT NOT NULL,
    key TEXT NOT NULL,
    version BIGINT NOT NULL,
    value JSONB NOT NULL,
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL,
    fencing_token BIGINT,
    tenant_id TEXT,
    account_id TEXT,
    user_id TEXT,
    CONSTRAINT prism_checkpoints_pkey PRIMARY KEY (namespace, key)
);

-- Run ledger (DB-7, REC-1): four append-only tables; seq keeps append (= emission) order.
CREATE TABLE {schema}.prism_runs (
    seq BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    id TEXT NOT NULL,
    session_id TEXT NOT NULL,
    status TEXT NOT NULL,
    body JSONB NOT NULL
);
CREATE INDEX prism_runs_session ON {schema}.prism_runs (session_id, id, seq);
CREATE INDEX prism_runs_id ON {schema}.prism_runs (id, seq);

CREATE TABLE {schema}.prism_run_events (
    seq BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    id TEXT NOT NULL,
    session_id TEXT NOT NULL,
    run_id TEXT NOT NULL,
    type TEXT NOT NULL,
    body JSONB NOT NULL
);
CREATE INDEX prism_run_events_run ON {schema}.prism_run_events (session_id, run_id, seq);

CREATE TABLE {schema}.prism_tool_calls (
    seq BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    id TEXT NOT NULL,
    session_id TEXT NOT NULL,
    run_id TEXT NOT NULL,
    tool_call_id TEXT NOT NULL,
    status TEXT NOT NULL,
    body JSONB NOT NULL
);
CREATE INDEX prism_tool_calls_run ON {schema}.prism_tool_calls (session_id, run_id, seq);

CREATE TABLE {schema}.prism_usage (
    seq BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    id TEXT NOT NULL,
    session_id TEXT NOT NULL,
    run_id TEXT NOT NULL,
    scope TEXT NOT NULL,
    body JSONB NOT NULL
);
CREATE INDEX prism_usage_run ON {schema}.prism_usage (session_id, run_id, seq);
