package chaos

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/url"
	"regexp"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	gomysql "github.com/go-sql-driver/mysql"
	"github.com/stretchr/testify/require"

	"github.com/claimlock/claimlock/dialect"
	"github.com/claimlock/claimlock/internal/store"
	"github.com/claimlock/claimlock/internal/testkit/dialecttest"
	"github.com/claimlock/claimlock/internal/testkit/testengine"
	"github.com/claimlock/claimlock/tasklock"
)

// Proxy modes: pass everything; hold every reply; hold the replies of a
// connection once it sent a COMMIT; hold them once it sent the bytes of
// stallProxy.match.
//
// A COMMIT is the word on its own (commitWord): "READ COMMITTED", which
// PostgreSQL's acks send in their BEGIN and MySQL's connections in their
// session setup, is not one.
const (
	passReplies int32 = iota
	holdReplies
	holdAfterCommit
	holdAfterMatch
)

// commitWord finds a COMMIT statement in a client's bytes.
var commitWord = regexp.MustCompile(`(?i)\bcommit\b`)

// stallProxy forwards TCP connections to a database server and can hold the
// server's replies, as a network partition or a stalled server would, while
// the requests still reach the server.
type stallProxy struct {
	ln     net.Listener
	target string
	mode   atomic.Int32
	match  []byte // for holdAfterMatch: set before the mode is stored
	done   chan struct{}
	wg     sync.WaitGroup
}

func newStallProxy(t *testing.T, target string) *stallProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	p := &stallProxy{ln: ln, target: target, done: make(chan struct{})}
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(func() {
		close(p.done)
		ln.Close()
		p.wg.Wait()
	})
	return p
}

func (p *stallProxy) addr() string { return p.ln.Addr().String() }

func (p *stallProxy) accept() {
	defer p.wg.Done()
	for {
		client, err := p.ln.Accept()
		if err != nil {
			return
		}
		server, err := net.Dial("tcp", p.target)
		if err != nil {
			client.Close()
			continue
		}
		p.wg.Add(2)
		var held atomic.Bool
		closeBoth := sync.OnceFunc(func() { client.Close(); server.Close() })
		go func() { // requests: always forwarded
			defer p.wg.Done()
			defer closeBoth()
			buf := make([]byte, 64<<10)
			for {
				n, err := client.Read(buf)
				if n > 0 {
					switch p.mode.Load() {
					case holdAfterCommit:
						if commitWord.Match(buf[:n]) {
							held.Store(true)
						}
					case holdAfterMatch:
						if bytes.Contains(buf[:n], p.match) {
							held.Store(true)
						}
					}
					if _, werr := server.Write(buf[:n]); werr != nil {
						return
					}
				}
				if err != nil {
					return
				}
			}
		}()
		go func() { // replies: held while the mode says so
			defer p.wg.Done()
			defer closeBoth()
			buf := make([]byte, 64<<10)
			for {
				n, err := server.Read(buf)
				for n > 0 {
					m := p.mode.Load()
					if m == holdReplies || (m == holdAfterCommit || m == holdAfterMatch) && held.Load() {
						select {
						case <-p.done:
							return
						case <-time.After(5 * time.Millisecond):
							// A client that gave up has closed its side;
							// the server side is closed with it.
							if _, werr := client.Write(nil); werr != nil {
								return
							}
							continue
						}
					}
					if _, werr := client.Write(buf[:n]); werr != nil {
						return
					}
					break
				}
				if err != nil {
					return
				}
			}
		}()
	}
}

// redirect points dsn at addr and returns the new DSN and the address it
// named.
func redirect(t *testing.T, engine, dsn, addr string) (newDSN, target string) {
	t.Helper()
	if engine == testengine.MySQL {
		cfg, err := gomysql.ParseDSN(dsn)
		require.NoError(t, err)
		target, cfg.Addr = cfg.Addr, addr
		return cfg.FormatDSN(), target
	}
	u, err := url.Parse(dsn)
	require.NoError(t, err)
	target, u.Host = u.Host, addr
	return u.String(), target
}

