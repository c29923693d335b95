-- Rendered by this package's TestGoldenSQL; regenerate with: go test -run TestGoldenSQL -update

-- create table 1
CREATE TABLE IF NOT EXISTS "outbox" ("msg_id" VARCHAR(64) NOT NULL, "state" BIGINT NOT NULL DEFAULT 0, "cron_token" VARCHAR(40), "send_at" TIMESTAMPTZ, "tries" BIGINT NOT NULL DEFAULT 0, PRIMARY KEY ("msg_id"));

-- claim
-- args: after, limit, after, limit, limit, token
WITH cl_c AS MATERIALIZED ( SELECT "msg_id"
  FROM (SELECT "msg_id"
  FROM "outbox"
  WHERE "state" = 0 AND ("msg_id" || '') > $1::text
  ORDER BY ("msg_id" || '')
  LIMIT $2
  FOR UPDATE SKIP LOCKED) cl_above
  UNION ALL SELECT "msg_id"
  FROM (SELECT "msg_id"
  FROM "outbox"
  WHERE "state" = 0 AND ("msg_id" || '') <= $3::text
  ORDER BY ("msg_id" || '')
  LIMIT $4
  FOR UPDATE SKIP LOCKED) cl_wrap
  LIMIT $5) UPDATE "outbox"
  SET "state" = 1, "cron_token" = $6, "send_at" = now(), "tries" = COALESCE("tries", 0) + 1
  WHERE "msg_id" = ANY(ARRAY(SELECT "msg_id"
  FROM cl_c)) AND "state" = 0
  RETURNING "msg_id", COALESCE("tries", 0);

-- read back
-- args: token
SELECT "msg_id", COALESCE("tries", 0)
  FROM "outbox"
  WHERE "cron_token" = $1
  ORDER BY "msg_id";

-- read back keys (by keys)
-- args: token, keys
SELECT "msg_id", COALESCE("tries", 0)
  FROM "outbox"
  WHERE "cron_token" = $1 AND "msg_id" = ANY($2::text[])
  ORDER BY "msg_id";

-- ack (to 2)
-- args: token, keys
UPDATE "outbox"
  SET "state" = 2, "cron_token" = NULL
  WHERE "cron_token" = $1 AND "msg_id" = ANY($2::text[])
  RETURNING "msg_id", false;

-- ack (to 0)
-- args: token, keys
UPDATE "outbox"
  SET "state" = 0, "cron_token" = NULL, "send_at" = NULL
  WHERE "cron_token" = $1 AND "msg_id" = ANY($2::text[])
  RETURNING "msg_id", false;

-- ack (to 3)
-- args: token, keys
UPDATE "outbox"
  SET "state" = 3, "cron_token" = NULL
  WHERE "cron_token" = $1 AND "msg_id" = ANY($2::text[])
  RETURNING "msg_id", false;

-- ack requeue (undo, to 0)
-- args: token, keys
UPDATE "outbox"
  SET "state" = 0, "cron_token" = NULL, "tries" = GREATEST("tries" - 1, 0), "send_at" = NULL
  WHERE "cron_token" = $1 AND "msg_id" = ANY($2::text[])
  RETURNING "msg_id", false;

-- ack lock
-- args: token, keys
SELECT "msg_id", 0, "tries"
  FROM "outbox"
  WHERE "cron_token" = $1 AND "msg_id" = ANY($2::text[])
  ORDER BY "msg_id"::text COLLATE "C"
  FOR UPDATE;

-- release keys (by keys)
-- args: token, keys
WITH cl_c AS MATERIALIZED ( SELECT "msg_id"
  FROM "outbox"
  WHERE "cron_token" = $1 AND "state" = 1 AND "msg_id" = ANY($2::text[])
  ORDER BY "msg_id"::text COLLATE "C" FOR NO KEY UPDATE) UPDATE "outbox"
  SET "state" = 0, "cron_token" = NULL, "tries" = GREATEST("tries" - 1, 0), "send_at" = NULL
  WHERE "msg_id" = ANY(ARRAY(SELECT "msg_id"
  FROM cl_c));

