-- prism-runtime store schema, version 2, PostgreSQL: the run index.
-- {schema} is replaced by the store's quoted schema name. Applied once, inside the opening
-- transaction under an advisory lock; recorded in prism_schema_migrations with the SHA-256 of
-- this file. Never edit a shipped migration: add a new numbered file instead.

-- Durable runs keep their run-state envelope as a checkpoint (namespace 'prism.agent-run',
-- key = run id). Three generated columns read from it what a listing filters on: the run's
-- session, its status, and whether a resume can continue it (running, suspended, or stopped
-- by a turn policy). They are computed from the value itself, so every existing row is indexed
-- at once and no write statement changes. (A value stored wrapped because it holds a NUL
-- character gets NULLs until its next write without one.)
ALTER TABLE {schema}.prism_checkpoints
    ADD COLUMN run_session_id TEXT GENERATED ALWAYS AS (
        CASE WHEN namespace = 'prism.agent-run' THEN value ->> 'session_id' END
    ) STORED,
    ADD COLUMN run_status TEXT GENERATED ALWAYS AS (
        CASE WHEN namespace = 'prism.agent-run' THEN value ->> 'status' END
    ) STORED,
    ADD COLUMN run_resumable BOOLEAN GENERATED ALWAYS AS (
        CASE WHEN namespace = 'prism.agent-run'
             THEN coalesce(value ->> 'status' IN ('running', 'suspended')
                           OR (value ->> 'status' = 'succeeded'
                               AND value ->> 'stop_reason' = 'host_policy'), false) END
    ) STORED;

-- A session's runs (a listing sorts the few it finds by updated_at; keeping updated_at out of
-- the indexes leaves a save that does not change a run's session or status off them).
CREATE INDEX prism_checkpoints_run_session
    ON {schema}.prism_checkpoints (namespace, run_session_id);

-- The runs a worker or an operator can resume.
CREATE INDEX prism_checkpoints_run_resumable
    ON {schema}.prism_checkpoints (namespace, run_resumable);
