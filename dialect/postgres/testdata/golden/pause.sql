-- Rendered by this package's TestGoldenSQL; regenerate with: go test -run TestGoldenSQL -update

-- create table 1
CREATE TABLE IF NOT EXISTS "app"."claimlock_pauses" ("claim_table" VARCHAR(255) NOT NULL, "scope" VARCHAR(255) NOT NULL, "reason" VARCHAR(1000), "paused_by" VARCHAR(255), "paused_us" BIGINT NOT NULL, PRIMARY KEY ("claim_table", "scope"));

-- pause insert
-- args: table, pause_scope, reason, by
INSERT INTO "app"."claimlock_pauses" ("claim_table", "scope", "reason", "paused_by", "paused_us")
  VALUES ($1, $2, $3, $4, CAST(EXTRACT(EPOCH
  FROM now()) * 1000000 AS bigint));

-- pause delete
-- args: table, pause_scope
DELETE
  FROM "app"."claimlock_pauses"
  WHERE "claim_table" = $1 AND "scope" = $2;

-- pause of table
-- args: table
SELECT "scope"
  FROM "app"."claimlock_pauses"
  WHERE "claim_table" = $1;

-- pause list
-- args: limit
SELECT "claim_table", "scope", COALESCE("reason", ''), COALESCE("paused_by", ''), "paused_us", CAST(EXTRACT(EPOCH
  FROM now()) * 1000000 AS bigint)
  FROM "app"."claimlock_pauses"
  ORDER BY "claim_table", "scope"
  LIMIT $1;

-- pause columns
-- args: schema, table
SELECT c.column_name::text, COALESCE(c.character_maximum_length, 0)::bigint, c.data_type::text, COALESCE(c.datetime_precision, -1)::bigint, COALESCE(c.collation_name, '')::text, c.is_nullable = 'YES', COALESCE((SELECT 'enum(' || string_agg(quote_nullable(e.enumlabel::text), ','
  ORDER BY e.enumsortorder) || ')'
  FROM pg_catalog.pg_enum e JOIN pg_catalog.pg_type t ON t.oid = e.enumtypid JOIN pg_catalog.pg_namespace n ON n.oid = t.typnamespace
  WHERE t.typname = c.udt_name AND n.nspname = c.udt_schema), '')::text, COALESCE((SELECT a.attname = c.column_name AND i.indnatts = 1
  FROM pg_catalog.pg_index i JOIN pg_catalog.pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = i.indkey[0]
  WHERE i.indisprimary AND i.indrelid = to_regclass(quote_ident(c.table_schema) || '.' || quote_ident(c.table_name))), false)
  FROM information_schema.columns c
  WHERE c.table_schema = COALESCE($1::text, current_schema()) AND c.table_name = $2::text;
