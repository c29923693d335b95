-- Rendered by this package's TestGoldenSQL; regenerate with: go test -run TestGoldenSQL -update

-- create table 1
CREATE TABLE IF NOT EXISTS "claimlock_lease" ("lease_key" VARCHAR(255) NOT NULL, "owner" VARCHAR(40), "lock_at" TIMESTAMPTZ, "expires_at" TIMESTAMPTZ, "fence" BIGINT NOT NULL DEFAULT 0, PRIMARY KEY ("lease_key"));

-- create table 2
CREATE INDEX IF NOT EXISTS "claimlock_lease_cl_exp" ON "claimlock_lease" ("expires_at");

-- lease acquire
-- args: owner, ttl, key, slack
UPDATE "claimlock_lease"
  SET "owner" = $1, "lock_at" = now(), "expires_at" = now() + ($2::bigint * interval '1 microsecond'), "fence" = COALESCE("fence", 0) + 1
  WHERE "lease_key" = $3 AND ("owner" IS NULL OR "expires_at" IS NULL OR "expires_at" < now() - ($4::bigint * interval '1 microsecond'))
  RETURNING COALESCE("fence", 0), CAST(EXTRACT(EPOCH
  FROM "expires_at") * 1000000 AS bigint), CAST(EXTRACT(EPOCH
  FROM "lock_at") * 1000000 AS bigint);

-- lease insert
-- args: key, owner, ttl
INSERT INTO "claimlock_lease" ("lease_key", "owner", "lock_at", "expires_at", "fence")
  VALUES ($1, $2, now(), now() + ($3::bigint * interval '1 microsecond'), 1)
  ON CONFLICT ("lease_key") DO NOTHING
  RETURNING COALESCE("fence", 0), CAST(EXTRACT(EPOCH
  FROM "expires_at") * 1000000 AS bigint), CAST(EXTRACT(EPOCH
  FROM "lock_at") * 1000000 AS bigint);

-- lease renew
-- args: ttl, key, owner
UPDATE "claimlock_lease"
  SET "lock_at" = now(), "expires_at" = GREATEST(now() + ($1::bigint * interval '1 microsecond'), "expires_at" + interval '1 microsecond')
  WHERE "lease_key" = $2 AND "owner" = $3
  RETURNING COALESCE("fence", 0), CAST(EXTRACT(EPOCH
  FROM "expires_at") * 1000000 AS bigint), CAST(EXTRACT(EPOCH
  FROM "lock_at") * 1000000 AS bigint);

-- lease release
-- args: key, owner
UPDATE "claimlock_lease"
  SET "owner" = NULL, "expires_at" = NULL
  WHERE "lease_key" = $1 AND "owner" = $2;

-- lease force release
-- args: key
UPDATE "claimlock_lease"
  SET "owner" = NULL, "expires_at" = NULL
  WHERE "lease_key" = $1 AND "owner" IS NOT NULL;

-- lease inspect
-- args: slack, key
SELECT "owner", COALESCE("fence", 0), CAST(EXTRACT(EPOCH
  FROM "expires_at") * 1000000 AS bigint), "expires_at" < now() - ($1::bigint * interval '1 microsecond'), NULL::text
  FROM "claimlock_lease"
  WHERE "lease_key" = $2;

-- lease release with hold
-- args: hold, hold, hold, key, owner
UPDATE "claimlock_lease"
  SET "owner" = CASE WHEN (timestamptz 'epoch' + $1::bigint * interval '1 microsecond') > now() THEN "owner" END, "expires_at" = CASE WHEN (timestamptz 'epoch' + $2::bigint * interval '1 microsecond') > now() THEN (timestamptz 'epoch' + $3::bigint * interval '1 microsecond') END
  WHERE "lease_key" = $4 AND "owner" = $5;

-- lease reap
-- args: slack, limit, slack
WITH cl_c AS MATERIALIZED ( SELECT "lease_key"
  FROM "claimlock_lease"
  WHERE "owner" IS NOT NULL AND "expires_at" < now() - ($1::bigint * interval '1 microsecond')
  ORDER BY "expires_at"
  LIMIT $2
  FOR UPDATE SKIP LOCKED) UPDATE "claimlock_lease"
  SET "owner" = NULL, "expires_at" = NULL
  WHERE "lease_key" = ANY(ARRAY(SELECT "lease_key"
  FROM cl_c)) AND "owner" IS NOT NULL AND "expires_at" < now() - ($3::bigint * interval '1 microsecond');

-- lease held
-- args: slack, limit
SELECT "lease_key", "owner", COALESCE("fence", 0), CAST(EXTRACT(EPOCH
  FROM "expires_at") * 1000000 AS bigint), GREATEST(CAST(EXTRACT(EPOCH
  FROM ("expires_at" - now())) * 1000000 AS bigint), 0), "expires_at" < now() - ($1::bigint * interval '1 microsecond')
  FROM "claimlock_lease"
  WHERE "expires_at" IS NOT NULL AND "owner" IS NOT NULL
  ORDER BY "expires_at"
  LIMIT $2;

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
