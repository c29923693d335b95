package store

import (
	"context"
	"database/sql"
	"fmt"
	"math"
	"strings"
	"unicode/utf8"

	"github.com/claimlock/claimlock/dialect"
	"github.com/claimlock/claimlock/internal/errclass"
	"github.com/claimlock/claimlock/internal/store/render"
)

// This file is the engine-neutral side of scheduled runs (package
// schedule): two library-managed tables and the statements on them.
//
// The jobs table holds one row per job: its lease (owner, lock_at,
// expires_at, fence: the columns of a keyed lease, so a tasklock.Locker
// takes it as it is), whether it is paused, and its cursor: the latest fire
// time handled (run or recorded as skipped), or, before the first one, the
// time the row was made. The runs table holds one row per fire time run
// and one per range of fire times skipped, keyed by (job, fire time).
//
// Every time the statements keep is an integer count of microseconds since
// the Unix epoch: fire times are computed by the caller from a schedule and
// must compare exactly (they are keys), and the others are read back on the
// same scale. Times written by a statement come from the database clock.

// ScheduleTables names a scheduler's two tables (optionally
// schema-qualified).
type ScheduleTables struct {
	Jobs, Runs string
}

// Validate checks both names.
func (t ScheduleTables) Validate() error {
	if err := ValidateIdent("Jobs", t.Jobs); err != nil {
		return err
	}
	if err := ValidateIdent("Runs", t.Runs); err != nil {
		return err
	}
	if strings.EqualFold(t.Jobs, t.Runs) {
		return fmt.Errorf("%w: Jobs and Runs name the same table %q", dialect.ErrInvalidConfig, t.Jobs)
	}
	return nil
}

// The run statuses the runs table holds.
const (
	RunRunning   = "running"
	RunSucceeded = "succeeded"
	RunFailed    = "failed"
	RunLost      = "lost"
	RunSkipped   = "skipped"
)

// MaxJobLen is the longest job name the jobs table holds, in bytes.
const MaxJobLen = 255

// maxRunError bounds the error text a run row keeps, in characters.
const maxRunError = 1000

// ScheduleTableDefs returns the definitions of the jobs and runs tables.
func ScheduleTableDefs(t ScheduleTables) []TableDef {
	return []TableDef{
		{
			Table: t.Jobs,
			Columns: []ColumnDef{
				{Name: "job", Type: TypeText, Len: MaxJobLen, NotNull: true},
				{Name: "owner", Type: TypeText, Len: MaxTokenLen},
				{Name: "lock_at", Type: TypeTime},
				{Name: "expires_at", Type: TypeTime},
				{Name: "fence", Type: TypeInt, NotNull: true, Default: zeroStatus()},
				{Name: "paused", Type: TypeInt, NotNull: true, Default: zeroStatus()},
				{Name: "cursor_us", Type: TypeInt, NotNull: true},
			},
			PrimaryKey: []string{"job"},
		},
		{
			Table: t.Runs,
			Columns: []ColumnDef{
				{Name: "job", Type: TypeText, Len: MaxJobLen, NotNull: true},
				{Name: "fire_us", Type: TypeInt, NotNull: true},
				{Name: "until_us", Type: TypeInt},
				{Name: "status", Type: TypeText, Len: 16, NotNull: true},
				{Name: "token", Type: TypeText, Len: MaxTokenLen},
				{Name: "fence", Type: TypeInt},
				{Name: "worker", Type: TypeText, Len: 255},
				{Name: "started_us", Type: TypeInt},
				{Name: "finished_us", Type: TypeInt},
				{Name: "error", Type: TypeText, Len: maxRunError},
			},
			PrimaryKey: []string{"job", "fire_us"},
			Indexes:    []IndexDef{{Name: IndexName(t.Runs, "status"), Columns: []string{"job", "status"}}},
		},
	}
}

// ScheduleLeaseTable describes the jobs table as the lease table of its
// jobs: one row per job, made by [Schedules.Register] (not keyed: a lease
// never inserts it).
func ScheduleLeaseTable(jobs string) dialect.LeaseTable {
	return dialect.LeaseTable{
		Table: jobs, Key: "job", KeyKind: dialect.IDText, KeyMaxLen: MaxJobLen,
		Owner: "owner", LockedAt: "lock_at", ExpiresAt: "expires_at", Fence: "fence",
	}
}

// Schedules runs the statements on one pair of schedule tables.
type Schedules struct {
	b *Backend
	t ScheduleTables
	// stmts are the statements rendered for the tables (schedulestmts.go).
	stmts statements[scheduleKey]
}

