package schedule_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/claimlock/claimlock/dialect"
	"github.com/claimlock/claimlock/dialect/sqlite"
	"github.com/claimlock/claimlock/schedule"
)

// openSQLite opens an in-memory SQLite database with the schedule tables.
func openSQLite() (dialect.Dialect, func()) {
	ctx := context.Background()
	db, err := sqlite.Open(":memory:")
	if err != nil {
		panic(err)
	}
	d, err := sqlite.New(ctx, db, dialect.Options{})
	if err != nil {
		panic(err)
	}
	if err := schedule.CreateTables(ctx, d, "", ""); err != nil {
		panic(err)
	}
	return d, func() { db.Close() }
}

// Example runs a job every 200 ms with Run until it has run twice, then
// reads its history.
func Example() {
	d, closeDB := openSQLite()
	defer closeDB()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	// snippet: schedule-run
	s, err := schedule.New(d, schedule.Config{TTL: 10 * time.Second})
	if err != nil {
		panic(err)
	}
	runs := 0
	err = s.Add(schedule.Job{
		Name:     "report",
		Schedule: schedule.Every(200 * time.Millisecond),
		Func: func(ctx context.Context, r *schedule.Run) error {
			// ctx ends if the run's lease is lost; r.Fence() fences its writes.
			runs++
			fmt.Println("run", runs, "fence", r.Fence())
			if runs == 2 {
				cancel()
			}
			return nil
		},
	})
	if err != nil {
		panic(err)
	}
	if err := s.Run(ctx); err != nil { // every process of the fleet runs the same
		panic(err)
	}
	// end snippet

	recs, err := s.History(context.Background(), "report", time.Time{}, 10)
	if err != nil {
		panic(err)
	}
	for _, r := range recs {
		fmt.Println(r.Status, r.FireTime.Sub(recs[len(recs)-1].FireTime))
	}
	// Output:
	// run 1 fence 1
	// run 2 fence 2
	// succeeded 200ms
	// succeeded 0s
}

// ExampleScheduler_Claim: two schedulers (two processes of a fleet) tick
// the same fire time; one claims it, the other is told it is not due for
// it.
func ExampleScheduler_Claim() {
	d, closeDB := openSQLite()
	defer closeDB()
	ctx := context.Background()
	const period = 400 * time.Millisecond
	job := schedule.Job{Name: "sync", Schedule: schedule.Every(period)}
	var fleet []*schedule.Scheduler
	for range 2 {
		s, err := schedule.New(d, schedule.Config{TTL: 10 * time.Second})
		if err != nil {
			panic(err)
		}
		if err := s.Add(job); err != nil {
			panic(err)
		}
		fleet = append(fleet, s)
	}
	// The first claim makes the job's row. Then tick both just after a
	// fire time (a tick nearer to the next fire time than to the last
	// one stands for the next one).
	if r, err := fleet[0].Claim(ctx, "sync"); err == nil {
		_ = r.Finish(ctx, nil)
	}
	now := time.Now()
	time.Sleep(now.Truncate(period).Add(period + 10*time.Millisecond).Sub(now))

	// snippet: schedule-claim
	var mu sync.Mutex
	var ran, notDue int
	var wg sync.WaitGroup
	for _, s := range fleet {
		wg.Go(func() {
			r, err := s.Claim(ctx, "sync")
			mu.Lock()
			defer mu.Unlock()
			switch {
			case errors.Is(err, schedule.ErrNotDue):
				notDue++ // another process runs this fire time
			case err != nil:
				panic(err)
			default:
				ran++
				_ = r.Finish(ctx, nil) // records the run and releases the job's lease
			}
		})
	}
	wg.Wait()
	// end snippet
	fmt.Println("ran:", ran, "not due:", notDue)
	// Output:
	// ran: 1 not due: 1
}

// ExampleScheduler_Pause pauses a job in the database: every scheduler
// records its fire times as skipped until it is resumed.
func ExampleScheduler_Pause() {
	d, closeDB := openSQLite()
	defer closeDB()
	ctx := context.Background()
	s, err := schedule.New(d, schedule.Config{})
	if err != nil {
		panic(err)
	}
	if err := s.Add(schedule.Job{Name: "mail", Schedule: schedule.Every(50 * time.Millisecond),
		Func: func(context.Context, *schedule.Run) error { return nil }}); err != nil {
		panic(err)
	}
	if err := s.Pause(ctx, "mail"); err != nil {
		panic(err)
	}
	time.Sleep(60 * time.Millisecond)
	fmt.Println(errors.Is(s.Tick(ctx, "mail"), schedule.ErrPaused))
	jobs, err := s.Jobs(ctx)
	if err != nil {
		panic(err)
	}
	fmt.Println(jobs[0].Name, "paused:", jobs[0].Paused)
	// Output:
	// true
	// mail paused: true
}
