package main

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"time"
	"unicode/utf8"
)

// pageSource is what the status page reads and changes: the configured
// claim table, one page per scope, and the lease table. serve_data.go
// implements it over the library. Every call is bounded in time and in
// rows by the source.
type pageSource interface {
	// describe says what is configured.
	describe() sourceInfo
	// sample reads page i: counts by status, stuck, parked and
	// scheduled rows.
	sample(ctx context.Context, i int) (scopeSample, error)
	// leases reads the held leases (and those of -key).
	leases(ctx context.Context) ([]leaseView, error)
	// unpark returns the parked rows ids of page i (every parked row of
	// its scope when ids is nil) to pending, with fresh attempts if reset;
	// it returns the rows changed, and a warning for the operator (the
	// page's task is finished: nothing will claim the rows).
	unpark(ctx context.Context, i int, ids []string, reset bool) (n int64, warning string, err error)
	// retryNow makes the scheduled rows ids of page i claimable now.
	retryNow(ctx context.Context, i int, ids []string) (int64, error)
	// forceRelease frees the lease of key if owner still holds it.
	forceRelease(ctx context.Context, key, owner string) (bool, error)
	// pause pauses claims of page i's scope (the whole table for an
	// unscoped one) with a note; resume ends that pause. Each reports
	// whether it changed anything.
	pause(ctx context.Context, i int, reason, by string) (bool, error)
	resume(ctx context.Context, i int) (bool, error)
}

// sourceInfo is what a pageSource serves.
type sourceInfo struct {
	// Table is the claim table ("" without one); Scopes label its pages
	// ("" for the whole table of an unscoped one).
	Table  string
	Scopes []string
	// The claim table's optional columns and its failed status.
	Attempts, RunAt, ErrorColumn, CreatedAt, Failed bool
	// WorkerColumn says whether the claim table has a worker column
	// (stuck rows then show who claimed them).
	WorkerColumn bool
	// LeaseTable is the lease table ("" without one); LeaseExpiry and
	// LeaseOwner say whether it has those columns.
	LeaseTable              string
	LeaseExpiry, LeaseOwner bool
	// LeaseTTL is the holders' TTL (-lease-ttl) by which the expiries of a
	// lease table without an expiry column are reckoned; zero when there
	// is an expiry column or the TTL is unknown.
	LeaseTTL time.Duration
	// StuckAfter is the reap timeout: rows processing longer are stuck.
	StuckAfter time.Duration
	// Limit bounds each list.
	Limit int
	// ChangesTable is the coalescer's changes table when the claim table
	// is a coalescer's keys table (-coalesce), "" otherwise: its pages
	// show the coalescer's backlog.
	ChangesTable string
	// PauseTable is the pause table (-pause-table), "" without one: its
	// pages show whether their scope is paused.
	PauseTable string
}

// counts are a scope's rows by status and its oldest ages, on the
// database clock.
type counts struct {
	Pending, Processing, Done, Failed, Other int64
	OldestPending, OldestProcessing          time.Duration
}

// rowView is one listed row; ClaimedAge is negative when unknown.
type rowView struct {
	ID, Token         string
	Attempts          int64
	ClaimedAge, RunIn time.Duration
	Error, Worker     string
}

// scopeSample is one reading of a page.
type scopeSample struct {
	Counts                   counts
	Stuck, Parked, Scheduled []rowView
	// Backlog is the coalescer's, nil without one.
	Backlog *backlog
	// Pause is the pause of the scope or of the whole table (the scope's
	// first), nil when neither is paused or without a pause table.
	Pause *pauseState
}

// pauseState is a pause a page shows.
type pauseState struct {
	// Whole says the whole table is paused, not only the page's scope.
	Whole      bool
	Reason, By string
	Since      time.Time
	Age        time.Duration
}

// pauseView is a pause as the page's JSON shows it.
type pauseView struct {
	Whole  bool   `json:"whole"`
	Reason string `json:"reason"`
	By     string `json:"by"`
	Since  string `json:"since"`
	Age    string `json:"age"`
}

