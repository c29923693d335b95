package postgres

// pipelineAckClaim is [dialect.Capabilities.PipelineAckClaim] on
// PostgreSQL: false, by measurement. The one-statement ack+claim (ClaimSQL
// AckClaim) saves a round trip and a commit per batch but none of the rows'
// work, which bounds a server like the one measured: with examples/claimbench
// on PostgreSQL 15 (2 cores, idle machine, batch 100, 100,000 rows, three
// runs) it claimed 1.02-1.34x the rows per second of claim then AckAll at 1
// worker, 0.81-0.88x at 4 and 1.04-1.06x at 16 (see the README's
// performance section). Hand-written loops and WorkerConfig.Pipeline can
// still ask for it.
const pipelineAckClaim = false
