-- Rendered by this package's TestGoldenSQL; regenerate with: go test -run TestGoldenSQL -update

-- lease acquire
-- args: owner, ttl, key, slack
UPDATE "xxx_task"
  SET "lock_owner" = $1, "lock_at" = now(), "lock_expires_at" = now() + ($2::bigint * interval '1 microsecond'), "fence" = COALESCE("fence", 0) + 1
  WHERE "id" = $3 AND ("lock_owner" IS NULL OR "lock_expires_at" IS NULL OR "lock_expires_at" < now() - ($4::bigint * interval '1 microsecond'))
  RETURNING COALESCE("fence", 0), CAST(EXTRACT(EPOCH
  FROM "lock_expires_at") * 1000000 AS bigint), CAST(EXTRACT(EPOCH
  FROM "lock_at") * 1000000 AS bigint);

-- lease renew
-- args: ttl, key, owner
UPDATE "xxx_task"
  SET "lock_at" = now(), "lock_expires_at" = GREATEST(now() + ($1::bigint * interval '1 microsecond'), "lock_expires_at" + interval '1 microsecond')
  WHERE "id" = $2 AND "lock_owner" = $3
  RETURNING COALESCE("fence", 0), CAST(EXTRACT(EPOCH
  FROM "lock_expires_at") * 1000000 AS bigint), CAST(EXTRACT(EPOCH
  FROM "lock_at") * 1000000 AS bigint);

-- lease release
-- args: key, owner
UPDATE "xxx_task"
  SET "lock_owner" = NULL, "lock_expires_at" = NULL
  WHERE "id" = $1 AND "lock_owner" = $2;

-- lease force release
-- args: key
UPDATE "xxx_task"
  SET "lock_owner" = NULL, "lock_expires_at" = NULL
  WHERE "id" = $1 AND "lock_owner" IS NOT NULL;

-- lease inspect
-- args: slack, key
SELECT "lock_owner", COALESCE("fence", 0), CAST(EXTRACT(EPOCH
  FROM "lock_expires_at") * 1000000 AS bigint), "lock_expires_at" < now() - ($1::bigint * interval '1 microsecond'), CAST("status" AS text)
  FROM "xxx_task"
  WHERE "id" = $2;

-- lease finish
-- args: status, key, owner
UPDATE "xxx_task"
  SET "status" = $1, "lock_owner" = NULL, "lock_expires_at" = NULL
  WHERE "id" = $2 AND "lock_owner" = $3;

-- lease release with hold
-- args: hold, hold, hold, key, owner
UPDATE "xxx_task"
  SET "lock_owner" = CASE WHEN (timestamptz 'epoch' + $1::bigint * interval '1 microsecond') > now() THEN "lock_owner" END, "lock_expires_at" = CASE WHEN (timestamptz 'epoch' + $2::bigint * interval '1 microsecond') > now() THEN (timestamptz 'epoch' + $3::bigint * interval '1 microsecond') END
  WHERE "id" = $4 AND "lock_owner" = $5;

-- lease finish with hold
-- args: status, hold, hold, hold, key, owner
UPDATE "xxx_task"
  SET "status" = $1, "lock_owner" = CASE WHEN (timestamptz 'epoch' + $2::bigint * interval '1 microsecond') > now() THEN "lock_owner" END, "lock_expires_at" = CASE WHEN (timestamptz 'epoch' + $3::bigint * interval '1 microsecond') > now() THEN (timestamptz 'epoch' + $4::bigint * interval '1 microsecond') END
  WHERE "id" = $5 AND "lock_owner" = $6;

-- lease reap
-- args: slack, limit, slack
WITH cl_c AS MATERIALIZED ( SELECT "id"
  FROM "xxx_task"
  WHERE "lock_owner" IS NOT NULL AND "lock_expires_at" < now() - ($1::bigint * interval '1 microsecond')
  ORDER BY "lock_expires_at"
  LIMIT $2
  FOR UPDATE SKIP LOCKED) UPDATE "xxx_task"
  SET "lock_owner" = NULL, "lock_expires_at" = NULL
  WHERE "id" = ANY(ARRAY(SELECT "id"
  FROM cl_c)) AND "lock_owner" IS NOT NULL AND "lock_expires_at" < now() - ($3::bigint * interval '1 microsecond');

-- lease held
-- args: slack, limit
SELECT "id", "lock_owner", COALESCE("fence", 0), CAST(EXTRACT(EPOCH
  FROM "lock_expires_at") * 1000000 AS bigint), GREATEST(CAST(EXTRACT(EPOCH
  FROM ("lock_expires_at" - now())) * 1000000 AS bigint), 0), "lock_expires_at" < now() - ($1::bigint * interval '1 microsecond')
  FROM "xxx_task"
  WHERE "lock_expires_at" IS NOT NULL AND "lock_owner" IS NOT NULL
  ORDER BY "lock_expires_at"
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
