-- prism-runtime store schema, version 3, PostgreSQL: what an inspector reads (prism.inspection).
-- {schema} is replaced by the store's quoted schema name. Applied once, inside the opening
-- transaction under an advisory lock; recorded in prism_schema_migrations with the SHA-256 of
-- this file. Never edit a shipped migration: add a new numbered file instead.
--
-- Two summary tables, kept in the transaction of the write they summarise:
--
-- * prism_sessions — one row per session: entry count, first and latest activity, the latest
--   entry, the first user message's text and the parent session of an agent tool's child
--   session. prism_append_entry (replaced below) upserts it with every entry it inserts.
-- * prism_run_summaries — one row per run, kept by triggers on ledger run rows, provider-turn
--   usage rows, turn_started events and a durable envelope's status changes (namespace 'prism.agent-run'; not on
--   every turn's save). Of the ledger and the envelope, the newer status wins.
--
-- Every write that touches both locks the session row before the run row (an entry append,
-- then its envelope; a ledger run row; an envelope's status change), so they never deadlock.
-- Usage rows get the columns a usage report groups and sums. Rows stored before this migration
-- are summarised here, once. (A row stored wrapped because it holds a NUL character is summarised
-- without the fields the wrapping hides.)

-- ---------------------------------------------------------------------------- sessions

CREATE TABLE {schema}.prism_sessions (
    session_id TEXT NOT NULL,
    parent_session_id TEXT,
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL,
    entries BIGINT NOT NULL,
    last_entry_id TEXT NOT NULL,
    first_input TEXT,
    CONSTRAINT prism_sessions_pkey PRIMARY KEY (session_id)
);

-- Most recently active first, keyset-paged on (updated_at, session_id).
CREATE INDEX prism_sessions_recent ON {schema}.prism_sessions (updated_at, session_id);

-- An agent tool's child sessions, under their parent.
CREATE INDEX prism_sessions_children
    ON {schema}.prism_sessions (parent_session_id, updated_at, session_id)
    WHERE parent_session_id IS NOT NULL;

-- The first 200 characters of the text parts of a stored message's content.
CREATE FUNCTION {schema}.prism_message_text(p_body JSONB) RETURNS TEXT
LANGUAGE sql IMMUTABLE
AS $fn$
    SELECT left(string_agg(part ->> 'text', '' ORDER BY ord), 200)
      FROM jsonb_array_elements(
               CASE WHEN jsonb_typeof(p_body #> '{message,content}') = 'array'
                    THEN p_body #> '{message,content}' ELSE '[]'::jsonb END
           ) WITH ORDINALITY AS t(part, ord)
     WHERE part ->> 'type' = 'text'
$fn$;

-- The append of migration 1, and with each inserted entry the session's summary: one upsert;
-- the first user message's text and parent session are read only until the session has them.
CREATE OR REPLACE FUNCTION {schema}.prism_append_entry(
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
    missing_input BOOLEAN;
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
        INSERT INTO {schema}.prism_sessions AS s (
            session_id, created_at, updated_at, entries, last_entry_id
        ) VALUES (p_session_id, p_timestamp, p_timestamp, 1, p_id)
        ON CONFLICT (session_id) DO UPDATE SET
            created_at = LEAST(s.created_at, EXCLUDED.created_at),
            updated_at = GREATEST(s.updated_at, EXCLUDED.updated_at),
            entries = s.entries + 1,
            last_entry_id = EXCLUDED.last_entry_id
        RETURNING s.first_input IS NULL INTO missing_input;
        IF missing_input AND p_kind = 'message' AND p_body #>> '{message,role}' = 'user' THEN
            UPDATE {schema}.prism_sessions
               SET first_input = {schema}.prism_message_text(p_body),
                   parent_session_id = coalesce(
                       parent_session_id, p_body #>> '{message,metadata,parent_run,session_id}')
             WHERE session_id = p_session_id;
        END IF;
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

-- ---------------------------------------------------------------------------- runs

CREATE TABLE {schema}.prism_run_summaries (
    run_id TEXT NOT NULL,
    session_id TEXT NOT NULL,
    agent_id TEXT,
    status TEXT,
    model TEXT,
    provider TEXT,
    started_at TEXT NOT NULL,
    finished_at TEXT,
    stop_reason TEXT,
    error JSONB,
    status_at TEXT,
    has_ledger BOOLEAN NOT NULL DEFAULT false,
    turns BIGINT NOT NULL DEFAULT 0,
    input_tokens BIGINT NOT NULL DEFAULT 0,
    output_tokens BIGINT NOT NULL DEFAULT 0,
    cost DOUBLE PRECISION,
    CONSTRAINT prism_run_summaries_pkey PRIMARY KEY (run_id)
);

-- Newest start first, keyset-paged on (started_at, run_id): all runs, a session's, an agent's,
-- a status's; and the runs of a model.
CREATE INDEX prism_run_summaries_started ON {schema}.prism_run_summaries (started_at, run_id);
CREATE INDEX prism_run_summaries_session
    ON {schema}.prism_run_summaries (session_id, started_at, run_id);
CREATE INDEX prism_run_summaries_agent
    ON {schema}.prism_run_summaries (agent_id, started_at, run_id);
CREATE INDEX prism_run_summaries_status
    ON {schema}.prism_run_summaries (status, started_at, run_id);
CREATE INDEX prism_run_summaries_model ON {schema}.prism_run_summaries (model, session_id);

-- Usage: the columns a report groups and sums (the store writes them with the row).
ALTER TABLE {schema}.prism_usage
    ADD COLUMN "timestamp" TEXT,
    ADD COLUMN model TEXT,
    ADD COLUMN input_tokens BIGINT,
    ADD COLUMN output_tokens BIGINT,
    ADD COLUMN cost DOUBLE PRECISION;

CREATE INDEX prism_usage_turns ON {schema}.prism_usage ("timestamp")
    WHERE scope = 'provider_turn';

-- A ledger run row (start or finish): the session's latest activity, then the run's summary.
CREATE FUNCTION {schema}.prism_run_summaries_run() RETURNS trigger
LANGUAGE plpgsql
AS $fn$
DECLARE
    activity_at TEXT := coalesce(NEW.body ->> 'finished_at', NEW.body ->> 'started_at');
BEGIN
    UPDATE {schema}.prism_sessions SET updated_at = activity_at
     WHERE session_id = NEW.session_id AND updated_at < activity_at;
    INSERT INTO {schema}.prism_run_summaries AS s (
        run_id, session_id, agent_id, status, model, provider, started_at, finished_at,
        stop_reason, error, status_at, has_ledger
    ) VALUES (
        NEW.id, NEW.session_id, NEW.body ->> 'agent_id', NEW.status,
        NEW.body #>> '{model,model}', NEW.body ->> 'provider',
        coalesce(NEW.body ->> 'started_at', ''), NEW.body ->> 'finished_at',
        NEW.body ->> 'stop_reason', NEW.body -> 'error', activity_at, true
    )
    ON CONFLICT (run_id) DO UPDATE SET
        agent_id = coalesce(EXCLUDED.agent_id, s.agent_id),
        model = coalesce(EXCLUDED.model, s.model),
        provider = coalesce(EXCLUDED.provider, s.provider),
        started_at = LEAST(s.started_at, EXCLUDED.started_at),
        status = CASE WHEN EXCLUDED.status_at >= coalesce(s.status_at, '')
                      THEN EXCLUDED.status ELSE s.status END,
        finished_at = CASE WHEN EXCLUDED.status_at >= coalesce(s.status_at, '')
                           THEN EXCLUDED.finished_at ELSE s.finished_at END,
        stop_reason = CASE WHEN EXCLUDED.status_at >= coalesce(s.status_at, '')
                           THEN EXCLUDED.stop_reason ELSE s.stop_reason END,
        error = CASE WHEN EXCLUDED.status_at >= coalesce(s.status_at, '')
                     THEN EXCLUDED.error ELSE s.error END,
        status_at = GREATEST(s.status_at, EXCLUDED.status_at),
        has_ledger = true;
    RETURN NULL;
END
$fn$;

CREATE TRIGGER prism_run_summaries_run AFTER INSERT ON {schema}.prism_runs
    FOR EACH ROW EXECUTE FUNCTION {schema}.prism_run_summaries_run();

-- A provider turn's usage: the run's token and cost totals.
CREATE FUNCTION {schema}.prism_run_summaries_usage() RETURNS trigger
LANGUAGE plpgsql
AS $fn$
BEGIN
    INSERT INTO {schema}.prism_run_summaries AS s (
        run_id, session_id, started_at, has_ledger, input_tokens, output_tokens, cost
    ) VALUES (
        NEW.run_id, NEW.session_id, coalesce(NEW."timestamp", ''), true,
        coalesce(NEW.input_tokens, 0), coalesce(NEW.output_tokens, 0), NEW.cost
    )
    ON CONFLICT (run_id) DO UPDATE SET
        input_tokens = s.input_tokens + EXCLUDED.input_tokens,
        output_tokens = s.output_tokens + EXCLUDED.output_tokens,
        cost = CASE WHEN EXCLUDED.cost IS NULL THEN s.cost
                    ELSE coalesce(s.cost, 0) + EXCLUDED.cost END,
        has_ledger = true;
    RETURN NULL;
END
$fn$;

CREATE TRIGGER prism_run_summaries_usage AFTER INSERT ON {schema}.prism_usage
    FOR EACH ROW WHEN (NEW.scope = 'provider_turn')
    EXECUTE FUNCTION {schema}.prism_run_summaries_usage();

-- A turn_started event: the run's turn count (other events change nothing).
CREATE FUNCTION {schema}.prism_run_summaries_turn() RETURNS trigger
LANGUAGE plpgsql
AS $fn$
BEGIN
    INSERT INTO {schema}.prism_run_summaries AS s (
        run_id, session_id, started_at, has_ledger, turns
    ) VALUES (
        NEW.run_id, NEW.session_id, coalesce(NEW.body ->> 'timestamp', ''), true, 1
    )
    ON CONFLICT (run_id) DO UPDATE SET turns = s.turns + 1, has_ledger = true;
    RETURN NULL;
END
$fn$;

CREATE TRIGGER prism_run_summaries_turn AFTER INSERT ON {schema}.prism_run_events
    FOR EACH ROW WHEN (NEW.type = 'turn_started')
    EXECUTE FUNCTION {schema}.prism_run_summaries_turn();

-- A durable run's envelope, when it is first saved and when its status changes: the session's
-- latest activity, then the run's summary.
CREATE FUNCTION {schema}.prism_run_summaries_envelope() RETURNS trigger
LANGUAGE plpgsql
AS $fn$
BEGIN
    UPDATE {schema}.prism_sessions SET updated_at = NEW.updated_at
     WHERE session_id = NEW.run_session_id AND updated_at < NEW.updated_at;
    INSERT INTO {schema}.prism_run_summaries AS s (
        run_id, session_id, agent_id, status, model, provider, started_at, finished_at,
        stop_reason, status_at
    ) VALUES (
        NEW.key, NEW.run_session_id, NEW.value ->> 'agent_id', NEW.run_status,
        NEW.value #>> '{model,model}', NEW.value #>> '{model,provider}', NEW.created_at,
        CASE WHEN NEW.run_status NOT IN ('running', 'suspended') THEN NEW.updated_at END,
        NEW.value ->> 'stop_reason', NEW.updated_at
    )
    ON CONFLICT (run_id) DO UPDATE SET
        agent_id = coalesce(s.agent_id, EXCLUDED.agent_id),
        model = coalesce(s.model, EXCLUDED.model),
        provider = coalesce(s.provider, EXCLUDED.provider),
        started_at = LEAST(s.started_at, EXCLUDED.started_at),
        status = CASE WHEN EXCLUDED.status_at >= coalesce(s.status_at, '')
                      THEN EXCLUDED.status ELSE s.status END,
        finished_at = CASE WHEN EXCLUDED.status_at >= coalesce(s.status_at, '')
                           THEN EXCLUDED.finished_at ELSE s.finished_at END,
        stop_reason = CASE WHEN EXCLUDED.status_at >= coalesce(s.status_at, '')
                           THEN EXCLUDED.stop_reason ELSE s.stop_reason END,
        error = CASE WHEN EXCLUDED.status_at >= coalesce(s.status_at, '')
                     THEN NULL ELSE s.error END,
        status_at = GREATEST(s.status_at, EXCLUDED.status_at);
    RETURN NULL;
END
$fn$;

CREATE TRIGGER prism_run_summaries_envelope_insert AFTER INSERT ON {schema}.prism_checkpoints
    FOR EACH ROW
    WHEN (NEW.namespace = 'prism.agent-run' AND NEW.run_status IS NOT NULL
          AND NEW.run_session_id IS NOT NULL)
    EXECUTE FUNCTION {schema}.prism_run_summaries_envelope();

CREATE TRIGGER prism_run_summaries_envelope_update AFTER UPDATE ON {schema}.prism_checkpoints
    FOR EACH ROW
    WHEN (NEW.namespace = 'prism.agent-run' AND NEW.run_status IS NOT NULL
          AND NEW.run_session_id IS NOT NULL AND OLD.run_status IS DISTINCT FROM NEW.run_status)
    EXECUTE FUNCTION {schema}.prism_run_summaries_envelope();

-- ---------------------------------------------------------------------------- backfill
-- (A durable run's status time is taken from its envelope's last save; the triggers record
-- the save that changed the status, which is not stored.)

INSERT INTO {schema}.prism_sessions (session_id, created_at, updated_at, entries, last_entry_id)
SELECT s.session_id, s.first_ts, s.last_ts, s.n, e.id
  FROM (SELECT session_id, count(*) AS n, min("timestamp") AS first_ts,
               max("timestamp") AS last_ts, max(seq) AS last_seq
          FROM {schema}.prism_session_entries GROUP BY session_id) AS s
  JOIN {schema}.prism_session_entries AS e ON e.session_id = s.session_id AND e.seq = s.last_seq;

UPDATE {schema}.prism_sessions AS p
   SET first_input = f.text, parent_session_id = f.parent
  FROM (SELECT DISTINCT ON (e.session_id) e.session_id,
               {schema}.prism_message_text(e.body) AS text,
               e.body #>> '{message,metadata,parent_run,session_id}' AS parent
          FROM {schema}.prism_session_entries AS e
         WHERE e.kind = 'message' AND e.body #>> '{message,role}' = 'user'
         ORDER BY e.session_id, e.seq) AS f
 WHERE p.session_id = f.session_id;

UPDATE {schema}.prism_usage
   SET "timestamp" = body ->> 'timestamp',
       model = body ->> 'model',
       input_tokens = (body #>> '{usage,input_tokens}')::bigint,
       output_tokens = (body #>> '{usage,output_tokens}')::bigint,
       cost = (body #>> '{usage,cost}')::double precision;

-- Each ledger run's latest run row, its first start and its provider-turn usage.
INSERT INTO {schema}.prism_run_summaries (
    run_id, session_id, agent_id, status, model, provider, started_at, finished_at,
    stop_reason, error, status_at, has_ledger
)
SELECT DISTINCT ON (r.id)
       r.id, r.session_id, r.body ->> 'agent_id', r.status, r.body #>> '{model,model}',
       r.body ->> 'provider',
       coalesce((SELECT min(f.body ->> 'started_at') FROM {schema}.prism_runs AS f
                  WHERE f.id = r.id), ''),
       r.body ->> 'finished_at', r.body ->> 'stop_reason', r.body -> 'error',
       coalesce(r.body ->> 'finished_at', r.body ->> 'started_at'), true
  FROM {schema}.prism_runs AS r
 ORDER BY r.id, r.seq DESC;

INSERT INTO {schema}.prism_run_summaries AS s (
    run_id, session_id, started_at, has_ledger, input_tokens, output_tokens, cost
)
SELECT run_id, min(session_id), coalesce(min("timestamp"), ''), true,
       coalesce(sum(input_tokens), 0), coalesce(sum(output_tokens), 0), sum(cost)
  FROM {schema}.prism_usage
 WHERE scope = 'provider_turn'
 GROUP BY run_id
    ON CONFLICT (run_id) DO UPDATE SET
       input_tokens = EXCLUDED.input_tokens,
       output_tokens = EXCLUDED.output_tokens,
       cost = EXCLUDED.cost;

INSERT INTO {schema}.prism_run_summaries AS s (run_id, session_id, started_at, has_ledger, turns)
SELECT run_id, min(session_id), coalesce(min(body ->> 'timestamp'), ''), true, count(*)
  FROM {schema}.prism_run_events
 WHERE type = 'turn_started'
 GROUP BY run_id
    ON CONFLICT (run_id) DO UPDATE SET turns = EXCLUDED.turns;

INSERT INTO {schema}.prism_run_summaries AS s (
    run_id, session_id, agent_id, status, model, provider, started_at, finished_at,
    stop_reason, status_at
)
SELECT key, run_session_id, value ->> 'agent_id', run_status, value #>> '{model,model}',
       value #>> '{model,provider}', created_at,
       CASE WHEN run_status NOT IN ('running', 'suspended') THEN updated_at END,
       value ->> 'stop_reason', updated_at
  FROM {schema}.prism_checkpoints
 WHERE namespace = 'prism.agent-run' AND run_status IS NOT NULL AND run_session_id IS NOT NULL
    ON CONFLICT (run_id) DO UPDATE SET
       agent_id = coalesce(s.agent_id, EXCLUDED.agent_id),
       model = coalesce(s.model, EXCLUDED.model),
       provider = coalesce(s.provider, EXCLUDED.provider),
       started_at = LEAST(s.started_at, EXCLUDED.started_at),
       status = CASE WHEN EXCLUDED.status_at >= coalesce(s.status_at, '')
                     THEN EXCLUDED.status ELSE s.status END,
       finished_at = CASE WHEN EXCLUDED.status_at >= coalesce(s.status_at, '')
                          THEN EXCLUDED.finished_at ELSE s.finished_at END,
       stop_reason = CASE WHEN EXCLUDED.status_at >= coalesce(s.status_at, '')
                          THEN EXCLUDED.stop_reason ELSE s.stop_reason END,
       error = CASE WHEN EXCLUDED.status_at >= coalesce(s.status_at, '')
                    THEN NULL ELSE s.error END,
       status_at = GREATEST(s.status_at, EXCLUDED.status_at);

UPDATE {schema}.prism_sessions AS p
   SET updated_at = r.at
  FROM (SELECT session_id, max(status_at) AS at FROM {schema}.prism_run_summaries
         GROUP BY session_id) AS r
 WHERE r.session_id = p.session_id AND p.updated_at < r.at;
