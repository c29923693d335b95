-- claimlock schema for mariadb 10.11.19-MariaDB-0+deb12u1

-- columns xxx_task_target lacks
ALTER TABLE `xxx_task_target` ADD COLUMN `attempts` BIGINT NOT NULL DEFAULT 0;
ALTER TABLE `xxx_task_target` ADD COLUMN `run_at` DATETIME(6);
ALTER TABLE `xxx_task_target` ADD COLUMN `last_error` VARCHAR(1024) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin;

-- recommended indexes xxx_task_target lacks, built online where the engine can: run them outside a transaction block
CREATE INDEX `xxx_task_target_cl_claim` ON `xxx_task_target` (`task_id`, `status`, `id`, `run_at`) ALGORITHM=INPLACE LOCK=NONE;
CREATE INDEX `xxx_task_target_cl_token` ON `xxx_task_target` (`cron_token`) ALGORITHM=INPLACE LOCK=NONE;
CREATE INDEX `xxx_task_target_cl_reap` ON `xxx_task_target` (`status`, `send_at`) ALGORITHM=INPLACE LOCK=NONE;
CREATE INDEX `xxx_task_target_cl_sched` ON `xxx_task_target` (`run_at`) ALGORITHM=INPLACE LOCK=NONE;

-- columns lease task table xxx_task lacks
ALTER TABLE `xxx_task` ADD COLUMN `lock_owner` VARCHAR(40) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin;
ALTER TABLE `xxx_task` ADD COLUMN `lock_fence` BIGINT NOT NULL DEFAULT 0;