-- ack park (park at max)
-- args: max_attempts, max_attempts, token, keys
UPDATE "outbox"
  SET "state" = CASE WHEN COALESCE("tries", 0) >= $1::bigint THEN 3 ELSE 0 END, "cron_token" = NULL, "send_at" = CASE WHEN COALESCE("tries", 0) >= $2::bigint THEN "send_at" END
  WHERE "cron_token" = $3 AND "msg_id" = ANY($4::text[])
  RETURNING "msg_id", "state" = 3;

-- heartbeat
-- args: token
WITH cl_c AS MATERIALIZED ( SELECT "msg_id"
  FROM "outbox"
  WHERE "cron_token" = $1 AND "state" = 1
  ORDER BY "msg_id"::text COLLATE "C" FOR NO KEY UPDATE) UPDATE "outbox"
  SET "send_at" = GREATEST(now(), "send_at" + interval '1 microsecond')
  WHERE "msg_id" = ANY(ARRAY(SELECT "msg_id"
  FROM cl_c))
  RETURNING "msg_id";

-- release
-- args: token
WITH cl_c AS MATERIALIZED ( SELECT "msg_id"
  FROM "outbox"
  WHERE "cron_token" = $1 AND "state" = 1
  ORDER BY "msg_id"::text COLLATE "C" FOR NO KEY UPDATE) UPDATE "outbox"
  SET "state" = 0, "cron_token" = NULL, "tries" = GREATEST("tries" - 1, 0), "send_at" = NULL
  WHERE "msg_id" = ANY(ARRAY(SELECT "msg_id"
  FROM cl_c));

-- reap
-- args: timeout, limit
WITH cl_c AS MATERIALIZED ( SELECT "msg_id"
  FROM "outbox"
  WHERE "state" = 1 AND "send_at" < now() - ($1::bigint * interval '1 microsecond')
  ORDER BY "send_at"
  LIMIT $2
  FOR UPDATE SKIP LOCKED) UPDATE "outbox"
  SET "state" = 0, "cron_token" = NULL, "send_at" = NULL
  WHERE "msg_id" = ANY(ARRAY(SELECT "msg_id"
  FROM cl_c)) AND "state" = 1;

-- reap (scoped)
-- args: timeout, limit
WITH cl_c AS MATERIALIZED ( SELECT "msg_id"
  FROM "outbox"
  WHERE "state" = 1 AND "send_at" < now() - ($1::bigint * interval '1 microsecond')
  ORDER BY "send_at"
  LIMIT $2
  FOR UPDATE SKIP LOCKED) UPDATE "outbox"
  SET "state" = 0, "cron_token" = NULL, "send_at" = NULL
  WHERE "msg_id" = ANY(ARRAY(SELECT "msg_id"
  FROM cl_c)) AND "state" = 1;

-- reap (park)
-- args: timeout, max_attempts, limit
WITH cl_c AS MATERIALIZED ( SELECT "msg_id"
  FROM "outbox"
  WHERE "state" = 1 AND "send_at" < now() - ($1::bigint * interval '1 microsecond') AND COALESCE("tries", 0) >= $2::bigint
  ORDER BY "send_at"
  LIMIT $3
  FOR UPDATE SKIP LOCKED) UPDATE "outbox"
  SET "state" = 3, "cron_token" = NULL
  WHERE "msg_id" = ANY(ARRAY(SELECT "msg_id"
  FROM cl_c)) AND "state" = 1;

-- reap (scoped, park)
-- args: timeout, max_attempts, limit
WITH cl_c AS MATERIALIZED ( SELECT "msg_id"
  FROM "outbox"
  WHERE "state" = 1 AND "send_at" < now() - ($1::bigint * interval '1 microsecond') AND COALESCE("tries", 0) >= $2::bigint
  ORDER BY "send_at"
  LIMIT $3
  FOR UPDATE SKIP LOCKED) UPDATE "outbox"
  SET "state" = 3, "cron_token" = NULL
  WHERE "msg_id" = ANY(ARRAY(SELECT "msg_id"
  FROM cl_c)) AND "state" = 1;

