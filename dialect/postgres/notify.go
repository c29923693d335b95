package postgres

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"database/sql/driver"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/claimlock/claimlock/dialect"
	"github.com/claimlock/claimlock/internal/loop"
	"github.com/claimlock/claimlock/internal/store"
)

var _ store.Notifier = (*notifier)(nil)

// channelExpr computes a table's notification channel on the server, from
// $1 its schema (NULL: the session's current schema), $2 its name and $3
// its scope columns: "claimlock_" and 24 hex digits of a hash, so that the
// name fits PostgreSQL's 63-byte identifiers, and two schemas' tables of
// the same name never share a channel.
const channelExpr = `'claimlock_' || left(md5(COALESCE($1::text, current_schema()) || '.' || $2::text || '|' || $3::text), 24)`

// notifySQL sends one notification ($4: the scope's payload); inside a
// transaction it is delivered when the transaction commits, and not at all
// if it rolls back.
const notifySQL = "SELECT pg_notify(" + channelExpr + ", $4::text)"

// probeSQL notifies channel $1 of a listener's check (notifier.check).
const probeSQL = "SELECT pg_notify($1::text, 'probe')"

// channelSQL returns the channel notifySQL notifies.
const channelSQL = "SELECT " + channelExpr

// ListenConfig configures [Dialect.Listen]. The zero value is ready to use.
type ListenConfig struct {
	// ConnConfig, if set, is where the listener connects, for example
	// straight to the server when the dialect's pool goes through
	// PgBouncer in transaction mode (LISTEN needs a session of its own).
	// Nil means a new connection configured like the dialect's pool
	// ([New]), or a connection taken from the dialect's *sql.DB for as long
	// as Listen runs ([NewStdlib]).
	ConnConfig *pgx.ConnConfig
	// ReconnectMin and ReconnectMax bound the jittered exponential backoff
	// between attempts to reconnect after the connection is lost; defaults
	// 100 ms and 10 s.
	ReconnectMin, ReconnectMax time.Duration
}

func (c *ListenConfig) validate() error {
	if c.ReconnectMin < 0 || c.ReconnectMax < 0 {
		return fmt.Errorf("postgres: %w: ListenConfig: negative reconnect backoff", dialect.ErrInvalidConfig)
	}
	if c.ReconnectMin == 0 {
		c.ReconnectMin = 100 * time.Millisecond
	}
	if c.ReconnectMax == 0 {
		c.ReconnectMax = 10 * time.Second
	}
	if c.ReconnectMax < c.ReconnectMin {
		return fmt.Errorf("postgres: %w: ListenConfig: ReconnectMax %v is below ReconnectMin %v", dialect.ErrInvalidConfig, c.ReconnectMax, c.ReconnectMin)
	}
	return nil
}

// connectFunc opens a dedicated connection, runs session on it and closes
// it (or hands it back clean).
type connectFunc func(ctx context.Context, session func(*pgx.Conn) error) error

// connectPool opens connections configured like pool's.
func connectPool(pool *pgxpool.Pool) connectFunc {
	return connectConfig(pool.Config().ConnConfig)
}

// connectConfig opens connections with cfg.
func connectConfig(cfg *pgx.ConnConfig) connectFunc {
	return func(ctx context.Context, session func(*pgx.Conn) error) error {
		c, err := pgx.ConnectConfig(ctx, cfg.Copy())
		if err != nil {
			return err
		}
		defer closeConn(ctx, c)
		return session(c)
	}
}

func closeConn(ctx context.Context, c *pgx.Conn) {
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	_ = c.Close(cctx)
}

// connectDB takes a connection of db for the session. Before it goes back
// to the pool it stops listening; if that fails, the pool discards it.
func connectDB(db *sql.DB) connectFunc {
	return func(ctx context.Context, session func(*pgx.Conn) error) error {
		conn, err := db.Conn(ctx)
		if err != nil {
			return err
		}
		defer conn.Close()
		var serr error
		err = conn.Raw(func(dc any) error {
			sc, ok := dc.(*stdlib.Conn)
			if !ok {
				serr = fmt.Errorf("driver connection is %T, not pgx's", dc)
				return serr
			}
			c := sc.Conn()
			serr = session(c)
			uctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			defer cancel()
			if c.IsClosed() {
				return driver.ErrBadConn
			}
			if _, err := c.Exec(uctx, "UNLISTEN *"); err != nil {
				return driver.ErrBadConn
			}
			return nil
		})
		if serr != nil {
			return serr
		}
		return err
	}
}

