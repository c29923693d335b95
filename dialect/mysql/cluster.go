package mysql

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"sync/atomic"

	gomysql "github.com/go-sql-driver/mysql"

	"github.com/claimlock/claimlock/dialect"
)

// OpenCluster returns one *sql.DB spread over the nodes of a multi-primary
// cluster (MariaDB Galera, Percona XtraDB Cluster), dsns being one DSN per
// node in go-sql-driver/mysql syntax: what a TCP load balancer in front of
// the nodes would give, without one. Every connection is set up as [Open]
// sets it up (READ COMMITTED, arguments interpolated, causal reads and
// updates on Galera). Each new connection goes to the next node in turn,
// skipping nodes that refuse the connection or report that they are not
// ready (wsrep_ready OFF: not in the primary component); a node that is
// ready but not synced (a donor or joiner) is used only when no node is
// synced. When a node dies, its pooled connections fail once (the driver's
// broken-connection error: a write's outcome is then unknown) and are
// dropped; new ones go to the survivors. When a node leaves the primary
// component (a partition, its peers gone), it refuses every statement with
// error 1047 before running it; each pooled connection to it is dropped at
// its first refusal, a statement outside a transaction is re-run at once on
// a new connection (database/sql's own re-run after [driver.ErrBadConn]),
// and one inside a transaction fails with an error the claimlock stores
// classify as unavailable (nothing ran) and re-run whole.
//
// Set the pool's MaxIdleConns to its MaxOpenConns: database/sql keeps two
// idle connections by default, and every extra one it opens costs a
// connection and a readiness check.
//
// The server settings (version, isolation variable, Galera) are read from
// the first node that answers. Bad DSNs wrap [dialect.ErrInvalidConfig];
// OpenCluster fails when no node answers.
func OpenCluster(ctx context.Context, dsns []string) (*sql.DB, error) {
	if len(dsns) == 0 {
		return nil, fmt.Errorf("mysql: %w: OpenCluster: no DSN", dialect.ErrInvalidConfig)
	}
	cfgs := make([]*gomysql.Config, len(dsns))
	for i, dsn := range dsns {
		cfg, err := gomysql.ParseDSN(dsn)
		if err != nil {
			return nil, fmt.Errorf("mysql: %w: OpenCluster: DSN %d: %v", dialect.ErrInvalidConfig, i+1, err)
		}
		cfgs[i] = cfg
	}
	// Probe the nodes in order until one answers; its settings apply to
	// all (a cluster runs one version).
	var name string
	var errs []error
	probed := -1
	for i, cfg := range cfgs {
		c, n, err := configure(ctx, cfg)
		if err != nil {
			errs = append(errs, fmt.Errorf("node %d: %w", i+1, err))
			continue
		}
		cfgs[i], name, probed = c, n, i
		break
	}
	if probed < 0 {
		return nil, fmt.Errorf("mysql: OpenCluster: no node answered: %w", errors.Join(errs...))
	}
	return openPinged(ctx, "OpenCluster", name, func(name string) (*sql.DB, error) {
		cc := &clusterConnector{nodes: make([]driver.Connector, len(cfgs))}
		for i, cfg := range cfgs {
			c := cfg.Clone()
			if i != probed {
				adoptProbed(c, cfgs[probed])
			}
			setIsolationParam(c, name)
			conn, err := gomysql.NewConnector(c)
			if err != nil {
				return nil, fmt.Errorf("mysql: %w: OpenCluster: DSN %d: %v", dialect.ErrInvalidConfig, i+1, err)
			}
			cc.nodes[i] = conn
		}
		return sql.OpenDB(cc), nil
	})
}

// adoptProbed gives c, a node's configuration, the adjustments configure
// made to the probed node's, p: interpolation and wsrep_sync_wait, unless
// c's DSN says otherwise.
func adoptProbed(c, p *gomysql.Config) {
	if _, ok := c.Params["wsrep_sync_wait"]; !ok {
		if v, ok := p.Params["wsrep_sync_wait"]; ok {
			if c.Params == nil {
				c.Params = map[string]string{}
			}
			c.Params["wsrep_sync_wait"] = v
		}
	}
	if !c.InterpolateParams && p.InterpolateParams {
		c.InterpolateParams = true
		if _, err := gomysql.NewConnector(c); err != nil {
			c.InterpolateParams = false
		}
	}
}

