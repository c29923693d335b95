package sqlite

// pipelineAckClaim is [dialect.Capabilities.PipelineAckClaim] on SQLite:
// false, by measurement. A commit in WAL mode does not wait for the disk,
// so the one BEGIN IMMEDIATE transaction of an ack+claim saves little and
// adds its BEGIN and COMMIT statements: measured with examples/claimbench
// (2 shared cores, batch 100, 100,000 rows, two runs) at 0.76-0.80x the
// rows per second of claim then AckAll at 1 worker and 0.99x at 16.
const pipelineAckClaim = false