// OpenSchedules validates t and renders d's schedule statements for it.
// Errors wrap [dialect.ErrInvalidConfig].
func OpenSchedules(d dialect.Dialect, t ScheduleTables) (*Schedules, error) {
	b, err := Of(d)
	if err != nil {
		return nil, err
	}
	if err := t.Validate(); err != nil {
		return nil, err
	}
	if b.schedules.Common == "" {
		return nil, fmt.Errorf("%w: %s has no schedule statements", dialect.ErrNotSupported, b.drv.Name())
	}
	s := &Schedules{b: b, t: t}
	if s.stmts, err = b.renderSchedules(t); err != nil {
		return nil, err
	}
	return s, nil
}

// st returns the statement of template t for variant v.
func (s *Schedules) st(t scheduleTmpl, v ScheduleVariant) render.Stmt {
	return s.stmts.get(scheduleKey{t: t, v: v})
}

// Rendered returns every statement rendered, in order: for the golden
// files.
func (s *Schedules) Rendered() []Rendered { return s.stmts.rendered }

// Tables returns the tables' names.
func (s *Schedules) Tables() ScheduleTables { return s.t }

// checkJob validates a job name.
func checkJob(job string) error {
	switch {
	case job == "":
		return fmt.Errorf("%w: empty job name", dialect.ErrInvalidConfig)
	case len(job) > MaxJobLen:
		return fmt.Errorf("%w: job name is %d bytes; the jobs table holds %d", dialect.ErrInvalidConfig, len(job), MaxJobLen)
	case !utf8.ValidString(job) || strings.ContainsRune(job, 0):
		return fmt.Errorf("%w: job name %q is not valid UTF-8 text without NUL", dialect.ErrInvalidConfig, job)
	}
	return nil
}

// CheckJob reports whether job can name a job: non-empty UTF-8 text
// without NUL, at most [MaxJobLen] bytes. The error wraps
// [dialect.ErrInvalidConfig].
func CheckJob(job string) error { return checkJob(job) }

// exec runs one write under the retrier.
func (s *Schedules) exec(ctx context.Context, op string, st render.Stmt, a *render.Args) (int64, error) {
	var n int64
	err := s.b.Do(ctx, op, false, func() error {
		var err error
		n, err = s.b.exec(ctx, s.b.db, st, a)
		return err
	})
	return n, err
}

// Register implements the Register statement: it makes the row of job if
// it has none.
func (s *Schedules) Register(ctx context.Context, job string) error {
	if err := checkJob(job); err != nil {
		return err
	}
	// Idempotent: a re-run after a broken connection makes nothing twice.
	err := s.b.Do(ctx, "schedule register", true, func() error {
		_, err := s.b.exec(ctx, s.b.db, s.st(sRegister, ScheduleVariant{}), &render.Args{Job: job})
		return err
	})
	return err
}

// JobState is a job's row as State reads it.
type JobState struct {
	// Exists is false when the job has no row.
	Exists bool
	// Cursor is the latest fire time handled, or the time the row was
	// made, in microseconds since the epoch.
	Cursor int64
	// Paused is the paused flag.
	Paused bool
	// Now is the database's clock when it was read, in microseconds.
	Now int64
}

// State reads the row of job.
func (s *Schedules) State(ctx context.Context, job string) (JobState, error) {
	var st JobState
	if err := checkJob(job); err != nil {
		return st, err
	}
	err := s.b.Do(ctx, "schedule state", true, func() error {
		var paused int64
		var err error
		st.Exists, err = s.b.queryRow(ctx, s.b.db, s.st(sState, ScheduleVariant{}), &render.Args{Job: job}, &st.Cursor, &paused, &st.Now)
		st.Paused = paused != 0
		return err
	})
	return st, err
}

// ScheduleClaim is one move of a job's cursor, with the rows it records.
type ScheduleClaim struct {
	Job string
	// Prev is the cursor as read; To the cursor after the claim.
	Prev, To int64
	// WinFrom and WinTo bound the database's now at the claim: it commits
	// only while WinFrom <= now < WinTo.
	WinFrom, WinTo int64
	// Run records a run of fire time To under Token and Fence; the job
	// must not be paused.
	Run bool
	// Paused records skipped fire times of a paused job: it must still
	// be paused.
	Paused bool
	Token  string
	Fence  int64
	// SkipFrom and SkipUntil, when SkipUntil > SkipFrom, record the fire
	// times in [SkipFrom, SkipUntil) as skipped, for SkipReason.
	SkipFrom, SkipUntil int64
	SkipReason          string
	// Worker names who records.
	Worker string
	// LostReason is the error recorded on runs found lost.
	LostReason string
}

// ClaimResult says what a claim did.
type ClaimResult struct {
	// Claimed is false when the cursor was not Prev, the job was paused
	// (for a run) or the database's now was outside the window: nothing
	// changed.
	Claimed bool
	// Lost counts the runs found lost and recorded so.
	Lost int64
}

