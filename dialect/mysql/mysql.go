package mysql

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"log/slog"
	"strings"

	gomysql "github.com/go-sql-driver/mysql"

	"github.com/claimlock/claimlock/dialect"
)

// preferredStrategy is what dialect.StrategyAuto resolves to on a
// MySQL-family server: token-update, on every version. The performance
// measurements decide it; change it here and nowhere else. Measured with
// examples/claimbench on MariaDB 10.11 (2 cores, batch 100, READ COMMITTED
// sessions, claimConcurrency 2, medians of three runs), token-update claimed
// 8-19% more rows per second than SKIP LOCKED at 1, 4 and 16 workers, and
// without the claim concurrency bound (16 workers each running its own
// claim) 35% more. Its claim is one autocommit statement holding its row
// locks only while it runs; a SKIP LOCKED claim is a four-round-trip
// transaction, and every concurrent select must step over the rows the
// others hold. SKIP LOCKED stays available where the server has it (MySQL
// 8.0.1+, MariaDB 10.6+). MySQL 8 was not measured.
func preferredStrategy(Version) dialect.Strategy { return dialect.StrategyTokenUpdate }

// claimConcurrency is [dialect.Capabilities.ClaimConcurrency] on a
// MySQL-family server. Concurrent token-update claims of one scope queue on
// each other's row locks at the head of the pending rows (InnoDB's
// semi-consistent read, which would let them pass, works on clustered-index
// scans only). Measured on MariaDB 10.11 with 16 workers: each claiming on
// its own, claims waited 50-80 ms and throughput fell to 65-76% of the
// 4-worker figure of the same run; with one or two claims in flight per
// claimer it stayed at 93-118%, with four at 86-95%. Two gave the highest
// 16-worker figures both through the library and with a hand-written
// claimer.
const claimConcurrency = 2

// now is the database clock used by every statement, in UTC with
// microseconds, whatever the session time_zone.
const now = "UTC_TIMESTAMP(6)"

// readCommitted is the value of the isolation variable this package wants.
const readCommitted = "READ-COMMITTED"

// micros renders an expression giving the microseconds since the Unix epoch
// of a DATETIME expression, so that times are read as integers and the
// dialect depends neither on the DSN's parseTime nor on its loc.
func micros(expr string) string {
	return "TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', " + expr + ")"
}

// MySQL error numbers this package interprets.
const (
	errLockWaitTimeout = 1205 // ER_LOCK_WAIT_TIMEOUT
	errDeadlock        = 1213 // ER_LOCK_DEADLOCK
	errDupEntry        = 1062 // ER_DUP_ENTRY
	errDupKeyName      = 1061 // ER_DUP_KEYNAME
	errUnknownSysVar   = 1193 // ER_UNKNOWN_SYSTEM_VARIABLE
	errKeyDoesNotExist = 1176 // ER_KEY_DOES_NOT_EXITS (a FORCE INDEX naming no index)
)

// Binlog is the server's binary log configuration as read by [New].
type Binlog struct {
	// Enabled is @@log_bin.
	Enabled bool
	// Format is @@binlog_format (STATEMENT, ROW or MIXED), "" if unknown.
	Format string
}

// Unsafe reports a statement-based binary log, for which UPDATE ... LIMIT
// and SKIP LOCKED are unsafe: replicas may pick other rows than the source.
func (b Binlog) Unsafe() bool {
	return b.Enabled && strings.EqualFold(b.Format, "STATEMENT")
}

// Dialect is the MySQL/MariaDB/TiDB implementation of [dialect.Dialect].
type Dialect struct {
	db      *sql.DB
	caps    dialect.Capabilities
	version Version
	retry   *dialect.Retrier
	logger  *slog.Logger

	isolationVar string
	isolation    string
	// rcSession is true when the pool's sessions already run in READ
	// COMMITTED; otherwise every operation that must run in READ COMMITTED
	// opens a transaction with that level.
	rcSession bool
	binlog    Binlog
}

var _ dialect.Dialect = (*Dialect)(nil)

