-- Rendered by this package's TestGoldenSQL; regenerate with: go test -run TestGoldenSQL -update

-- lease acquire
-- args: owner, ttl, key, slack
UPDATE `xxx_task`
  SET `lock_owner` = ?, `lock_at` = strftime('%Y-%m-%d %H:%M:%f', 'now'), `lock_expires_at` = strftime('%Y-%m-%d %H:%M:%f', 'now', '+' || (? / 1000.0) || ' seconds')
  WHERE `id` = ? AND (`lock_owner` IS NULL OR `lock_expires_at` IS NULL OR `lock_expires_at` < strftime('%Y-%m-%d %H:%M:%f', 'now', '-' || (? / 1000.0) || ' seconds'))
  RETURNING 0, CAST(ROUND(unixepoch(`lock_expires_at`, 'subsec') * 1000) AS INTEGER) * 1000, CAST(ROUND(unixepoch(`lock_at`, 'subsec') * 1000) AS INTEGER);

-- lease renew
-- args: ttl, key, owner
UPDATE `xxx_task`
  SET `lock_at` = strftime('%Y-%m-%d %H:%M:%f', 'now'), `lock_expires_at` = MAX(strftime('%Y-%m-%d %H:%M:%f', 'now', '+' || (? / 1000.0) || ' seconds'), strftime('%Y-%m-%d %H:%M:%f', `lock_expires_at`, '+0.001 seconds'))
  WHERE `id` = ? AND `lock_owner` = ?
  RETURNING 0, CAST(ROUND(unixepoch(`lock_expires_at`, 'subsec') * 1000) AS INTEGER) * 1000, CAST(ROUND(unixepoch(`lock_at`, 'subsec') * 1000) AS INTEGER);

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
SELECT `lock_owner`, 0, CAST(ROUND(unixepoch(`lock_expires_at`, 'subsec') * 1000) AS INTEGER) * 1000, `lock_expires_at` < strftime('%Y-%m-%d %H:%M:%f', 'now', '-' || (? / 1000.0) || ' seconds'), NULL
  FROM `xxx_task`
  WHERE `id` = ?;

-- lease release with hold
-- args: hold, hold, hold, key, owner
UPDATE `xxx_task`
  SET `lock_owner` = CASE WHEN ? > CAST(unixepoch('subsec') * 1000 AS INTEGER) THEN `lock_owner` END, `lock_expires_at` = CASE WHEN ? > CAST(unixepoch('subsec') * 1000 AS INTEGER) THEN strftime('%Y-%m-%d %H:%M:%f', ? / 1000.0, 'unixepoch') END
  WHERE `id` = ? AND `lock_owner` = ?;

-- lease reap
-- args: slack, limit, slack
UPDATE `xxx_task`
  SET `lock_owner` = NULL, `lock_expires_at` = NULL
  WHERE `id` IN (SELECT `id`
  FROM `xxx_task`
  WHERE `lock_owner` IS NOT NULL AND `lock_expires_at` < strftime('%Y-%m-%d %H:%M:%f', 'now', '-' || (? / 1000.0) || ' seconds')
  ORDER BY `lock_expires_at`
  LIMIT ?) AND `lock_owner` IS NOT NULL AND `lock_expires_at` < strftime('%Y-%m-%d %H:%M:%f', 'now', '-' || (? / 1000.0) || ' seconds');

-- lease held
-- args: slack, limit
SELECT `id`, `lock_owner`, 0, CAST(ROUND(unixepoch(`lock_expires_at`, 'subsec') * 1000) AS INTEGER) * 1000, MAX((CAST(ROUND(unixepoch(`lock_expires_at`, 'subsec') * 1000) AS INTEGER) - CAST(unixepoch('subsec') * 1000 AS INTEGER)) * 1000, 0), `lock_expires_at` < strftime('%Y-%m-%d %H:%M:%f', 'now', '-' || (? / 1000.0) || ' seconds')
  FROM `xxx_task`
  WHERE `lock_expires_at` IS NOT NULL AND `lock_owner` IS NOT NULL
  ORDER BY `lock_expires_at`
  LIMIT ?;

-- columns
-- args: table, schema, table, schema
SELECT name, 0, type, 3, '', "notnull" = 0 AND pk = 0, type, pk = 1 AND (SELECT COUNT(*)
  FROM pragma_table_info(?, COALESCE(?, 'main'))
  WHERE pk > 0) = 1
  FROM pragma_table_info(?, COALESCE(?, 'main'));
