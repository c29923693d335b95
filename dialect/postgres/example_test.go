package postgres_test

import (
	"context"
	"database/sql"
	"log"
	"os"

	"github.com/jackc/pgx/v5/pgxpool"
	_ "github.com/jackc/pgx/v5/stdlib" // database/sql driver "pgx"

	"github.com/claimlock/claimlock/claim"
	"github.com/claimlock/claimlock/dialect"
	"github.com/claimlock/claimlock/dialect/postgres"
)

// The native form: a dialect on a pgx pool. Statements use pgx's own
// protocol; claims take SKIP LOCKED by default.
func ExampleNew() {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, os.Getenv("DATABASE_URL"))
	if err != nil {
		log.Fatal(err)
	}
	defer pool.Close()
	d, err := postgres.New(ctx, pool, dialect.Options{})
	if err != nil {
		log.Fatal(err) // an unreachable server, or one older than 9.5
	}
	c, err := claim.New[struct{}](d, claim.Config{ClaimTable: dialect.ClaimTable{Table: "jobs"}}, nil)
	if err != nil {
		log.Fatal(err)
	}
	b, err := c.Claim(ctx)
	if err != nil {
		log.Fatal(err)
	}
	_ = b.AckAll(ctx)
}

// The database/sql form, for applications whose code already holds a
// *sql.DB (here on pgx's stdlib driver). Transactions claimlock runs are
// READ COMMITTED whatever the pool's default.
func ExampleNewStdlib() {
	ctx := context.Background()
	db, err := sql.Open("pgx", os.Getenv("DATABASE_URL"))
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()
	d, err := postgres.NewStdlib(ctx, db, dialect.Options{})
	if err != nil {
		log.Fatal(err)
	}
	log.Println(d.Capabilities().PreferredStrategy) // skip-locked
}
