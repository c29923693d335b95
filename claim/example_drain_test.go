package claim_test

import (
	"context"
	"fmt"
	"log"
	"sync"

	"github.com/claimlock/claimlock/claim"
)

// A cron job sends what is pending and exits: with Drain, Run returns once
// nothing is left to claim, instead of polling until its context ends.
func ExampleWorkerConfig_drain() {
	cfg := targetConfig()
	d := exampleSetup(cfg) // five targets of task 42
	c, err := claim.New(d, cfg, func(m *Message) []any { return []any{&m.OpenID} })
	if err != nil {
		log.Fatal(err)
	}
	err = c.Run(context.Background(), claim.WorkerConfig[Message]{
		Workers: 1,
		Drain:   true,
		Handler: func(_ context.Context, r claim.Row[Message]) error {
			fmt.Println("send to", r.Value.OpenID)
			return nil
		},
	})
	st, _ := c.Stats(context.Background())
	fmt.Println(err, st.Done, st.Pending)
	// Output:
	// send to user-1
	// send to user-2
	// send to user-3
	// send to user-4
	// send to user-5
	// <nil> 5 0
}

// One claimer serves many tasks: Scope gives a view of another task's rows,
// sharing the claimer's store and connections, without a claimer per task.
func ExampleClaimer_Scope() {
	cfg := targetConfig()
	d, db := exampleTable(cfg)
	for _, task := range []int{42, 43, 43} {
		if _, err := db.Exec("INSERT INTO xxx_task_target (task_id, openid) VALUES (?, ?)", task, fmt.Sprint("user-of-", task)); err != nil {
			log.Fatal(err)
		}
	}
	c, err := claim.New(d, cfg, func(m *Message) []any { return []any{&m.OpenID} })
	if err != nil {
		log.Fatal(err)
	}
	task43, err := c.Scope(43)
	if err != nil {
		log.Fatal(err)
	}
	b, err := task43.Claim(context.Background())
	if err != nil {
		log.Fatal(err)
	}
	for _, r := range b.Rows() {
		fmt.Println("task 43:", r.Value.OpenID)
	}
	if err := b.AckAll(context.Background()); err != nil {
		log.Fatal(err)
	}
	_, err = c.Scope(43, "extra")
	fmt.Println(err)
	// Output:
	// task 43: user-of-43
	// task 43: user-of-43
	// claim: invalid configuration: ScopeValues: 2 value(s) for 1 Scope column(s) [task_id]
}

// A job serving many tasks drains them with one pool of workers, in turn:
// a small task is not served after a large one, and no task holds more
// than ScopeInFlight rows at once.
func ExampleWorkerConfig_scopes() {
	cfg := targetConfig()
	d, db := exampleTable(cfg)
	for i := range 6 {
		if _, err := db.Exec("INSERT INTO xxx_task_target (task_id, openid) VALUES (1, ?)", fmt.Sprint("large-", i)); err != nil {
			log.Fatal(err)
		}
	}
	if _, err := db.Exec("INSERT INTO xxx_task_target (task_id, openid) VALUES (2, 'small-0')"); err != nil {
		log.Fatal(err)
	}
	c, err := claim.New(d, cfg, func(m *Message) []any { return []any{&m.OpenID} })
	if err != nil {
		log.Fatal(err)
	}
	var mu sync.Mutex
	var order []string
	err = c.Run(context.Background(), claim.WorkerConfig[Message]{
		Workers:       1,
		Drain:         true,
		Scopes:        [][]any{{1}, {2}}, // task ids, as listed by the job
		ScopeInFlight: 2,
		Handler: func(_ context.Context, r claim.Row[Message]) error {
			mu.Lock()
			defer mu.Unlock()
			order = append(order, r.Value.OpenID)
			return nil
		},
	})
	fmt.Println(order[:3], err)
	fmt.Println(len(order), "rows sent")
	// Output:
	// [large-0 large-1 small-0] <nil>
	// 7 rows sent
}