// New returns the dialect for db, a database/sql handle opened with the
// "mysql" driver of github.com/go-sql-driver/mysql. It reads the server
// version (engine and SKIP LOCKED support), the session isolation level and
// the binary log format once.
//
// When the session isolation is not READ-COMMITTED (the server default is
// REPEATABLE-READ), New logs one warning and every claim, ack and reap then
// runs in its own transaction started with READ COMMITTED, which costs extra
// round trips; open the database with [Open] (or [ConfigureDSN]) to avoid
// them. A statement-based binary log is also reported through the logger and
// [Dialect.Binlog].
func New(ctx context.Context, db *sql.DB, opts dialect.Options) (*Dialect, error) {
	if db == nil {
		return nil, fmt.Errorf("%w: mysql: nil *sql.DB", dialect.ErrInvalidConfig)
	}
	if err := opts.Retry.Validate(); err != nil {
		return nil, err
	}
	logger := opts.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	var raw, comment string
	if err := db.QueryRowContext(ctx, "SELECT VERSION(), @@version_comment").Scan(&raw, &comment); err != nil {
		return nil, fmt.Errorf("mysql: read version: %w", err)
	}
	v := ParseVersion(raw, comment)
	d := &Dialect{
		db: db, version: v, logger: logger,
		retry: dialect.NewRetrier(opts.Retry),
		caps: dialect.Capabilities{
			Engine: v.Engine, Version: raw,
			SkipLocked: v.SkipLocked(), Returning: false,
			PreferredStrategy: preferredStrategy(v),
			ClaimConcurrency:  claimConcurrency,
		},
	}
	name, iso, err := readIsolation(ctx, db, v.IsolationVariable())
	if err != nil {
		return nil, fmt.Errorf("mysql: read isolation level: %w", err)
	}
	d.isolationVar, d.isolation = name, iso
	d.rcSession = strings.EqualFold(iso, readCommitted)
	if !d.rcSession {
		logger.Warn("claimlock: mysql session isolation is not READ-COMMITTED; claims, acks and reaps will each open a READ COMMITTED transaction (open the database with mysql.Open, or set "+name+"='READ-COMMITTED' in the DSN)",
			"variable", name, "isolation", iso)
	}
	var logBin, format sql.NullString
	if err := db.QueryRowContext(ctx, "SELECT @@log_bin, @@binlog_format").Scan(&logBin, &format); err == nil {
		d.binlog = Binlog{Enabled: logBin.String == "1" || strings.EqualFold(logBin.String, "ON"), Format: format.String}
	} else {
		logger.Debug("claimlock: mysql binlog settings not readable", "err", err)
	}
	if d.binlog.Unsafe() {
		logger.Warn("claimlock: mysql binlog_format is STATEMENT; UPDATE ... LIMIT and SKIP LOCKED are unsafe for statement-based replication (use ROW or MIXED)")
	}
	return d, nil
}

// readIsolation reads the session isolation variable, trying the other name
// when the server does not know the first one.
func readIsolation(ctx context.Context, db *sql.DB, name string) (string, string, error) {
	var iso string
	err := db.QueryRowContext(ctx, "SELECT @@SESSION."+name).Scan(&iso)
	if isErrNumber(err, errUnknownSysVar) {
		name = otherIsolationVariable(name)
		err = db.QueryRowContext(ctx, "SELECT @@SESSION."+name).Scan(&iso)
	}
	return name, iso, err
}

// ConfigureDSN makes every connection of cfg start in READ COMMITTED by
// setting the isolation variable v names (see [Version.IsolationVariable])
// as a session variable, and removing the other name if present. The driver
// runs SET name = 'READ-COMMITTED' on each new connection.
func ConfigureDSN(cfg *gomysql.Config, v Version) {
	setIsolationParam(cfg, v.IsolationVariable())
}

func setIsolationParam(cfg *gomysql.Config, name string) {
	if cfg.Params == nil {
		cfg.Params = make(map[string]string)
	}
	delete(cfg.Params, otherIsolationVariable(name))
	cfg.Params[name] = "'" + readCommitted + "'"
}

