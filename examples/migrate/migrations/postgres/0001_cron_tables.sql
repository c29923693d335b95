-- The cron story's tables as they were before claimlock.
CREATE TABLE xxx_task (id BIGINT PRIMARY KEY, status VARCHAR(32) NOT NULL, lock_at TIMESTAMPTZ);
CREATE TABLE xxx_task_target (id BIGSERIAL PRIMARY KEY, task_id BIGINT NOT NULL, openid VARCHAR(64) NOT NULL,
  status VARCHAR(32) NOT NULL DEFAULT 'PENDING', cron_token VARCHAR(40), send_at TIMESTAMPTZ);
