package dbtest

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/testcontainers/testcontainers-go"
	tcmysql "github.com/testcontainers/testcontainers-go/modules/mysql"
	tcpostgres "github.com/testcontainers/testcontainers-go/modules/postgres"
)

// dockerAvailable asks the Docker engine for a health check, quickly, so that
// machines without one fall through to the skip (or failure) at once.
func dockerAvailable(ctx context.Context) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("testcontainers: %v", r)
		}
	}()
	p, err := testcontainers.NewDockerProvider()
	if err != nil {
		return err
	}
	defer p.Close()
	return p.Health(ctx)
}

// Containers are started once per test binary and left to testcontainers'
// reaper (Ryuk), which removes them when the binary exits.

func startPostgresContainer() (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	hctx, hcancel := context.WithTimeout(ctx, 5*time.Second)
	defer hcancel()
	if err := dockerAvailable(hctx); err != nil {
		return "", errors.Join(errors.New("no Docker engine"), err)
	}
	c, err := tcpostgres.Run(ctx, "postgres:16-alpine",
		tcpostgres.WithDatabase("test"), tcpostgres.WithUsername("postgres"), tcpostgres.WithPassword("postgres"),
		tcpostgres.BasicWaitStrategies())
	if err != nil {
		return "", fmt.Errorf("start PostgreSQL container: %w", err)
	}
	return c.ConnectionString(ctx, "sslmode=disable")
}

func startMySQLContainer() (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	hctx, hcancel := context.WithTimeout(ctx, 5*time.Second)
	defer hcancel()
	if err := dockerAvailable(hctx); err != nil {
		return "", errors.Join(errors.New("no Docker engine"), err)
	}
	c, err := tcmysql.Run(ctx, "mysql:8.4", tcmysql.WithDatabase("test"), tcmysql.WithUsername("root"), tcmysql.WithPassword("test"))
	if err != nil {
		return "", fmt.Errorf("start MySQL container: %w", err)
	}
	return c.ConnectionString(ctx)
}
