package coalesce

import (
	"context"
	"database/sql"
	"fmt"
	"strings"

	"github.com/claimlock/claimlock/claim"
	"github.com/claimlock/claimlock/dialect"
)

// The coalescer's tables. Their column names are fixed; their table names
// come from [Config].
//
//	changes(id, change_key, event_id UNIQUE, source, seq, payload, accepted_at, folded_at)
//	keys(change_key PK, status, token, claimed_at, attempts, run_at, last_error,
//	     version, flush_version, persisted, folded)
//	sources(change_key, source, last_seq; PK (change_key, source))
//
// accepted_at and folded_at are milliseconds since the Unix epoch on the
// database clock; folded_at is NULL until a flush folded the change. The
// keys table is a claim table (package claim): version counts the dirty
// marks, flush_version is the version a flush started from, persisted the
// highest sequence folded and folded the number of changes folded.

// claimConfig describes the keys table to package claim.
func claimConfig(cfg Config) claim.Config {
	return claim.Config{
		ClaimTable: dialect.ClaimTable{
			Table: cfg.KeysTable, ID: "change_key", IDKind: dialect.IDText,
			Status: "status", Token: "token", ClaimedAt: "claimed_at",
			Attempts: "attempts", Version: "version", RunAt: "run_at", Error: "last_error",
			Pending:    dialect.StatusString(statusPending),
			Processing: dialect.StatusString(statusProcessing),
			Done:       dialect.StatusString(statusDone),
			Failed:     dialect.StatusString(statusFailed),
		},
		Logger:   cfg.Logger,
		Observer: cfg.Observer,
	}
}

// KeysTable returns the claim table description of cfg's keys table (its
// table name from cfg, default [DefaultKeysTable]), validated: what package
// claim, a reaper or an operator's tool needs to count the keys by status
// and to list and unpark parked ones without a [Flusher] (whose
// [Flusher.ClaimConfig] holds the same description). Errors wrap
// [dialect.ErrInvalidConfig] naming the bad field of cfg.
func KeysTable(cfg Config) (dialect.ClaimTable, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return dialect.ClaimTable{}, err
	}
	t := claimConfig(cfg).ClaimTable.WithDefaults()
	if err := t.Validate(); err != nil {
		return t, fmt.Errorf("coalesce: keys table: %w", err)
	}
	return t, nil
}

// CreateTablesDDL returns the statements that create cfg's three tables
// and their indexes in d's syntax (CREATE TABLE IF NOT EXISTS; the keys
// table's claim indexes are those of [claim.Claimer.IndexDDL], which on
// MySQL and MariaDB have no IF NOT EXISTS: run them once). Errors wrap
// [dialect.ErrInvalidConfig].
func CreateTablesDDL(d dialect.Dialect, cfg Config) ([]string, error) {
	e, cfg, err := prepare(d, cfg)
	if err != nil {
		return nil, err
	}
	c, err := claim.New[struct{}](d, claimConfig(cfg), nil)
	if err != nil {
		return nil, fmt.Errorf("coalesce: keys table: %w", err)
	}
	return append(tableDDL(e, cfg), c.IndexDDL(false)...), nil
}

// CreateTables creates cfg's tables and their indexes on db, the database
// of d, unless they exist: it runs [CreateTablesDDL]'s statements, but only
// the claim indexes the keys table lacks.
func CreateTables(ctx context.Context, d dialect.Dialect, db *sql.DB, cfg Config) error {
	e, cfg, err := prepare(d, cfg)
	if err != nil {
		return err
	}
	if db == nil {
		return invalid("db", "is nil")
	}
	for _, q := range tableDDL(e, cfg) {
		if _, err := db.ExecContext(ctx, q); err != nil {
			return fmt.Errorf("coalesce: create tables: %s: %w", q, err)
		}
	}
	c, err := claim.New[struct{}](d, claimConfig(cfg), nil)
	if err != nil {
		return fmt.Errorf("coalesce: keys table: %w", err)
	}
	missing, err := c.MissingIndexes(ctx)
	if err != nil {
		return fmt.Errorf("coalesce: create tables: %w", err)
	}
	for _, q := range missing {
		if _, err := db.ExecContext(ctx, q); err != nil {
			return fmt.Errorf("coalesce: create tables: %s: %w", q, err)
		}
	}
	return nil
}