// Claim moves the cursor and records the claim's rows in one transaction:
// the compare-and-set of the cursor decides, so every fire time is
// recorded once, whichever process claims it; the unique key (job, fire
// time) of the runs table is the second line. A duplicate key rolls the
// claim back and reports it not claimed.
func (s *Schedules) Claim(ctx context.Context, c ScheduleClaim) (ClaimResult, error) {
	var res ClaimResult
	if err := checkJob(c.Job); err != nil {
		return res, err
	}
	switch {
	case c.To <= c.Prev:
		return res, fmt.Errorf("schedule claim: %w: the cursor must move forward (%d to %d)", dialect.ErrInvalidConfig, c.Prev, c.To)
	case c.Run && (c.Token == "" || len(c.Token) > MaxTokenLen):
		return res, fmt.Errorf("schedule claim: %w: a run needs a token of 1..%d bytes", dialect.ErrInvalidConfig, MaxTokenLen)
	case c.Run && c.Paused:
		return res, fmt.Errorf("schedule claim: %w: a run of a paused job", dialect.ErrInvalidConfig)
	case c.SkipUntil > c.SkipFrom && (c.SkipFrom <= c.Prev || c.Run && c.SkipUntil > c.To):
		return res, fmt.Errorf("schedule claim: %w: skipped range [%d, %d) outside (%d, %d]", dialect.ErrInvalidConfig, c.SkipFrom, c.SkipUntil, c.Prev, c.To)
	}
	adv := s.st(sAdvance, ScheduleVariant{Skip: true})
	switch {
	case c.Run:
		adv = s.st(sAdvance, ScheduleVariant{Run: true})
	case c.Paused:
		adv = s.st(sAdvance, ScheduleVariant{WhilePaused: true})
	}
	a := &render.Args{Job: c.Job, Prev: c.Prev, Fire: c.To, WinFrom: c.WinFrom, WinTo: c.WinTo}
	err := s.b.Do(ctx, "schedule claim", false, func() error {
		res = ClaimResult{}
		return s.b.InTx(ctx, func(tx Querier) error {
			n, err := s.b.exec(ctx, tx, adv, a)
			if err != nil || n == 0 {
				return err
			}
			lost := &render.Args{Job: c.Job, Slack: defaultSlack, Error: cutError(c.LostReason)}
			if res.Lost, err = s.b.exec(ctx, tx, s.st(sMarkLost, ScheduleVariant{}), lost); err != nil {
				return err
			}
			if c.SkipUntil > c.SkipFrom {
				sk := &render.Args{Job: c.Job, Fire: c.SkipFrom, Until: c.SkipUntil, Worker: c.Worker, Error: cutError(c.SkipReason)}
				if _, err := s.b.exec(ctx, tx, s.st(sInsert, ScheduleVariant{Skip: true}), sk); err != nil {
					return err
				}
			}
			if c.Run {
				r := &render.Args{Job: c.Job, Fire: c.To, Token: c.Token, Fence: c.Fence, Worker: c.Worker}
				if _, err := s.b.exec(ctx, tx, s.st(sInsert, ScheduleVariant{Run: true}), r); err != nil {
					return err
				}
			}
			res.Claimed = true
			return nil
		})
	})
	if classOf(err) == errclass.Duplicate {
		// A row of the claim exists already: someone recorded it (the
		// cursor was moved back by hand?). Nothing was committed.
		return ClaimResult{}, nil
	}
	return res, err
}

// cutError prepares an error text for the runs table: valid UTF-8 without
// NUL, at most maxRunError characters.
func cutError(msg string) string {
	if msg == "" {
		return ""
	}
	msg = strings.ToValidUTF8(msg, "\uFFFD")
	msg = strings.ReplaceAll(msg, "\x00", "\uFFFD")
	if utf8.RuneCountInString(msg) > maxRunError {
		msg = cutRunes(msg, maxRunError)
	}
	return msg
}

// Finish records the end of a run held by token: status (succeeded,
// failed or lost) and its error. It reports false when the run was no
// longer running under token (found lost by another process), in which
// case nothing changed.
func (s *Schedules) Finish(ctx context.Context, job string, fire int64, token, status, msg string) (bool, error) {
	if err := checkJob(job); err != nil {
		return false, err
	}
	switch status {
	case RunSucceeded, RunFailed, RunLost:
	default:
		return false, fmt.Errorf("schedule finish: %w: status %q", dialect.ErrInvalidConfig, status)
	}
	a := &render.Args{Job: job, Fire: fire, Token: token, Status: status, Error: cutError(msg)}
	n, err := s.exec(ctx, "schedule finish", s.st(sFinish, ScheduleVariant{}), a)
	if err == nil && n == 0 && !s.b.caps.Returning {
		// MySQL reports changed rows; the status always changes here, so 0
		// rows means no match.
		return false, nil
	}
	return n > 0, err
}

