-- Rendered by this package's TestGoldenSQL; regenerate with: go test -run TestGoldenSQL -update

-- create table app.claimlock_jobs 1
CREATE TABLE IF NOT EXISTS `app`.`claimlock_jobs` (`job` TEXT NOT NULL, `owner` TEXT, `lock_at` INTEGER, `expires_at` INTEGER, `fence` INTEGER NOT NULL DEFAULT 0, `paused` INTEGER NOT NULL DEFAULT 0, `cursor_us` INTEGER NOT NULL, PRIMARY KEY (`job`));

-- create table app.claimlock_runs 1
CREATE TABLE IF NOT EXISTS `app`.`claimlock_runs` (`job` TEXT NOT NULL, `fire_us` INTEGER NOT NULL, `until_us` INTEGER, `status` TEXT NOT NULL, `token` TEXT, `fence` INTEGER, `worker` TEXT, `started_us` INTEGER, `finished_us` INTEGER, `error` TEXT, PRIMARY KEY (`job`, `fire_us`));

-- create table app.claimlock_runs 2
CREATE INDEX IF NOT EXISTS `claimlock_runs_cl_status` ON `app`.`claimlock_runs` (`job`, `status`);

-- schedule register
-- args: job
INSERT INTO `app`.`claimlock_jobs` (`job`, `fence`, `paused`, `cursor_us`)
  VALUES (?, 0, 0, (CAST(unixepoch('subsec') * 1000 AS INTEGER) * 1000))
  ON CONFLICT (`job`) DO NOTHING;

-- schedule state
-- args: job
SELECT `cursor_us`, `paused`, (CAST(unixepoch('subsec') * 1000 AS INTEGER) * 1000)
  FROM `app`.`claimlock_jobs`
  WHERE `job` = ?;

-- schedule advance (run)
-- args: fire, job, prev, win_from, win_to
UPDATE `app`.`claimlock_jobs`
  SET `cursor_us` = ?
  WHERE `job` = ? AND `cursor_us` = ? AND `paused` = 0 AND (CAST(unixepoch('subsec') * 1000 AS INTEGER) * 1000) >= ? AND (CAST(unixepoch('subsec') * 1000 AS INTEGER) * 1000) < ?;

-- schedule advance (skipped)
-- args: fire, job, prev, win_from, win_to
UPDATE `app`.`claimlock_jobs`
  SET `cursor_us` = ?
  WHERE `job` = ? AND `cursor_us` = ? AND (CAST(unixepoch('subsec') * 1000 AS INTEGER) * 1000) >= ? AND (CAST(unixepoch('subsec') * 1000 AS INTEGER) * 1000) < ?;

-- schedule advance (paused)
-- args: fire, job, prev, win_from, win_to
UPDATE `app`.`claimlock_jobs`
  SET `cursor_us` = ?
  WHERE `job` = ? AND `cursor_us` = ? AND `paused` <> 0 AND (CAST(unixepoch('subsec') * 1000 AS INTEGER) * 1000) >= ? AND (CAST(unixepoch('subsec') * 1000 AS INTEGER) * 1000) < ?;

-- schedule mark lost
-- args: error, job, job, slack
UPDATE `app`.`claimlock_runs`
  SET `status` = 'lost', `finished_us` = (CAST(unixepoch('subsec') * 1000 AS INTEGER) * 1000), `error` = ?
  WHERE `job` = ? AND `status` = 'running' AND `token` <> COALESCE((SELECT `owner`
  FROM `app`.`claimlock_jobs`
  WHERE `job` = ? AND `expires_at` >= CAST(unixepoch('subsec') * 1000 AS INTEGER) - ?), '');

-- schedule insert (run)
-- args: job, fire, token, fence, worker
INSERT INTO `app`.`claimlock_runs` (`job`, `fire_us`, `until_us`, `status`, `token`, `fence`, `worker`, `started_us`, `finished_us`, `error`)
  VALUES (?, ?, NULL, 'running', ?, ?, ?, (CAST(unixepoch('subsec') * 1000 AS INTEGER) * 1000), NULL, NULL);

-- schedule insert (skipped)
-- args: job, fire, until, worker, error
INSERT INTO `app`.`claimlock_runs` (`job`, `fire_us`, `until_us`, `status`, `token`, `fence`, `worker`, `started_us`, `finished_us`, `error`)
  VALUES (?, ?, ?, 'skipped', NULL, NULL, ?, (CAST(unixepoch('subsec') * 1000 AS INTEGER) * 1000), (CAST(unixepoch('subsec') * 1000 AS INTEGER) * 1000), ?);

-- schedule finish
-- args: status, error, job, fire, token
UPDATE `app`.`claimlock_runs`
  SET `status` = ?, `finished_us` = (CAST(unixepoch('subsec') * 1000 AS INTEGER) * 1000), `error` = ?
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
SELECT `job`, `paused`, `cursor_us`, (CAST(unixepoch('subsec') * 1000 AS INTEGER) * 1000)
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
-- args: table, schema, table, schema
SELECT name, 0, type, 3, '', "notnull" = 0 AND pk = 0, type, pk = 1 AND (SELECT COUNT(*)
  FROM pragma_table_info(?, COALESCE(?, 'main'))
  WHERE pk > 0) = 1
  FROM pragma_table_info(?, COALESCE(?, 'main'));
