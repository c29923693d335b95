package store

import (
	"context"
	"fmt"

	"github.com/claimlock/claimlock/dialect"
	"github.com/claimlock/claimlock/internal/ident"
)

// ColumnType is a portable column type for [TableDef].
type ColumnType int

// ColumnDef is one column of a [TableDef].
type ColumnDef struct {
	// Name is the column name.
	Name string
	// Type is the portable type.
	Type ColumnType
	// Len is the length of a TypeText column (0 means 255).
	Len int
	// NotNull adds NOT NULL.
	NotNull bool
	// Default is a literal default: a Status (string or integer) or nil.
	Default *dialect.Status
}

// IndexDef is a secondary index of a [TableDef].
type IndexDef struct {
	// Name is the index name.
	Name string
	// Columns are the indexed columns, in order.
	Columns []string
	// Unique makes it a unique index.
	Unique bool
}

// TableDef is a portable table definition that a dialect renders as DDL.
type TableDef struct {
	// Table is the table name, optionally schema-qualified.
	Table string
	// Columns are the columns, in order.
	Columns []ColumnDef
	// PrimaryKey names the key columns (ignored for a TypeSerial column,
	// which is the key by itself).
	PrimaryKey []string
	// Indexes are secondary indexes created with the table.
	Indexes []IndexDef
}

// Validate checks every identifier of the definition.
func (d TableDef) Validate() error {
	if err := ValidateIdent("Table", d.Table); err != nil {
		return err
	}
	if len(d.Columns) == 0 {
		return fmt.Errorf("%w: TableDef %s has no columns", dialect.ErrInvalidConfig, d.Table)
	}
	for i, c := range d.Columns {
		if err := ValidateColumn(fmt.Sprintf("Columns[%d]", i), c.Name); err != nil {
			return err
		}
		if c.Len < 0 {
			return fmt.Errorf("%w: Columns[%d]: negative length", dialect.ErrInvalidConfig, i)
		}
	}
	for i, c := range d.PrimaryKey {
		if err := ValidateColumn(fmt.Sprintf("PrimaryKey[%d]", i), c); err != nil {
			return err
		}
	}
	for i, ix := range d.Indexes {
		if err := ValidateColumn(fmt.Sprintf("Indexes[%d].Name", i), ix.Name); err != nil {
			return err
		}
		for j, c := range ix.Columns {
			if err := ValidateColumn(fmt.Sprintf("Indexes[%d].Columns[%d]", i, j), c); err != nil {
				return err
			}
		}
	}
	return nil
}

// LeaseTableDef is the library-managed key table for keyed leases: a text
// key of keyLen bytes (0 means 255), owner, lock_at, expires_at and fence.
// Pass it to [CreateTableDDL]; [KeyedLeaseTable] describes it.
func LeaseTableDef(table string, keyLen int) TableDef {
	if keyLen == 0 {
		keyLen = 255
	}
	return TableDef{
		Table: table,
		Columns: []ColumnDef{
			{Name: "lease_key", Type: TypeText, Len: keyLen, NotNull: true},
			{Name: "owner", Type: TypeText, Len: MaxTokenLen},
			{Name: "lock_at", Type: TypeTime},
			{Name: "expires_at", Type: TypeTime},
			{Name: "fence", Type: TypeInt, NotNull: true, Default: zeroStatus()},
		},
		PrimaryKey: []string{"lease_key"},
		Indexes:    []IndexDef{{Name: IndexName(table, "exp"), Columns: []string{"expires_at"}}},
	}
}

// KeyedLeaseTable describes the table created from [LeaseTableDef].
func KeyedLeaseTable(table string, keyLen int) dialect.LeaseTable {
	return dialect.LeaseTable{
		Table: table, Key: "lease_key", KeyKind: dialect.IDText, KeyMaxLen: keyLen,
		Owner: "owner", LockedAt: "lock_at", ExpiresAt: "expires_at", Fence: "fence", Keyed: true,
	}
}

// IndexName derives an index name from a table name and a suffix, within
// [ident.MaxLen], using only the table's last part.
func IndexName(table, suffix string) string {
	if i := lastDot(table); i >= 0 {
		table = table[i+1:]
	}
	name := table + "_cl_" + suffix
	if len(name) > ident.MaxLen {
		h := fnv32(table)
		name = fmt.Sprintf("%s_%08x_cl_%s", table[:ident.MaxLen-len(suffix)-14], h, suffix)
	}
	return name
}

func lastDot(s string) int {
	for i := len(s) - 1; i >= 0; i-- {
		if s[i] == '.' {
			return i
		}
	}
	return -1
}

