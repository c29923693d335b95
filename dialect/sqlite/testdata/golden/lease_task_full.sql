-- Rendered by this package's TestGoldenSQL; regenerate with: go test -run TestGoldenSQL -update

-- lease acquire
-- args: owner, ttl, key, slack
UPDATE `xxx_task`
  SET `lock_owner` = ?, `lock_at` = CAST(unixepoch('subsec') * 1000 AS INTEGER), `lock_expires_at` = CAST(unixepoch('subsec') * 1000 AS INTEGER) + ?, `fence` = COALESCE(`fence`, 0) + 1
  WHERE `id` = ? AND (`lock_owner` IS NULL OR `lock_expires_at` IS NULL OR `lock_expires_at` < CAST(unixepoch('subsec') * 1000 AS INTEGER) - ?)
  RETURNING COALESCE(`fence`, 0), `lock_expires_at` * 1000, `lock_at`;

-- lease renew
-- args: ttl, key, owner
UPDATE `xxx_task`
  SET `lock_at` = CAST(unixepoch('subsec') * 1000 AS INTEGER), `lock_expires_at` = MAX(CAST(unixepoch('subsec') * 1000 AS INTEGER) + ?, `lock_expires_at` + 1)
  WHERE `id` = ? AND `lock_owner` = ?
  RETURNING COALESCE(`fence`, 0), `lock_expires_at` * 1000, `lock_at`;

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
SELECT `lock_owner`, COALESCE(`fence`, 0), `lock_expires_at` * 1000, `lock_expires_at` < CAST(unixepoch('subsec') * 1000 AS INTEGER) - ?, CAST(`status` AS TEXT)
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
  SET `lock_owner` = CASE WHEN ? > CAST(unixepoch('subsec') * 1000 AS INTEGER) THEN `lock_owner` END, `lock_expires_at` = CASE WHEN ? > CAST(unixepoch('subsec') * 1000 AS INTEGER) THEN ? END
  WHERE `id` = ? AND `lock_owner` = ?;

-- lease finish with hold
-- args: status, hold, hold, hold, key, owner
UPDATE `xxx_task`
  SET `status` = ?, `lock_owner` = CASE WHEN ? > CAST(unixepoch('subsec') * 1000 AS INTEGER) THEN `lock_owner` END, `lock_expires_at` = CASE WHEN ? > CAST(unixepoch('subsec') * 1000 AS INTEGER) THEN ? END
  WHERE `id` = ? AND `lock_owner` = ?;

-- lease reap
-- args: slack, limit, slack
UPDATE `xxx_task`
  SET `lock_owner` = NULL, `lock_expires_at` = NULL
  WHERE `id` IN (SELECT `id`
  FROM `xxx_task`
  WHERE `lock_owner` IS NOT NULL AND `lock_expires_at` < CAST(unixepoch('subsec') * 1000 AS INTEGER) - ?
  ORDER BY `lock_expires_at`
  LIMIT ?) AND `lock_owner` IS NOT NULL AND `lock_expires_at` < CAST(unixepoch('subsec') * 1000 AS INTEGER) - ?;

-- lease held
-- args: slack, limit
SELECT `id`, `lock_owner`, COALESCE(`fence`, 0), `lock_expires_at` * 1000, MAX((`lock_expires_at` - CAST(unixepoch('subsec') * 1000 AS INTEGER)) * 1000, 0), `lock_expires_at` < CAST(unixepoch('subsec') * 1000 AS INTEGER) - ?
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