// notifier is the dialect's registry of subscribed claimers and the state of
// its listener.
type notifier struct {
	connect connectFunc // nil for a dialect built without a server
	logger  *slog.Logger
	// probe sends a notification on a channel through the dialect's own
	// handle, where its claims, releases and reaps send theirs.
	probe func(ctx context.Context, channel string) error

	mu      sync.Mutex
	subs    map[string]map[*subscription]struct{} // by tableKey
	changed chan struct{}                         // capacity 1: subs changed

	running   atomic.Bool   // a Listen call is running
	listening atomic.Bool   // its connection is up
	gen       atomic.Int64  // changes of subs
	synced    atomic.Int64  // the gen the connection listens for
	pid       atomic.Uint32 // the listening backend's process id
}

type subscription struct {
	payload string // "" for an unscoped claimer: every notification of the channel
	wake    func()
}

func newNotifier(logger *slog.Logger) *notifier {
	return &notifier{logger: logger, subs: map[string]map[*subscription]struct{}{}, changed: make(chan struct{}, 1)}
}

// Subscribe registers a claimer's wake-up: wake is called for the
// notifications of spec's table and scope (see [NotifyStatement]) that
// reach the dialect's listener ([Dialect.Listen]). Without a running
// listener nothing arrives, and claimers poll.
func (n *notifier) Subscribe(spec dialect.ClaimTable, scopeValues []any, wake func()) (cancel func()) {
	ch := tableKey(spec)
	s := &subscription{payload: scopePayload(scopeValues), wake: wake}
	n.mu.Lock()
	if n.subs[ch] == nil {
		n.subs[ch] = map[*subscription]struct{}{}
	}
	n.subs[ch][s] = struct{}{}
	n.mu.Unlock()
	n.signal()
	var once sync.Once
	return func() {
		once.Do(func() {
			n.mu.Lock()
			delete(n.subs[ch], s)
			if len(n.subs[ch]) == 0 {
				delete(n.subs, ch)
			}
			n.mu.Unlock()
			n.signal()
		})
	}
}

func (n *notifier) signal() {
	n.gen.Add(1)
	select {
	case n.changed <- struct{}{}:
	default:
	}
}

// keys returns the subscribed tables' keys.
func (n *notifier) keys() map[string]bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	out := make(map[string]bool, len(n.subs))
	for ch := range n.subs {
		out[ch] = true
	}
	return out
}

// dispatch wakes the subscribers a notification of the tables keys is
// for: all of them for an empty payload (rows of any scope), else those of
// its scope and the unscoped ones.
func (n *notifier) dispatch(keys []string, payload string) {
	n.mu.Lock()
	var wakes []func()
	for _, key := range keys {
		for s := range n.subs[key] {
			if payload == "" || s.payload == "" || s.payload == payload {
				wakes = append(wakes, s.wake)
			}
		}
	}
	n.mu.Unlock()
	for _, w := range wakes {
		w()
	}
}

// wakeAll wakes every subscriber: after a (re)connection, notifications
// sent while nobody listened are lost, so every claimer claims once.
func (n *notifier) wakeAll() {
	n.mu.Lock()
	var wakes []func()
	for _, subs := range n.subs {
		for s := range subs {
			wakes = append(wakes, s.wake)
		}
	}
	n.mu.Unlock()
	for _, w := range wakes {
		w()
	}
}

