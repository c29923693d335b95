-- Rendered by this package's TestGoldenSQL; regenerate with: go test -run TestGoldenSQL -update

-- lease acquire
-- args: key, ttl, slack
UPDATE `xxx_task`
  SET `lock_at` = (TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000000)
  WHERE `id` = ? AND (`lock_at` IS NULL OR `lock_at` < ((TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) - ? - ?) DIV 1000000));

-- lease read back
-- args: ttl, key
SELECT 0, (`lock_at` * 1000000 + ?), (`lock_at` * 1000000)
  FROM `xxx_task`
  WHERE `id` = ?;

-- lease renew
-- args: key, stamp
UPDATE `xxx_task`
  SET `lock_at` = GREATEST((TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000000), COALESCE(`lock_at`, 0))
  WHERE `id` = ? AND (`lock_at` * 1000000) = ?;

-- lease release
-- args: key, stamp
UPDATE `xxx_task`
  SET `lock_at` = NULL
  WHERE `id` = ? AND (`lock_at` * 1000000) = ?;

-- lease force release
-- args: key
UPDATE `xxx_task`
  SET `lock_at` = NULL
  WHERE `id` = ? AND `lock_at` IS NOT NULL;

-- lease inspect
-- args: ttl, ttl, slack, key
SELECT CAST((`lock_at` * 1000000) AS CHAR), 0, (`lock_at` * 1000000 + ?), COALESCE(`lock_at` < ((TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) - ? - ?) DIV 1000000), FALSE), CAST(`status` AS CHAR)
  FROM `xxx_task`
  WHERE `id` = ?;

-- lease finish
-- args: status, key, stamp
UPDATE `xxx_task`
  SET `status` = ?, `lock_at` = NULL
  WHERE `id` = ? AND (`lock_at` * 1000000) = ?;

-- lease held
-- args: ttl, ttl, ttl, slack, limit
SELECT `id`, CAST((`lock_at` * 1000000) AS CHAR), 0, (`lock_at` * 1000000 + ?), GREATEST((`lock_at` * 1000000 + ?) - TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)), 0), `lock_at` < ((TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) - ? - ?) DIV 1000000)
  FROM `xxx_task`
  WHERE `lock_at` IS NOT NULL
  ORDER BY `lock_at`
  LIMIT ?;

-- columns
-- args: schema, table, schema, table
SELECT c.column_name, COALESCE(c.character_maximum_length, 0), c.data_type, COALESCE(c.datetime_precision, -1), COALESCE(c.collation_name, ''), c.is_nullable = 'YES', c.column_type, c.column_key = 'PRI' AND pk.n = 1
  FROM information_schema.columns c CROSS JOIN (SELECT COUNT(*) AS n
  FROM information_schema.columns
  WHERE table_schema = COALESCE(?, DATABASE()) AND table_name = ? AND column_key = 'PRI') pk
  WHERE c.table_schema = COALESCE(?, DATABASE()) AND c.table_name = ?;
