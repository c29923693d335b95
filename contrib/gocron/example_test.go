package claimgocron_test

import (
	"context"
	"fmt"
	"time"

	"github.com/go-co-op/gocron/v2"

	"github.com/claimlock/claimlock/contrib/gocron"
	"github.com/claimlock/claimlock/dialect"
	"github.com/claimlock/claimlock/dialect/sqlite"
	"github.com/claimlock/claimlock/schedule"
)

// Example runs a gocron job once per fire time across every process that
// runs this program (here, one, on SQLite), through the Locker.
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
	ran := make(chan struct{}, 10)
	sendReport := func() { ran <- struct{}{} }

	// snippet: gocron-locker
	s, err := schedule.New(d, schedule.Config{TTL: time.Minute})
	if err != nil {
		panic(err)
	}
	locker := claimgocron.NewLocker(s)
	sched, err := gocron.NewScheduler(gocron.WithDistributedLocker(locker))
	if err != nil {
		panic(err)
	}
	def, opts, err := locker.CronJob("report", "* * * * * *", true, time.Local)
	if err != nil {
		panic(err)
	}
	if _, err := sched.NewJob(def, gocron.NewTask(sendReport), opts...); err != nil {
		panic(err)
	}
	sched.Start()
	// end snippet

	<-ran
	if err := sched.Shutdown(); err != nil {
		panic(err)
	}
	recs, err := s.History(ctx, "report", time.Time{}, 1)
	if err != nil {
		panic(err)
	}
	fmt.Println(recs[0].Status)
	// Output:
	// succeeded
}
