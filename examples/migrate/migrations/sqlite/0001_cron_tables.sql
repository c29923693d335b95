-- The cron story's tables as they were before claimlock.
CREATE TABLE xxx_task (id INTEGER PRIMARY KEY, status TEXT NOT NULL, lock_at INTEGER);
CREATE TABLE xxx_task_target (id INTEGER PRIMARY KEY AUTOINCREMENT, task_id INTEGER NOT NULL, openid TEXT NOT NULL,
  status TEXT NOT NULL DEFAULT 'PENDING', cron_token TEXT, send_at INTEGER);