-- reap (below)
-- args: timeout, below, limit
WITH cl_c AS MATERIALIZED ( SELECT "msg_id"
  FROM "outbox"
  WHERE "state" = 1 AND "send_at" < now() - ($1::bigint * interval '1 microsecond') AND COALESCE("tries", 0) < $2::bigint
  ORDER BY "send_at"
  LIMIT $3
  FOR UPDATE SKIP LOCKED) UPDATE "outbox"
  SET "state" = 0, "cron_token" = NULL, "send_at" = NULL
  WHERE "msg_id" = ANY(ARRAY(SELECT "msg_id"
  FROM cl_c)) AND "state" = 1;

-- reap (scoped, below)
-- args: timeout, below, limit
WITH cl_c AS MATERIALIZED ( SELECT "msg_id"
  FROM "outbox"
  WHERE "state" = 1 AND "send_at" < now() - ($1::bigint * interval '1 microsecond') AND COALESCE("tries", 0) < $2::bigint
  ORDER BY "send_at"
  LIMIT $3
  FOR UPDATE SKIP LOCKED) UPDATE "outbox"
  SET "state" = 0, "cron_token" = NULL, "send_at" = NULL
  WHERE "msg_id" = ANY(ARRAY(SELECT "msg_id"
  FROM cl_c)) AND "state" = 1;

-- unpark
-- args: limit
WITH cl_c AS MATERIALIZED ( SELECT "msg_id"
  FROM "outbox"
  WHERE "state" = 3
  LIMIT $1
  FOR UPDATE) UPDATE "outbox"
  SET "state" = 0, "cron_token" = NULL, "send_at" = NULL
  WHERE "msg_id" = ANY(ARRAY(SELECT "msg_id"
  FROM cl_c)) AND "state" = 3;

-- unpark (by keys)
-- args: keys, limit
WITH cl_c AS MATERIALIZED ( SELECT "msg_id"
  FROM "outbox"
  WHERE "state" = 3 AND "msg_id" = ANY($1::text[])
  LIMIT $2
  FOR UPDATE) UPDATE "outbox"
  SET "state" = 0, "cron_token" = NULL, "send_at" = NULL
  WHERE "msg_id" = ANY(ARRAY(SELECT "msg_id"
  FROM cl_c)) AND "state" = 3;

-- unpark (scoped)
-- args: limit
WITH cl_c AS MATERIALIZED ( SELECT "msg_id"
  FROM "outbox"
  WHERE "state" = 3
  LIMIT $1
  FOR UPDATE) UPDATE "outbox"
  SET "state" = 0, "cron_token" = NULL, "send_at" = NULL
  WHERE "msg_id" = ANY(ARRAY(SELECT "msg_id"
  FROM cl_c)) AND "state" = 3;

-- unpark (scoped, by keys)
-- args: keys, limit
WITH cl_c AS MATERIALIZED ( SELECT "msg_id"
  FROM "outbox"
  WHERE "state" = 3 AND "msg_id" = ANY($1::text[])
  LIMIT $2
  FOR UPDATE) UPDATE "outbox"
  SET "state" = 0, "cron_token" = NULL, "send_at" = NULL
  WHERE "msg_id" = ANY(ARRAY(SELECT "msg_id"
  FROM cl_c)) AND "state" = 3;

-- unpark (reset)
-- args: limit
WITH cl_c AS MATERIALIZED ( SELECT "msg_id"
  FROM "outbox"
  WHERE "state" = 3
  LIMIT $1
  FOR UPDATE) UPDATE "outbox"
  SET "state" = 0, "cron_token" = NULL, "send_at" = NULL, "tries" = 0
  WHERE "msg_id" = ANY(ARRAY(SELECT "msg_id"
  FROM cl_c)) AND "state" = 3;

-- unpark (by keys, reset)
-- args: keys, limit
WITH cl_c AS MATERIALIZED ( SELECT "msg_id"
  FROM "outbox"
  WHERE "state" = 3 AND "msg_id" = ANY($1::text[])
  LIMIT $2
  FOR UPDATE) UPDATE "outbox"
  SET "state" = 0, "cron_token" = NULL, "send_at" = NULL, "tries" = 0
  WHERE "msg_id" = ANY(ARRAY(SELECT "msg_id"
  FROM cl_c)) AND "state" = 3;

