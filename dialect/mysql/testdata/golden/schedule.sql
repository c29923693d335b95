-- Rendered by this package's TestGoldenSQL; regenerate with: go test -run TestGoldenSQL -update

-- create table app.claimlock_jobs 1
CREATE TABLE IF NOT EXISTS `app`.`claimlock_jobs` (`job` VARCHAR(255) CHARACTER
  SET utf8mb4 COLLATE utf8mb4_bin NOT NULL, `owner` VARCHAR(40) CHARACTER
  SET utf8mb4 COLLATE utf8mb4_bin, `lock_at` DATETIME(6), `expires_at` DATETIME(6), `fence` BIGINT NOT NULL DEFAULT 0, `paused` BIGINT NOT NULL DEFAULT 0, `cursor_us` BIGINT NOT NULL, PRIMARY KEY (`job`)) ENGINE=InnoDB;

-- create table app.claimlock_runs 1
CREATE TABLE IF NOT EXISTS `app`.`claimlock_runs` (`job` VARCHAR(255) CHARACTER
  SET utf8mb4 COLLATE utf8mb4_bin NOT NULL, `fire_us` BIGINT NOT NULL, `until_us` BIGINT, `status` VARCHAR(16) CHARACTER
  SET utf8mb4 COLLATE utf8mb4_bin NOT NULL, `token` VARCHAR(40) CHARACTER
  SET utf8mb4 COLLATE utf8mb4_bin, `fence` BIGINT, `worker` VARCHAR(255) CHARACTER
  SET utf8mb4 COLLATE utf8mb4_bin, `started_us` BIGINT, `finished_us` BIGINT, `error` VARCHAR(1000) CHARACTER
  SET utf8mb4 COLLATE utf8mb4_bin, PRIMARY KEY (`job`, `fire_us`), INDEX `claimlock_runs_cl_status` (`job`, `status`)) ENGINE=InnoDB;

-- schedule register
-- args: job
INSERT INTO `app`.`claimlock_jobs` (`job`, `fence`, `paused`, `cursor_us`)
  VALUES (?, 0, 0, TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)))
  ON DUPLICATE KEY UPDATE `job` = `job`;

-- schedule state
-- args: job
SELECT `cursor_us`, `paused`, TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6))
  FROM `app`.`claimlock_jobs`
  WHERE `job` = ?;

-- schedule advance (run)
-- args: fire, job, prev, win_from, win_to
UPDATE `app`.`claimlock_jobs`
  SET `cursor_us` = ?
  WHERE `job` = ? AND `cursor_us` = ? AND `paused` = 0 AND TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) >= ? AND TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) < ?;

-- schedule advance (skipped)
-- args: fire, job, prev, win_from, win_to
UPDATE `app`.`claimlock_jobs`
  SET `cursor_us` = ?
  WHERE `job` = ? AND `cursor_us` = ? AND TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) >= ? AND TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) < ?;

-- schedule advance (paused)
-- args: fire, job, prev, win_from, win_to
UPDATE `app`.`claimlock_jobs`
  SET `cursor_us` = ?
  WHERE `job` = ? AND `cursor_us` = ? AND `paused` <> 0 AND TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) >= ? AND TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) < ?;

-- schedule mark lost
-- args: error, job, job, slack
UPDATE `app`.`claimlock_runs`
  SET `status` = 'lost', `finished_us` = TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)), `error` = ?
  WHERE `job` = ? AND `status` = 'running' AND `token` <> COALESCE((SELECT `owner`
  FROM `app`.`claimlock_jobs`
  WHERE `job` = ? AND `expires_at` >= UTC_TIMESTAMP(6) - INTERVAL ? MICROSECOND), '');

-- schedule insert (run)
-- args: job, fire, token, fence, worker
INSERT INTO `app`.`claimlock_runs` (`job`, `fire_us`, `until_us`, `status`, `token`, `fence`, `worker`, `started_us`, `finished_us`, `error`)
  VALUES (?, ?, NULL, 'running', ?, ?, ?, TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)), NULL, NULL);

-- schedule insert (skipped)
-- args: job, fire, until, worker, error
INSERT INTO `app`.`claimlock_runs` (`job`, `fire_us`, `until_us`, `status`, `token`, `fence`, `worker`, `started_us`, `finished_us`, `error`)
  VALUES (?, ?, ?, 'skipped', NULL, NULL, ?, TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)), TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)), ?);

-- schedule finish
-- args: status, error, job, fire, token
UPDATE `app`.`claimlock_runs`
  SET `status` = ?, `finished_us` = TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)), `error` = ?
  WHERE `job` = ? AND `fire_us` = ? AND `token` = ? AND `status` = 'running';

-- schedule pause
-- args: flag, job
UPDATE `app`.`claimlock_jobs`
  SET `paused` = ?
  WHERE `job` = ?;

-- schedule run
-- args: job, fire
SELECT `status`, COALESCE(`token`, '')
  FROM `app`.`claimlock_runs`
  WHERE `job` = ? AND `fire_us` = ?;

-- schedule history
-- args: job, fire, limit
SELECT `fire_us`, `until_us`, `status`, COALESCE(`worker`, ''), COALESCE(`fence`, 0), `started_us`, `finished_us`, COALESCE(`error`, '')
  FROM `app`.`claimlock_runs`
  WHERE `job` = ? AND `fire_us` < ?
  ORDER BY `fire_us` DESC
  LIMIT ?;

-- schedule jobs
SELECT `job`, `paused`, `cursor_us`, TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6))
  FROM `app`.`claimlock_jobs`
  ORDER BY `job`;

-- schedule cutoff
-- args: job, offset
SELECT `fire_us`
  FROM `app`.`claimlock_runs`
  WHERE `job` = ?
  ORDER BY `fire_us` DESC
  LIMIT 1 OFFSET ?;

-- schedule prune
-- args: job, fire
DELETE
  FROM `app`.`claimlock_runs`
  WHERE `job` = ? AND `fire_us` < ? AND `status` <> 'running';

-- schedule columns
-- args: schema, table, schema, table
SELECT c.column_name, COALESCE(c.character_maximum_length, 0), c.data_type, COALESCE(c.datetime_precision, -1), COALESCE(c.collation_name, ''), c.is_nullable = 'YES', c.column_type, c.column_key = 'PRI' AND pk.n = 1
  FROM information_schema.columns c CROSS JOIN (SELECT COUNT(*) AS n
  FROM information_schema.columns
  WHERE table_schema = COALESCE(?, DATABASE()) AND table_name = ? AND column_key = 'PRI') pk
  WHERE c.table_schema = COALESCE(?, DATABASE()) AND c.table_name = ?;