func fnv32(s string) uint32 {
	h := uint32(2166136261)
	for i := 0; i < len(s); i++ {
		h ^= uint32(s[i])
		h *= 16777619
	}
	return h
}

// recommendedIndexes returns the indexes a claim table needs, in the order the
// dialects' IndexDDL lists them:
//
//   - claim (scope columns..., status, key): claims read the pending rows of
//     their scope in key order.
//   - token (token): read-backs, acks, heartbeats and releases find a
//     claim's rows.
//   - reap (status, claimed_at): sweeps read the stale rows, oldest first.
//   - scope (scope columns..., status, claimed_at), for a scoped table only:
//     scoped Stats read the scope's rows, scoped sweeps its stale rows
//     oldest first.
//   - sched (run_at), with a RunAt column only: operators' retry now and
//     listings find the rows scheduled for later (a future RunAt) without
//     reading every pending row. It leads with RunAt, not the status, so
//     that no optimizer mistakes it for the reap index.
//
// PostgreSQL keeps the names and builds a partial claim index of its own,
// over the pending rows only (the plan trap of its package documentation),
// so that its scoped Stats need the scope index. MySQL and MariaDB leave
// the scope index out: their claim index serves scoped Stats, and MariaDB
// does not use a scope index for sweeps (see dialect/mysql).
func recommendedIndexes(c dialect.ClaimTable) []IndexDef {
	claimCols := append(append([]string{}, c.Scope...), c.Status, c.ID)
	if c.RunAt != "" {
		// Claims skip pending rows whose RunAt is in the future: with the
		// column in the claim index, engines that filter index entries
		// (index condition pushdown) skip them without reading the rows.
		claimCols = append(claimCols, c.RunAt)
	}
	out := []IndexDef{
		{Name: IndexName(c.Table, "claim"), Columns: claimCols},
		{Name: IndexName(c.Table, "token"), Columns: []string{c.Token}},
		{Name: IndexName(c.Table, "reap"), Columns: []string{c.Status, c.ClaimedAt}},
	}
	if len(c.Scope) > 0 {
		scopeCols := append(append([]string{}, c.Scope...), c.Status, c.ClaimedAt)
		out = append(out, IndexDef{Name: IndexName(c.Table, "scope"), Columns: scopeCols})
	}
	if c.RunAt != "" {
		out = append(out, IndexDef{Name: IndexName(c.Table, "sched"), Columns: []string{c.RunAt}})
	}
	return out
}

// defaultErrorLen is the width [ClaimTableDef] gives an Error column.
const defaultErrorLen = 1024

// defaultWorkerLen is the width [ClaimTableDef] gives a Worker column:
// claim.Config.Worker's longest.
const defaultWorkerLen = 255

// ClaimTableDef builds a [TableDef] holding every column spec names: the key
// (auto-incrementing for integer keys), status, token, claimed-at (a
// 64-bit integer where spec says it holds unix time, like created-at and
// run-at), the
// optional attempts, version, created-at, run-at, error and worker columns, the scope columns
// (integers) and spec.Columns, typed by extra where it names them and text
// otherwise. Recommended indexes are not included: create them from
// [ClaimStore.IndexDDL].
func ClaimTableDef(spec dialect.ClaimTable, extra ...ColumnDef) TableDef {
	def := TableDef{Table: spec.Table, PrimaryKey: []string{spec.ID}}
	if spec.IDKind == dialect.IDText {
		def.Columns = append(def.Columns, ColumnDef{Name: spec.ID, Type: TypeText, Len: 64, NotNull: true})
	} else {
		def.Columns = append(def.Columns, ColumnDef{Name: spec.ID, Type: TypeSerial, NotNull: true})
	}
	for _, c := range spec.Scope {
		def.Columns = append(def.Columns, ColumnDef{Name: c, Type: TypeInt, NotNull: true})
	}
	pending := spec.Pending
	st := ColumnDef{Name: spec.Status, Type: TypeText, Len: 32, NotNull: true, Default: &pending}
	if spec.Pending.IsNumeric() {
		st.Type = TypeInt
	}
	zero := dialect.StatusInt(0)
	def.Columns = append(def.Columns, st,
		ColumnDef{Name: spec.Token, Type: TypeText, Len: MaxTokenLen},
		ColumnDef{Name: spec.ClaimedAt, Type: timeType(spec.ClaimedAtFormat)})
	if spec.Attempts != "" {
		def.Columns = append(def.Columns, ColumnDef{Name: spec.Attempts, Type: TypeInt, NotNull: true, Default: &zero})
	}
	if spec.Version != "" {
		def.Columns = append(def.Columns, ColumnDef{Name: spec.Version, Type: TypeInt, NotNull: true, Default: &zero})
	}
	if spec.CreatedAt != "" {
		def.Columns = append(def.Columns, ColumnDef{Name: spec.CreatedAt, Type: timeType(spec.CreatedAtFormat)})
	}
	if spec.RunAt != "" {
		def.Columns = append(def.Columns, ColumnDef{Name: spec.RunAt, Type: timeType(spec.RunAtFormat)})
	}
	if spec.Error != "" {
		def.Columns = append(def.Columns, ColumnDef{Name: spec.Error, Type: TypeText, Len: defaultErrorLen})
	}
	if spec.Worker != "" {
		def.Columns = append(def.Columns, ColumnDef{Name: spec.Worker, Type: TypeText, Len: defaultWorkerLen})
	}
	for _, c := range spec.Columns {
		cd := ColumnDef{Name: c, Type: TypeText}
		for _, e := range extra {
			if e.Name == c {
				cd = e
			}
		}
		def.Columns = append(def.Columns, cd)
	}
	return def
}

