package main

// This file is the status page's only contact with the library (claim,
// coalesce, tasklock, dialect): the rest of serve*.go sees the pageSource interface
// and its plain result types. It reuses what the other commands do: the
// table descriptions, their validation and the catalog checks of rows.go
// and leases.go, then the same library calls the stats, stuck, parked,
// scheduled, leases, unpark, retry-now and force-release commands make. It
// builds no SQL.

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/claimlock/claimlock/claim"
	"github.com/claimlock/claimlock/coalesce"
	"github.com/claimlock/claimlock/dialect"
	"github.com/claimlock/claimlock/tasklock"
)

// libSource is the pageSource over the configured claim and lease tables.
type libSource struct {
	info sourceInfo
	// callTimeout bounds each database call.
	callTimeout time.Duration
	older       time.Duration
	limit       int

	spec     dialect.ClaimTable
	claimers []*claim.Claimer[struct{}] // one per page (scope); nil without a claim table
	scopes   [][]any
	co       *coalesce.Coalescer // the coalescer of -coalesce, nil without one
	pauses   *claim.Pauses       // the pause table of -pause-table, nil without one

	lt   dialect.LeaseTable
	k    *tasklock.Locker // nil without a lease table
	keys []any            // -key values, inspected one by one
	o    *options         // the lease TTL (leaseFrom)
}

// openSource describes and verifies the tables e's options name, as the
// other commands do, within e's timeout per database call. The claim
// table's scopes are those of -scope: a scoped table needs at least one,
// since counting rows by status without a scope scans the whole table.
func openSource(ctx context.Context, e *env) (*libSource, error) {
	s := &libSource{callTimeout: e.o.Timeout, older: e.o.Older, limit: e.o.Limit, o: e.o}
	if !e.o.hasClaimTable() && e.o.LeaseTable == "" {
		return nil, usageErr("give a claim table (-table) or a coalescer (-coalesce), a lease table (-lease-table), or both")
	}
	if e.o.Older <= 0 {
		return nil, usageErr("-older must be positive")
	}
	if e.o.hasClaimTable() {
		if err := s.openClaims(ctx, e); err != nil {
			return nil, err
		}
	}
	if e.o.PauseTable != "" {
		if !e.o.hasClaimTable() {
			return nil, usageErr("-pause-table needs a claim table (-table) whose pages show their pauses")
		}
		cctx, cancel := context.WithTimeout(ctx, s.callTimeout)
		p, err := e.pauses(cctx)
		cancel()
		if err != nil {
			return nil, err
		}
		s.pauses, s.info.PauseTable = p, p.Table()
	}
	if e.o.LeaseTable != "" {
		if err := s.openLeases(ctx, e); err != nil {
			return nil, err
		}
	} else if len(e.o.Keys) > 0 {
		return nil, usageErr("-key needs a lease table (-lease-table)")
	}
	s.info.StuckAfter = s.older
	s.info.Limit = s.limit
	return s, nil
}

// openClaims opens s's claim table (and coalescer tables, with -coalesce):
// a claimer per scope the page counts, and what the page says of the table.
func (s *libSource) openClaims(ctx context.Context, e *env) error {
	spec, err := e.claimSpec(func(spec dialect.ClaimTable) (err error) {
		s.scopes, err = e.o.scopeValues(spec)
		if err == nil && len(s.scopes) == 0 && len(spec.Scope) > 0 {
			err = usageErr("-scope is required: the page counts rows by status for each -scope given (repeatable); counting the whole table would scan it on every refresh")
		}
		return err
	})
	if err != nil {
		return err
	}
	s.spec = spec
	if len(s.scopes) == 0 {
		s.scopes = [][]any{nil}
	}
	for _, sv := range s.scopes {
		cctx, cancel := context.WithTimeout(ctx, s.callTimeout)
		c, err := e.claimer(cctx, spec, sv)
		cancel()
		if err != nil {
			return err
		}
		s.claimers = append(s.claimers, c)
	}
	s.info.Table = spec.Table
	for _, sv := range s.scopes {
		label := scopeLabel(spec.Scope, sv)
		if sv == nil {
			label = ""
		}
		s.info.Scopes = append(s.info.Scopes, label)
	}
	s.info.Attempts = spec.Attempts != ""
	s.info.RunAt = spec.RunAt != ""
	s.info.ErrorColumn = spec.Error != ""
	s.info.WorkerColumn = spec.Worker != ""
	s.info.CreatedAt = spec.CreatedAt != ""
	s.info.Failed = spec.Failed.IsSet()
	if e.o.Coalesce {
		cfg, err := e.o.coalesceConfig()
		if err != nil {
			return err
		}
		if s.co, err = coalesce.New(e.d, e.db, cfg); err != nil {
			return usageErr("coalescer tables: %v", err)
		}
		s.info.ChangesTable = cfg.ChangesTable
		if s.info.ChangesTable == "" {
			s.info.ChangesTable = coalesce.DefaultChangesTable
		}
	}
	return nil
}

