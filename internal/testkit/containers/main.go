// Command containers starts the test databases of internal/testkit/dbtest
// in Docker, through testcontainers-go, for a test binary that found no
// DSN in its environment. It is a module of its own so that testcontainers
// and the Docker client, with their dozens of modules, stay out of the
// claimlock module's requirements, which every user's build inherits.
//
// It takes the engines to start as arguments ("postgres", "mysql"), prints
// one line per engine, NAME=DSN, once each server answers, and then waits:
// when its standard input closes (the test binary that started it exited)
// it stops the containers, which testcontainers' reaper (Ryuk) also removes
// should this program be killed. An engine that cannot start prints
// NAME!reason instead.
package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/testcontainers/testcontainers-go"
	tcmysql "github.com/testcontainers/testcontainers-go/modules/mysql"
	tcpostgres "github.com/testcontainers/testcontainers-go/modules/postgres"
)

func main() {
	var stops []func()
	out := bufio.NewWriter(os.Stdout)
	for _, engine := range os.Args[1:] {
		dsn, stop, err := start(engine)
		if err != nil {
			fmt.Fprintf(out, "%s!%v\n", engine, oneLine(err))
		} else {
			fmt.Fprintf(out, "%s=%s\n", engine, dsn)
			stops = append(stops, stop)
		}
		out.Flush()
	}
	_, _ = io.Copy(io.Discard, os.Stdin) // until the test binary exits
	for _, stop := range stops {
		stop()
	}
}

func oneLine(err error) string {
	s := err.Error()
	for i, c := range s {
		if c == '\n' {
			return s[:i]
		}
	}
	return s
}

// start runs one engine's container and returns its DSN.
func start(engine string) (string, func(), error) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	hctx, hcancel := context.WithTimeout(ctx, 5*time.Second)
	defer hcancel()
	if err := dockerAvailable(hctx); err != nil {
		return "", nil, errors.Join(errors.New("no Docker engine"), err)
	}
	var c testcontainers.Container
	var dsn string
	var err error
	switch engine {
	case "postgres":
		var pg *tcpostgres.PostgresContainer
		pg, err = tcpostgres.Run(ctx, "postgres:16-alpine",
			tcpostgres.WithDatabase("test"), tcpostgres.WithUsername("postgres"), tcpostgres.WithPassword("postgres"),
			tcpostgres.BasicWaitStrategies())
		if err == nil {
			c = pg
			dsn, err = pg.ConnectionString(ctx, "sslmode=disable")
		}
	case "mysql":
		var my *tcmysql.MySQLContainer
		my, err = tcmysql.Run(ctx, "mysql:8.4", tcmysql.WithDatabase("test"), tcmysql.WithUsername("root"), tcmysql.WithPassword("test"))
		if err == nil {
			c = my
			dsn, err = my.ConnectionString(ctx)
		}
	default:
		return "", nil, fmt.Errorf("unknown engine %q (want postgres or mysql)", engine)
	}
	if err != nil {
		return "", nil, fmt.Errorf("start %s container: %w", engine, err)
	}
	return dsn, func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = c.Terminate(ctx)
	}, nil
}

// dockerAvailable asks the Docker engine for a health check, quickly.
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