// backlog is a coalescer's dirty keys and the age of its oldest unfolded
// change (parked keys' changes left out), on the database clock.
type backlog struct {
	Dirty  int64
	Oldest time.Duration
}

// leaseView is one lease. Remaining is on the database clock when DBClock
// is set, else estimated with this machine's clock.
type leaseView struct {
	// Owner is the owner token or the stamp (force-release presents it);
	// Holder is who holds the lease as shown (leaseOut.Holder).
	Key, State, Owner, Holder string
	Fence                     int64
	// LockedAt is set for a table without an expiry column; ExpiresAt is
	// zero when unknown, and Note says why.
	LockedAt, ExpiresAt time.Time
	Remaining           time.Duration
	DBClock             bool
	Note                string
}

// historyLen is how many samples of each page's counts the server keeps
// for its chart.
const historyLen = 720

// maxShownText bounds a value (an error text, a key, an owner) as the page
// shows it, in characters.
const maxShownText = 2000

// point is one sample of a page's counts, at T (Unix milliseconds, this
// machine's clock).
type point struct {
	T          int64 `json:"t"`
	Pending    int64 `json:"pending"`
	Processing int64 `json:"processing"`
	Failed     int64 `json:"failed"`
	Done       int64 `json:"done"`
}

// pageState is what the monitor knows of one page.
type pageState struct {
	last scopeSample
	ok   bool
	at   time.Time
	err  string
	hist []point
}

// monitor samples every page on a timer (and after each action), keeps
// the last reading and a bounded history, and serves views of them: the
// database's cost depends on the interval, not on the number of viewers.
type monitor struct {
	src      pageSource
	info     sourceInfo
	interval time.Duration
	log      *slog.Logger

	// sampling serialises samples (the timer's and the actions').
	sampling sync.Mutex

	mu       sync.RWMutex
	pages    []pageState
	leaseOK  bool
	leaseAt  time.Time
	leaseErr string
	leases   []leaseView
}

func newMonitor(src pageSource, interval time.Duration, log *slog.Logger) *monitor {
	info := src.describe()
	n := len(info.Scopes)
	if info.Table == "" {
		n = 1 // a page of leases only
	}
	return &monitor{src: src, info: info, interval: interval, log: log, pages: make([]pageState, n)}
}

// run samples every interval until ctx ends.
func (m *monitor) run(ctx context.Context) {
	t := time.NewTicker(m.interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		m.sampleAll(ctx)
	}
}

// sampleAll reads every page and the leases once. A failed read keeps the
// last good one and records the error, which the page shows.
func (m *monitor) sampleAll(ctx context.Context) {
	m.sampling.Lock()
	defer m.sampling.Unlock()
	if m.info.Table != "" {
		for i := range m.pages {
			s, err := m.src.sample(ctx, i)
			now := time.Now()
			if ctx.Err() != nil {
				return
			}
			m.mu.Lock()
			p := &m.pages[i]
			if err != nil {
				p.err = oneLine(err.Error())
				m.log.Warn("serve: sample failed", "page", i, "err", err)
			} else {
				p.last, p.ok, p.at, p.err = s, true, now, ""
				c := s.Counts
				p.hist = append(p.hist, point{T: now.UnixMilli(), Pending: c.Pending, Processing: c.Processing, Failed: c.Failed, Done: c.Done})
				if len(p.hist) > historyLen {
					p.hist = append(p.hist[:0], p.hist[len(p.hist)-historyLen:]...)
				}
			}
			m.mu.Unlock()
		}
	}
	if m.info.LeaseTable != "" {
		ls, err := m.src.leases(ctx)
		now := time.Now()
		if ctx.Err() != nil {
			return
		}
		m.mu.Lock()
		if err != nil {
			m.leaseErr = oneLine(err.Error())
			m.log.Warn("serve: lease sample failed", "err", err)
		} else {
			m.leases, m.leaseOK, m.leaseAt, m.leaseErr = ls, true, now, ""
		}
		m.mu.Unlock()
	}
}

