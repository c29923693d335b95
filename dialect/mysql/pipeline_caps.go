package mysql

// pipelineAckClaim is [dialect.Capabilities.PipelineAckClaim] on a
// MySQL-family server: false, by measurement. Without RETURNING or
// multi-statement round trips an ack+claim transaction is five round trips
// (START TRANSACTION, the ack, the marking UPDATE, the read-back, COMMIT),
// as many as a claim (the marking UPDATE, the read-back) then an ack in its
// own transaction: it saves one commit, and it holds the claim slot
// (claimConcurrency) and the claimed rows' locks until its COMMIT.
// Measured with examples/claimbench on MariaDB 10.11 (2 cores, idle
// machine, batch 100, 100,000 rows, token-update, three runs): 1.01-1.44x
// the rows per second of claim then AckAll at 1 worker, 1.05-1.12x at 4 and
// 0.81-1.12x at 16 (two of three runs slower).
const pipelineAckClaim = false