-- unpark (scoped, reset)
-- args: limit
WITH cl_c AS MATERIALIZED ( SELECT "msg_id"
  FROM "outbox"
  WHERE "state" = 3
  LIMIT $1
  FOR UPDATE) UPDATE "outbox"
  SET "state" = 0, "cron_token" = NULL, "send_at" = NULL, "tries" = 0
  WHERE "msg_id" = ANY(ARRAY(SELECT "msg_id"
  FROM cl_c)) AND "state" = 3;

-- unpark (scoped, by keys, reset)
-- args: keys, limit
WITH cl_c AS MATERIALIZED ( SELECT "msg_id"
  FROM "outbox"
  WHERE "state" = 3 AND "msg_id" = ANY($1::text[])
  LIMIT $2
  FOR UPDATE) UPDATE "outbox"
  SET "state" = 0, "cron_token" = NULL, "send_at" = NULL, "tries" = 0
  WHERE "msg_id" = ANY(ARRAY(SELECT "msg_id"
  FROM cl_c)) AND "state" = 3;

-- list failed
-- args: limit
SELECT "msg_id", COALESCE("cron_token", ''), COALESCE("tries", 0)::bigint, COALESCE(GREATEST(CAST(EXTRACT(EPOCH
  FROM (now() - "send_at")) * 1000000 AS bigint), 0), -1), 0::bigint, ''
  FROM "outbox"
  WHERE "state" = 3
  ORDER BY "send_at"
  LIMIT $1;

-- list failed (scoped)
-- args: limit
SELECT "msg_id", COALESCE("cron_token", ''), COALESCE("tries", 0)::bigint, COALESCE(GREATEST(CAST(EXTRACT(EPOCH
  FROM (now() - "send_at")) * 1000000 AS bigint), 0), -1), 0::bigint, ''
  FROM "outbox"
  WHERE "state" = 3
  ORDER BY "send_at"
  LIMIT $1;

-- list processing
-- args: older, limit
SELECT "msg_id", COALESCE("cron_token", ''), COALESCE("tries", 0)::bigint, COALESCE(GREATEST(CAST(EXTRACT(EPOCH
  FROM (now() - "send_at")) * 1000000 AS bigint), 0), -1), 0::bigint, ''
  FROM "outbox"
  WHERE "state" = 1 AND "send_at" <= now() - ($1::bigint * interval '1 microsecond')
  ORDER BY "send_at"
  LIMIT $2;

-- list processing (scoped)
-- args: older, limit
SELECT "msg_id", COALESCE("cron_token", ''), COALESCE("tries", 0)::bigint, COALESCE(GREATEST(CAST(EXTRACT(EPOCH
  FROM (now() - "send_at")) * 1000000 AS bigint), 0), -1), 0::bigint, ''
  FROM "outbox"
  WHERE "state" = 1 AND "send_at" <= now() - ($1::bigint * interval '1 microsecond')
  ORDER BY "send_at"
  LIMIT $2;

-- stats
SELECT COUNT(*) FILTER (WHERE "state" = 0), COUNT(*) FILTER (WHERE "state" = 1), COUNT(*) FILTER (WHERE "state" = 2), COUNT(*) FILTER (WHERE "state" = 3), COUNT(*), GREATEST(CAST(EXTRACT(EPOCH
  FROM (now() - MIN("send_at") FILTER (WHERE "state" = 1))) * 1000000 AS bigint), 0), NULL::bigint
  FROM "outbox";

-- stats (scoped)
SELECT COUNT(*) FILTER (WHERE "state" = 0), COUNT(*) FILTER (WHERE "state" = 1), COUNT(*) FILTER (WHERE "state" = 2), COUNT(*) FILTER (WHERE "state" = 3), COUNT(*), GREATEST(CAST(EXTRACT(EPOCH
  FROM (now() - MIN("send_at") FILTER (WHERE "state" = 1))) * 1000000 AS bigint), 0), NULL::bigint
  FROM "outbox"
  WHERE TRUE;