// openLeases opens s's lease table: its locker, the keys the page lists,
// and what the page says of the table.
func (s *libSource) openLeases(ctx context.Context, e *env) error {
	cctx, cancel := context.WithTimeout(ctx, s.callTimeout)
	lt, k, err := e.locker(cctx)
	cancel()
	if err != nil {
		return err
	}
	if s.keys, err = e.keys(lt, k); err != nil {
		return err
	}
	s.lt, s.k = lt, k
	if len(e.o.LeaseDone) > 0 && s.claimers != nil && len(s.spec.Scope) != 1 {
		return usageErr("-lease-done: the claim table's scope must be one column, the task's key in the lease table (-scope-cols %s)", strings.Join(s.spec.Scope, ","))
	}
	s.info.LeaseTable = lt.Table
	s.info.LeaseExpiry = lt.ExpiresAt != ""
	s.info.LeaseOwner = lt.Owner != ""
	if ttl, known := e.o.leaseTTL(lt); known && lt.ExpiresAt == "" {
		s.info.LeaseTTL = ttl
	}
	return nil
}

func (s *libSource) describe() sourceInfo { return s.info }

// claimer returns the claimer of page i.
func (s *libSource) claimer(i int) (*claim.Claimer[struct{}], error) {
	if i < 0 || i >= len(s.claimers) {
		return nil, fmt.Errorf("no page %d", i)
	}
	return s.claimers[i], nil
}

func (s *libSource) sample(ctx context.Context, i int) (scopeSample, error) {
	var out scopeSample
	c, err := s.claimer(i)
	if err != nil {
		return out, err
	}
	sctx, cancel := context.WithTimeout(ctx, s.callTimeout)
	st, err := c.Stats(sctx)
	cancel()
	if err != nil {
		return out, err
	}
	if s.co != nil {
		bctx, cancel := context.WithTimeout(ctx, s.callTimeout)
		dirty, oldest, err := s.co.Backlog(bctx)
		cancel()
		if err != nil {
			return out, err
		}
		out.Backlog = &backlog{Dirty: dirty, Oldest: oldest}
	}
	if s.pauses != nil {
		if out.Pause, err = s.pauseOf(ctx, i); err != nil {
			return out, err
		}
	}
	out.Counts = counts{
		Pending: st.Pending, Processing: st.Processing, Done: st.Done, Failed: st.Failed, Other: st.Other,
		OldestPending: st.OldestPending, OldestProcessing: st.OldestProcessing,
	}
	list := func(set claim.RowSet, older time.Duration) ([]rowView, error) {
		cctx, cancel := context.WithTimeout(ctx, s.callTimeout)
		defer cancel()
		rows, err := c.List(cctx, set, older, s.limit)
		if err != nil {
			return nil, err
		}
		out := make([]rowView, len(rows))
		for j, r := range rows {
			out[j] = rowView{ID: fmt.Sprint(r.ID), Token: r.Token, Attempts: r.Attempts, ClaimedAge: r.ClaimedAge, RunIn: r.RunIn, Error: r.Error, Worker: r.Worker}
		}
		return out, nil
	}
	if out.Stuck, err = list(claim.Stuck, s.older); err != nil {
		return out, err
	}
	if s.info.Failed {
		if out.Parked, err = list(claim.Parked, 0); err != nil {
			return out, err
		}
	}
	if s.info.RunAt {
		if out.Scheduled, err = list(claim.Scheduled, 0); err != nil {
			return out, err
		}
	}
	return out, nil
}

func (s *libSource) leases(ctx context.Context) ([]leaseView, error) {
	if s.k == nil {
		return nil, nil
	}
	ctx, cancel := context.WithTimeout(ctx, s.callTimeout)
	defer cancel()
	// Every lease with a holder, then those of -key: the leases command's
	// listing and inspections.
	all, err := s.o.holders(ctx, s.lt, s.k, s.limit)
	if err != nil {
		return nil, err
	}
	for _, key := range s.keys {
		o, err := s.o.inspect(ctx, s.lt, s.k, key)
		if err != nil {
			return nil, err
		}
		all = append(all, o)
	}
	out := make([]leaseView, len(all))
	for i, o := range all {
		l := leaseView{Key: fmt.Sprint(o.Key), State: o.State, Owner: o.Owner, Holder: o.Holder, Fence: o.Fence,
			Remaining: time.Duration(o.RemainingSeconds * float64(time.Second)), DBClock: o.DBClock, Note: o.Note}
		if o.ExpiresAt != nil {
			l.ExpiresAt = *o.ExpiresAt
		}
		if o.LockedAt != nil {
			l.LockedAt = *o.LockedAt
		}
		out[i] = l
	}
	return out, nil
}

