package claimotel_test

import (
	"log"
	"time"

	"github.com/claimlock/claimlock/claim"
	claimotel "github.com/claimlock/claimlock/contrib/otel"
	"github.com/claimlock/claimlock/dialect"
	"github.com/claimlock/claimlock/tasklock"
	"github.com/claimlock/claimlock/zombie"
)

// One Observer serves the claimer, the lease locker and the reaper; it
// reports to the global tracer and meter providers unless options say
// otherwise.
func ExampleNew() {
	obs, err := claimotel.New() // claimotel.WithTracerProvider(tp), claimotel.WithMeterProvider(mp)
	if err != nil {
		log.Fatal(err)
	}
	cfg := claim.Config{
		ClaimTable:  dialect.ClaimTable{Table: "jobs", Scope: []string{"task_id"}},
		ScopeValues: []any{42},
		Observer:    obs,
	}
	_ = cfg
	_ = tasklock.Config{Table: tasklock.KeyTable("claimlock_lease"), TTL: 30 * time.Second, Observer: obs}
	_ = zombie.Config{Timeout: time.Minute, Observer: obs}
}
