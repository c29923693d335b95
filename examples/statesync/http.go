package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/claimlock/claimlock/coalesce"
	"github.com/claimlock/claimlock/dialect"
)

// changeRequest is the body of POST /changes.
type changeRequest struct {
	Key     string `json:"key"`
	EventID string `json:"event_id"`
	Source  string `json:"source,omitempty"`
	Seq     int64  `json:"seq,omitempty"`
	Delta   int64  `json:"delta"`
}

// receipt is the body of a 202 or 200 answer to POST /changes: the
// coalescer's receipt. Version is the change's sequence: once GET
// /state/{key} shows a persisted version at least this one, the change is
// in the state (when one source writes the key).
type receipt struct {
	Key       string `json:"key"`
	EventID   string `json:"event_id"`
	Source    string `json:"source,omitempty"`
	Version   int64  `json:"version"`
	ID        int64  `json:"id"`
	Duplicate bool   `json:"duplicate,omitempty"`
}

// problem is the body of an error answer. Version is, for a 409, the last
// sequence accepted from the source for the key.
type problem struct {
	Error      string `json:"error"`
	Version    int64  `json:"version,omitempty"`
	RetryAfter string `json:"retry_after,omitempty"`
}

// stateView is the body of GET /state/{key}.
type stateView struct {
	Key string `json:"key"`
	// Accepted and Persisted are [coalesce.Coalescer.Versions]: the
	// highest sequence accepted for the key, and the highest folded into
	// Total.
	Accepted  int64 `json:"accepted"`
	Persisted int64 `json:"persisted"`
	// Total is the state: the sum of the folded deltas; Writes how many
	// times the state row was written.
	Total  int64 `json:"total"`
	Writes int64 `json:"writes"`
}

// maxBody bounds a request body: a change is small.
const maxBody = 64 << 10

// handler serves POST /changes and GET /state/{key} on a's coalescer.
func (a *app) handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /changes", a.postChange)
	mux.HandleFunc("GET /state/{key}", a.getState)
	return mux
}

func (a *app) postChange(w http.ResponseWriter, r *http.Request) {
	var req changeRequest
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxBody))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		writeJSON(w, http.StatusBadRequest, problem{Error: "body: " + err.Error()})
		return
	}
	rc, err := a.co.Accept(r.Context(), coalesce.Change{
		Key: req.Key, EventID: req.EventID, Source: req.Source, Seq: req.Seq,
		Payload: strconv.AppendInt(nil, req.Delta, 10),
	})
	var stale *coalesce.StaleError
	var over *coalesce.OverloadError
	switch {
	case errors.As(err, &stale):
		writeJSON(w, http.StatusConflict, problem{Error: err.Error(), Version: stale.Current})
	case errors.As(err, &over):
		secs := int64(math.Ceil(over.RetryAfter.Seconds()))
		w.Header().Set("Retry-After", strconv.FormatInt(max(secs, 1), 10))
		writeJSON(w, http.StatusTooManyRequests, problem{Error: err.Error(), RetryAfter: over.RetryAfter.String()})
	case errors.Is(err, dialect.ErrInvalidConfig):
		// A change the tables cannot hold: an empty or too long key,
		// event id or source.
		writeJSON(w, http.StatusBadRequest, problem{Error: err.Error()})
	case err != nil:
		a.serverError(w, r, err)
	default:
		status := http.StatusAccepted
		if rc.Duplicate {
			status = http.StatusOK
		}
		writeJSON(w, status, receipt{Key: rc.Key, EventID: rc.EventID, Source: rc.Source, Version: rc.Seq, ID: rc.ID, Duplicate: rc.Duplicate})
	}
}

func (a *app) getState(w http.ResponseWriter, r *http.Request) {
	v := stateView{Key: r.PathValue("key")}
	var err error
	v.Accepted, v.Persisted, err = a.co.Versions(r.Context(), v.Key)
	if err != nil {
		a.serverError(w, r, err)
		return
	}
	// Read after the versions: the state holds at least what Persisted says.
	err = a.db.SQL.QueryRowContext(r.Context(), a.sq.readState, v.Key).Scan(&v.Total, &v.Writes)
	if err != nil && !errors.Is(err, sql.ErrNoRows) { // no row: nothing folded yet
		a.serverError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, v)
}

func (a *app) serverError(w http.ResponseWriter, r *http.Request, err error) {
	if r.Context().Err() != nil {
		return // the client left
	}
	a.logf("%s %s: %v", r.Method, r.URL.Path, err)
	writeJSON(w, http.StatusInternalServerError, problem{Error: "internal error"})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// serve is -http: it creates the tables unless they exist (keeping their
// rows), runs -flushers flushers and serves the handler on o.http until ctx
// ends.
func serve(ctx context.Context, o options, stderr io.Writer) error {
	a, err := open(ctx, o)
	if err != nil {
		return err
	}
	defer a.close()
	a.log = stderr
	if err := a.createTables(ctx); err != nil {
		return fmt.Errorf("setup: %w", err)
	}
	ln, err := net.Listen("tcp", o.http)
	if err != nil {
		return err
	}
	fmt.Fprintf(stderr, "statesync: serving on %s (driver %s)\n", ln.Addr(), a.db.Driver)
	if a.db.Path != "" {
		fmt.Fprintln(stderr, "statesync: database:", a.db.Path)
	}
	srv := &http.Server{Handler: a.handler(), ReadHeaderTimeout: 5 * time.Second}
	fctx, stopFlushers := context.WithCancel(ctx)
	var wg sync.WaitGroup
	errs := make(chan error, o.flushers+1)
	for range o.flushers {
		wg.Go(func() {
			if err := a.flusher.Run(fctx); err != nil {
				errs <- fmt.Errorf("flusher: %w", err)
			}
		})
	}
	wg.Go(func() {
		if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
			errs <- err
		}
	})
	select {
	case <-ctx.Done():
	case err = <-errs:
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	_ = srv.Shutdown(sctx)
	stopFlushers()
	wg.Wait()
	return err
}