// Open connects to dsn (go-sql-driver/mysql syntax) once to read the server
// version, then returns a *sql.DB whose every pooled connection runs in READ
// COMMITTED (see [ConfigureDSN]) and interpolates statement arguments on the
// client (interpolateParams=true: one round trip per statement instead of
// three; left off for the multibyte character sets where the driver forbids
// it). Errors parsing dsn wrap
// [dialect.ErrInvalidConfig].
func Open(ctx context.Context, dsn string) (*sql.DB, error) {
	cfg, err := gomysql.ParseDSN(dsn)
	if err != nil {
		return nil, fmt.Errorf("%w: mysql: %v", dialect.ErrInvalidConfig, err)
	}
	probe, err := openConfig(cfg)
	if err != nil {
		return nil, err
	}
	probe.SetMaxOpenConns(1)
	var raw, comment string
	err = probe.QueryRowContext(ctx, "SELECT VERSION(), @@version_comment").Scan(&raw, &comment)
	probe.Close()
	if err != nil {
		return nil, fmt.Errorf("mysql: open: read version: %w", err)
	}
	name := ParseVersion(raw, comment).IsolationVariable()
	// Interpolate arguments client-side: a statement with arguments is then
	// one round trip instead of three (prepare, execute, close). The driver
	// escapes values for the connection's character set and refuses the
	// multibyte sets where that is unsafe (BIG5, CP932, GB2312, GBK, SJIS):
	// with one of those, keep server-side prepared statements.
	if c := cfg.Clone(); !c.InterpolateParams {
		c.InterpolateParams = true
		if _, err := gomysql.NewConnector(c); err == nil {
			cfg = c
		}
	}
	for try := 0; ; try++ {
		c := cfg.Clone()
		setIsolationParam(c, name)
		db, err := openConfig(c)
		if err != nil {
			return nil, err
		}
		err = db.PingContext(ctx)
		if err == nil {
			return db, nil
		}
		db.Close()
		if try == 0 && isErrNumber(err, errUnknownSysVar) {
			name = otherIsolationVariable(name)
			continue
		}
		return nil, fmt.Errorf("mysql: open: %w", err)
	}
}

func openConfig(cfg *gomysql.Config) (*sql.DB, error) {
	conn, err := gomysql.NewConnector(cfg)
	if err != nil {
		return nil, fmt.Errorf("%w: mysql: %v", dialect.ErrInvalidConfig, err)
	}
	return sql.OpenDB(conn), nil
}

// Capabilities implements [dialect.Dialect].
func (d *Dialect) Capabilities() dialect.Capabilities { return d.caps }

// Version returns the parsed server version.
func (d *Dialect) Version() Version { return d.version }

// Isolation returns the session isolation variable's name and the value New
// read from it.
func (d *Dialect) Isolation() (variable, value string) { return d.isolationVar, d.isolation }

// ReadCommittedSession reports whether the pool's sessions run in READ
// COMMITTED; when false, claims, acks and reaps open READ COMMITTED
// transactions instead.
func (d *Dialect) ReadCommittedSession() bool { return d.rcSession }

// Binlog returns the binary log configuration New read.
func (d *Dialect) Binlog() Binlog { return d.binlog }

// Retries implements [dialect.Dialect].
func (d *Dialect) Retries() int64 { return d.retry.Retries() }

// QuoteIdent implements [dialect.Dialect] with backticks.
func (d *Dialect) QuoteIdent(field, name string) (string, error) {
	return dialect.Quote(field, name, '`')
}

// quote quotes an identifier already validated by a Validate method.
func quote(name string) string {
	s, _ := dialect.Quote("", name, '`')
	return s
}

// IsRetryable reports whether err is a MySQL deadlock (1213) or lock-wait
// timeout (1205): the whole statement or transaction can be run again.
func IsRetryable(err error) bool {
	return isErrNumber(err, errDeadlock) || isErrNumber(err, errLockWaitTimeout)
}

func isErrNumber(err error, n uint16) bool {
	var me *gomysql.MySQLError
	return err != nil && errors.As(err, &me) && me.Number == n
}

// isConnErr reports a broken connection. driver.ErrBadConn means nothing was
// sent (database/sql already retries it); mysql.ErrInvalidConn means the
// statement may or may not have run, so only idempotent operations may be
// re-run after it.
func isConnErr(err error) bool {
	return errors.Is(err, gomysql.ErrInvalidConn) || errors.Is(err, driver.ErrBadConn)
}

// interpretError marks retryable engine errors; others pass through.
func interpretError(err error) error {
	if err == nil || dialect.IsRetryable(err) {
		return err
	}
	if IsRetryable(err) {
		return &dialect.RetryableError{Err: err}
	}
	return err
}

// do runs fn under the retrier. An idempotent fn (one whose re-run does no
// harm and reports the same thing) is also re-run once after a broken
// connection; writes that may have been applied never are.
func (d *Dialect) do(ctx context.Context, op string, idempotent bool, fn func() error) error {
	connRetried := false
	return d.retry.Do(ctx, op, func() error {
		err := fn()
		if idempotent && !connRetried && isConnErr(err) && ctx.Err() == nil {
			connRetried = true
			err = fn()
		}
		return interpretError(err)
	})
}