-- columns
-- args: schema, table
SELECT c.column_name::text, COALESCE(c.character_maximum_length, 0)::bigint, c.data_type::text, COALESCE(c.datetime_precision, -1)::bigint, COALESCE(c.collation_name, '')::text, c.is_nullable = 'YES', COALESCE((SELECT 'enum(' || string_agg(quote_nullable(e.enumlabel::text), ','
  ORDER BY e.enumsortorder) || ')'
  FROM pg_catalog.pg_enum e JOIN pg_catalog.pg_type t ON t.oid = e.enumtypid JOIN pg_catalog.pg_namespace n ON n.oid = t.typnamespace
  WHERE t.typname = c.udt_name AND n.nspname = c.udt_schema), '')::text, COALESCE((SELECT a.attname = c.column_name AND i.indnatts = 1
  FROM pg_catalog.pg_index i JOIN pg_catalog.pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = i.indkey[0]
  WHERE i.indisprimary AND i.indrelid = to_regclass(quote_ident(c.table_schema) || '.' || quote_ident(c.table_name))), false)
  FROM information_schema.columns c
  WHERE c.table_schema = COALESCE($1::text, current_schema()) AND c.table_name = $2::text;

-- index exists
-- args: schema, table, index
SELECT COUNT(*) FILTER (WHERE i.indisvalid), COUNT(*)
  FROM pg_catalog.pg_index i JOIN pg_catalog.pg_class ic ON ic.oid = i.indexrelid JOIN pg_catalog.pg_class tc ON tc.oid = i.indrelid JOIN pg_catalog.pg_namespace n ON n.oid = tc.relnamespace
  WHERE n.nspname = COALESCE($1::text, current_schema()) AND tc.relname = $2::text AND ic.relname = $3::text;

-- index outbox_cl_claim
CREATE INDEX IF NOT EXISTS "outbox_cl_claim" ON "outbox" ((("msg_id" || '')))
  WHERE "state" = 0;

-- drop index outbox_cl_claim
DROP INDEX IF EXISTS "outbox_cl_claim";

-- index outbox_cl_claim (online)
CREATE INDEX CONCURRENTLY IF NOT EXISTS "outbox_cl_claim" ON "outbox" ((("msg_id" || '')))
  WHERE "state" = 0;

-- drop index outbox_cl_claim (online)
DROP INDEX CONCURRENTLY IF EXISTS "outbox_cl_claim";

-- index outbox_cl_token
CREATE INDEX IF NOT EXISTS "outbox_cl_token" ON "outbox" ("cron_token");

-- drop index outbox_cl_token
DROP INDEX IF EXISTS "outbox_cl_token";

-- index outbox_cl_token (online)
CREATE INDEX CONCURRENTLY IF NOT EXISTS "outbox_cl_token" ON "outbox" ("cron_token");

-- drop index outbox_cl_token (online)
DROP INDEX CONCURRENTLY IF EXISTS "outbox_cl_token";

-- index outbox_cl_reap
CREATE INDEX IF NOT EXISTS "outbox_cl_reap" ON "outbox" ("state", "send_at");

-- drop index outbox_cl_reap
DROP INDEX IF EXISTS "outbox_cl_reap";

-- index outbox_cl_reap (online)
CREATE INDEX CONCURRENTLY IF NOT EXISTS "outbox_cl_reap" ON "outbox" ("state", "send_at");

-- drop index outbox_cl_reap (online)
DROP INDEX CONCURRENTLY IF EXISTS "outbox_cl_reap";