// timeType is the portable type of a time column of format f: a 64-bit
// integer for unix time.
func timeType(f dialect.TimeFormat) ColumnType {
	if f.IsUnix() {
		return TypeInt
	}
	return TypeTime
}

// ColumnAdder is an optional interface of a [dialect.Dialect] (the dialects of this
// module implement it): schema advice for a table that already exists, for
// migration tools.
type ColumnAdder interface {
	// AddColumnsDDL reads table's columns from the catalog and returns one
	// ALTER TABLE ... ADD COLUMN statement for each column of cols that
	// the table lacks (none when it has them all), typed as CreateTableDDL
	// types them. A missing table, an invalid name, an auto-incrementing
	// column or a NOT NULL column without a default is an error wrapping
	// [dialect.ErrInvalidConfig].
	AddColumnsDDL(ctx context.Context, table string, cols []ColumnDef) ([]string, error)
}

// IndexOptions change how the recommended indexes of a claim table are
// built ([IndexDDLer]). The zero value is IndexDDL's plain form.
type IndexOptions struct {
	// Online builds each index without blocking writes to the table while
	// it is built, for a table in use:
	//
	//   - PostgreSQL: CREATE INDEX CONCURRENTLY. It cannot run inside a
	//     transaction block: a migration tool must run such statements
	//     outside one (goose: a "-- +goose NO TRANSACTION" file), and
	//     [ExecDDL] does. It waits for the transactions that may
	//     write the table to end, twice, and reads the table twice. A build
	//     that fails or is interrupted leaves an INVALID index, which no
	//     query uses and which CREATE INDEX ... IF NOT EXISTS then skips:
	//     [IndexDDLer.MissingIndexesWith] (and [ClaimStore.MissingIndexes])
	//     report it as missing, its CREATE INDEX preceded by the DROP INDEX
	//     that removes it.
	//   - MySQL and MariaDB: ALGORITHM=INPLACE, LOCK=NONE, InnoDB's online
	//     DDL, which lets writes run while the index is built; a server
	//     that cannot build the index so fails the statement rather than
	//     locking the table. Like any DDL it waits for the transactions
	//     that used the table to end, and commits on its own.
	//   - SQLite: no effect. CREATE INDEX holds the database's write lock
	//     while it runs: build indexes while the table is small, or when
	//     writers can wait.
	Online bool
}

// IndexDDLer is an optional interface of a [ClaimStore] (the stores of this
// module implement it): the recommended indexes' DDL with [IndexOptions].
type IndexDDLer interface {
	// IndexDDLWith is [ClaimStore.IndexDDL] built with opts.
	IndexDDLWith(opts IndexOptions) []string
	// MissingIndexesWith is [ClaimStore.MissingIndexes] built with opts.
	MissingIndexesWith(ctx context.Context, opts IndexOptions) ([]string, error)
}

const (
	// TypeInt is a 64-bit integer.
	TypeInt ColumnType = iota
	// TypeText is a string of at most Len bytes (VARCHAR; Len zero means 255).
	TypeText
	// TypeTime is a timestamp with sub-second precision in UTC (DATETIME(6),
	// timestamptz, or integer milliseconds on SQLite).
	TypeTime
	// TypeSerial is an auto-incrementing 64-bit integer primary key.
	TypeSerial
	// TypeTimeSeconds is a timestamp that holds whole seconds, as many
	// existing schemas have (DATETIME, timestamptz(0); on SQLite the same
	// integer milliseconds as TypeTime). claimlock's stores learn the
	// precision from the catalog and keep every expiry test safe for it.
	TypeTimeSeconds
)

// zeroStatus returns a new integer status 0, for column defaults.
func zeroStatus() *dialect.Status {
	z := dialect.StatusInt(0)
	return &z
}