// TestStalledReplies holds the server's replies on the library's
// connections. Every operation returns by its context's deadline, and a
// write whose COMMIT reached the server reports an unknown outcome rather
// than a failure or a success: with go-sql-driver/mysql, database/sql's
// Tx.Commit ignores the context and waited for ever.
func TestStalledReplies(t *testing.T) {
	t.Parallel()
	for _, name := range []string{testengine.Postgres, testengine.PostgresStdlib, testengine.MySQL} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			spec := dialect.ClaimTable{Table: "stall", ID: "id", Status: "status", Token: "token", ClaimedAt: "claimed_at",
				Version: "version", Columns: []string{"payload"}, Scope: []string{"task_id"},
				Pending: dialect.StatusString("PENDING"), Processing: dialect.StatusString("PROCESSING"), Done: dialect.StatusString("SENT"), Failed: dialect.StatusString("FAILED")}
			direct, pc, p := stallSetup(t, name, spec)
			for i := range 20 {
				_, err := direct.DB.ExecContext(ctx, fmt.Sprintf("INSERT INTO stall (task_id, payload) VALUES (1, 'p%d')", i))
				require.NoError(t, err)
			}
			cs, err := store.OpenClaims(pc.Dialect, spec)
			require.NoError(t, err)
			require.NoError(t, cs.VerifySchema(ctx))

			tok := store.NewToken()
			var ids []any
			var versions []int64
			_, err = cs.Claim(ctx, &store.ClaimParams{Token: tok, Limit: 10, ScopeValues: []any{1}, Strategy: dialect.StrategyTokenUpdate},
				func(sc store.Scanner) error {
					var id, v int64
					var payload string
					err := sc.Scan(&id, &v, &payload)
					ids, versions = append(ids, id), append(versions, v)
					return err
				})
			require.NoError(t, err)
			require.Len(t, ids, 10)

			// The ack's COMMIT reaches the server; its reply does not.
			p.mode.Store(holdAfterCommit)
			err = within(t, 1500*time.Millisecond, func(ctx context.Context) error {
				_, err := cs.Ack(ctx, &store.AckParams{Token: tok, IDs: ids, Versions: versions})
				return err
			})
			require.Error(t, err)
			require.ErrorIs(t, err, dialect.ErrOutcomeUnknown, "a COMMIT without a reply has an unknown outcome: %v", err)

			// Every reply held: a claim returns by its deadline too.
			p.mode.Store(holdReplies)
			err = within(t, 2*time.Second, func(ctx context.Context) error {
				_, err := cs.Claim(ctx, &store.ClaimParams{Token: store.NewToken(), Limit: 5, ScopeValues: []any{1},
					Strategy: pc.Dialect.Capabilities().PreferredStrategy}, func(store.Scanner) error { return nil })
				return err
			})
			require.Error(t, err)
			p.mode.Store(passReplies)

			// The COMMIT reached the server, so the whole ack committed: an
			// unknown outcome, not a lost ack.
			var sent, held int
			require.NoError(t, direct.DB.QueryRowContext(ctx, "SELECT COUNT(*) FROM stall WHERE status = 'SENT'").Scan(&sent))
			require.NoError(t, direct.DB.QueryRowContext(ctx, "SELECT COUNT(*) FROM stall WHERE token = '"+tok+"'").Scan(&held))
			require.Equal(t, [2]int{10, 0}, [2]int{sent, held}, "rows sent and still held after an ack whose COMMIT reached the server")
			// The pool recovers once replies flow again.
			_, err = cs.Stats(ctx, nil)
			require.NoError(t, err)
		})
	}
}

// stallSetup connects to engine name twice, directly and through a new
// stallProxy, and creates spec's table through the direct connection.
func stallSetup(t *testing.T, name string, spec dialect.ClaimTable) (direct, proxied *testengine.Conn, p *stallProxy) {
	t.Helper()
	e, ok := testengine.ByName(name)
	if !ok {
		e, _ = testengine.ByName(testengine.Postgres)
	}
	dsn := e.DSN(t)
	ctx := context.Background()
	direct, closeDirect, err := testengine.Connect(ctx, name, dsn, 4, dialect.Options{})
	require.NoError(t, err)
	t.Cleanup(closeDirect)
	dialecttest.CreateClaimTable(t, direct.Dialect, spec)
	_, target := redirect(t, name, dsn, "")
	p = newStallProxy(t, target)
	proxyDSN, _ := redirect(t, name, dsn, p.addr())
	proxied, closeProxied, err := testengine.Connect(ctx, name, proxyDSN, 4, dialect.Options{})
	require.NoError(t, err)
	t.Cleanup(closeProxied)
	return direct, proxied, p
}

