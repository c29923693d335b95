package mysql_test

import (
	"context"
	"database/sql"
	"log"
	"os"

	gomysql "github.com/go-sql-driver/mysql"

	"github.com/claimlock/claimlock/dialect"
	"github.com/claimlock/claimlock/dialect/mysql"
)

// Open reads the server's version once, then returns a pool whose every
// connection runs in READ COMMITTED and interpolates arguments on the
// client; on a Galera node it also turns on causal reads.
func ExampleOpen() {
	ctx := context.Background()
	db, err := mysql.Open(ctx, os.Getenv("MYSQL_DSN")) // "user:pass@tcp(host:3306)/app"
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()
	d, err := mysql.New(ctx, db, dialect.Options{})
	if err != nil {
		log.Fatal(err)
	}
	log.Println(d.Capabilities().PreferredStrategy) // token-update
}

// ConfigureDSN is for applications that build their own pool from a
// driver config: it makes every connection start in READ COMMITTED, under
// the isolation variable the server's version names.
func ExampleConfigureDSN() {
	ctx := context.Background()
	cfg, err := gomysql.ParseDSN(os.Getenv("MYSQL_DSN"))
	if err != nil {
		log.Fatal(err)
	}
	v := mysql.ParseVersion("8.0.36", "MySQL Community Server - GPL") // SELECT VERSION(), @@version_comment
	mysql.ConfigureDSN(cfg, v)
	connector, err := gomysql.NewConnector(cfg)
	if err != nil {
		log.Fatal(err)
	}
	db := sql.OpenDB(connector)
	defer db.Close()
	if _, err := mysql.New(ctx, db, dialect.Options{}); err != nil {
		log.Fatal(err)
	}
}
