-- Rendered by this package's TestGoldenSQL; regenerate with: go test -run TestGoldenSQL -update

-- lease acquire
-- args: owner, key, ttl, slack, ttl
UPDATE "xxx_task"
  SET "lock_owner" = $1, "lock_at" = now()
  WHERE "id" = $2 AND ("lock_owner" IS NULL OR "lock_at" IS NULL OR "lock_at" < now() - ($3::bigint * interval '1 microsecond') - ($4::bigint * interval '1 microsecond'))
  RETURNING 0::bigint, CAST(EXTRACT(EPOCH
  FROM "lock_at" + ($5::bigint * interval '1 microsecond')) * 1000000 AS bigint), CAST(EXTRACT(EPOCH
  FROM "lock_at") * 1000000 AS bigint);

-- lease renew
-- args: key, owner, ttl
UPDATE "xxx_task"
  SET "lock_at" = GREATEST(now(), "lock_at" + interval '1 microsecond')
  WHERE "id" = $1 AND "lock_owner" = $2
  RETURNING 0::bigint, CAST(EXTRACT(EPOCH
  FROM "lock_at" + ($3::bigint * interval '1 microsecond')) * 1000000 AS bigint), CAST(EXTRACT(EPOCH
  FROM "lock_at") * 1000000 AS bigint);

-- lease release
-- args: key, owner
UPDATE "xxx_task"
  SET "lock_owner" = NULL
  WHERE "id" = $1 AND "lock_owner" = $2;

-- lease force release
-- args: key
UPDATE "xxx_task"
  SET "lock_owner" = NULL
  WHERE "id" = $1 AND "lock_owner" IS NOT NULL;

-- lease inspect
-- args: ttl, ttl, slack, key
SELECT "lock_owner", 0::bigint, CAST(EXTRACT(EPOCH
  FROM "lock_at" + ($1::bigint * interval '1 microsecond')) * 1000000 AS bigint), COALESCE("lock_at" < now() - ($2::bigint * interval '1 microsecond') - ($3::bigint * interval '1 microsecond'), false), NULL::text
  FROM "xxx_task"
  WHERE "id" = $4;

-- lease held
-- args: ttl, ttl, ttl, slack, limit
SELECT "id", "lock_owner", 0::bigint, CAST(EXTRACT(EPOCH
  FROM "lock_at" + ($1::bigint * interval '1 microsecond')) * 1000000 AS bigint), GREATEST(CAST(EXTRACT(EPOCH
  FROM "lock_at" + ($2::bigint * interval '1 microsecond')) * 1000000 AS bigint) - CAST(EXTRACT(EPOCH
  FROM now()) * 1000000 AS bigint), 0), "lock_at" < now() - ($3::bigint * interval '1 microsecond') - ($4::bigint * interval '1 microsecond')
  FROM "xxx_task"
  WHERE "lock_at" IS NOT NULL AND "lock_owner" IS NOT NULL
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
