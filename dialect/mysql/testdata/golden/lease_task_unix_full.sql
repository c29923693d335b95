-- Rendered by this package's TestGoldenSQL; regenerate with: go test -run TestGoldenSQL -update

-- lease acquire
-- args: owner, ttl, key, slack
UPDATE `xxx_task`
  SET `lock_owner` = ?, `lock_at` = (TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000000), `lock_expires_at` = ((TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) + ? + 1000 - 1) DIV 1000), `fence` = COALESCE(`fence`, 0) + 1
  WHERE `id` = ? AND (`lock_owner` IS NULL OR `lock_expires_at` IS NULL OR `lock_expires_at` < ((TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) - ?) DIV 1000));

-- lease read back
-- args: key, owner
SELECT COALESCE(`fence`, 0), (`lock_expires_at` * 1000), (`lock_at` * 1000000)
  FROM `xxx_task`
  WHERE `id` = ? AND `lock_owner` = ?;

-- lease renew
-- args: ttl, key, owner
UPDATE `xxx_task`
  SET `lock_at` = (TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000000), `lock_expires_at` = GREATEST(((TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) + ? + 1000 - 1) DIV 1000), COALESCE(`lock_expires_at`, 0))
  WHERE `id` = ? AND `lock_owner` = ?;

-- lease release
-- args: key, owner
UPDATE `xxx_task`
  SET `lock_owner` = NULL, `lock_expires_at` = NULL
  WHERE `id` = ? AND `lock_owner` = ?;

-- lease force release
-- args: key
UPDATE `xxx_task`
  SET `lock_owner` = NULL, `lock_expires_at` = NULL
  WHERE `id` = ? AND `lock_owner` IS NOT NULL;

-- lease inspect
-- args: slack, key
SELECT `lock_owner`, COALESCE(`fence`, 0), (`lock_expires_at` * 1000), `lock_expires_at` < ((TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) - ?) DIV 1000), CAST(`status` AS CHAR)
  FROM `xxx_task`
  WHERE `id` = ?;

-- lease finish
-- args: status, key, owner
UPDATE `xxx_task`
  SET `status` = ?, `lock_owner` = NULL, `lock_expires_at` = NULL
  WHERE `id` = ? AND `lock_owner` = ?;

-- lease release with hold
-- args: hold, hold, hold, key, owner
UPDATE `xxx_task`
  SET `lock_owner` = IF(? > TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)), `lock_owner`, NULL), `lock_expires_at` = IF(? > TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)), (? + 1000 - 1) DIV 1000, NULL)
  WHERE `id` = ? AND `lock_owner` = ?;

-- lease finish with hold
-- args: status, hold, hold, hold, key, owner
UPDATE `xxx_task`
  SET `status` = ?, `lock_owner` = IF(? > TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)), `lock_owner`, NULL), `lock_expires_at` = IF(? > TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)), (? + 1000 - 1) DIV 1000, NULL)
  WHERE `id` = ? AND `lock_owner` = ?;

-- lease reap
-- args: slack, limit
UPDATE `xxx_task`
  SET `lock_owner` = NULL, `lock_expires_at` = NULL
  WHERE `lock_owner` IS NOT NULL AND `lock_expires_at` < ((TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) - ?) DIV 1000)
  ORDER BY `lock_expires_at`, `id`
  LIMIT ?;

-- lease held
-- args: slack, limit
SELECT `id`, `lock_owner`, COALESCE(`fence`, 0), (`lock_expires_at` * 1000), GREATEST((`lock_expires_at` * 1000 - TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6))), 0), `lock_expires_at` < ((TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) - ?) DIV 1000)
  FROM `xxx_task`
  WHERE `lock_expires_at` IS NOT NULL AND `lock_owner` IS NOT NULL
  ORDER BY `lock_expires_at`
  LIMIT ?;

-- columns
-- args: schema, table, schema, table
SELECT c.column_name, COALESCE(c.character_maximum_length, 0), c.data_type, COALESCE(c.datetime_precision, -1), COALESCE(c.collation_name, ''), c.is_nullable = 'YES', c.column_type, c.column_key = 'PRI' AND pk.n = 1
  FROM information_schema.columns c CROSS JOIN (SELECT COUNT(*) AS n
  FROM information_schema.columns
  WHERE table_schema = COALESCE(?, DATABASE()) AND table_name = ? AND column_key = 'PRI') pk
  WHERE c.table_schema = COALESCE(?, DATABASE()) AND c.table_name = ?;
