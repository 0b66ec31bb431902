-- prism-runtime store schema, version 5, SQLite: checkpoint values stored in their row.
-- Applied once, inside the opening transaction; recorded in prism_schema_migrations with the
-- SHA-256 of this file. Never edit a shipped migration: add a new numbered file instead.
--
-- prism_checkpoints was a WITHOUT ROWID table: its rows live in an index b-tree, whose cells
-- keep at most ~1,000 bytes on a 4 KiB page, so a durable run's envelope (~1.5 KB for a tool
-- round) spilled to an overflow page, and every save freed that page and took another (four
-- pages written: the row's, the new overflow page, the freed one, the database header). As a
-- rowid table with the same columns and primary key (kept by its own unique index, which a
-- save does not change), the row holds values up to ~4,000 bytes and a save writes one page.
-- Same columns, keys, indexes, triggers and contents; the table is rebuilt once here.

CREATE TABLE prism_checkpoints_rebuilt (
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
    run_session_id TEXT,
    run_status TEXT,
    run_resumable INTEGER,
    PRIMARY KEY (namespace, key)
);

INSERT INTO prism_checkpoints_rebuilt (
    namespace, key, version, value, created_at, updated_at, fencing_token,
    tenant_id, account_id, user_id, run_session_id, run_status, run_resumable
)
SELECT namespace, key, version, value, created_at, updated_at, fencing_token,
       tenant_id, account_id, user_id, run_session_id, run_status, run_resumable
  FROM prism_checkpoints;

-- (drops the table's indexes and triggers too; they are made again below, as they were)
DROP TABLE prism_checkpoints;

ALTER TABLE prism_checkpoints_rebuilt RENAME TO prism_checkpoints;

-- As in version 2.
CREATE INDEX prism_checkpoints_run_session
    ON prism_checkpoints (namespace, run_session_id);

CREATE INDEX prism_checkpoints_run_resumable
    ON prism_checkpoints (namespace, run_resumable);

-- As in version 3.
-- A durable run's envelope, when it is first saved and when its status changes (the store
-- assigns run_status only then): the session's latest activity, then the run's summary.
CREATE TRIGGER prism_run_summaries_envelope_insert AFTER INSERT ON prism_checkpoints
WHEN NEW.namespace = 'prism.agent-run' AND NEW.run_status IS NOT NULL
     AND NEW.run_session_id IS NOT NULL
BEGIN
    UPDATE prism_sessions SET updated_at = NEW.updated_at
     WHERE session_id = NEW.run_session_id AND updated_at < NEW.updated_at;
    INSERT INTO prism_run_summaries (
        run_id, session_id, agent_id, status, model, provider, started_at, finished_at,
        stop_reason, status_at
    ) VALUES (
        NEW.key, NEW.run_session_id, json_extract(NEW.value, '$.agent_id'), NEW.run_status,
        json_extract(NEW.value, '$.model.model'), json_extract(NEW.value, '$.model.provider'),
        NEW.created_at,
        CASE WHEN NEW.run_status NOT IN ('running', 'suspended') THEN NEW.updated_at END,
        json_extract(NEW.value, '$.stop_reason'), NEW.updated_at
    )
    ON CONFLICT (run_id) DO UPDATE SET
        agent_id = coalesce(agent_id, excluded.agent_id),
        model = coalesce(model, excluded.model),
        provider = coalesce(provider, excluded.provider),
        started_at = min(started_at, excluded.started_at),
        status = CASE WHEN excluded.status_at >= coalesce(status_at, '')
                      THEN excluded.status ELSE status END,
        finished_at = CASE WHEN excluded.status_at >= coalesce(status_at, '')
                           THEN excluded.finished_at ELSE finished_at END,
        stop_reason = CASE WHEN excluded.status_at >= coalesce(status_at, '')
                           THEN excluded.stop_reason ELSE stop_reason END,
        error = CASE WHEN excluded.status_at >= coalesce(status_at, '')
                     THEN NULL ELSE error END,
        status_at = max(coalesce(status_at, ''), excluded.status_at);
END;

CREATE TRIGGER prism_run_summaries_envelope_update AFTER UPDATE OF run_status ON prism_checkpoints
WHEN NEW.namespace = 'prism.agent-run' AND NEW.run_status IS NOT NULL
     AND NEW.run_session_id IS NOT NULL AND OLD.run_status IS NOT NEW.run_status
BEGIN
    UPDATE prism_sessions SET updated_at = NEW.updated_at
     WHERE session_id = NEW.run_session_id AND updated_at < NEW.updated_at;
    INSERT INTO prism_run_summaries (
        run_id, session_id, agent_id, status, model, provider, started_at, finished_at,
        stop_reason, status_at
    ) VALUES (
        NEW.key, NEW.run_session_id, json_extract(NEW.value, '$.agent_id'), NEW.run_status,
        json_extract(NEW.value, '$.model.model'), json_extract(NEW.value, '$.model.provider'),
        NEW.created_at,
        CASE WHEN NEW.run_status NOT IN ('running', 'suspended') THEN NEW.updated_at END,
        json_extract(NEW.value, '$.stop_reason'), NEW.updated_at
    )
    ON CONFLICT (run_id) DO UPDATE SET
        agent_id = coalesce(agent_id, excluded.agent_id),
        model = coalesce(model, excluded.model),
        provider = coalesce(provider, excluded.provider),
        started_at = min(started_at, excluded.started_at),
        status = CASE WHEN excluded.status_at >= coalesce(status_at, '')
                      THEN excluded.status ELSE status END,
        finished_at = CASE WHEN excluded.status_at >= coalesce(status_at, '')
                           THEN excluded.finished_at ELSE finished_at END,
        stop_reason = CASE WHEN excluded.status_at >= coalesce(status_at, '')
                           THEN excluded.stop_reason ELSE stop_reason END,
        error = CASE WHEN excluded.status_at >= coalesce(status_at, '')
                     THEN NULL ELSE error END,
        status_at = max(coalesce(status_at, ''), excluded.status_at);
END;
