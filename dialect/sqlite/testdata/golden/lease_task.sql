-- Rendered by this package's TestGoldenSQL; regenerate with: go test -run TestGoldenSQL -update

-- lease acquire
-- args: owner, key, ttl, slack, ttl
UPDATE `xxx_task`
  SET `lock_owner` = ?, `lock_at` = CAST(unixepoch('subsec') * 1000 AS INTEGER)
  WHERE `id` = ? AND (`lock_owner` IS NULL OR `lock_at` IS NULL OR `lock_at` < CAST(unixepoch('subsec') * 1000 AS INTEGER) - ? - ?)
  RETURNING 0, (`lock_at` + ?) * 1000, `lock_at`;

-- lease renew
-- args: key, owner, ttl
UPDATE `xxx_task`
  SET `lock_at` = MAX(CAST(unixepoch('subsec') * 1000 AS INTEGER), `lock_at` + 1)
  WHERE `id` = ? AND `lock_owner` = ?
  RETURNING 0, (`lock_at` + ?) * 1000, `lock_at`;

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
SELECT `lock_owner`, 0, (`lock_at` + ?) * 1000, COALESCE(`lock_at` < CAST(unixepoch('subsec') * 1000 AS INTEGER) - ? - ?, false), NULL
  FROM `xxx_task`
  WHERE `id` = ?;

-- lease held
-- args: ttl, ttl, ttl, slack, limit
SELECT `id`, `lock_owner`, 0, (`lock_at` + ?) * 1000, MAX((`lock_at` + ? - CAST(unixepoch('subsec') * 1000 AS INTEGER)) * 1000, 0), `lock_at` < CAST(unixepoch('subsec') * 1000 AS INTEGER) - ? - ?
  FROM `xxx_task`
  WHERE `lock_at` IS NOT NULL AND `lock_owner` IS NOT NULL
  ORDER BY `lock_at`
  LIMIT ?;

-- columns
-- args: table, schema, table, schema
SELECT name, 0, type, 3, '', "notnull" = 0 AND pk = 0, type, pk = 1 AND (SELECT COUNT(*)
  FROM pragma_table_info(?, COALESCE(?, 'main'))
  WHERE pk > 0) = 1
  FROM pragma_table_info(?, COALESCE(?, 'main'));