// Listen runs the dialect's listener until ctx ends, then returns nil: one
// dedicated connection that LISTENs on the channels of every claimer of this
// dialect running claim.Claimer.Run (channels are added and dropped as
// claimers start and stop), and wakes those claimers' idle loops when
// another process makes rows of their table and scope pending: a release,
// a retried fail or a reap by claimlock (which sends the notification
// itself), or an insert by an application that called [Notify] in its
// transaction. Run one Listen per dialect (per process); a second call
// while one runs returns an error wrapping [dialect.ErrInvalidConfig], as
// does a bad cfg.
//
// Notifications are hints on top of polling, never a replacement: while the
// connection is down Listen reconnects with backoff (logging a warning) and
// claimers keep polling with their own backoff; after each (re)connection
// every subscribed claimer claims once, to catch notifications sent while
// nobody listened; so do the claimers of a table the connection starts
// listening to (a claimer that started while Listen ran), to catch those
// sent between their first claim and the LISTEN.
//
// Each connection is checked before it counts as listening: it LISTENs on
// a channel of its own, a notification is sent there through the dialect's
// pool (which takes a second connection for a moment), and it must arrive
// within five seconds. LISTEN holds a session, which a pooler in
// transaction mode (PgBouncer's pool_mode = transaction) does not keep: its
// listener's server connection goes back to the pool after the LISTEN, and
// notifications never reach the listener. That check fails then: Listen
// logs a warning saying so and tries again with backoff, [Dialect.Listening]
// stays false, and claimers find rows by polling (claim.WorkerConfig's
// PollMin and PollMax). Behind such a pooler, point cfg.ConnConfig straight
// at the server, or do not call Listen (poll-only mode; the dialect's own
// notifications work through any pooler and are simply not heard).
func (d *Dialect) Listen(ctx context.Context, cfg ListenConfig) error {
	if err := cfg.validate(); err != nil {
		return err
	}
	n := d.n
	connect := n.connect
	if cfg.ConnConfig != nil {
		connect = connectConfig(cfg.ConnConfig)
	}
	if connect == nil {
		return fmt.Errorf("postgres: %w: Listen needs a dialect built by New or NewStdlib, or ListenConfig.ConnConfig", dialect.ErrInvalidConfig)
	}
	if !n.running.CompareAndSwap(false, true) {
		return fmt.Errorf("postgres: %w: Listen is already running for this dialect", dialect.ErrInvalidConfig)
	}
	defer n.running.Store(false)
	attempt := 0 // the backoff's count of reconnections
	return loop.Loop{}.Run(ctx, func(ctx context.Context) loop.Next {
		err := connect(ctx, func(c *pgx.Conn) error { return n.session(ctx, c) })
		if n.listening.Swap(false) {
			attempt = -1 // it was up: start the backoff again (at its base, twice)
		}
		if ctx.Err() != nil {
			return loop.End(nil)
		}
		if errors.Is(err, errProbeNotHeard) {
			n.logger.Warn("claimlock: postgres listener hears no notifications on its connection (a pooler in transaction mode?); claimers poll; set ListenConfig.ConnConfig to connect straight to the server", "err", err)
		} else {
			n.logger.Warn("claimlock: postgres listener disconnected; claimers poll until it reconnects", "err", err)
		}
		pause := loop.Backoff(attempt, cfg.ReconnectMin, cfg.ReconnectMax)
		attempt++
		return loop.After(pause)
	})
}

// Listening reports whether [Dialect.Listen] is connected and listens on
// the channel of every claimer subscribed now.
func (d *Dialect) Listening() bool {
	n := d.n
	return n.listening.Load() && n.synced.Load() == n.gen.Load()
}

