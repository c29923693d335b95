package mysql

import (
	"context"
	"database/sql"
	"strconv"

	gomysql "github.com/go-sql-driver/mysql"
)

// Causal-read bits of wsrep_sync_wait: before a statement of a kind whose
// bit is set, the node waits until it has applied every write set the
// cluster had committed when the statement arrived.
const (
	syncWaitRead   = 1 // SELECT, SHOW, BEGIN / START TRANSACTION
	syncWaitUpdate = 2 // UPDATE, DELETE (4 would be INSERT, REPLACE)
)

// GaleraSyncWait is the wsrep_sync_wait value [Open] and [OpenCluster] set
// on every connection to a Galera node (unless the DSN sets one): reads and
// updates are causal. A Galera commit returns once its write set is
// certified cluster-wide, but the other nodes apply it asynchronously, so
// without causal reads a statement on another node can miss a claim that
// committed a moment ago: the token read-back of a claim finds no rows (they
// stay processing until reaped), and an ack, heartbeat or lease renewal
// conditioned on the token or owner matches nothing and reports the claim or
// lease lost. Inserts (keyed lease creation) need no wait: a duplicate is
// caught by certification. Measured costs are in the README's scaling
// section.
const GaleraSyncWait = syncWaitRead | syncWaitUpdate

// Galera describes the Galera (wsrep) replication of a MariaDB or Percona
// XtraDB Cluster node, as read by [New].
type Galera struct {
	// Enabled is @@wsrep_on: the server replicates through Galera.
	Enabled bool
	// SyncWait is the session's @@wsrep_sync_wait read by New (from one
	// pooled connection): the causal-read bits ([GaleraSyncWait]).
	SyncWait int
	// RetryAutocommit is @@wsrep_retry_autocommit: how many times the
	// server itself re-runs an autocommit statement that failed
	// certification before it returns the deadlock error.
	RetryAutocommit int
}

// Causal reports whether the session's reads and updates wait for the
// cluster's earlier commits (wsrep_sync_wait has both bits of
// [GaleraSyncWait]). It is true on a server that is not a Galera node.
func (g Galera) Causal() bool {
	return !g.Enabled || g.SyncWait&GaleraSyncWait == GaleraSyncWait
}

// readGalera reads the wsrep variables; a server without Galera (MySQL, or
// MariaDB without a provider) reports Enabled false.
func readGalera(ctx context.Context, q interface {
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}) (Galera, error) {
	var on sql.NullString
	err := q.QueryRowContext(ctx, "SELECT @@wsrep_on").Scan(&on)
	if isErrNumber(err, errUnknownSysVar) {
		return Galera{}, nil
	}
	if err != nil {
		return Galera{}, err
	}
	g := Galera{Enabled: on.String == "1" || on.String == "ON"}
	if !g.Enabled {
		return g, nil
	}
	err = q.QueryRowContext(ctx, "SELECT @@SESSION.wsrep_sync_wait, @@wsrep_retry_autocommit").Scan(&g.SyncWait, &g.RetryAutocommit)
	return g, err
}

// setSyncWaitParam makes every connection of cfg run with causal reads and
// updates, unless the DSN sets wsrep_sync_wait itself.
func setSyncWaitParam(cfg *gomysql.Config) {
	if _, ok := cfg.Params["wsrep_sync_wait"]; ok {
		return
	}
	if cfg.Params == nil {
		cfg.Params = make(map[string]string)
	}
	cfg.Params["wsrep_sync_wait"] = strconv.Itoa(GaleraSyncWait)
}
