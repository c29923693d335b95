package store

import "github.com/claimlock/claimlock/dialect"

// scheduleData is what a schedule template is executed with.
type scheduleData struct {
	ScheduleNames
	ScheduleVariant
}

// scheduleTmpl is the [ScheduleSQL] template a schedule statement renders.
type scheduleTmpl uint8

const (
	sRegister scheduleTmpl = iota
	sState
	sAdvance
	sMarkLost
	sInsert
	sFinish
	sPause
	sRun
	sHistory
	sJobs
	sCutoff
	sPrune
	sColumns
)

// scheduleKey names one statement of a schedule store: the template it
// renders and the variant it renders it for.
type scheduleKey struct {
	t scheduleTmpl
	v ScheduleVariant
}

// scheduleTable is every statement a schedule store renders, in the order
// of the golden files, each with its name there (completed by its
// variant). Every engine has every one.
var scheduleTable = []struct {
	name string
	key  scheduleKey
}{
	{"register", scheduleKey{t: sRegister}},
	{"state", scheduleKey{t: sState}},
	// A claim moves the cursor for a run, over skipped fire times, or over
	// the fire times of a paused job.
	{"advance", scheduleKey{t: sAdvance, v: ScheduleVariant{Run: true}}},
	{"advance", scheduleKey{t: sAdvance, v: ScheduleVariant{Skip: true}}},
	{"advance", scheduleKey{t: sAdvance, v: ScheduleVariant{WhilePaused: true}}},
	{"mark lost", scheduleKey{t: sMarkLost}},
	{"insert", scheduleKey{t: sInsert, v: ScheduleVariant{Run: true}}},
	{"insert", scheduleKey{t: sInsert, v: ScheduleVariant{Skip: true}}},
	{"finish", scheduleKey{t: sFinish}},
	{"pause", scheduleKey{t: sPause}},
	{"run", scheduleKey{t: sRun}},
	{"history", scheduleKey{t: sHistory}},
	{"jobs", scheduleKey{t: sJobs}},
	{"cutoff", scheduleKey{t: sCutoff}},
	{"prune", scheduleKey{t: sPrune}},
	{"columns", scheduleKey{t: sColumns}},
}

// source returns the template t with the engine's defines; the generic
// statements fill in those the engine leaves empty.
func (c *ScheduleSQL) source(t scheduleTmpl) string {
	pick := func(own, generic string) string {
		if own != "" {
			return own
		}
		return generic
	}
	g := genericScheduleSQL
	return c.Common + map[scheduleTmpl]string{
		sRegister: pick(c.Register, g.Register), sState: pick(c.State, g.State), sAdvance: pick(c.Advance, g.Advance),
		sMarkLost: pick(c.MarkLost, g.MarkLost), sInsert: pick(c.Insert, g.Insert), sFinish: pick(c.Finish, g.Finish),
		sPause: pick(c.Pause, g.Pause), sRun: pick(c.Run, g.Run), sHistory: pick(c.History, g.History),
		sJobs: pick(c.Jobs, g.Jobs), sCutoff: pick(c.Cutoff, g.Cutoff), sPrune: pick(c.Prune, g.Prune),
		sColumns: c.Columns,
	}[t]
}

// describe names the variant, for the name of a rendered statement.
func (v ScheduleVariant) describe() string {
	switch {
	case v.Run:
		return " (run)"
	case v.WhilePaused:
		return " (paused)"
	case v.Skip:
		return " (skipped)"
	}
	return ""
}

// scheduleNames quotes the tables t and their columns.
func (b *Backend) scheduleNames(t ScheduleTables) ScheduleNames {
	q := b.drv.Quote
	return ScheduleNames{
		Jobs: b.quoteName(t.Jobs), Runs: b.quoteName(t.Runs),
		Job: q("job"), Owner: q("owner"), ExpiresAt: q("expires_at"), Fence: q("fence"), Paused: q("paused"), Cursor: q("cursor_us"),
		FireAt: q("fire_us"), Until: q("until_us"), Status: q("status"), Token: q("token"), Worker: q("worker"),
		Started: q("started_us"), Finished: q("finished_us"), Error: q("error"),
		Running: dialect.StatusString(RunRunning).Literal(), Lost: dialect.StatusString(RunLost).Literal(),
		Skipped: dialect.StatusString(RunSkipped).Literal(),
	}
}

// renderSchedules renders every statement of the schedule table for the
// tables t on b's engine.
func (b *Backend) renderSchedules(t ScheduleTables) (statements[scheduleKey], error) {
	var out statements[scheduleKey]
	names := b.scheduleNames(t)
	for _, e := range scheduleTable {
		data := scheduleData{names, e.key.v}
		if err := out.add(b, e.key, "schedule "+e.name+e.key.v.describe(), "", b.schedules.source(e.key.t), data, true); err != nil {
			return out, err
		}
	}
	return out, nil
}
