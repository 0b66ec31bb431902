-- prism-runtime store schema, version 2, SQLite: the run index.
-- Applied once, inside the opening transaction; recorded in prism_schema_migrations with the
-- SHA-256 of this file. Never edit a shipped migration: add a new numbered file instead.

-- Durable runs keep their run-state envelope as a checkpoint (namespace 'prism.agent-run',
-- key = run id). Three generated columns read from it what a listing filters on: the run's
-- session, its status, and whether a resume can continue it (running, suspended, or stopped
-- by a turn policy). They are computed from the value itself, so every existing row is indexed
-- at once and no write statement changes; a value that is not valid JSON gets NULLs.
ALTER TABLE prism_checkpoints ADD COLUMN run_session_id TEXT GENERATED ALWAYS AS (
    CASE WHEN namespace = 'prism.agent-run' AND json_valid(value)
         THEN json_extract(value, '$.session_id') END
) VIRTUAL;

ALTER TABLE prism_checkpoints ADD COLUMN run_status TEXT GENERATED ALWAYS AS (
    CASE WHEN namespace = 'prism.agent-run' AND json_valid(value)
         THEN json_extract(value, '$.status') END
) VIRTUAL;

ALTER TABLE prism_checkpoints ADD COLUMN run_resumable INTEGER GENERATED ALWAYS AS (
    CASE WHEN namespace = 'prism.agent-run' AND json_valid(value)
         THEN json_extract(value, '$.status') IN ('running', 'suspended')
              OR (json_extract(value, '$.status') = 'succeeded'
                  AND json_extract(value, '$.stop_reason') = 'host_policy') END
) VIRTUAL;

-- A session's runs, newest first.
CREATE INDEX prism_checkpoints_run_session
    ON prism_checkpoints (namespace, run_session_id, updated_at);

-- The runs a worker or an operator can resume, newest first.
CREATE INDEX prism_checkpoints_run_resumable
    ON prism_checkpoints (namespace, run_resumable, updated_at);
