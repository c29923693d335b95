package claimcron_test

import (
	"context"
	"fmt"
	"time"

	"github.com/robfig/cron/v3"

	"github.com/claimlock/claimlock/contrib/robfigcron"
	"github.com/claimlock/claimlock/dialect"
	"github.com/claimlock/claimlock/dialect/sqlite"
	"github.com/claimlock/claimlock/schedule"
)

// Example runs a robfig/cron job once per fire time across every process
// that runs this program (here, one, on SQLite).
func Example() {
	ctx := context.Background()
	db, err := sqlite.Open(":memory:")
	if err != nil {
		panic(err)
	}
	defer db.Close()
	d, err := sqlite.New(ctx, db, dialect.Options{})
	if err != nil {
		panic(err)
	}
	if err := schedule.CreateTables(ctx, d, "", ""); err != nil {
		panic(err)
	}
	ran := make(chan time.Time, 10)

	// snippet: robfigcron-add
	s, err := schedule.New(d, schedule.Config{TTL: time.Minute})
	if err != nil {
		panic(err)
	}
	c := cron.New(cron.WithSeconds())
	_, err = claimcron.Add(c, s, "report", "* * * * * *", claimcron.Func(func(ctx context.Context, r *schedule.Run) error {
		// Only the process that claimed this fire time runs it; ctx ends
		// if the run's lease is lost.
		ran <- r.FireTime()
		return nil
	}))
	if err != nil {
		panic(err)
	}
	c.Start()
	// end snippet

	fire := <-ran
	<-c.Stop().Done()
	fmt.Println("ran at a whole second:", fire.Equal(fire.Truncate(time.Second)))
	// Output:
	// ran at a whole second: true
}
