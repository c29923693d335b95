-- claimlock schema for postgresql 15.20 (Debian 15.20-0+deb12u1)

-- columns xxx_task_target lacks
ALTER TABLE "xxx_task_target" ADD COLUMN "attempts" BIGINT NOT NULL DEFAULT 0;
ALTER TABLE "xxx_task_target" ADD COLUMN "run_at" TIMESTAMPTZ;
ALTER TABLE "xxx_task_target" ADD COLUMN "last_error" VARCHAR(1024);

-- recommended indexes xxx_task_target lacks, built online where the engine can: run them outside a transaction block
CREATE INDEX CONCURRENTLY IF NOT EXISTS "xxx_task_target_cl_claim" ON "xxx_task_target" ("task_id", ("id" + 0), (COALESCE("run_at", '-infinity'))) WHERE "status" = 'PENDING';
CREATE INDEX CONCURRENTLY IF NOT EXISTS "xxx_task_target_cl_token" ON "xxx_task_target" ("cron_token");
CREATE INDEX CONCURRENTLY IF NOT EXISTS "xxx_task_target_cl_reap" ON "xxx_task_target" ("status", "send_at");
CREATE INDEX CONCURRENTLY IF NOT EXISTS "xxx_task_target_cl_scope" ON "xxx_task_target" ("task_id", "status", "send_at");
CREATE INDEX CONCURRENTLY IF NOT EXISTS "xxx_task_target_cl_sched" ON "xxx_task_target" ("run_at") WHERE "status" = 'PENDING' AND "run_at" IS NOT NULL;

-- columns lease task table xxx_task lacks
ALTER TABLE "xxx_task" ADD COLUMN "lock_owner" VARCHAR(40);
ALTER TABLE "xxx_task" ADD COLUMN "lock_fence" BIGINT NOT NULL DEFAULT 0;
