package claim_test

import (
	"context"
	"fmt"
	"log"

	"github.com/claimlock/claimlock/claim"
	"github.com/claimlock/claimlock/dialect"
	"github.com/claimlock/claimlock/dialect/sqlite"
)

// A migration of an existing table: the table was created for a
// configuration without attempts, and the configuration now counts them.
func ExampleClaimer_Migration() {
	ctx := context.Background()
	db, err := sqlite.Open(":memory:")
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()
	d, err := sqlite.New(ctx, db, dialect.Options{})
	if err != nil {
		log.Fatal(err)
	}
	cfg := claim.Config{ClaimTable: dialect.ClaimTable{Table: "outbox"}}
	if err := claim.CreateTable(ctx, d, cfg); err != nil {
		log.Fatal(err)
	}

	cfg.Attempts, cfg.MaxAttempts = "attempts", 5
	c, err := claim.New[struct{}](d, cfg, nil)
	if err != nil {
		log.Fatal(err)
	}
	m, err := c.Migration(ctx, false)
	if err != nil {
		log.Fatal(err)
	}
	for _, q := range append(m.Columns, m.Indexes...) {
		fmt.Println(q)
	}
	// Output:
	// ALTER TABLE `outbox` ADD COLUMN `attempts` INTEGER NOT NULL DEFAULT 0
}