-- ack claim (to 2, pipelined)
-- args: ack_token, keys, after, limit, after, limit, limit, token
WITH cl_a (k, parked) AS ( UPDATE "outbox"
  SET "state" = 2, "cron_token" = NULL
  WHERE "cron_token" = $1 AND "msg_id" = ANY($2::text[])
  RETURNING "msg_id", false), cl_c AS MATERIALIZED ( SELECT "msg_id"
  FROM (SELECT "msg_id"
  FROM "outbox"
  WHERE "state" = 0 AND ("msg_id" || '') > $3::text
  ORDER BY ("msg_id" || '')
  LIMIT $4
  FOR UPDATE SKIP LOCKED) cl_above
  UNION ALL SELECT "msg_id"
  FROM (SELECT "msg_id"
  FROM "outbox"
  WHERE "state" = 0 AND ("msg_id" || '') <= $5::text
  ORDER BY ("msg_id" || '')
  LIMIT $6
  FOR UPDATE SKIP LOCKED) cl_wrap
  LIMIT $7), cl_n AS ( UPDATE "outbox"
  SET "state" = 1, "cron_token" = $8, "send_at" = now(), "tries" = COALESCE("tries", 0) + 1
  WHERE "msg_id" = ANY(ARRAY(SELECT "msg_id"
  FROM cl_c)) AND "state" = 0
  RETURNING "msg_id", COALESCE("tries", 0)) SELECT 0, (SELECT json_agg(k)
  FROM cl_a)::text, (SELECT json_agg(k)
  FROM cl_a
  WHERE parked)::text, NULL, NULL
  UNION ALL SELECT 1, NULL, NULL, cl_n.*
  FROM cl_n
  ORDER BY 1;

-- ack claim (to 0, pipelined)
-- args: ack_token, keys, after, limit, after, limit, limit, token
WITH cl_a (k, parked) AS ( UPDATE "outbox"
  SET "state" = 0, "cron_token" = NULL, "send_at" = NULL
  WHERE "cron_token" = $1 AND "msg_id" = ANY($2::text[])
  RETURNING "msg_id", false), cl_c AS MATERIALIZED ( SELECT "msg_id"
  FROM (SELECT "msg_id"
  FROM "outbox"
  WHERE "state" = 0 AND ("msg_id" || '') > $3::text
  ORDER BY ("msg_id" || '')
  LIMIT $4
  FOR UPDATE SKIP LOCKED) cl_above
  UNION ALL SELECT "msg_id"
  FROM (SELECT "msg_id"
  FROM "outbox"
  WHERE "state" = 0 AND ("msg_id" || '') <= $5::text
  ORDER BY ("msg_id" || '')
  LIMIT $6
  FOR UPDATE SKIP LOCKED) cl_wrap
  LIMIT $7), cl_n AS ( UPDATE "outbox"
  SET "state" = 1, "cron_token" = $8, "send_at" = now(), "tries" = COALESCE("tries", 0) + 1
  WHERE "msg_id" = ANY(ARRAY(SELECT "msg_id"
  FROM cl_c)) AND "state" = 0
  RETURNING "msg_id", COALESCE("tries", 0)) SELECT 0, (SELECT json_agg(k)
  FROM cl_a)::text, (SELECT json_agg(k)
  FROM cl_a
  WHERE parked)::text, NULL, NULL
  UNION ALL SELECT 1, NULL, NULL, cl_n.*
  FROM cl_n
  ORDER BY 1;

-- ack claim (to 3, pipelined)
-- args: ack_token, keys, after, limit, after, limit, limit, token
WITH cl_a (k, parked) AS ( UPDATE "outbox"
  SET "state" = 3, "cron_token" = NULL
  WHERE "cron_token" = $1 AND "msg_id" = ANY($2::text[])
  RETURNING "msg_id", false), cl_c AS MATERIALIZED ( SELECT "msg_id"
  FROM (SELECT "msg_id"
  FROM "outbox"
  WHERE "state" = 0 AND ("msg_id" || '') > $3::text
  ORDER BY ("msg_id" || '')
  LIMIT $4
  FOR UPDATE SKIP LOCKED) cl_above
  UNION ALL SELECT "msg_id"
  FROM (SELECT "msg_id"
  FROM "outbox"
  WHERE "state" = 0 AND ("msg_id" || '') <= $5::text
  ORDER BY ("msg_id" || '')
  LIMIT $6
  FOR UPDATE SKIP LOCKED) cl_wrap
  LIMIT $7), cl_n AS ( UPDATE "outbox"
  SET "state" = 1, "cron_token" = $8, "send_at" = now(), "tries" = COALESCE("tries", 0) + 1
  WHERE "msg_id" = ANY(ARRAY(SELECT "msg_id"
  FROM cl_c)) AND "state" = 0
  RETURNING "msg_id", COALESCE("tries", 0)) SELECT 0, (SELECT json_agg(k)
  FROM cl_a)::text, (SELECT json_agg(k)
  FROM cl_a
  WHERE parked)::text, NULL, NULL
  UNION ALL SELECT 1, NULL, NULL, cl_n.*
  FROM cl_n
  ORDER BY 1;

