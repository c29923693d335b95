-- claimlock schema for sqlite 3.54.1

-- columns xxx_task_target lacks
ALTER TABLE `xxx_task_target` ADD COLUMN `attempts` INTEGER NOT NULL DEFAULT 0;
ALTER TABLE `xxx_task_target` ADD COLUMN `run_at` INTEGER;
ALTER TABLE `xxx_task_target` ADD COLUMN `last_error` TEXT;

-- recommended indexes xxx_task_target lacks, built online where the engine can: run them outside a transaction block
CREATE INDEX IF NOT EXISTS `xxx_task_target_cl_claim` ON `xxx_task_target` (`task_id`, `status`, `id`, `run_at`);
CREATE INDEX IF NOT EXISTS `xxx_task_target_cl_token` ON `xxx_task_target` (`cron_token`);
CREATE INDEX IF NOT EXISTS `xxx_task_target_cl_reap` ON `xxx_task_target` (`status`, `send_at`);
CREATE INDEX IF NOT EXISTS `xxx_task_target_cl_scope` ON `xxx_task_target` (`task_id`, `status`, `send_at`);
CREATE INDEX IF NOT EXISTS `xxx_task_target_cl_sched` ON `xxx_task_target` (`run_at`);

-- columns lease task table xxx_task lacks
ALTER TABLE `xxx_task` ADD COLUMN `lock_owner` TEXT;
ALTER TABLE `xxx_task` ADD COLUMN `lock_fence` INTEGER NOT NULL DEFAULT 0;