// within runs fn with a context of the given deadline and fails the test
// unless fn returns within the deadline and a grace of two seconds.
func within(t *testing.T, deadline time.Duration, fn func(context.Context) error) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	defer cancel()
	done := make(chan error, 1)
	start := time.Now()
	go func() { done <- fn(ctx) }()
	select {
	case err := <-done:
		return err
	case <-time.After(deadline + 2*time.Second):
		t.Fatalf("still running %v after a deadline of %v", time.Since(start), deadline)
		return nil
	}
}

// TestStalledLeaseAcquire holds every reply while a lease is acquired: the
// acquisition's outcome is unknown, and its clean-up release stalls too.
// Acquire still returns by its context's deadline (the release goes on in
// the background), and once replies flow again the key can be acquired:
// the clean-up released it, or it expired.
func TestStalledLeaseAcquire(t *testing.T) {
	t.Parallel()
	for _, name := range []string{testengine.Postgres, testengine.PostgresStdlib, testengine.MySQL} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			spec := dialect.ClaimTable{Table: "stall_lease_items", ID: "id", Status: "status", Token: "token", ClaimedAt: "claimed_at",
				Pending: dialect.StatusString("PENDING"), Processing: dialect.StatusString("PROCESSING"), Done: dialect.StatusString("SENT"), Failed: dialect.StatusString("FAILED")}
			direct, pc, p := stallSetup(t, name, spec)
			ctx := context.Background()
			ddl, err := store.CreateTableDDL(direct.Dialect, store.LeaseTableDef("stall_leases", 64))
			require.NoError(t, err)
			require.NoError(t, store.ExecDDL(ctx, direct.Dialect, ddl))
			k, err := tasklock.New(pc.Dialect, tasklock.Config{Table: store.KeyedLeaseTable("stall_leases", 64), TTL: 2 * time.Second})
			require.NoError(t, err)
			require.NoError(t, k.Verify(ctx))

			p.mode.Store(holdReplies)
			err = within(t, time.Second, func(ctx context.Context) error {
				_, err := k.Acquire(ctx, "job")
				return err
			})
			p.mode.Store(passReplies)
			require.Error(t, err)

			require.Eventually(t, func() bool {
				l, err := k.Acquire(ctx, "job")
				if err != nil {
					return false
				}
				_, err = l.Release(ctx)
				return err == nil
			}, 10*time.Second, 50*time.Millisecond, "the key stays held")
		})
	}
}

// TestStalledNotify holds the replies to the notification PostgreSQL
// stores send after a release returned rows to pending: the release has
// committed, and it still returns by its context's deadline instead of
// waiting for the notification's own.
func TestStalledNotify(t *testing.T) {
	t.Parallel()
	for _, name := range []string{testengine.Postgres, testengine.PostgresStdlib} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			spec := dialect.ClaimTable{Table: "stall_notify", ID: "id", Status: "status", Token: "token", ClaimedAt: "claimed_at",
				Scope: []string{"task_id"}, Pending: dialect.StatusString("PENDING"),
				Processing: dialect.StatusString("PROCESSING"), Done: dialect.StatusString("SENT"), Failed: dialect.StatusString("FAILED")}
			direct, pc, p := stallSetup(t, name, spec)
			ctx := context.Background()
			_, err := direct.DB.ExecContext(ctx, "INSERT INTO stall_notify (task_id) SELECT 1 FROM generate_series(1, 5)")
			require.NoError(t, err)
			cs, err := store.OpenClaims(pc.Dialect, spec)
			require.NoError(t, err)
			tok := store.NewToken()
			n, err := cs.Claim(ctx, &store.ClaimParams{Token: tok, Limit: 5, ScopeValues: []any{1}, Strategy: dialect.StrategySkipLocked},
				func(store.Scanner) error { return nil })
			require.NoError(t, err)
			require.Equal(t, 5, n)

			p.match = []byte("pg_notify")
			p.mode.Store(holdAfterMatch)
			err = within(t, time.Second, func(ctx context.Context) error {
				_, err := cs.Release(ctx, tok, nil)
				return err
			})
			p.mode.Store(passReplies)
			require.NoError(t, err, "the release committed; only its notification stalled")
			var pending int
			require.NoError(t, direct.DB.QueryRowContext(ctx, "SELECT COUNT(*) FROM stall_notify WHERE status = 'PENDING' AND token IS NULL").Scan(&pending))
			require.Equal(t, 5, pending)
		})
	}
}
