package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"
)

// serveOptions are the flags of the serve command.
type serveOptions struct {
	Listen      string
	ActionToken string
	Interval    time.Duration
}

// serveAbout is the serve command's help text.
const serveAbout = "Serve a status page: one page per -scope of the claim table (counts by status over time, the\n" +
	"oldest pending age, rows stuck longer than -older, parked and scheduled rows) and the held leases\n" +
	"of the lease table, refreshed in place every -interval. The server samples the database on its\n" +
	"own timer, whoever looks: per -interval, for each -scope one count by status and three lists of\n" +
	"at most -limit rows, and one list of at most -limit leases. Counts are kept only for the scopes\n" +
	"given (a scoped table needs -scope: counting the whole table scans it). -timeout bounds each\n" +
	"database call. It listens on 127.0.0.1 unless -listen says otherwise, and is read-only unless an\n" +
	"action token is set (-action-token or, out of the process list, $CLAIMCTL_ACTION_TOKEN): then an\n" +
	"operator who logs in with it can unpark, retry now and force-release, each after a confirmation.\n" +
	"With -pause-table each page shows whether its scope (or the whole table) is paused, and an operator\n" +
	"who logged in can pause and resume the page's scope.\n" +
	"Actions and refusals are logged on standard output with the caller's address and session."

// minActionToken is the shortest action token accepted.
const minActionToken = 16

func defineServeFlags(fs *flag.FlagSet, o *serveOptions) {
	fs.StringVar(&o.Listen, "listen", "127.0.0.1:8080", "`address` to listen on (host:port; port 0 picks a free one)")
	fs.StringVar(&o.ActionToken, "action-token", "", "`token` that enables actions (default $CLAIMCTL_ACTION_TOKEN; none: read-only)")
	fs.DurationVar(&o.Interval, "interval", 5*time.Second, "how often the server reads the database (1s to 1h)")
}

// check validates the serve flags, reading the action token from the
// environment when the flag does not give one.
func (o *serveOptions) check() error {
	if o.ActionToken == "" {
		o.ActionToken = os.Getenv("CLAIMCTL_ACTION_TOKEN")
	}
	if o.ActionToken != "" && len(o.ActionToken) < minActionToken {
		return usageErr("action token: at least %d characters (it guards the actions); none makes the page read-only", minActionToken)
	}
	if strings.ContainsAny(o.ActionToken, " \t\r\n") {
		return usageErr("action token: must not contain white space")
	}
	if o.Interval < time.Second || o.Interval > time.Hour {
		return usageErr("-interval %v is outside 1s..1h", o.Interval)
	}
	if _, _, err := net.SplitHostPort(o.Listen); err != nil {
		return usageErr("-listen %q: want host:port (%v)", o.Listen, err)
	}
	return nil
}

// HTTP server bounds.
const (
	readHeaderTimeout = 5 * time.Second
	readTimeout       = 15 * time.Second
	idleTimeout       = time.Minute
	maxHeaderBytes    = 16 << 10
)

func cmdServe(ctx context.Context, e *env) error {
	so := &e.o.Serve
	if err := so.check(); err != nil {
		return err
	}
	src, err := openSource(ctx, e)
	if err != nil {
		return err
	}
	log := slog.New(slog.NewTextHandler(e.out, nil))
	return serve(ctx, src, so, e.o.Timeout, log)
}

// serve runs the status page of src until ctx ends.
func serve(ctx context.Context, src pageSource, so *serveOptions, callTimeout time.Duration, log *slog.Logger) error {
	ln, err := net.Listen("tcp", so.Listen)
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	addr := ln.Addr().(*net.TCPAddr)
	m := newMonitor(src, so.Interval, log)
	s, err := newServer(m, so.ActionToken, addr.IP.IsLoopback(), log)
	if err != nil {
		ln.Close()
		return err
	}
	srv := &http.Server{
		Handler:           s,
		ReadHeaderTimeout: readHeaderTimeout,
		ReadTimeout:       readTimeout,
		// An action answers after its database call and a fresh sample.
		WriteTimeout:   2*callTimeout + readTimeout,
		IdleTimeout:    idleTimeout,
		MaxHeaderBytes: maxHeaderBytes,
		ErrorLog:       slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	// The first visitor sees a sample (or why there is none).
	m.sampleAll(ctx)
	var wg sync.WaitGroup
	wg.Go(func() { m.run(ctx) })
	defer wg.Wait()
	mode := "read-only (no action token)"
	if so.ActionToken != "" {
		mode = "actions need the action token"
	}
	log.Info("serve: listening", "url", "http://"+addr.String()+"/", "mode", mode, "interval", so.Interval)
	if !addr.IP.IsLoopback() {
		log.Warn("serve: listening beyond loopback: anyone who reaches this address reads the page, and the token and session cookie travel in clear text unless a TLS proxy is in front")
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	select {
	case err := <-served:
		return fmt.Errorf("serve: %w", err)
	case <-ctx.Done():
	}
	sctx, scancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer scancel()
	err = srv.Shutdown(sctx)
	if serr := <-served; !errors.Is(serr, http.ErrServerClosed) && err == nil {
		err = serr
	}
	log.Info("serve: stopped")
	if err != nil {
		return fmt.Errorf("shutdown: %w", err)
	}
	return nil
}