-- ack claim park (park at max, pipelined)
-- args: max_attempts, max_attempts, ack_token, keys, after, limit, after, limit, limit, token
WITH cl_a (k, parked) AS ( UPDATE "outbox"
  SET "state" = CASE WHEN COALESCE("tries", 0) >= $1::bigint THEN 3 ELSE 0 END, "cron_token" = NULL, "send_at" = CASE WHEN COALESCE("tries", 0) >= $2::bigint THEN "send_at" END
  WHERE "cron_token" = $3 AND "msg_id" = ANY($4::text[])
  RETURNING "msg_id", "state" = 3), cl_c AS MATERIALIZED ( SELECT "msg_id"
  FROM (SELECT "msg_id"
  FROM "outbox"
  WHERE "state" = 0 AND ("msg_id" || '') > $5::text
  ORDER BY ("msg_id" || '')
  LIMIT $6
  FOR UPDATE SKIP LOCKED) cl_above
  UNION ALL SELECT "msg_id"
  FROM (SELECT "msg_id"
  FROM "outbox"
  WHERE "state" = 0 AND ("msg_id" || '') <= $7::text
  ORDER BY ("msg_id" || '')
  LIMIT $8
  FOR UPDATE SKIP LOCKED) cl_wrap
  LIMIT $9), cl_n AS ( UPDATE "outbox"
  SET "state" = 1, "cron_token" = $10, "send_at" = now(), "tries" = COALESCE("tries", 0) + 1
  WHERE "msg_id" = ANY(ARRAY(SELECT "msg_id"
  FROM cl_c)) AND "state" = 0
  RETURNING "msg_id", COALESCE("tries", 0)) SELECT 0, (SELECT json_agg(k)
  FROM cl_a)::text, (SELECT json_agg(k)
  FROM cl_a
  WHERE parked)::text, NULL, NULL
  UNION ALL SELECT 1, NULL, NULL, cl_n.*
  FROM cl_n
  ORDER BY 1;

-- held limit
-- args: hold_ms, hold_ms, hold_ms
SELECT set_config('idle_in_transaction_session_timeout', $1, true), set_config('statement_timeout', $2, true), set_config('lock_timeout', $3, true);

-- held claim
-- args: limit
SELECT "msg_id", COALESCE("tries", 0)
  FROM "outbox"
  WHERE "state" = 0
  ORDER BY ("msg_id" || '')
  LIMIT $1 FOR NO KEY UPDATE SKIP LOCKED;

-- held attempts
-- args: keys
SELECT "msg_id", COALESCE("tries", 0)::bigint
  FROM "outbox"
  WHERE "msg_id" = ANY($1::text[]);

-- held read
-- args: keys
SELECT "msg_id", COALESCE("tries", 0)
  FROM "outbox"
  WHERE "msg_id" = ANY($1::text[])
  ORDER BY "msg_id";

-- held ack (to 2)
-- args: keys
UPDATE "outbox"
  SET "state" = 2
  WHERE "msg_id" = ANY($1::text[]) AND "state" = 0;

-- held ack (to 0)
-- args: keys
UPDATE "outbox"
  SET "state" = 0, "tries" = COALESCE("tries", 0) + 1
  WHERE "msg_id" = ANY($1::text[]) AND "state" = 0;

-- held ack (to 3)
-- args: keys
UPDATE "outbox"
  SET "state" = 3, "tries" = COALESCE("tries", 0) + 1
  WHERE "msg_id" = ANY($1::text[]) AND "state" = 0;
