package mysql

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strings"

	gomysql "github.com/go-sql-driver/mysql"

	"github.com/claimlock/claimlock/dialect"
	"github.com/claimlock/claimlock/internal/errclass"
	"github.com/claimlock/claimlock/internal/store"
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

// readCommitted is the value of the isolation variable this package wants.
const readCommitted = "READ-COMMITTED"

// MySQL error numbers this package interprets.
const (
	errLockWaitTimeout = 1205 // ER_LOCK_WAIT_TIMEOUT
	errDeadlock        = 1213 // ER_LOCK_DEADLOCK
	errDupEntry        = 1062 // ER_DUP_ENTRY
	errDupKeyName      = 1061 // ER_DUP_KEYNAME
	errUnknownSysVar   = 1193 // ER_UNKNOWN_SYSTEM_VARIABLE
	errKeyDoesNotExist = 1176 // ER_KEY_DOES_NOT_EXITS (a FORCE INDEX naming no index)
	errReadOnly        = 1290 // ER_OPTION_PREVENTS_STATEMENT (--read-only)
	errReadOnlyTx      = 1792 // ER_CANT_EXECUTE_IN_READ_ONLY_TRANSACTION
	// errNotPrimary is ER_UNKNOWN_COM_ERROR, which a Galera node outside the
	// primary component returns for every statement it refuses to run
	// ("WSREP has not yet prepared node for application use").
	errNotPrimary = 1047
	// Sessions the server refused at connect: nothing ran.
	errTooManyConnections     = 1040 // ER_CON_COUNT_ERROR
	errTooManyUserConnections = 1203 // ER_TOO_MANY_USER_CONNECTIONS
	// A statement whose session ended while it ran: it may have run.
	errServerShutdown   = 1053 // ER_SERVER_SHUTDOWN
	errConnectionKilled = 1927 // ER_CONNECTION_KILLED (MariaDB)
	errSessionKilled    = 3169 // ER_SESSION_WAS_KILLED (MySQL)
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

// backendRef carries the engine's store inside Dialect; its field name is
// unexported, so users cannot reach it.
type backendRef = store.BackendRef

// Dialect is the MySQL/MariaDB/TiDB implementation of [dialect.Dialect].
type Dialect struct {
	backendRef
	b       *store.Backend // the store the backendRef carries, for the claim (claim.go)
	drv     *storeDriver   // what the dialect supplies to the store (driver.go)
	db      *sql.DB
	version Version

	isolationVar string
	isolation    string
	// rcSession is true when the pool's sessions already run in READ
	// COMMITTED; otherwise every operation that must run in READ COMMITTED
	// opens a transaction with that level.
	rcSession bool
	binlog    Binlog
	galera    Galera
	// utcSession is true when the sessions' time zone is UTC all year
	// (TIMESTAMP columns are then exact); timeZone names it, for errors.
	utcSession bool
	timeZone   string
}

var _ dialect.Dialect = (*Dialect)(nil)

func init() { errclass.Register(classify) }

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
		return nil, fmt.Errorf("mysql: %w: nil *sql.DB", dialect.ErrInvalidConfig)
	}
	logger, err := store.CheckOptions("mysql", opts)
	if err != nil {
		return nil, err
	}
	var raw, comment string
	if err := db.QueryRowContext(ctx, "SELECT VERSION(), @@version_comment").Scan(&raw, &comment); err != nil {
		return nil, fmt.Errorf("mysql: read version: %w", err)
	}
	v := ParseVersion(raw, comment)
	name, iso, err := readIsolation(ctx, db, v.IsolationVariable())
	if err != nil {
		return nil, fmt.Errorf("mysql: read isolation level: %w", err)
	}
	var autocommit int
	if err := db.QueryRowContext(ctx, "SELECT @@autocommit").Scan(&autocommit); err != nil {
		return nil, fmt.Errorf("mysql: read autocommit: %w", err)
	}
	if autocommit == 0 {
		// Every claim, heartbeat and reap is one autocommit statement: with
		// autocommit off it would stay invisible to other sessions, and
		// hold its row locks, until the session's next COMMIT.
		return nil, fmt.Errorf("mysql: %w: the sessions run with autocommit=0, so claims would stay invisible and locked until a later COMMIT; remove autocommit=0 from the DSN or the server's init_connect", dialect.ErrInvalidConfig)
	}
	d := build(db, v, raw, opts, logger, strings.EqualFold(iso, readCommitted))
	d.isolationVar, d.isolation = name, iso
	if d.utcSession, d.timeZone, err = readUTCSession(ctx, db); err != nil {
		return nil, fmt.Errorf("mysql: read time zone: %w", err)
	}
	if !d.rcSession {
		logger.Warn("claimlock: mysql session isolation is not READ-COMMITTED; claims, acks and reaps will each open a READ COMMITTED transaction (open the database with mysql.Open, or set "+name+"='READ-COMMITTED' in the DSN)",
			"variable", name, "isolation", iso)
	}
	if d.galera, err = readGalera(ctx, db); err != nil {
		return nil, fmt.Errorf("mysql: read wsrep settings: %w", err)
	}
	if !d.galera.Causal() {
		logger.Warn("claimlock: mysql Galera node without causal reads: a read-back, ack, heartbeat or renewal that reaches another node than its claim or lease may miss it and report it lost (open the database with mysql.Open or mysql.OpenCluster, or set wsrep_sync_wait=3 in the DSN)",
			"wsrep_sync_wait", d.galera.SyncWait)
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

// build assembles the dialect for a server of version v whose sessions are
// (rcSession) or are not READ COMMITTED.
func build(db *sql.DB, v Version, raw string, opts dialect.Options, logger *slog.Logger, rcSession bool) *Dialect {
	d := &Dialect{db: db, version: v, rcSession: rcSession}
	begin := []string{"START TRANSACTION"}
	if !rcSession {
		begin = []string{"SET TRANSACTION ISOLATION LEVEL READ COMMITTED", "START TRANSACTION"}
	}
	d.drv = &storeDriver{d: d, db: store.ConnDB{DB: db, BeginSQL: begin}, raw: raw}
	d.b = store.NewBackend(d.drv, opts, logger)
	d.backendRef = d.b.Ref()
	return d
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
// it). On a Galera node every connection also runs with causal reads and
// updates (wsrep_sync_wait = [GaleraSyncWait]) unless the DSN sets
// wsrep_sync_wait itself. Errors parsing dsn wrap
// [dialect.ErrInvalidConfig].
func Open(ctx context.Context, dsn string) (*sql.DB, error) {
	cfg, err := gomysql.ParseDSN(dsn)
	if err != nil {
		return nil, fmt.Errorf("mysql: %w: %v", dialect.ErrInvalidConfig, err)
	}
	cfg, name, err := configure(ctx, cfg)
	if err != nil {
		return nil, err
	}
	return openPinged(ctx, "open", name, func(name string) (*sql.DB, error) {
		c := cfg.Clone()
		setIsolationParam(c, name)
		return openConfig(c)
	})
}

// openPinged opens a pool with open, its connections setting the session
// isolation through the variable name, and pings it. A server that rejects
// that variable (the version suggested the wrong one: see
// [Version.IsolationVariable]) gets a second pool setting the other one.
// what names the caller in errors.
func openPinged(ctx context.Context, what, name string, open func(name string) (*sql.DB, error)) (*sql.DB, error) {
	for try := 0; ; try++ {
		db, err := open(name)
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
		return nil, fmt.Errorf("mysql: %s: %w", what, err)
	}
}

// configure probes the server of cfg once and returns cfg adjusted as
// [Open] documents, except for the isolation variable, whose name it
// returns.
func configure(ctx context.Context, cfg *gomysql.Config) (*gomysql.Config, string, error) {
	probe, err := openConfig(cfg)
	if err != nil {
		return nil, "", err
	}
	defer probe.Close()
	probe.SetMaxOpenConns(1)
	var raw, comment string
	if err := probe.QueryRowContext(ctx, "SELECT VERSION(), @@version_comment").Scan(&raw, &comment); err != nil {
		return nil, "", fmt.Errorf("mysql: open: read version: %w", err)
	}
	g, err := readGalera(ctx, probe)
	if err != nil {
		return nil, "", fmt.Errorf("mysql: open: read wsrep settings: %w", err)
	}
	cfg = cfg.Clone()
	if g.Enabled {
		setSyncWaitParam(cfg)
	}
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
	return cfg, ParseVersion(raw, comment).IsolationVariable(), nil
}

func openConfig(cfg *gomysql.Config) (*sql.DB, error) {
	conn, err := gomysql.NewConnector(cfg)
	if err != nil {
		return nil, fmt.Errorf("mysql: %w: %v", dialect.ErrInvalidConfig, err)
	}
	return sql.OpenDB(conn), nil
}

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

// Galera returns the Galera (wsrep) settings New read; Enabled is false on a
// server that is not a Galera node.
func (d *Dialect) Galera() Galera { return d.galera }

// quote quotes one identifier part that was validated already.
var quote = store.QuoteWith('`')

func isErrNumber(err error, n uint16) bool {
	var me *gomysql.MySQLError
	return err != nil && errors.As(err, &me) && me.Number == n
}

// classify sorts go-sql-driver/mysql errors. mysql.ErrInvalidConn means
// the statement may or may not have run; only idempotent operations are
// re-run after it.
// permanentErrors are the server errors of statements that fail the same
// way until the schema, grants or data change.
var permanentErrors = map[uint16]bool{
	1044: true, // access denied to a database
	1048: true, // column cannot be null
	1054: true, // unknown column
	1064: true, // syntax error
	1142: true, // command denied on a table
	1143: true, // command denied on a column
	1146: true, // table does not exist
	1264: true, // out of range value for a column
	1265: true, // data truncated for a column
	1292: true, // incorrect value (a date, a number)
	1366: true, // incorrect value for a column
	1406: true, // data too long for a column
	1452: true, // a foreign key constraint fails
	3819: true, // a check constraint is violated (MySQL)
	4025: true, // a check constraint is violated (MariaDB)
}

// classify sorts go-sql-driver/mysql errors, and tells a statement that
// never reached the server (a refused or timed-out dial, a name that does
// not resolve, a connection the driver found dead before writing,
// driver.ErrBadConn, or a session the server refused at connect: 1040 too
// many connections, 1203 too many for this user) apart from one whose
// connection broke once it was written (the driver's ErrInvalidConn, or a
// connection killed while it ran).
func classify(err error) errclass.Class {
	var me *gomysql.MySQLError
	if errors.As(err, &me) {
		switch me.Number {
		case errDeadlock:
			return errclass.Deadlock
		case errLockWaitTimeout:
			return errclass.LockTimeout
		case errDupEntry, errDupKeyName:
			return errclass.Duplicate
		case errReadOnly, errReadOnlyTx:
			return errclass.ReadOnly
		case errNotPrimary:
			return errclass.Unavailable
		case errTooManyConnections, errTooManyUserConnections:
			return errclass.Unreachable
		case errConnectionKilled, errSessionKilled, errServerShutdown:
			return errclass.Connection
		}
		if permanentErrors[me.Number] {
			return errclass.Permanent
		}
		return errclass.Other
	}
	if errors.Is(err, driver.ErrBadConn) || store.IsDialError(err) {
		return errclass.Unreachable
	}
	var ne net.Error
	if errors.Is(err, gomysql.ErrInvalidConn) || errors.Is(err, io.ErrUnexpectedEOF) || errors.As(err, &ne) {
		return errclass.Connection
	}
	return errclass.Other
}

// inReadCommitted runs fn directly on the pool when its sessions are READ
// COMMITTED, and in a READ COMMITTED transaction otherwise.
func (d *Dialect) inReadCommitted(ctx context.Context, fn func(store.Querier) error) error {
	if d.rcSession {
		return fn(d.drv.db)
	}
	return d.b.InTx(ctx, fn)
}
