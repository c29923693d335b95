-- Rendered by this package's TestGoldenSQL; regenerate with: go test -run TestGoldenSQL -update

-- create table 1
CREATE TABLE IF NOT EXISTS `claimlock_lease` (`lease_key` TEXT NOT NULL, `owner` TEXT, `lock_at` INTEGER, `expires_at` INTEGER, `fence` INTEGER NOT NULL DEFAULT 0, PRIMARY KEY (`lease_key`));

-- create table 2
CREATE INDEX IF NOT EXISTS `claimlock_lease_cl_exp` ON `claimlock_lease` (`expires_at`);

-- lease acquire
-- args: owner, ttl, key, slack
UPDATE `claimlock_lease`
  SET `owner` = ?, `lock_at` = CAST(unixepoch('subsec') * 1000 AS INTEGER), `expires_at` = CAST(unixepoch('subsec') * 1000 AS INTEGER) + ?, `fence` = COALESCE(`fence`, 0) + 1
  WHERE `lease_key` = ? AND (`owner` IS NULL OR `expires_at` IS NULL OR `expires_at` < CAST(unixepoch('subsec') * 1000 AS INTEGER) - ?)
  RETURNING COALESCE(`fence`, 0), `expires_at` * 1000, `lock_at`;

-- lease insert
-- args: key, owner, ttl
INSERT INTO `claimlock_lease` (`lease_key`, `owner`, `lock_at`, `expires_at`, `fence`)
  VALUES (?, ?, CAST(unixepoch('subsec') * 1000 AS INTEGER), CAST(unixepoch('subsec') * 1000 AS INTEGER) + ?, 1)
  ON CONFLICT (`lease_key`) DO NOTHING
  RETURNING COALESCE(`fence`, 0), `expires_at` * 1000, `lock_at`;

-- lease renew
-- args: ttl, key, owner
UPDATE `claimlock_lease`
  SET `lock_at` = CAST(unixepoch('subsec') * 1000 AS INTEGER), `expires_at` = MAX(CAST(unixepoch('subsec') * 1000 AS INTEGER) + ?, `expires_at` + 1)
  WHERE `lease_key` = ? AND `owner` = ?
  RETURNING COALESCE(`fence`, 0), `expires_at` * 1000, `lock_at`;

-- lease release
-- args: key, owner
UPDATE `claimlock_lease`
  SET `owner` = NULL, `expires_at` = NULL
  WHERE `lease_key` = ? AND `owner` = ?;

-- lease force release
-- args: key
UPDATE `claimlock_lease`
  SET `owner` = NULL, `expires_at` = NULL
  WHERE `lease_key` = ? AND `owner` IS NOT NULL;

-- lease inspect
-- args: slack, key
SELECT `owner`, COALESCE(`fence`, 0), `expires_at` * 1000, `expires_at` < CAST(unixepoch('subsec') * 1000 AS INTEGER) - ?, NULL
  FROM `claimlock_lease`
  WHERE `lease_key` = ?;

-- lease release with hold
-- args: hold, hold, hold, key, owner
UPDATE `claimlock_lease`
  SET `owner` = CASE WHEN ? > CAST(unixepoch('subsec') * 1000 AS INTEGER) THEN `owner` END, `expires_at` = CASE WHEN ? > CAST(unixepoch('subsec') * 1000 AS INTEGER) THEN ? END
  WHERE `lease_key` = ? AND `owner` = ?;

-- lease reap
-- args: slack, limit, slack
UPDATE `claimlock_lease`
  SET `owner` = NULL, `expires_at` = NULL
  WHERE `lease_key` IN (SELECT `lease_key`
  FROM `claimlock_lease`
  WHERE `owner` IS NOT NULL AND `expires_at` < CAST(unixepoch('subsec') * 1000 AS INTEGER) - ?
  ORDER BY `expires_at`
  LIMIT ?) AND `owner` IS NOT NULL AND `expires_at` < CAST(unixepoch('subsec') * 1000 AS INTEGER) - ?;

-- lease held
-- args: slack, limit
SELECT `lease_key`, `owner`, COALESCE(`fence`, 0), `expires_at` * 1000, MAX((`expires_at` - CAST(unixepoch('subsec') * 1000 AS INTEGER)) * 1000, 0), `expires_at` < CAST(unixepoch('subsec') * 1000 AS INTEGER) - ?
  FROM `claimlock_lease`
  WHERE `expires_at` IS NOT NULL AND `owner` IS NOT NULL
  ORDER BY `expires_at`
  LIMIT ?;

-- columns
-- args: table, schema, table, schema
SELECT name, 0, type, 3, '', "notnull" = 0 AND pk = 0, type, pk = 1 AND (SELECT COUNT(*)
  FROM pragma_table_info(?, COALESCE(?, 'main'))
  WHERE pk > 0) = 1
  FROM pragma_table_info(?, COALESCE(?, 'main'));
