package sqlite

// pipelineAckClaim is [dialect.Capabilities.PipelineAckClaim] on SQLite:
// false, by measurement. A commit in WAL mode does not wait for the disk,
// so the one BEGIN IMMEDIATE transaction of an ack+claim saves little and
// adds its BEGIN and COMMIT statements: measured with examples/claimbench
// (2 cores, idle machine, batch 100, 100,000 rows, two runs) at 0.99-1.16x
// the rows per second of claim then AckAll at 1 worker, 1.02-1.11x at 4 and
// 0.83-0.91x at 16.
const pipelineAckClaim = false
