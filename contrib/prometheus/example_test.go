package claimprom_test

import (
	"context"
	"log"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/claimlock/claimlock/claim"
	claimprom "github.com/claimlock/claimlock/contrib/prometheus"
	"github.com/claimlock/claimlock/dialect"
	"github.com/claimlock/claimlock/dialect/sqlite"
	"github.com/claimlock/claimlock/tasklock"
)

// Watch a claim table's scope (Stats at each scrape), count what the
// claimer and a lease locker do (as their Observer), with every series at
// zero from the start; serve them on /metrics.
func ExampleNew() {
	ctx := context.Background()
	db, err := sqlite.Open("app.db")
	if err != nil {
		log.Fatal(err)
	}
	d, err := sqlite.New(ctx, db, dialect.Options{})
	if err != nil {
		log.Fatal(err)
	}
	m := claimprom.New()
	cfg := claim.Config{
		ClaimTable:  dialect.ClaimTable{Table: "jobs", Scope: []string{"task_id"}},
		ScopeValues: []any{42},
		Observer:    m,
	}
	if err := m.Watch(d, cfg); err != nil {
		log.Fatal(err)
	}
	lockCfg := tasklock.Config{Table: tasklock.TaskTableNoOwner("xxx_task"), TTL: time.Minute, Observer: m}
	if err := m.InitLeases(lockCfg.Table); err != nil {
		log.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(m)
	http.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
}