// querier is what *sql.DB and *sql.Tx share.
type querier interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// readCommittedTx runs fn in a READ COMMITTED transaction (the session's
// own level when it is READ COMMITTED, else set for this transaction),
// committing when fn returns nil and rolling back otherwise.
func (d *Dialect) readCommittedTx(ctx context.Context, fn func(q querier) error) (err error) {
	opts := &sql.TxOptions{Isolation: sql.LevelReadCommitted}
	if d.rcSession {
		opts = nil // the session is READ COMMITTED already: save a SET TRANSACTION round trip
	}
	tx, err := d.db.BeginTx(ctx, opts)
	if err != nil {
		return interpretError(err)
	}
	defer func() {
		if err != nil {
			_ = tx.Rollback()
		}
	}()
	if err := fn(tx); err != nil {
		return interpretError(err)
	}
	return interpretError(tx.Commit())
}

// inReadCommitted runs fn directly on the pool when its sessions are READ
// COMMITTED, and in a READ COMMITTED transaction otherwise.
func (d *Dialect) inReadCommitted(ctx context.Context, fn func(q querier) error) error {
	if d.rcSession {
		return interpretError(fn(d.db))
	}
	return d.readCommittedTx(ctx, fn)
}

// ExecDDL implements [dialect.Dialect]. A CREATE INDEX whose index already
// exists (error 1061) is skipped, so running IndexDDL twice is harmless.
func (d *Dialect) ExecDDL(ctx context.Context, stmts []string) error {
	for _, s := range stmts {
		if _, err := d.db.ExecContext(ctx, s); err != nil {
			if strings.HasPrefix(s, "CREATE INDEX") && isErrNumber(err, errDupKeyName) {
				continue
			}
			return fmt.Errorf("mysql: ddl %q: %w", s, interpretError(err))
		}
	}
	return nil
}

// CreateTableDDL implements [dialect.Dialect]: one CREATE TABLE IF NOT
// EXISTS ... ENGINE=InnoDB statement with the indexes inside it. Text columns
// are VARCHAR with a binary utf8mb4 collation, so keys and tokens compare
// exactly as on the other engines.
func (d *Dialect) CreateTableDDL(def dialect.TableDef) ([]string, error) {
	if err := def.Validate(); err != nil {
		return nil, err
	}
	var b strings.Builder
	fmt.Fprintf(&b, "CREATE TABLE IF NOT EXISTS %s (", quote(def.Table))
	serial := ""
	for i, c := range def.Columns {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(quote(c.Name))
		switch c.Type {
		case dialect.TypeSerial:
			b.WriteString(" BIGINT NOT NULL AUTO_INCREMENT")
			serial = c.Name
			continue
		case dialect.TypeInt:
			b.WriteString(" BIGINT")
		case dialect.TypeTime:
			b.WriteString(" DATETIME(6)")
		case dialect.TypeText:
			n := c.Len
			if n == 0 {
				n = 255
			}
			fmt.Fprintf(&b, " VARCHAR(%d) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin", n)
		default:
			return nil, fmt.Errorf("%w: mysql: column %s: unknown type %d", dialect.ErrInvalidConfig, c.Name, c.Type)
		}
		if c.NotNull {
			b.WriteString(" NOT NULL")
		}
		if c.Default != nil {
			b.WriteString(" DEFAULT " + c.Default.Literal())
		}
	}
	pk := def.PrimaryKey
	if len(pk) == 0 && serial != "" {
		pk = []string{serial}
	}
	if len(pk) > 0 {
		fmt.Fprintf(&b, ", PRIMARY KEY (%s)", quoteAll(pk))
	}
	for _, ix := range def.Indexes {
		u := ""
		if ix.Unique {
			u = "UNIQUE "
		}
		fmt.Fprintf(&b, ", %sINDEX %s (%s)", u, quote(ix.Name), quoteAll(ix.Columns))
	}
	b.WriteString(") ENGINE=InnoDB")
	return []string{b.String()}, nil
}

func quoteAll(names []string) string {
	q := make([]string, len(names))
	for i, n := range names {
		q[i] = quote(n)
	}
	return strings.Join(q, ", ")
}
