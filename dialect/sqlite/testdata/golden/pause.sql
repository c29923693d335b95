-- Rendered by this package's TestGoldenSQL; regenerate with: go test -run TestGoldenSQL -update

-- create table 1
CREATE TABLE IF NOT EXISTS `app`.`claimlock_pauses` (`claim_table` TEXT NOT NULL, `scope` TEXT NOT NULL, `reason` TEXT, `paused_by` TEXT, `paused_us` INTEGER NOT NULL, PRIMARY KEY (`claim_table`, `scope`));

-- pause insert
-- args: table, pause_scope, reason, by
INSERT INTO `app`.`claimlock_pauses` (`claim_table`, `scope`, `reason`, `paused_by`, `paused_us`)
  VALUES (?, ?, ?, ?, (CAST(unixepoch('subsec') * 1000 AS INTEGER) * 1000));

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
SELECT `claim_table`, `scope`, COALESCE(`reason`, ''), COALESCE(`paused_by`, ''), `paused_us`, (CAST(unixepoch('subsec') * 1000 AS INTEGER) * 1000)
  FROM `app`.`claimlock_pauses`
  ORDER BY `claim_table`, `scope`
  LIMIT ?;

-- pause columns
-- args: table, schema, table, schema
SELECT name, 0, type, 3, '', "notnull" = 0 AND pk = 0, type, pk = 1 AND (SELECT COUNT(*)
  FROM pragma_table_info(?, COALESCE(?, 'main'))
  WHERE pk > 0) = 1
  FROM pragma_table_info(?, COALESCE(?, 'main'));
