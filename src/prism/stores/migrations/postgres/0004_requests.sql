-- prism-runtime store schema, version 4, PostgreSQL: request rows.
-- {schema} is replaced by the store's quoted schema name. Applied once, inside the opening
-- transaction under an advisory lock; recorded in prism_schema_migrations with the SHA-256 of
-- this file. Never edit a shipped migration: add a new numbered file instead.
--
-- A run whose ledger stores request rows (prism.ledger.RequestLedger) appends one row per
-- provider attempt: the canonical hash of what the model was asked (prism.request_hash) and the
-- hash of the request's head (system prompt, tool schemas, model and options). Heads are kept
-- once per distinct hash in prism_request_heads: a run's requests share one head until its
-- prompt, tools or options change, and runs of one agent share it too.

CREATE TABLE {schema}.prism_requests (
    seq BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    id TEXT NOT NULL,
    session_id TEXT NOT NULL,
    run_id TEXT NOT NULL,
    request_hash TEXT NOT NULL,
    head_hash TEXT NOT NULL,
    body JSONB NOT NULL
);

-- One run's rows in append order (what a capture reads).
CREATE INDEX prism_requests_run ON {schema}.prism_requests (run_id, seq);

CREATE TABLE {schema}.prism_request_heads (
    head_hash TEXT PRIMARY KEY,
    created_at TEXT NOT NULL,
    body JSONB NOT NULL
);
