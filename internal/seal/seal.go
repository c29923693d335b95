// Package seal lets the engine packages and the store make and read values
// of the dialect package's opaque types, which users can only make through
// that package's constructors. The dialect package sets these functions
// when it is initialised (every package that can reach them imports it).
// It is not for users.
package seal

// NewTx returns a dialect.Tx holding tx, a transaction of an engine's own
// driver (a pgx.Tx).
var NewTx func(tx any) any

// TxOf returns the transaction a dialect.Tx holds: a *sql.Tx, a driver's
// own transaction, or nil for the zero Tx.
var TxOf func(t any) any
