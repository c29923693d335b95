-- Rendered by this package's TestGoldenSQL; regenerate with: go test -run TestGoldenSQL -update

-- lease acquire
-- args: owner, key, ttl, slack
UPDATE `xxx_task`
  SET `lock_owner` = ?, `lock_at` = UTC_TIMESTAMP(6)
  WHERE `id` = ? AND (`lock_owner` IS NULL OR `lock_at` IS NULL OR `lock_at` < UTC_TIMESTAMP(6) - INTERVAL ? MICROSECOND - INTERVAL ? MICROSECOND);

-- lease read back
-- args: ttl, key, owner
SELECT 0, TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', `lock_at` + INTERVAL ? MICROSECOND), TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', `lock_at`)
  FROM `xxx_task`
  WHERE `id` = ? AND `lock_owner` = ?;

-- lease renew
-- args: key, owner
UPDATE `xxx_task`
  SET `lock_at` = GREATEST(UTC_TIMESTAMP(6), COALESCE(`lock_at` + INTERVAL 1 MICROSECOND, UTC_TIMESTAMP(6)))
  WHERE `id` = ? AND `lock_owner` = ?;

-- lease release
-- args: key, owner
UPDATE `xxx_task`
  SET `lock_owner` = NULL
  WHERE `id` = ? AND `lock_owner` = ?;

-- lease force release
-- args: key
UPDATE `xxx_task`
  SET `lock_owner` = NULL
  WHERE `id` = ? AND `lock_owner` IS NOT NULL;

-- lease inspect
-- args: ttl, ttl, slack, key
SELECT `lock_owner`, 0, TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', `lock_at` + INTERVAL ? MICROSECOND), COALESCE(`lock_at` < UTC_TIMESTAMP(6) - INTERVAL ? MICROSECOND - INTERVAL ? MICROSECOND, FALSE), NULL
  FROM `xxx_task`
  WHERE `id` = ?;

-- lease held
-- args: ttl, ttl, ttl, slack, limit
SELECT `id`, `lock_owner`, 0, TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', `lock_at` + INTERVAL ? MICROSECOND), GREATEST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', `lock_at` + INTERVAL ? MICROSECOND) - TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)), 0), `lock_at` < UTC_TIMESTAMP(6) - INTERVAL ? MICROSECOND - INTERVAL ? MICROSECOND
  FROM `xxx_task`
  WHERE `lock_at` IS NOT NULL AND `lock_owner` IS NOT NULL
  ORDER BY `lock_at`
  LIMIT ?;

-- columns
-- args: schema, table, schema, table
SELECT c.column_name, COALESCE(c.character_maximum_length, 0), c.data_type, COALESCE(c.datetime_precision, -1), COALESCE(c.collation_name, ''), c.is_nullable = 'YES', c.column_type, c.column_key = 'PRI' AND pk.n = 1
  FROM information_schema.columns c CROSS JOIN (SELECT COUNT(*) AS n
  FROM information_schema.columns
  WHERE table_schema = COALESCE(?, DATABASE()) AND table_name = ? AND column_key = 'PRI') pk
  WHERE c.table_schema = COALESCE(?, DATABASE()) AND c.table_name = ?;