// Pause sets the paused flag of job.
func (s *Schedules) Pause(ctx context.Context, job string, paused bool) error {
	if err := checkJob(job); err != nil {
		return err
	}
	var flag int64
	if paused {
		flag = 1
	}
	_, err := s.exec(ctx, "schedule pause", s.st(sPause, ScheduleVariant{}), &render.Args{Job: job, Flag: flag})
	return err
}

// RunOf returns the status and token of the run of job at fire, and
// whether there is one.
func (s *Schedules) RunOf(ctx context.Context, job string, fire int64) (status, token string, ok bool, err error) {
	err = s.b.Do(ctx, "schedule run", true, func() error {
		var e error
		ok, e = s.b.queryRow(ctx, s.b.db, s.st(sRun, ScheduleVariant{}), &render.Args{Job: job, Fire: fire}, &status, &token)
		return e
	})
	return status, token, ok, err
}

// RunRow is one row of the runs table.
type RunRow struct {
	Fire, Until       int64 // Until is 0 for a run
	Status            string
	Worker            string
	Fence             int64
	Started, Finished int64 // 0 when unset
	Error             string
}

// History returns the runs of job with a fire time before `before`, newest
// first, at most limit.
func (s *Schedules) History(ctx context.Context, job string, before int64, limit int) ([]RunRow, error) {
	if err := checkJob(job); err != nil {
		return nil, err
	}
	if limit <= 0 || limit > MaxListLimit {
		return nil, fmt.Errorf("schedule history: %w: limit %d is outside 1..%d", dialect.ErrInvalidConfig, limit, MaxListLimit)
	}
	var out []RunRow
	err := s.b.Do(ctx, "schedule history", true, func() error {
		out = out[:0]
		return s.b.query(ctx, s.b.db, s.st(sHistory, ScheduleVariant{}), &render.Args{Job: job, Fire: before, Limit: limit}, func(r Rows) error {
			var row RunRow
			var until, started, finished sql.NullInt64
			if err := r.Scan(&row.Fire, &until, &row.Status, &row.Worker, &row.Fence, &started, &finished, &row.Error); err != nil {
				return err
			}
			row.Until, row.Started, row.Finished = until.Int64, started.Int64, finished.Int64
			out = append(out, row)
			return nil
		})
	})
	return out, err
}

// JobRow is one row of the jobs table as Jobs reads it.
type JobRow struct {
	Job    string
	Paused bool
	Cursor int64
	Now    int64
}

// Jobs lists every job's row, by name.
func (s *Schedules) Jobs(ctx context.Context) ([]JobRow, error) {
	var out []JobRow
	err := s.b.Do(ctx, "schedule jobs", true, func() error {
		out = out[:0]
		return s.b.query(ctx, s.b.db, s.st(sJobs, ScheduleVariant{}), &render.Args{}, func(r Rows) error {
			var row JobRow
			var paused int64
			if err := r.Scan(&row.Job, &paused, &row.Cursor, &row.Now); err != nil {
				return err
			}
			row.Paused = paused != 0
			out = append(out, row)
			return nil
		})
	})
	return out, err
}

// Prune deletes the runs of job older than its keep newest ones (running
// ones stay) and returns how many it deleted.
func (s *Schedules) Prune(ctx context.Context, job string, keep int) (int64, error) {
	if keep <= 0 {
		return 0, fmt.Errorf("schedule prune: %w: keep %d", dialect.ErrInvalidConfig, keep)
	}
	var cut int64
	var found bool
	err := s.b.Do(ctx, "schedule prune", true, func() error {
		var err error
		found, err = s.b.queryRow(ctx, s.b.db, s.st(sCutoff, ScheduleVariant{}), &render.Args{Job: job, Offset: int64(keep - 1)}, &cut)
		return err
	})
	if err != nil || !found {
		return 0, err
	}
	return s.exec(ctx, "schedule prune", s.st(sPrune, ScheduleVariant{}), &render.Args{Job: job, Fire: cut})
}

// VerifySchema checks that both tables exist with the columns the
// statements use.
func (s *Schedules) VerifySchema(ctx context.Context) error {
	for _, def := range ScheduleTableDefs(s.t) {
		cols, err := s.b.catalogColumns(ctx, s.st(sColumns, ScheduleVariant{}), def.Table)
		if err != nil {
			return err
		}
		if len(cols.ByName) == 0 {
			return fmt.Errorf("%w: table %s does not exist (create it with schedule.CreateTables)", dialect.ErrInvalidConfig, def.Table)
		}
		for _, c := range def.Columns {
			if _, ok := cols.Get(c.Name); !ok {
				return fmt.Errorf("%w: table %s has no column %s (it was made for another version; see schedule.CreateTablesDDL)", dialect.ErrInvalidConfig, def.Table, c.Name)
			}
		}
	}
	return nil
}

// NoEnd is the end of a window that never closes.
const NoEnd = math.MaxInt64