// target is the claimer and the keys of an action on page i: the keys
// given (at least one), parsed as -ids is.
func (s *libSource) target(i int, ids []string) (*claim.Claimer[struct{}], []any, error) {
	c, err := s.claimer(i)
	if err != nil {
		return nil, nil, err
	}
	if len(ids) == 0 {
		return nil, nil, usageErr("no row keys given")
	}
	for _, id := range ids {
		if strings.Contains(id, ",") {
			return nil, nil, usageErr("row key %q contains a comma", id)
		}
	}
	keys, err := (&options{IDs: strings.Join(ids, ",")}).ids(s.spec)
	if err != nil {
		return nil, nil, err
	}
	if len(keys) == 0 {
		return nil, nil, usageErr("no row keys given")
	}
	return c, keys, nil
}

// unpark unparks the rows ids of page i, or every parked row of its scope
// for nil ids.
// With -lease-done, warning says when the page's task is finished (see
// taskWarning).
func (s *libSource) unpark(ctx context.Context, i int, ids []string, reset bool) (int64, string, error) {
	var c *claim.Claimer[struct{}]
	var keys []any
	var err error
	if ids == nil {
		c, err = s.claimer(i)
	} else {
		c, keys, err = s.target(i, ids)
	}
	if err != nil {
		return 0, "", err
	}
	if reset && !s.info.Attempts {
		return 0, "", usageErr("fresh attempts need an attempts column (-attempts)")
	}
	ctx, cancel := context.WithTimeout(ctx, s.callTimeout)
	defer cancel()
	n, err := c.Unpark(ctx, reset, keys...)
	if err != nil || n == 0 || len(s.o.LeaseDone) == 0 || len(s.scopes[i]) != 1 {
		return n, "", err
	}
	warning, err := taskWarning(ctx, s.o.LeaseDone, s.lt, s.k, s.scopes[i][0])
	if err != nil {
		// The rows are unparked: the reply says so, and why there is no
		// word on the task.
		warning = "could not read the task's status: " + oneLine(err.Error())
	}
	return n, warning, nil
}

func (s *libSource) retryNow(ctx context.Context, i int, ids []string) (int64, error) {
	c, keys, err := s.target(i, ids)
	if err != nil {
		return 0, err
	}
	ctx, cancel := context.WithTimeout(ctx, s.callTimeout)
	defer cancel()
	return c.RetryNow(ctx, keys...)
}

// forceRelease frees the lease of key if owner still holds it: the
// release is conditioned on the holder the operator confirmed, so a lease
// taken again meanwhile by someone else stays held.
func (s *libSource) forceRelease(ctx context.Context, key, owner string) (bool, error) {
	if s.k == nil {
		return false, errors.New("no lease table")
	}
	if owner == "" {
		return false, usageErr("no owner given")
	}
	k, err := leaseKey(s.lt, key)
	if err != nil {
		return false, err
	}
	ctx, cancel := context.WithTimeout(ctx, s.callTimeout)
	defer cancel()
	return s.k.ReleaseOwner(ctx, k, owner)
}

// invalidInput reports whether err refuses an input (a key of the wrong
// type, no keys), claimctl's or the library's, as opposed to a failure.
func invalidInput(err error) bool {
	return errors.Is(err, dialect.ErrInvalidConfig) || errors.As(err, new(*exitError))
}

// pauseOf returns the pause of page i's scope, or else of the whole table;
// nil when neither is paused.
func (s *libSource) pauseOf(ctx context.Context, i int) (*pauseState, error) {
	text, err := claim.PauseScope(s.scopes[i]...)
	if err != nil {
		return nil, err
	}
	cctx, cancel := context.WithTimeout(ctx, s.callTimeout)
	defer cancel()
	list, err := s.pauses.List(cctx, claim.MaxListLimit)
	if err != nil {
		return nil, err
	}
	var whole *pauseState
	for _, p := range list {
		if p.Table != s.spec.Table {
			continue
		}
		st := &pauseState{Whole: p.ScopeText == "", Reason: p.Reason, By: p.By, Since: p.PausedAt, Age: p.Age}
		switch {
		case p.ScopeText == text:
			return st, nil
		case p.ScopeText == "":
			whole = st
		}
	}
	return whole, nil
}

// pause pauses page i's scope (the whole table of an unscoped one).
func (s *libSource) pause(ctx context.Context, i int, reason, by string) (bool, error) {
	if s.pauses == nil || i < 0 || i >= len(s.scopes) {
		return false, fmt.Errorf("no pause table or no page %d", i)
	}
	return s.pauses.Pause(ctx, s.spec.Table, s.scopes[i], claim.PauseNote{Reason: reason, By: by})
}

// resume ends the pause of page i's scope (of the whole table for an
// unscoped one).
func (s *libSource) resume(ctx context.Context, i int) (bool, error) {
	if s.pauses == nil || i < 0 || i >= len(s.scopes) {
		return false, fmt.Errorf("no pause table or no page %d", i)
	}
	return s.pauses.Resume(ctx, s.spec.Table, s.scopes[i])
}