// session listens on c until ctx ends or c fails.
func (n *notifier) session(ctx context.Context, c *pgx.Conn) error {
	listened := map[string]string{} // tableKey -> channel
	byChannel := map[string][]string{}
	n.pid.Store(c.PgConn().PID())
	if err := n.check(ctx, c); err != nil {
		return err
	}
	for {
		g := n.gen.Load()
		want := n.keys()
		var added []string
		for key := range want {
			if _, ok := listened[key]; ok {
				continue
			}
			var ch string
			schema, table, scope := splitKey(key)
			if err := c.QueryRow(ctx, channelSQL, schema, table, scope).Scan(&ch); err != nil {
				return fmt.Errorf("channel name: %w", err)
			}
			if len(byChannel[ch]) == 0 {
				if _, err := c.Exec(ctx, "LISTEN "+quote(ch)); err != nil {
					return fmt.Errorf("listen: %w", err)
				}
			}
			listened[key] = ch
			byChannel[ch] = append(byChannel[ch], key)
			added = append(added, key)
		}
		for key, ch := range listened {
			if want[key] {
				continue
			}
			delete(listened, key)
			byChannel[ch] = slices.DeleteFunc(byChannel[ch], func(k string) bool { return k == key })
			if len(byChannel[ch]) == 0 {
				delete(byChannel, ch)
				if _, err := c.Exec(ctx, "UNLISTEN "+quote(ch)); err != nil {
					return fmt.Errorf("unlisten: %w", err)
				}
			}
		}
		n.synced.Store(g)
		if !n.listening.Swap(true) {
			n.wakeAll()
		} else if len(added) > 0 {
			// A claimer subscribed while this connection listened: a
			// notification sent after its first claim and before this
			// LISTEN was lost, so its table's claimers claim once.
			n.dispatch(added, "")
		}
		wctx, cancel := context.WithCancel(ctx)
		go func() {
			select {
			case <-n.changed:
				cancel()
			case <-wctx.Done():
			}
		}()
		note, err := c.WaitForNotification(wctx)
		changed := wctx.Err() != nil
		cancel()
		if note != nil {
			n.dispatch(byChannel[note.Channel], note.Payload)
		}
		switch {
		case ctx.Err() != nil:
			return ctx.Err()
		case err != nil && (!changed || c.IsClosed()):
			return err
		}
	}
}

// listenProbeTimeout bounds how long [Dialect.Listen] waits for the probe
// notification that shows its connection hears what the dialect's pool
// sends.
const listenProbeTimeout = 5 * time.Second

// errProbeNotHeard: the listener's connection did not receive a
// notification sent through the dialect's pool.
var errProbeNotHeard = errors.New("postgres: listen: the probe notification sent through the dialect's pool did not reach the listener's connection: LISTEN needs a session of its own, which a pooler in transaction mode (PgBouncer pool_mode = transaction) does not keep")

// check shows that c receives notifications sent through the dialect's
// pool: it LISTENs on a channel of its own, has the pool notify it, and
// waits for the notification (at most listenProbeTimeout). A connection
// through a pooler in transaction mode fails it with errProbeNotHeard.
func (n *notifier) check(ctx context.Context, c *pgx.Conn) error {
	if n.probe == nil {
		return nil
	}
	ch := "claimlock_probe_" + store.NewToken()[:16]
	if _, err := c.Exec(ctx, "LISTEN "+quote(ch)); err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	pctx, cancel := context.WithTimeoutCause(ctx, listenProbeTimeout, errProbeNotHeard)
	defer cancel()
	if err := n.probe(pctx, ch); err != nil {
		if context.Cause(pctx) == errProbeNotHeard {
			return fmt.Errorf("%w (the pool gave no connection to send it on within %v)", errProbeNotHeard, listenProbeTimeout)
		}
		return fmt.Errorf("listen: probe notification: %w", err)
	}
	for {
		note, err := c.WaitForNotification(pctx)
		if err != nil {
			if ctx.Err() == nil && context.Cause(pctx) == errProbeNotHeard {
				return fmt.Errorf("%w (waited %v)", errProbeNotHeard, listenProbeTimeout)
			}
			return err
		}
		if note.Channel == ch {
			break
		}
	}
	if _, err := c.Exec(ctx, "UNLISTEN "+quote(ch)); err != nil {
		return fmt.Errorf("unlisten: %w", err)
	}
	return nil
}

// NotifyPending implements [store.PendingNotifier]: it runs in its own
// statement, after the one that made the rows pending committed.
func (d *storeDriver) NotifyPending(ctx context.Context, spec dialect.ClaimTable, scopeValues []any) error {
	_, args, err := NotifyStatement(spec, scopeValues...)
	if err != nil {
		return err
	}
	_, err = d.db.Exec(ctx, notifySQL, args...)
	return err
}

