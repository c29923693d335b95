package postgres

// pipelineAckClaim is [dialect.Capabilities.PipelineAckClaim] on
// PostgreSQL: false, by measurement. The one-statement ack+claim (ClaimSQL
// AckClaim) saves a round trip and a commit per batch, but measured with
// examples/claimbench on PostgreSQL 15 (2 shared cores, batch 100, 100,000
// rows, two runs) it claimed 0.99-1.09x the rows per second of claim then
// AckAll at 1 worker and 0.67-1.10x at 16: the server's CPU, not its
// commits or the round trips, bounded both there (see the README's
// performance section). Hand-written loops and WorkerConfig.Pipeline can
// still ask for it.
const pipelineAckClaim = false
