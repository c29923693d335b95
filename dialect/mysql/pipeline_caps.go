package mysql

// pipelineAckClaim is [dialect.Capabilities.PipelineAckClaim] on a
// MySQL-family server: false, by measurement. Without RETURNING or
// multi-statement round trips an ack+claim transaction is five round trips
// (START TRANSACTION, the ack, the marking UPDATE, the read-back, COMMIT)
// against three for an autocommit ack then a claim, and it holds the claim
// slot (claimConcurrency) and the claimed rows' locks until its COMMIT.
// Measured with examples/claimbench on MariaDB 10.11 (2 shared cores,
// batch 100, 100,000 rows, token-update, two runs): 0.98-1.10x the rows per
// second of claim then AckAll at 1 worker, 1.03-1.06x at 4 and 0.61-0.88x
// at 16.
const pipelineAckClaim = false