// Subscribe implements [store.Notifier] with the dialect's listener
// (notifier.Subscribe).
func (d *storeDriver) Subscribe(spec dialect.ClaimTable, scopeValues []any, wake func()) (cancel func()) {
	return d.n.Subscribe(spec, scopeValues, wake)
}

// Execer runs a statement: pgx.Tx, *pgx.Conn, *pgxpool.Pool and
// *pgxpool.Conn fit.
type Execer interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
}

// Notify wakes the idle claimers of table's scope scopeValues (in the order
// of table.Scope) in every process whose dialect runs [Dialect.Listen]. Call
// it in the transaction that inserts the rows (or makes them pending): the
// notification is delivered when that transaction commits, so a woken
// claimer always sees the rows, and never if it rolls back. table is the
// claimers' [dialect.ClaimTable] (claim.Config's); only its Table and Scope
// matter, and they must be spelled as the claimers spell them (an
// unqualified table is taken in the session's current schema). With no
// scope values at all, the claimers of every scope of the table wake.
//
// Each notification costs little, but PostgreSQL serialises the commits of
// notifying transactions: notify once per transaction, not once per row.
// Errors wrap [dialect.ErrInvalidConfig] for a bad table or scope, or are
// the database's.
func Notify(ctx context.Context, tx Execer, table dialect.ClaimTable, scopeValues ...any) error {
	q, args, err := NotifyStatement(table, scopeValues...)
	if err != nil {
		return err
	}
	if _, err := tx.Exec(ctx, q, args...); err != nil {
		return fmt.Errorf("postgres: notify: %w", err)
	}
	return nil
}

// NotifyStatement returns the statement [Notify] runs and its arguments,
// for handles that are not pgx's (a *sql.Tx of pgx's stdlib driver):
//
//	q, args, err := postgres.NotifyStatement(cfg.ClaimTable, cfg.ScopeValues...)
//	if err == nil {
//		_, err = tx.ExecContext(ctx, q, args...)
//	}
func NotifyStatement(table dialect.ClaimTable, scopeValues ...any) (string, []any, error) {
	if err := store.ValidateIdent("Table", table.Table); err != nil {
		return "", nil, fmt.Errorf("postgres: notify: %w", err)
	}
	if len(scopeValues) != len(table.Scope) && len(scopeValues) > 0 {
		return "", nil, fmt.Errorf("postgres: %w: notify: %d scope value(s) for %d Scope column(s)", dialect.ErrInvalidConfig, len(scopeValues), len(table.Scope))
	}
	for i, v := range scopeValues {
		if err := store.ValidateColumn(fmt.Sprintf("Scope[%d]", i), table.Scope[i]); err != nil {
			return "", nil, fmt.Errorf("postgres: notify: %w", err)
		}
		if v == nil {
			return "", nil, fmt.Errorf("postgres: %w: notify: scope value %d is nil", dialect.ErrInvalidConfig, i)
		}
	}
	schema, name := store.SplitName(table.Table)
	var sch any
	if schema != "" {
		sch = schema
	}
	return notifySQL, []any{sch, name, strings.Join(table.Scope, ","), scopePayload(scopeValues)}, nil
}

// tableKey names a subscribed table and its scope columns in the registry.
func tableKey(spec dialect.ClaimTable) string {
	return spec.Table + "\x00" + strings.Join(spec.Scope, ",")
}

// splitKey returns channelSQL's arguments for a tableKey.
func splitKey(key string) (schema any, table, scope string) {
	name, scope, _ := strings.Cut(key, "\x00")
	sch, table := store.SplitName(name)
	if sch != "" {
		schema = sch
	}
	return schema, table, scope
}

// scopePayload is a notification's payload: 16 hex digits of a hash of the
// scope values' text (so that 42 as an int and as an int64 agree), or ""
// for no scope. Two scopes whose hashes collide only cost a spurious
// wake-up.
func scopePayload(vals []any) string {
	if len(vals) == 0 {
		return ""
	}
	h := sha256.New()
	for _, v := range vals {
		if b, ok := v.([]byte); ok {
			v = string(b)
		}
		fmt.Fprintf(h, "%v\x00", v)
	}
	return hex.EncodeToString(h.Sum(nil)[:8])
}
