package dialect

import (
	"database/sql"

	"github.com/claimlock/claimlock/internal/seal"
)

// Tx is a transaction of the caller's in which claimlock completes rows
// (claim.AckTx and the batch's AckTx and FailTx), so that the caller's own
// writes and the completion commit or roll back together. Make one with
// [SQLTx] from a *sql.Tx, or with postgres.PgxTx from a pgx.Tx; the zero
// Tx is refused.
type Tx struct{ tx any }

// SQLTx returns the [Tx] of a database/sql transaction, begun on a handle of
// the same database as the dialect's.
func SQLTx(tx *sql.Tx) Tx { return Tx{tx: tx} }

func init() {
	seal.NewTx = func(tx any) any { return Tx{tx: tx} }
	seal.TxOf = func(t any) any { return t.(Tx).tx }
}
