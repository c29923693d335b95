package claim_test

import (
	"context"
	"database/sql"

	"github.com/claimlock/claimlock/dialect"
	"github.com/claimlock/claimlock/dialect/mysql"
	"github.com/claimlock/claimlock/internal/dbtest"
)

func init() {
	engines = append(engines, engine{"mysql", dbtest.MySQLDSN})
	extraOpeners["mysql"] = func(ctx context.Context, dsn string, opts dialect.Options) (dialect.Dialect, *sql.DB, func(), error) {
		db, err := mysql.Open(ctx, dsn)
		if err != nil {
			return nil, nil, nil, err
		}
		db.SetMaxOpenConns(24)
		d, err := mysql.New(ctx, db, opts)
		if err != nil {
			db.Close()
			return nil, nil, nil, err
		}
		return d, db, func() { db.Close() }, nil
	}
}
