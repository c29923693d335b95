-- Rendered by this package's TestGoldenSQL; regenerate with: go test -run TestGoldenSQL -update

-- lease acquire
-- args: key, ttl, slack, ttl
UPDATE "xxx_task"
  SET "lock_at" = (CAST(EXTRACT(EPOCH
  FROM now()) * 1000000 AS bigint) / 1000000)
  WHERE "id" = $1 AND ("lock_at" IS NULL OR "lock_at" < ((CAST(EXTRACT(EPOCH
  FROM now()) * 1000000 AS bigint) - $2::bigint - $3::bigint) / 1000000))
  RETURNING 0::bigint, ("lock_at"::bigint * 1000000 + $4::bigint), ("lock_at"::bigint * 1000000);

-- lease renew
-- args: key, stamp, ttl
UPDATE "xxx_task"
  SET "lock_at" = GREATEST((CAST(EXTRACT(EPOCH
  FROM now()) * 1000000 AS bigint) / 1000000), COALESCE("lock_at", 0))
  WHERE "id" = $1 AND ("lock_at"::bigint * 1000000) = $2
  RETURNING 0::bigint, ("lock_at"::bigint * 1000000 + $3::bigint), ("lock_at"::bigint * 1000000);

-- lease release
-- args: key, stamp
UPDATE "xxx_task"
  SET "lock_at" = NULL
  WHERE "id" = $1 AND ("lock_at"::bigint * 1000000) = $2;

-- lease force release
-- args: key
UPDATE "xxx_task"
  SET "lock_at" = NULL
  WHERE "id" = $1 AND "lock_at" IS NOT NULL;

-- lease inspect
-- args: ttl, ttl, slack, key
SELECT CAST(("lock_at"::bigint * 1000000) AS text), 0::bigint, ("lock_at"::bigint * 1000000 + $1::bigint), COALESCE("lock_at" < ((CAST(EXTRACT(EPOCH
  FROM now()) * 1000000 AS bigint) - $2::bigint - $3::bigint) / 1000000), false), CAST("status" AS text)
  FROM "xxx_task"
  WHERE "id" = $4;

-- lease finish
-- args: status, key, stamp
UPDATE "xxx_task"
  SET "status" = $1, "lock_at" = NULL
  WHERE "id" = $2 AND ("lock_at"::bigint * 1000000) = $3;

-- lease held
-- args: ttl, ttl, ttl, slack, limit
SELECT "id", CAST(("lock_at"::bigint * 1000000) AS text), 0::bigint, ("lock_at"::bigint * 1000000 + $1::bigint), GREATEST(("lock_at"::bigint * 1000000 + $2::bigint) - CAST(EXTRACT(EPOCH
  FROM now()) * 1000000 AS bigint), 0), "lock_at" < ((CAST(EXTRACT(EPOCH
  FROM now()) * 1000000 AS bigint) - $3::bigint - $4::bigint) / 1000000)
  FROM "xxx_task"
  WHERE "lock_at" IS NOT NULL
  ORDER BY "lock_at"
  LIMIT $5;

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