// clusterConnector dials the nodes in turn, skipping the ones not ready.
type clusterConnector struct {
	nodes []driver.Connector
	next  atomic.Uint64
}

// Connect implements [driver.Connector].
func (c *clusterConnector) Connect(ctx context.Context) (driver.Conn, error) {
	n := uint64(len(c.nodes))
	start := c.next.Add(1)
	var errs []error
	var fallback driver.Conn
	for i := range n {
		node := int((start + i) % n)
		conn, err := c.nodes[node].Connect(ctx)
		if err != nil {
			errs = append(errs, fmt.Errorf("node %d: %w", node+1, err))
			continue
		}
		st, err := nodeState(ctx, conn)
		switch {
		case err != nil:
			errs = append(errs, fmt.Errorf("node %d: %w", node+1, err))
			conn.Close()
		case st == nodeSynced:
			if fallback != nil {
				fallback.Close()
			}
			return &clusterConn{conn: conn}, nil
		case st == nodeReady && fallback == nil:
			fallback = conn
		default:
			errs = append(errs, fmt.Errorf("node %d: not ready (wsrep_ready OFF)", node+1))
			conn.Close()
		}
		if ctx.Err() != nil {
			break
		}
	}
	if fallback != nil {
		return &clusterConn{conn: fallback}, nil
	}
	return nil, fmt.Errorf("mysql: no cluster node is ready: %w", errors.Join(errs...))
}

// Driver implements [driver.Connector].
func (c *clusterConnector) Driver() driver.Driver { return gomysql.MySQLDriver{} }

// Node states as nodeState reports them.
const (
	nodeNotReady = iota
	nodeReady    // in the primary component, not synced (donor, joiner)
	nodeSynced   // synced, or not a Galera node at all
)

// nodeState reads wsrep_on, then wsrep_ready and wsrep_local_state (4:
// Synced) on a fresh connection. A server without Galera (MySQL has none of
// these; MariaDB without a provider has wsrep_on OFF) counts as synced.
func nodeState(ctx context.Context, conn driver.Conn) (int, error) {
	q, ok := conn.(driver.QueryerContext)
	if !ok {
		return nodeSynced, nil
	}
	vars, err := showPairs(ctx, q, "SHOW VARIABLES LIKE 'wsrep_on'")
	if err != nil {
		return nodeNotReady, err
	}
	if vars["wsrep_on"] != "ON" {
		return nodeSynced, nil
	}
	st, err := showPairs(ctx, q, "SHOW GLOBAL STATUS WHERE Variable_name IN ('wsrep_ready', 'wsrep_local_state')")
	switch {
	case err != nil:
		return nodeNotReady, err
	case st["wsrep_ready"] != "ON":
		return nodeNotReady, nil
	case st["wsrep_local_state"] == "4":
		return nodeSynced, nil
	}
	return nodeReady, nil
}

// showPairs runs a SHOW statement of (name, value) rows on a driver
// connection.
func showPairs(ctx context.Context, q driver.QueryerContext, stmt string) (map[string]string, error) {
	rows, err := q.QueryContext(ctx, stmt, nil)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	vals := map[string]string{}
	dest := make([]driver.Value, 2)
	for {
		err := rows.Next(dest)
		if errors.Is(err, io.EOF) {
			return vals, nil
		}
		if err != nil {
			return nil, err
		}
		vals[text(dest[0])] = text(dest[1])
	}
}

// text converts a driver value of a text column to a string.
func text(v driver.Value) string {
	switch v := v.(type) {
	case []byte:
		return string(v)
	case string:
		return v
	case nil:
		return ""
	}
	return fmt.Sprint(v)
}
