-- Rendered by this package's TestGoldenSQL; regenerate with: go test -run TestGoldenSQL -update

-- create table 1
CREATE TABLE IF NOT EXISTS `claimlock_lease` (`lease_key` VARCHAR(255) CHARACTER
  SET utf8mb4 COLLATE utf8mb4_bin NOT NULL, `owner` VARCHAR(40) CHARACTER
  SET utf8mb4 COLLATE utf8mb4_bin, `lock_at` DATETIME(6), `expires_at` DATETIME(6), `fence` BIGINT NOT NULL DEFAULT 0, PRIMARY KEY (`lease_key`), INDEX `claimlock_lease_cl_exp` (`expires_at`)) ENGINE=InnoDB;

-- lease acquire
-- args: owner, ttl, key, slack
UPDATE `claimlock_lease`
  SET `owner` = ?, `lock_at` = UTC_TIMESTAMP(6), `expires_at` = UTC_TIMESTAMP(6) + INTERVAL ? MICROSECOND, `fence` = COALESCE(`fence`, 0) + 1
  WHERE `lease_key` = ? AND (`owner` IS NULL OR `expires_at` IS NULL OR `expires_at` < UTC_TIMESTAMP(6) - INTERVAL ? MICROSECOND);

-- lease insert
-- args: key, owner, ttl
INSERT INTO `claimlock_lease` (`lease_key`, `owner`, `lock_at`, `expires_at`, `fence`)
  VALUES (?, ?, UTC_TIMESTAMP(6), UTC_TIMESTAMP(6) + INTERVAL ? MICROSECOND, 1);

-- lease read back
-- args: key, owner
SELECT COALESCE(`fence`, 0), TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', `expires_at`), TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', `lock_at`)
  FROM `claimlock_lease`
  WHERE `lease_key` = ? AND `owner` = ?;

-- lease renew
-- args: ttl, key, owner
UPDATE `claimlock_lease`
  SET `lock_at` = UTC_TIMESTAMP(6), `expires_at` = GREATEST(UTC_TIMESTAMP(6) + INTERVAL ? MICROSECOND, COALESCE(`expires_at` + INTERVAL 1 MICROSECOND, UTC_TIMESTAMP(6)))
  WHERE `lease_key` = ? AND `owner` = ?;

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
SELECT `owner`, COALESCE(`fence`, 0), TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', `expires_at`), `expires_at` < UTC_TIMESTAMP(6) - INTERVAL ? MICROSECOND, NULL
  FROM `claimlock_lease`
  WHERE `lease_key` = ?;

-- lease release with hold
-- args: hold, hold, hold, key, owner
UPDATE `claimlock_lease`
  SET `owner` = IF(('1970-01-01 00:00:00' + INTERVAL ? MICROSECOND) > UTC_TIMESTAMP(6), `owner`, NULL), `expires_at` = IF(('1970-01-01 00:00:00' + INTERVAL ? MICROSECOND) > UTC_TIMESTAMP(6), ('1970-01-01 00:00:00' + INTERVAL ? MICROSECOND), NULL)
  WHERE `lease_key` = ? AND `owner` = ?;

-- lease reap
-- args: slack, limit
UPDATE `claimlock_lease`
  SET `owner` = NULL, `expires_at` = NULL
  WHERE `owner` IS NOT NULL AND `expires_at` < UTC_TIMESTAMP(6) - INTERVAL ? MICROSECOND
  ORDER BY `expires_at`, `lease_key`
  LIMIT ?;

-- lease held
-- args: slack, limit
SELECT `lease_key`, `owner`, COALESCE(`fence`, 0), TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', `expires_at`), GREATEST(TIMESTAMPDIFF(MICROSECOND, UTC_TIMESTAMP(6), `expires_at`), 0), `expires_at` < UTC_TIMESTAMP(6) - INTERVAL ? MICROSECOND
  FROM `claimlock_lease`
  WHERE `expires_at` IS NOT NULL AND `owner` IS NOT NULL
  ORDER BY `expires_at`
  LIMIT ?;

-- columns
-- args: schema, table, schema, table
SELECT c.column_name, COALESCE(c.character_maximum_length, 0), c.data_type, COALESCE(c.datetime_precision, -1), COALESCE(c.collation_name, ''), c.is_nullable = 'YES', c.column_type, c.column_key = 'PRI' AND pk.n = 1
  FROM information_schema.columns c CROSS JOIN (SELECT COUNT(*) AS n
  FROM information_schema.columns
  WHERE table_schema = COALESCE(?, DATABASE()) AND table_name = ? AND column_key = 'PRI') pk
  WHERE c.table_schema = COALESCE(?, DATABASE()) AND c.table_name = ?;
