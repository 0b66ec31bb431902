-- prism-runtime store schema, version 3, SQLite: what an inspector reads (prism.inspection).
-- Applied once, inside the opening transaction; recorded in prism_schema_migrations with the
-- SHA-256 of this file. Never edit a shipped migration: add a new numbered file instead.
--
-- Two summary tables, kept by triggers in the transaction of the write they summarise (so no
-- write statement of the store changes, and a summary is never ahead of or behind its rows):
--
-- * prism_sessions — one row per session: entry count, first and latest activity, the latest
--   entry, the first user message's text and the parent session of an agent tool's child
--   session. One upsert per appended entry.
-- * prism_run_summaries — one row per run, from its ledger run rows, its provider-turn usage
--   rows, its turn_started events and its durable envelope (namespace 'prism.agent-run', only when the envelope's status
--   changes, not on every turn's save). Of the ledger and the envelope, the newer status wins.
--
-- Usage rows get the columns a usage report groups and sums. Rows stored before this
-- migration are summarised here, once.

-- ---------------------------------------------------------------------------- sessions

CREATE TABLE prism_sessions (
    session_id TEXT PRIMARY KEY,
    parent_session_id TEXT,
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL,
    entries INTEGER NOT NULL,
    last_entry_id TEXT NOT NULL,
    first_input TEXT
) WITHOUT ROWID;

-- Most recently active first, keyset-paged on (updated_at, session_id).
CREATE INDEX prism_sessions_recent ON prism_sessions (updated_at, session_id);

-- An agent tool's child sessions, under their parent.
CREATE INDEX prism_sessions_children
    ON prism_sessions (parent_session_id, updated_at, session_id)
    WHERE parent_session_id IS NOT NULL;

-- One upsert per entry; the text of the first user message (its first 200 characters) and the
-- parent session its metadata names are read from the body only until the session has them.
CREATE TRIGGER prism_sessions_entry AFTER INSERT ON prism_session_entries
BEGIN
    INSERT INTO prism_sessions (session_id, created_at, updated_at, entries, last_entry_id)
    VALUES (NEW.session_id, NEW."timestamp", NEW."timestamp", 1, NEW.id)
    ON CONFLICT (session_id) DO UPDATE SET
        created_at = min(created_at, excluded.created_at),
        updated_at = max(updated_at, excluded.updated_at),
        entries = entries + 1,
        last_entry_id = excluded.last_entry_id;
    UPDATE prism_sessions
       SET first_input = (
               SELECT substr(group_concat(json_extract(part.value, '$.text'), ''), 1, 200)
                 FROM json_each(NEW.body, '$.message.content') AS part
                WHERE json_extract(part.value, '$.type') = 'text'),
           parent_session_id = coalesce(
               parent_session_id,
               json_extract(NEW.body, '$.message.metadata.parent_run.session_id'))
     WHERE session_id = NEW.session_id
       -- a CASE on the row's column, so the body is read only while first_input is missing
       AND CASE WHEN first_input IS NULL AND NEW.kind = 'message'
                THEN json_extract(NEW.body, '$.message.role') = 'user' ELSE 0 END;
END;

-- ---------------------------------------------------------------------------- runs

CREATE TABLE prism_run_summaries (
    run_id TEXT PRIMARY KEY,
    session_id TEXT NOT NULL,
    agent_id TEXT,
    status TEXT,
    model TEXT,
    provider TEXT,
    started_at TEXT NOT NULL,
    finished_at TEXT,
    stop_reason TEXT,
    error TEXT,
    status_at TEXT,
    has_ledger INTEGER NOT NULL DEFAULT 0,
    turns INTEGER NOT NULL DEFAULT 0,
    input_tokens INTEGER NOT NULL DEFAULT 0,
    output_tokens INTEGER NOT NULL DEFAULT 0,
    cost REAL
) WITHOUT ROWID;

-- Newest start first, keyset-paged on (started_at, run_id): all runs, a session's, an agent's,
-- a status's; and the runs of a model.
CREATE INDEX prism_run_summaries_started ON prism_run_summaries (started_at, run_id);
CREATE INDEX prism_run_summaries_session ON prism_run_summaries (session_id, started_at, run_id);
CREATE INDEX prism_run_summaries_agent ON prism_run_summaries (agent_id, started_at, run_id);
CREATE INDEX prism_run_summaries_status ON prism_run_summaries (status, started_at, run_id);
CREATE INDEX prism_run_summaries_model ON prism_run_summaries (model, session_id);

-- Usage: the columns a report groups and sums (the store writes them with the row).
ALTER TABLE prism_usage ADD COLUMN "timestamp" TEXT;
ALTER TABLE prism_usage ADD COLUMN model TEXT;
ALTER TABLE prism_usage ADD COLUMN input_tokens INTEGER;
ALTER TABLE prism_usage ADD COLUMN output_tokens INTEGER;
ALTER TABLE prism_usage ADD COLUMN cost REAL;

CREATE INDEX prism_usage_turns ON prism_usage ("timestamp") WHERE scope = 'provider_turn';

-- A ledger run row (start or finish): the session's latest activity, then the run's summary.
CREATE TRIGGER prism_run_summaries_run AFTER INSERT ON prism_runs
BEGIN
    UPDATE prism_sessions
       SET updated_at = coalesce(json_extract(NEW.body, '$.finished_at'),
                                 json_extract(NEW.body, '$.started_at'))
     WHERE session_id = NEW.session_id
       AND updated_at < coalesce(json_extract(NEW.body, '$.finished_at'),
                                 json_extract(NEW.body, '$.started_at'));
    INSERT INTO prism_run_summaries (
        run_id, session_id, agent_id, status, model, provider, started_at, finished_at,
        stop_reason, error, status_at, has_ledger
    ) VALUES (
        NEW.id, NEW.session_id, json_extract(NEW.body, '$.agent_id'), NEW.status,
        json_extract(NEW.body, '$.model.model'), json_extract(NEW.body, '$.provider'),
        coalesce(json_extract(NEW.body, '$.started_at'), ''),
        json_extract(NEW.body, '$.finished_at'), json_extract(NEW.body, '$.stop_reason'),
        json_extract(NEW.body, '$.error'),
        coalesce(json_extract(NEW.body, '$.finished_at'), json_extract(NEW.body, '$.started_at')),
        1
    )
    ON CONFLICT (run_id) DO UPDATE SET
        agent_id = coalesce(excluded.agent_id, agent_id),
        model = coalesce(excluded.model, model),
        provider = coalesce(excluded.provider, provider),
        started_at = min(started_at, excluded.started_at),
        status = CASE WHEN excluded.status_at >= coalesce(status_at, '')
                      THEN excluded.status ELSE status END,
        finished_at = CASE WHEN excluded.status_at >= coalesce(status_at, '')
                           THEN excluded.finished_at ELSE finished_at END,
        stop_reason = CASE WHEN excluded.status_at >= coalesce(status_at, '')
                           THEN excluded.stop_reason ELSE stop_reason END,
        error = CASE WHEN excluded.status_at >= coalesce(status_at, '')
                     THEN excluded.error ELSE error END,
        status_at = max(coalesce(status_at, ''), excluded.status_at),
        has_ledger = 1;
END;

-- A provider turn's usage: the run's token and cost totals.
CREATE TRIGGER prism_run_summaries_usage AFTER INSERT ON prism_usage
WHEN NEW.scope = 'provider_turn'
BEGIN
    INSERT INTO prism_run_summaries (
        run_id, session_id, started_at, has_ledger, input_tokens, output_tokens, cost
    ) VALUES (
        NEW.run_id, NEW.session_id, coalesce(NEW."timestamp", ''), 1,
        coalesce(NEW.input_tokens, 0), coalesce(NEW.output_tokens, 0), NEW.cost
    )
    ON CONFLICT (run_id) DO UPDATE SET
        input_tokens = input_tokens + excluded.input_tokens,
        output_tokens = output_tokens + excluded.output_tokens,
        cost = CASE WHEN excluded.cost IS NULL THEN cost ELSE coalesce(cost, 0) + excluded.cost END,
        has_ledger = 1;
END;

-- A turn_started event: the run's turn count (other events change nothing).
CREATE TRIGGER prism_run_summaries_turn AFTER INSERT ON prism_run_events
WHEN NEW.type = 'turn_started'
BEGIN
    INSERT INTO prism_run_summaries (run_id, session_id, started_at, has_ledger, turns)
    VALUES (NEW.run_id, NEW.session_id, coalesce(json_extract(NEW.body, '$.timestamp'), ''), 1, 1)
    ON CONFLICT (run_id) DO UPDATE SET turns = turns + 1, has_ledger = 1;
END;

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

-- ---------------------------------------------------------------------------- backfill
-- (A durable run's status time is taken from its envelope's last save; the triggers record
-- the save that changed the status, which is not stored.)

INSERT INTO prism_sessions (session_id, created_at, updated_at, entries, last_entry_id)
SELECT s.session_id, s.first_ts, s.last_ts, s.n, e.id
  FROM (SELECT session_id, count(*) AS n, min("timestamp") AS first_ts,
               max("timestamp") AS last_ts, max(seq) AS last_seq
          FROM prism_session_entries GROUP BY session_id) AS s
  JOIN prism_session_entries AS e ON e.seq = s.last_seq;

UPDATE prism_sessions
   SET (first_input, parent_session_id) = (
       SELECT (SELECT substr(group_concat(json_extract(part.value, '$.text'), ''), 1, 200)
                 FROM json_each(e.body, '$.message.content') AS part
                WHERE json_extract(part.value, '$.type') = 'text'),
              json_extract(e.body, '$.message.metadata.parent_run.session_id')
         FROM prism_session_entries AS e
        WHERE e.session_id = prism_sessions.session_id
          AND e.kind = 'message'
          AND CASE WHEN json_valid(e.body)
                   THEN json_extract(e.body, '$.message.role') = 'user' ELSE 0 END
        ORDER BY e.seq LIMIT 1);

UPDATE prism_usage
   SET "timestamp" = json_extract(body, '$.timestamp'),
       model = json_extract(body, '$.model'),
       input_tokens = json_extract(body, '$.usage.input_tokens'),
       output_tokens = json_extract(body, '$.usage.output_tokens'),
       cost = json_extract(body, '$.usage.cost')
 WHERE CASE WHEN json_valid(body) THEN json_type(body) = 'object' ELSE 0 END;

-- Each ledger run's latest run row, its first start and its provider-turn usage.
INSERT INTO prism_run_summaries (
    run_id, session_id, agent_id, status, model, provider, started_at, finished_at,
    stop_reason, error, status_at, has_ledger
)
SELECT r.id, r.session_id, json_extract(r.body, '$.agent_id'), r.status,
       json_extract(r.body, '$.model.model'), json_extract(r.body, '$.provider'),
       coalesce((SELECT min(json_extract(f.body, '$.started_at')) FROM prism_runs AS f
                  WHERE f.id = r.id AND json_valid(f.body)), ''),
       json_extract(r.body, '$.finished_at'), json_extract(r.body, '$.stop_reason'),
       json_extract(r.body, '$.error'),
       coalesce(json_extract(r.body, '$.finished_at'), json_extract(r.body, '$.started_at')),
       1
  FROM prism_runs AS r
 WHERE r.seq = (SELECT max(l.seq) FROM prism_runs AS l WHERE l.id = r.id AND json_valid(l.body));

INSERT INTO prism_run_summaries (
    run_id, session_id, started_at, has_ledger, input_tokens, output_tokens, cost
)
SELECT run_id, min(session_id), coalesce(min("timestamp"), ''), 1,
       coalesce(sum(input_tokens), 0), coalesce(sum(output_tokens), 0), sum(cost)
  FROM prism_usage
 WHERE scope = 'provider_turn'
 GROUP BY run_id
    ON CONFLICT (run_id) DO UPDATE SET
       input_tokens = excluded.input_tokens,
       output_tokens = excluded.output_tokens,
       cost = excluded.cost;

INSERT INTO prism_run_summaries (run_id, session_id, started_at, has_ledger, turns)
SELECT run_id, min(session_id),
       coalesce(min(CASE WHEN json_valid(body) THEN json_extract(body, '$.timestamp') END), ''),
       1, count(*)
  FROM prism_run_events
 WHERE type = 'turn_started'
 GROUP BY run_id
    ON CONFLICT (run_id) DO UPDATE SET turns = excluded.turns;

INSERT INTO prism_run_summaries (
    run_id, session_id, agent_id, status, model, provider, started_at, finished_at,
    stop_reason, status_at
)
SELECT key, run_session_id, json_extract(value, '$.agent_id'), run_status,
       json_extract(value, '$.model.model'), json_extract(value, '$.model.provider'),
       created_at,
       CASE WHEN run_status NOT IN ('running', 'suspended') THEN updated_at END,
       json_extract(value, '$.stop_reason'), updated_at
  FROM prism_checkpoints
 WHERE namespace = 'prism.agent-run' AND run_status IS NOT NULL AND run_session_id IS NOT NULL
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

UPDATE prism_sessions
   SET updated_at = (SELECT max(r.status_at) FROM prism_run_summaries AS r
                      WHERE r.session_id = prism_sessions.session_id)
 WHERE updated_at < (SELECT max(r.status_at) FROM prism_run_summaries AS r
                      WHERE r.session_id = prism_sessions.session_id);