// countsView is a page's counts as shown.
type countsView struct {
	Pending          int64  `json:"pending"`
	Processing       int64  `json:"processing"`
	Done             int64  `json:"done"`
	Failed           int64  `json:"failed"`
	Other            int64  `json:"other"`
	OldestPending    string `json:"oldest_pending"`
	OldestProcessing string `json:"oldest_processing"`
}

// backlogView is a coalescer's backlog as shown.
type backlogView struct {
	ChangesTable   string `json:"changes_table"`
	Dirty          int64  `json:"dirty"`
	OldestUnfolded string `json:"oldest_unfolded"`
}

// rowOutView is a listed row as shown.
type rowOutView struct {
	ID       string `json:"id"`
	Token    string `json:"token"`
	Attempts int64  `json:"attempts"`
	Age      string `json:"age"`
	RunIn    string `json:"run_in"`
	Error    string `json:"error"`
	Worker   string `json:"worker"`
}

// leaseOutView is a lease as shown.
type leaseOutView struct {
	Key   string `json:"key"`
	State string `json:"state"`
	// Owner is what a force-release presents: the owner token, or the
	// stamp of a table without an owner column.
	Owner     string `json:"owner"`
	Holder    string `json:"holder"`
	Fence     int64  `json:"fence"`
	LockedAt  string `json:"locked_at"`
	ExpiresAt string `json:"expires_at"`
	Remaining string `json:"remaining"`
	Note      string `json:"note"`
}

// pageView is everything page i shows, as its JSON and its template get
// it: values from the database are cleaned (valid UTF-8, bounded length)
// and left for the template or the script to escape.
type pageView struct {
	Index     int         `json:"index"`
	Table     string      `json:"table"`
	Scope     string      `json:"scope"`
	SampledAt string      `json:"sampled_at"`
	Error     string      `json:"error"`
	Counts    *countsView `json:"counts"`
	// Backlog is the coalescer's (-coalesce), nil otherwise or before the
	// first reading.
	Backlog   *backlogView `json:"backlog"`
	History   []point      `json:"history"`
	Stuck     []rowOutView `json:"stuck"`
	Parked    []rowOutView `json:"parked"`
	Scheduled []rowOutView `json:"scheduled"`
	// More says which lists reached the limit.
	More       map[string]bool `json:"more"`
	Leases     []leaseOutView  `json:"leases"`
	LeaseError string          `json:"lease_error"`
	// Pause is the page's pause, nil when not paused.
	Pause *pauseView `json:"pause"`
}

// view returns what page i shows now.
func (m *monitor) view(i int) pageView {
	m.mu.RLock()
	defer m.mu.RUnlock()
	v := pageView{Index: i, Table: m.info.Table, More: map[string]bool{},
		Stuck: []rowOutView{}, Parked: []rowOutView{}, Scheduled: []rowOutView{}, Leases: []leaseOutView{}, History: []point{}}
	if m.info.Table != "" {
		m.viewTable(&v, i)
	}
	if m.info.LeaseTable != "" {
		m.viewLeases(&v)
	}
	return v
}

