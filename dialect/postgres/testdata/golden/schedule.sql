-- Rendered by this package's TestGoldenSQL; regenerate with: go test -run TestGoldenSQL -update

-- create table app.claimlock_jobs 1
CREATE TABLE IF NOT EXISTS "app"."claimlock_jobs" ("job" VARCHAR(255) NOT NULL, "owner" VARCHAR(40), "lock_at" TIMESTAMPTZ, "expires_at" TIMESTAMPTZ, "fence" BIGINT NOT NULL DEFAULT 0, "paused" BIGINT NOT NULL DEFAULT 0, "cursor_us" BIGINT NOT NULL, PRIMARY KEY ("job"));

-- create table app.claimlock_runs 1
CREATE TABLE IF NOT EXISTS "app"."claimlock_runs" ("job" VARCHAR(255) NOT NULL, "fire_us" BIGINT NOT NULL, "until_us" BIGINT, "status" VARCHAR(16) NOT NULL, "token" VARCHAR(40), "fence" BIGINT, "worker" VARCHAR(255), "started_us" BIGINT, "finished_us" BIGINT, "error" VARCHAR(1000), PRIMARY KEY ("job", "fire_us"));

-- create table app.claimlock_runs 2
CREATE INDEX IF NOT EXISTS "claimlock_runs_cl_status" ON "app"."claimlock_runs" ("job", "status");

-- schedule register
-- args: job
INSERT INTO "app"."claimlock_jobs" ("job", "fence", "paused", "cursor_us")
  VALUES ($1, 0, 0, CAST(EXTRACT(EPOCH
  FROM now()) * 1000000 AS bigint))
  ON CONFLICT ("job") DO NOTHING;

-- schedule state
-- args: job
SELECT "cursor_us", "paused", CAST(EXTRACT(EPOCH
  FROM now()) * 1000000 AS bigint)
  FROM "app"."claimlock_jobs"
  WHERE "job" = $1;

-- schedule advance (run)
-- args: fire, job, prev, win_from, win_to
UPDATE "app"."claimlock_jobs"
  SET "cursor_us" = $1
  WHERE "job" = $2 AND "cursor_us" = $3 AND "paused" = 0 AND CAST(EXTRACT(EPOCH
  FROM now()) * 1000000 AS bigint) >= $4 AND CAST(EXTRACT(EPOCH
  FROM now()) * 1000000 AS bigint) < $5;

-- schedule advance (skipped)
-- args: fire, job, prev, win_from, win_to
UPDATE "app"."claimlock_jobs"
  SET "cursor_us" = $1
  WHERE "job" = $2 AND "cursor_us" = $3 AND CAST(EXTRACT(EPOCH
  FROM now()) * 1000000 AS bigint) >= $4 AND CAST(EXTRACT(EPOCH
  FROM now()) * 1000000 AS bigint) < $5;

-- schedule advance (paused)
-- args: fire, job, prev, win_from, win_to
UPDATE "app"."claimlock_jobs"
  SET "cursor_us" = $1
  WHERE "job" = $2 AND "cursor_us" = $3 AND "paused" <> 0 AND CAST(EXTRACT(EPOCH
  FROM now()) * 1000000 AS bigint) >= $4 AND CAST(EXTRACT(EPOCH
  FROM now()) * 1000000 AS bigint) < $5;

-- schedule mark lost
-- args: error, job, job, slack
UPDATE "app"."claimlock_runs"
  SET "status" = 'lost', "finished_us" = CAST(EXTRACT(EPOCH
  FROM now()) * 1000000 AS bigint), "error" = $1
  WHERE "job" = $2 AND "status" = 'running' AND "token" <> COALESCE((SELECT "owner"
  FROM "app"."claimlock_jobs"
  WHERE "job" = $3 AND "expires_at" >= now() - ($4::bigint * interval '1 microsecond')), '');

-- schedule insert (run)
-- args: job, fire, token, fence, worker
INSERT INTO "app"."claimlock_runs" ("job", "fire_us", "until_us", "status", "token", "fence", "worker", "started_us", "finished_us", "error")
  VALUES ($1, $2, NULL, 'running', $3, $4, $5, CAST(EXTRACT(EPOCH
  FROM now()) * 1000000 AS bigint), NULL, NULL);

-- schedule insert (skipped)
-- args: job, fire, until, worker, error
INSERT INTO "app"."claimlock_runs" ("job", "fire_us", "until_us", "status", "token", "fence", "worker", "started_us", "finished_us", "error")
  VALUES ($1, $2, $3, 'skipped', NULL, NULL, $4, CAST(EXTRACT(EPOCH
  FROM now()) * 1000000 AS bigint), CAST(EXTRACT(EPOCH
  FROM now()) * 1000000 AS bigint), $5);

-- schedule finish
-- args: status, error, job, fire, token
UPDATE "app"."claimlock_runs"
  SET "status" = $1, "finished_us" = CAST(EXTRACT(EPOCH
  FROM now()) * 1000000 AS bigint), "error" = $2
  WHERE "job" = $3 AND "fire_us" = $4 AND "token" = $5 AND "status" = 'running';

-- schedule pause
-- args: flag, job
UPDATE "app"."claimlock_jobs"
  SET "paused" = $1
  WHERE "job" = $2;

-- schedule run
-- args: job, fire
SELECT "status", COALESCE("token", '')
  FROM "app"."claimlock_runs"
  WHERE "job" = $1 AND "fire_us" = $2;

-- schedule history
-- args: job, fire, limit
SELECT "fire_us", "until_us", "status", COALESCE("worker", ''), COALESCE("fence", 0), "started_us", "finished_us", COALESCE("error", '')
  FROM "app"."claimlock_runs"
  WHERE "job" = $1 AND "fire_us" < $2
  ORDER BY "fire_us" DESC
  LIMIT $3;

-- schedule jobs
SELECT "job", "paused", "cursor_us", CAST(EXTRACT(EPOCH
  FROM now()) * 1000000 AS bigint)
  FROM "app"."claimlock_jobs"
  ORDER BY "job";

-- schedule cutoff
-- args: job, offset
SELECT "fire_us"
  FROM "app"."claimlock_runs"
  WHERE "job" = $1
  ORDER BY "fire_us" DESC
  LIMIT 1 OFFSET $2;

-- schedule prune
-- args: job, fire
DELETE
  FROM "app"."claimlock_runs"
  WHERE "job" = $1 AND "fire_us" < $2 AND "status" <> 'running';

-- schedule columns
-- args: schema, table
SELECT c.column_name::text, COALESCE(c.character_maximum_length, 0)::bigint, c.data_type::text, COALESCE(c.datetime_precision, -1)::bigint, COALESCE(c.collation_name, '')::text, c.is_nullable = 'YES', COALESCE((SELECT 'enum(' || string_agg(quote_nullable(e.enumlabel::text), ','
  ORDER BY e.enumsortorder) || ')'
  FROM pg_catalog.pg_enum e JOIN pg_catalog.pg_type t ON t.oid = e.enumtypid JOIN pg_catalog.pg_namespace n ON n.oid = t.typnamespace
  WHERE t.typname = c.udt_name AND n.nspname = c.udt_schema), '')::text, COALESCE((SELECT a.attname = c.column_name AND i.indnatts = 1
  FROM pg_catalog.pg_index i JOIN pg_catalog.pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = i.indkey[0]
  WHERE i.indisprimary AND i.indrelid = to_regclass(quote_ident(c.table_schema) || '.' || quote_ident(c.table_name))), false)
  FROM information_schema.columns c
  WHERE c.table_schema = COALESCE($1::text, current_schema()) AND c.table_name = $2::text;
