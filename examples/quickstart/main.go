// snippet: readme-quickstart

// Command quickstart sends every pending message of an outbox table once,
// however many copies of it run at the same time.
package main

import (
	"context"
	"fmt"
	"log"

	"github.com/claimlock/claimlock/claim"
	"github.com/claimlock/claimlock/dialect"
	"github.com/claimlock/claimlock/dialect/sqlite"
	"github.com/claimlock/claimlock/hold"
)

// Msg is what a worker reads of each row: its "addr" column.
type Msg struct{ Addr string }

func main() {
	ctx := context.Background()
	db, err := sqlite.Open("outbox.db") // or mysql.Open, pgxpool.New
	if err != nil {
		log.Fatal(err)
	}
	d, err := sqlite.New(ctx, db, dialect.Options{}) // or mysql.New, postgres.New
	if err != nil {
		log.Fatal(err)
	}
	_, err = db.Exec(`CREATE TABLE IF NOT EXISTS outbox (id INTEGER PRIMARY KEY, addr TEXT NOT NULL,
		status TEXT NOT NULL DEFAULT 'PENDING', token TEXT, claimed_at INTEGER);
		INSERT INTO outbox (addr) VALUES ('ann@example.com'), ('bob@example.com')`)
	if err != nil {
		log.Fatal(err)
	}
	c, err := claim.New(d, claim.Config{ClaimTable: dialect.ClaimTable{Table: "outbox", Columns: []string{"addr"}}},
		func(m *Msg) []any { return []any{&m.Addr} })
	if err != nil {
		log.Fatal(err)
	}
	for _, q := range c.IndexDDL(false) { // the claim, token and reaper indexes
		if _, err := db.Exec(q); err != nil {
			log.Fatal(err)
		}
	}
	for {
		b, err := c.Claim(ctx) // up to 100 pending rows, now PROCESSING under b's token
		if err != nil {
			log.Fatal(err)
		}
		if b.Len() == 0 {
			return // nothing pending
		}
		wctx, cancel := b.Context(ctx) // ends if every row is lost (reaped and claimed again)
		for _, r := range b.Rows() {
			if hold.Check(wctx) != nil { // the last check before a send
				break // lost: another copy may be sending them now
			}
			fmt.Println("send to", r.Value.Addr) // make the send idempotent on r.ID
		}
		cancel()
		if err := b.AckAll(ctx); err != nil { // DONE, unless a reaper took them back
			log.Fatal(err)
		}
	}
}

// end snippet
