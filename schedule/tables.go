package schedule

import (
	"context"
	"fmt"

	"github.com/claimlock/claimlock/dialect"
	"github.com/claimlock/claimlock/internal/store"
)

// CreateTablesDDL returns the statements that create the jobs and runs
// tables (CREATE TABLE IF NOT EXISTS, with the runs table's index) in d's
// syntax, for printing or a migration tool. Empty names mean
// [DefaultJobsTable] and [DefaultRunsTable].
//
// The jobs table: job (the key), the job's lease (owner, lock_at,
// expires_at, fence), paused, and cursor_us, the latest fire time handled.
// The runs table: job and fire_us (the primary key: one row per fire
// time), until_us (the end of a skipped range), status, token and fence
// (of the run's lease), worker, started_us, finished_us and error. Times
// named _us are microseconds since the Unix epoch, UTC.
func CreateTablesDDL(d dialect.Dialect, jobs, runs string) ([]string, error) {
	if d == nil {
		return nil, fmt.Errorf("%w: schedule: nil dialect", dialect.ErrInvalidConfig)
	}
	t := tables(jobs, runs)
	if err := t.Validate(); err != nil {
		return nil, fmt.Errorf("schedule: create tables: %w", err)
	}
	var out []string
	for _, def := range store.ScheduleTableDefs(t) {
		ddl, err := store.CreateTableDDL(d, def)
		if err != nil {
			return nil, fmt.Errorf("schedule: create tables: %w", err)
		}
		out = append(out, ddl...)
	}
	return out, nil
}

// CreateTables creates the jobs and runs tables if they do not exist (see
// [CreateTablesDDL]).
func CreateTables(ctx context.Context, d dialect.Dialect, jobs, runs string) error {
	stmts, err := CreateTablesDDL(d, jobs, runs)
	if err != nil {
		return err
	}
	if err := store.ExecDDL(ctx, d, stmts); err != nil {
		return fmt.Errorf("schedule: create tables: %w", err)
	}
	return nil
}

func tables(jobs, runs string) store.ScheduleTables {
	if jobs == "" {
		jobs = DefaultJobsTable
	}
	if runs == "" {
		runs = DefaultRunsTable
	}
	return store.ScheduleTables{Jobs: jobs, Runs: runs}
}