// prepare validates d and cfg.
func prepare(d dialect.Dialect, cfg Config) (engine, Config, error) {
	e, err := engineOf(d)
	if err != nil {
		return 0, cfg, err
	}
	cfg, err = cfg.withDefaults()
	return e, cfg, err
}

// indexName names an index of table: its last part, an underscore and
// suffix.
func indexName(table, suffix string) string {
	return table[strings.LastIndex(table, ".")+1:] + "_" + suffix
}

// tableDDL returns the CREATE TABLE (and, outside MySQL, CREATE INDEX)
// statements of the three tables.
func tableDDL(e engine, cfg Config) []string {
	ch, keys, src := e.quote(cfg.ChangesTable), e.quote(cfg.KeysTable), e.quote(cfg.SourcesTable)
	q := e.quote
	var id, text, token, bigint, blob, timeCol, errCol, suffix string
	switch e {
	case engMySQL:
		id = "BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY"
		text = "VARCHAR(191) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin"
		token = "VARCHAR(40) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin"
		bigint, blob, timeCol, errCol = "BIGINT", "LONGBLOB", "DATETIME(6)", "VARCHAR(1024)"
		suffix = " ENGINE=InnoDB"
	case engPostgres:
		id = "BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY"
		text, token = "VARCHAR(191)", "VARCHAR(40)"
		bigint, blob, timeCol, errCol = "BIGINT", "BYTEA", "TIMESTAMPTZ", "VARCHAR(1024)"
	default:
		id = "INTEGER PRIMARY KEY AUTOINCREMENT"
		text, token = "TEXT", "TEXT"
		bigint, blob, timeCol, errCol = "INTEGER", "BLOB", "INTEGER", "TEXT"
	}
	changes := "CREATE TABLE IF NOT EXISTS " + ch + " (id " + id +
		", change_key " + text + " NOT NULL, event_id " + text + " NOT NULL, source " + text + " NOT NULL DEFAULT ''" +
		", seq " + bigint + " NOT NULL DEFAULT 0, payload " + blob + ", accepted_at " + bigint + " NOT NULL, folded_at " + bigint
	keysT := "CREATE TABLE IF NOT EXISTS " + keys + " (change_key " + text + " NOT NULL PRIMARY KEY" +
		", status VARCHAR(32) NOT NULL DEFAULT '" + statusPending + "', token " + token + ", claimed_at " + timeCol +
		", attempts " + bigint + " NOT NULL DEFAULT 0, run_at " + timeCol + ", last_error " + errCol +
		", version " + bigint + " NOT NULL DEFAULT 0, flush_version " + bigint + " NOT NULL DEFAULT 0" +
		", persisted " + bigint + " NOT NULL DEFAULT 0, folded " + bigint + " NOT NULL DEFAULT 0)" + suffix
	sources := "CREATE TABLE IF NOT EXISTS " + src + " (change_key " + text + " NOT NULL, source " + text + " NOT NULL" +
		", last_seq " + bigint + " NOT NULL, PRIMARY KEY (change_key, source))" + suffix
	// The event id is unique: the last line of defence against a resent
	// change. A flush reads a key's unfolded changes in id order; the
	// backpressure check finds the oldest unfolded change.
	idx := []struct{ name, unique, cols string }{
		{indexName(cfg.ChangesTable, "event"), "UNIQUE ", "event_id"},
		{indexName(cfg.ChangesTable, "key"), "", "change_key, folded_at, id"},
		{indexName(cfg.ChangesTable, "unfolded"), "", "folded_at, accepted_at"},
	}
	if e == engMySQL {
		for _, i := range idx {
			changes += ", " + i.unique + "KEY " + q(i.name) + " (" + i.cols + ")"
		}
		return []string{changes + ")" + suffix, keysT, sources}
	}
	out := []string{changes + ")", keysT, sources}
	for _, i := range idx {
		// An index lives in its table's schema.
		out = append(out, "CREATE "+i.unique+"INDEX IF NOT EXISTS "+q(i.name)+" ON "+ch+" ("+i.cols+")")
	}
	return out
}
