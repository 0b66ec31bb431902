-- prism-runtime store schema, version 2, SQLite: the run index.
-- Applied once, inside the opening transaction; recorded in prism_schema_migrations with the
-- SHA-256 of this file. Never edit a shipped migration: add a new numbered file instead.

-- Durable runs keep their run-state envelope as a checkpoint (namespace 'prism.agent-run',
-- key = run id). Three columns hold what a listing filters on: the run's session, its status,
-- and whether a resume can continue it (running, suspended, or stopped by a turn policy). The
-- store fills them on every save from the value it already has in hand (no JSON parsing in
-- SQL on the write path); rows stored before this migration are filled here, once.
ALTER TABLE prism_checkpoints ADD COLUMN run_session_id TEXT;
ALTER TABLE prism_checkpoints ADD COLUMN run_status TEXT;
ALTER TABLE prism_checkpoints ADD COLUMN run_resumable INTEGER;

UPDATE prism_checkpoints
   SET run_session_id = json_extract(value, '$.session_id'),
       run_status = json_extract(value, '$.status'),
       run_resumable = coalesce(
           json_extract(value, '$.status') IN ('running', 'suspended')
           OR (json_extract(value, '$.status') = 'succeeded'
               AND json_extract(value, '$.stop_reason') = 'host_policy'), 0)
 WHERE namespace = 'prism.agent-run'
   AND CASE WHEN json_valid(value) THEN json_type(value) = 'object' ELSE 0 END;

-- A session's runs (a listing sorts the few it finds by updated_at; keeping updated_at out of
-- the indexes leaves a save that does not change a run's session or status off them).
CREATE INDEX prism_checkpoints_run_session
    ON prism_checkpoints (namespace, run_session_id);

-- The runs a worker or an operator can resume.
CREATE INDEX prism_checkpoints_run_resumable
    ON prism_checkpoints (namespace, run_resumable);
