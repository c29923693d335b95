-- Rendered by this package's TestGoldenSQL; regenerate with: go test -run TestGoldenSQL -update

-- create table 1
CREATE TABLE IF NOT EXISTS `app`.`claimlock_pauses` (`claim_table` VARCHAR(255) CHARACTER
  SET utf8mb4 COLLATE utf8mb4_bin NOT NULL, `scope` VARCHAR(255) CHARACTER
  SET utf8mb4 COLLATE utf8mb4_bin NOT NULL, `reason` VARCHAR(1000) CHARACTER
  SET utf8mb4 COLLATE utf8mb4_bin, `paused_by` VARCHAR(255) CHARACTER
  SET utf8mb4 COLLATE utf8mb4_bin, `paused_us` BIGINT NOT NULL, PRIMARY KEY (`claim_table`, `scope`)) ENGINE=InnoDB;

-- pause insert
-- args: table, pause_scope, reason, by
INSERT INTO `app`.`claimlock_pauses` (`claim_table`, `scope`, `reason`, `paused_by`, `paused_us`)
  VALUES (?, ?, ?, ?, TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)));

-- pause delete
-- args: table, pause_scope
DELETE
  FROM `app`.`claimlock_pauses`
  WHERE `claim_table` = ? AND `scope` = ?;

-- pause of table
-- args: table
SELECT `scope`
  FROM `app`.`claimlock_pauses`
  WHERE `claim_table` = ?;

-- pause list
-- args: limit
SELECT `claim_table`, `scope`, COALESCE(`reason`, ''), COALESCE(`paused_by`, ''), `paused_us`, TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6))
  FROM `app`.`claimlock_pauses`
  ORDER BY `claim_table`, `scope`
  LIMIT ?;

-- pause columns
-- args: schema, table, schema, table
SELECT c.column_name, COALESCE(c.character_maximum_length, 0), c.data_type, COALESCE(c.datetime_precision, -1), COALESCE(c.collation_name, ''), c.is_nullable = 'YES', c.column_type, c.column_key = 'PRI' AND pk.n = 1
  FROM information_schema.columns c CROSS JOIN (SELECT COUNT(*) AS n
  FROM information_schema.columns
  WHERE table_schema = COALESCE(?, DATABASE()) AND table_name = ? AND column_key = 'PRI') pk
  WHERE c.table_schema = COALESCE(?, DATABASE()) AND c.table_name = ?;