// viewTable fills v with the claim table's sample of scope i; m.mu is held.
func (m *monitor) viewTable(v *pageView, i int) {
	p := m.pages[i]
	v.Scope = m.info.Scopes[i]
	v.Error = clean(p.err)
	if !p.ok {
		return
	}
	v.SampledAt = p.at.UTC().Format(time.RFC3339)
	c := p.last.Counts
	v.Counts = &countsView{Pending: c.Pending, Processing: c.Processing, Done: c.Done, Failed: c.Failed, Other: c.Other,
		OldestPending: age(c.OldestPending), OldestProcessing: age(c.OldestProcessing)}
	if !m.info.CreatedAt {
		v.Counts.OldestPending = "n/a"
	}
	if c.Processing == 0 {
		v.Counts.OldestProcessing = "-"
	}
	if c.Pending == 0 && m.info.CreatedAt {
		v.Counts.OldestPending = "-"
	}
	if b := p.last.Backlog; b != nil {
		v.Backlog = &backlogView{ChangesTable: m.info.ChangesTable, Dirty: b.Dirty, OldestUnfolded: age(b.Oldest)}
		if b.Oldest == 0 {
			v.Backlog.OldestUnfolded = "-"
		}
	}
	v.History = append(v.History, p.hist...)
	v.Stuck = rowsOut(p.last.Stuck)
	for j := range v.Stuck {
		switch {
		case !m.info.WorkerColumn:
			v.Stuck[j].Worker = noWorkerColumn
		case v.Stuck[j].Worker == "":
			v.Stuck[j].Worker = "-"
		}
	}
	v.Parked = rowsOut(p.last.Parked)
	v.Scheduled = rowsOut(p.last.Scheduled)
	if !m.info.ErrorColumn {
		for _, rows := range [][]rowOutView{v.Parked, v.Scheduled} {
			for j := range rows {
				rows[j].Error = noErrorColumn
			}
		}
	}
	if ps := p.last.Pause; ps != nil {
		v.Pause = &pauseView{Whole: ps.Whole, Reason: clean(ps.Reason), By: clean(ps.By), Since: ps.Since.UTC().Format(time.RFC3339), Age: age(ps.Age)}
	}
	v.More["stuck"] = len(p.last.Stuck) >= m.info.Limit
	v.More["parked"] = len(p.last.Parked) >= m.info.Limit
	v.More["scheduled"] = len(p.last.Scheduled) >= m.info.Limit
}

// viewLeases fills v with the lease table's sample; m.mu is held.
func (m *monitor) viewLeases(v *pageView) {
	v.LeaseError = clean(m.leaseErr)
	for _, l := range m.leases {
		o := leaseOutView{Key: clean(l.Key), State: l.State, Owner: clean(l.Owner), Holder: clean(l.Holder), Fence: l.Fence,
			LockedAt: "-", ExpiresAt: "-", Remaining: "-", Note: l.Note}
		if o.Holder == "" {
			o.Holder = "-"
		}
		if !l.LockedAt.IsZero() {
			o.LockedAt = timeText(&l.LockedAt)
		}
		if !l.ExpiresAt.IsZero() {
			o.ExpiresAt = timeText(&l.ExpiresAt)
		} else if l.Note != "" {
			o.ExpiresAt = "unknown"
		}
		if l.State == "held" {
			o.Remaining = age(l.Remaining)
			if !l.DBClock {
				o.Remaining = "~" + o.Remaining
			}
		}
		v.Leases = append(v.Leases, o)
	}
	v.More["leases"] = len(m.leases) >= m.info.Limit
	if v.SampledAt == "" && m.leaseOK {
		v.SampledAt = m.leaseAt.UTC().Format(time.RFC3339)
	}
}

func rowsOut(rows []rowView) []rowOutView {
	out := make([]rowOutView, len(rows))
	for i, r := range rows {
		out[i] = rowOutView{ID: clean(r.ID), Token: clean(r.Token), Attempts: r.Attempts, Age: age(r.ClaimedAge), RunIn: age(r.RunIn), Error: clean(r.Error), Worker: clean(r.Worker)}
	}
	return out
}

// clean prepares a value from the database for the page: valid UTF-8,
// without NUL bytes, cut to maxShownText characters (the last one "…").
// Escaping is the template's and the script's (textContent) job.
func clean(s string) string {
	if !utf8.ValidString(s) {
		s = strings.ToValidUTF8(s, "\uFFFD")
	}
	s = strings.ReplaceAll(s, "\x00", "\uFFFD")
	if utf8.RuneCountInString(s) > maxShownText {
		n := 0
		for i := range s {
			if n == maxShownText-1 {
				return s[:i] + "…"
			}
			n++
		}
	}
	return s
}
