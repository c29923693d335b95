//go:build unix

package main

// Environment variables of internal/testkit/dbtest that the engines' tests need.
const (
	envPostgres = "CLAIMLOCK_POSTGRES_DSN"
	envMySQL    = "CLAIMLOCK_MYSQL_DSN"
)

var (
	pg = []string{envPostgres}
	my = []string{envMySQL}
)

// mutations are the deliberate bugs, each anchored on a short snippet that
// must occur exactly once in its file (Count times when set). Engine-neutral
// code is tested on SQLite; an engine's SQL on that engine (PostgreSQL
// through pgxpool, MySQL in the server's default isolation). When the code moves, update the
// snippet (From) and its replacement (To) to the code's new text.
var mutations = []mutation{
	// --- token conditions: a statement that ignores the claim token writes
	// rows another worker has claimed since.
	{Name: "sqlite/ack-token", File: "dialect/sqlite/sql.go",
		From: "{{- template \"ackmark\" .}}\nWHERE {{.Token}} = {{arg \"token\"}} AND {{.ID}} {{keys}}\nRETURNING",
		To:   "{{- template \"ackmark\" .}}\nWHERE {{.ID}} {{keys}}\nRETURNING",
		Pkg:  "./dialect/sqlite", Run: "^TestConformance$/AckLostAfterReclaim"},
	{Name: "sqlite/heartbeat-token", File: "dialect/sqlite/sql.go",
		From: "{{.ClaimedAt}} + 1){{end}}\nWHERE {{.Token}} = {{arg \"token\"}} AND ",
		To:   "{{.ClaimedAt}} + 1){{end}}\nWHERE ",
		Pkg:  "./dialect/sqlite", Run: "^TestConformance$/HeartbeatAndReap"},
	{Name: "sqlite/release-token", File: "dialect/sqlite/sql.go",
		From: "WHERE {{.Token}} = {{arg \"token\"}} AND {{.Status}} = {{.Processing}}{{if .ByKeys}}",
		To:   "WHERE {{.Status}} = {{.Processing}}{{if .ByKeys}}",
		Pkg:  "./dialect/sqlite", Run: "^TestConformance$/Release$"},
	{Name: "sqlite/read-back-token", File: "dialect/sqlite/sql.go",
		From: "FROM {{.Table}} WHERE {{.Token}} = {{arg \"token\"}}{{if .ByKeys}}",
		To:   "FROM {{.Table}} WHERE {{.Token}} IS NOT NULL{{if .ByKeys}}",
		Pkg:  "./dialect/sqlite", Run: "^TestConformance$/Read$"},
	{Name: "postgres/ack-token", File: "dialect/postgres/sql.go",
		From: "{{- template \"ackmark\" .}}\nWHERE {{.Token}} = {{if .Pipelined}}{{arg \"ack_token\"}}{{else}}{{arg \"token\"}}{{end}} AND {{.ID}} {{keys}}",
		To:   "{{- template \"ackmark\" .}}\nWHERE {{.ID}} {{keys}}",
		Pkg:  "./dialect/postgres", Run: "^TestConformancePool$/AckLostAfterReclaim", Env: pg},
	{Name: "postgres/heartbeat-token", File: "dialect/postgres/sql.go",
		From: "SELECT {{.ID}} FROM {{.Table}} WHERE {{.Token}} = {{arg \"token\"}} AND {{.Status}} = {{.Processing}}\n",
		To:   "SELECT {{.ID}} FROM {{.Table}} WHERE {{.Status}} = {{.Processing}}\n",
		Pkg:  "./dialect/postgres", Run: "^TestConformancePool$/HeartbeatAndReap", Env: pg},
	{Name: "postgres/release-token", File: "dialect/postgres/sql.go",
		From: "  WHERE {{.Token}} = {{arg \"token\"}} AND {{.Status}} = {{.Processing}}{{if .ByKeys}}",
		To:   "  WHERE {{.Status}} = {{.Processing}}{{if .ByKeys}}",
		Pkg:  "./dialect/postgres", Run: "^TestConformancePool$/Release$", Env: pg},
	// A heartbeat locks its rows in the table's order, not in key order.
	{Name: "postgres/heartbeat-table-order", File: "dialect/postgres/sql.go",
		From: "{{.Processing}}\n  ORDER BY {{template \"lockorder\" .}} FOR NO KEY UPDATE)\nUPDATE {{.Table}} SET {{.ClaimedAt}}",
		To:   "{{.Processing}}\n  FOR NO KEY UPDATE)\nUPDATE {{.Table}} SET {{.ClaimedAt}}",
		Pkg:  "./dialect/postgres", Run: "^TestConformancePool$/^LockOrder$//^heartbeat$", Env: pg},
	// An ack in the caller's transaction locks its rows in the table's
	// order, not in key order.
	{Name: "postgres/ack-lock-table-order", File: "dialect/postgres/sql.go",
		From: "WHERE {{.Token}} = {{arg \"token\"}} AND {{.ID}} {{keys}}\nORDER BY {{template \"lockorder\" .}} FOR UPDATE`,",
		To:   "WHERE {{.Token}} = {{arg \"token\"}} AND {{.ID}} {{keys}}\nFOR UPDATE`,",
		Pkg:  "./dialect/postgres", Run: "^TestConformancePool$/^LockOrder$//^ack_lock$", Env: pg},
	// Text keys lock in the column's collation, not in byte order.
	{Name: "postgres/lock-order-collation", File: "dialect/postgres/sql.go",
		From: "{{.ID}}::text COLLATE \"C\"",
		To:   "{{.ID}}",
		Pkg:  "./dialect/postgres", Run: "^TestConformancePool$/^LockOrder$/^text$", Env: pg},
	{Name: "postgres/read-back-token", File: "dialect/postgres/sql.go",
		From: "FROM {{.Table}} WHERE {{.Token}} = {{arg \"token\"}}{{if .ByKeys}}",
		To:   "FROM {{.Table}} WHERE {{.Token}} IS NOT NULL{{if .ByKeys}}",
		Pkg:  "./dialect/postgres", Run: "^TestConformancePool$/Read$", Env: pg},
	{Name: "mysql/ack-token", File: "dialect/mysql/sql.go",
		From: "{{- end}}\nWHERE {{.Token}} = {{arg \"token\"}} AND {{.ID}} {{keys}}`,",
		To:   "{{- end}}\nWHERE {{.ID}} {{keys}}`,",
		Pkg:  "./dialect/mysql", Run: "^TestConformance$/AckLostAfterReclaim", Env: my},
	{Name: "mysql/heartbeat-token", File: "dialect/mysql/sql.go",
		From: "INTERVAL 1 MICROSECOND, UTC_TIMESTAMP(6))){{end}}\nWHERE {{.Token}} = {{arg \"token\"}} AND ",
		To:   "INTERVAL 1 MICROSECOND, UTC_TIMESTAMP(6))){{end}}\nWHERE ",
		Pkg:  "./dialect/mysql", Run: "^TestConformance$/HeartbeatAndReap", Env: my},
	{Name: "mysql/release-token", File: "dialect/mysql/sql.go",
		From: "WHERE {{.Token}} = {{arg \"token\"}} AND {{.Status}} = {{.Processing}}{{if .ByKeys}}",
		To:   "WHERE {{.Status}} = {{.Processing}}{{if .ByKeys}}",
		Pkg:  "./dialect/mysql", Run: "^TestConformance$/Release$", Env: my},
	{Name: "mysql/read-back-token", File: "dialect/mysql/sql.go",
		From: "FROM {{.Table}} WHERE {{.Token}} = {{arg \"token\"}}{{if .ByKeys}}",
		To:   "FROM {{.Table}} WHERE {{.Token}} IS NOT NULL{{if .ByKeys}}",
		Pkg:  "./dialect/mysql", Run: "^TestConformance$/Claim$", Env: my},

	// --- SKIP LOCKED dropped: concurrent claims wait for each other's rows.
	{Name: "postgres/claim-skip-locked", File: "dialect/postgres/sql.go",
		From: "    FOR UPDATE SKIP LOCKED) cl_", Count: 2,
		To:  "    FOR UPDATE) cl_",
		Pkg: "./dialect/postgres", Run: "TestClaimsNeverWaitForLocks", Env: pg},
	{Name: "mysql/claim-skip-locked", File: "dialect/mysql/sql.go",
		From: "{{template \"runnable\" .}}\nORDER BY {{.ID}} LIMIT {{arg \"limit\"}} FOR UPDATE SKIP LOCKED`\n",
		To:   "{{template \"runnable\" .}}\nORDER BY {{.ID}} LIMIT {{arg \"limit\"}} FOR UPDATE`\n",
		Pkg:  "./dialect/mysql", Run: "^TestConformance$/ClaimSkipsLockedRows$", Env: my},

	// --- reap timeouts and the time columns' slack: rows and leases taken
	// back before their holder's time is up.
	{Name: "sqlite/reap-timeout", File: "dialect/sqlite/sql.go",
		From: "{{else}} {{template \"now\"}} - {{arg \"timeout\"}}{{end}}",
		To:   "{{else}} {{template \"now\"}}{{end}}",
		Pkg:  "./dialect/sqlite", Run: "^TestConformance$/HeartbeatAndReap"},
	{Name: "postgres/reap-timeout", File: "dialect/postgres/sql.go",
		From: "{{else}}now() - ({{arg \"timeout\"}}::bigint * interval '1 microsecond'){{end}}",
		To:   "{{else}}now(){{end}}",
		Pkg:  "./dialect/postgres", Run: "^TestConformancePool$/HeartbeatAndReap", Env: pg},
	{Name: "core/reap-slack", File: "internal/store/claims.go",
		From: "timeout := p.Timeout + time.Duration(s.slack.Load())",
		To:   "timeout := p.Timeout",
		Pkg:  "./dialect/mysql", Run: "^TestConformance$/SecondPrecision", Env: my},
	{Name: "mysql/lease-acquire-slack", File: "dialect/mysql/sql.go",
		From: "- INTERVAL {{arg \"ttl\"}} MICROSECOND - INTERVAL {{arg \"slack\"}} MICROSECOND{{end}}{{end}})",
		To:   "- INTERVAL {{arg \"ttl\"}} MICROSECOND{{end}}{{end}})",
		Pkg:  "./dialect/mysql", Run: "^TestConformance$/SecondPrecision", Env: my},
	// PostgreSQL's acquire without the rounding margin: a whole-second
	// expires_at (TIMESTAMPTZ(0)) is rounded, up to half a second early.
	{Name: "postgres/lease-acquire-slack", File: "dialect/postgres/sql.go",
		From: "{{.ExpiresAt}} IS NULL OR {{template \"expgone\" .}}{{else}}",
		To:   "{{.ExpiresAt}} IS NULL OR {{.ExpiresAt}} < now(){{else}}",
		Pkg:  "./dialect/postgres", Run: "^TestConformancePool$/SecondPrecision", Env: pg},
	// The lease reap without its margin (in both of its conditions): a
	// whole-second expires_at frees the lease up to a second early.
	{Name: "postgres/lease-reap-slack", File: "dialect/postgres/sql.go",
		From:  "{{.Owner}} IS NOT NULL AND {{template \"expgone\" .}}",
		To:    "{{.Owner}} IS NOT NULL AND {{.ExpiresAt}} < now()",
		Count: 2,
		Pkg:   "./dialect/postgres", Run: "^TestConformancePool$/SecondPrecision", Env: pg},
	{Name: "core/lease-reap-slack", File: "internal/store/leases.go",
		From: "l.st(lReap), &render.Args{Limit: limit, Slack: time.Duration(l.slack.Load())})",
		To:   "l.st(lReap), &render.Args{Limit: limit})",
		Pkg:  "./dialect/mysql", Run: "^TestConformance$/SecondPrecision", Env: my},

	// --- leases: owner checks and the fence.
	{Name: "core/lease-release-owner", File: "internal/store/leasesql.go",
		From: "UPDATE {{.Table}} SET {{template \"free\" .}}\nWHERE {{.Key}} = {{arg \"key\"}} AND {{template \"held\" .}}",
		To:   "UPDATE {{.Table}} SET {{template \"free\" .}}\nWHERE {{.Key}} = {{arg \"key\"}}",
		Pkg:  "./dialect/sqlite", Run: "^TestConformance$/LeaseKeyed$"},
	{Name: "postgres/lease-renew-owner", File: "dialect/postgres/sql.go",
		From: "WHERE {{.Key}} = {{arg \"key\"}} AND {{template \"held\" .}}",
		To:   "WHERE {{.Key}} = {{arg \"key\"}}",
		Pkg:  "./dialect/postgres", Run: "^TestConformancePool$/LeaseKeyed$", Env: pg},
	{Name: "sqlite/lease-fence", File: "dialect/sqlite/sql.go",
		From: "{{.Fence}} = COALESCE({{.Fence}}, 0) + 1",
		To:   "{{.Fence}} = COALESCE({{.Fence}}, 0)",
		Pkg:  "./dialect/sqlite", Run: "^TestConformance$/LeaseKeyed$"},

	// --- the ack: lost rows reported, parking at MaxAttempts (not after).
	{Name: "core/ack-lost-returning", File: "internal/store/ack.go",
		From: "\tres.Lost = missing(got)\n\treturn err\n",
		To:   "\treturn err\n",
		Pkg:  "./dialect/sqlite", Run: "^TestConformance$/AckLostAfterReclaim"},
	{Name: "core/ack-lost-partial", File: "internal/store/ack.go",
		From: "if err == nil && n != int64(idx.distinct()) {",
		To:   "if err == nil && n < 0 {",
		Pkg:  "./dialect/mysql", Run: "^TestConformance$/AckLostAfterReclaim", Env: my},
	{Name: "core/ack-park-off-by-one", File: "internal/store/ack.go",
		From: "h.attempts >= int64(p.MaxAttempts)",
		To:   "h.attempts > int64(p.MaxAttempts)",
		Pkg:  "./dialect/mysql", Run: "^TestConformance$/AckFailAndRetry", Env: my},
	{Name: "sqlite/ack-park-off-by-one", File: "dialect/sqlite/sql.go",
		From: "CASE WHEN COALESCE({{.Attempts}}, 0) >= {{template \"maxatt\" .}} THEN {{.Failed}}",
		To:   "CASE WHEN COALESCE({{.Attempts}}, 0) > {{template \"maxatt\" .}} THEN {{.Failed}}",
		Pkg:  "./dialect/sqlite", Run: "^TestConformance$/AckFailAndRetry"},

	// --- the reaper: parking at MaxAttempts, and its return step taking
	// only rows below it (model/check.sh, REAP_RETURN_BELOW_MAX).
	{Name: "sqlite/reap-park-off-by-one", File: "dialect/sqlite/sql.go",
		From: "{{- if .Park}} AND COALESCE({{.Attempts}}, 0) >= {{template \"maxatt\" .}}",
		To:   "{{- if .Park}} AND COALESCE({{.Attempts}}, 0) > {{template \"maxatt\" .}}",
		Pkg:  "./dialect/sqlite", Run: "^TestConformance$/ReapBoundedAndParks"},
	{Name: "sqlite/reap-return-below-max", File: "dialect/sqlite/sql.go",
		From: "{{else if .Below}} AND COALESCE({{.Attempts}}, 0) < {{arg \"below\"}}{{end}}",
		To:   "{{end}}",
		Pkg:  "./dialect/sqlite", Run: "^TestConformance$/ReapReturnsOnlyBelowMax"},

	// --- retries bounded by the caller's context.
	{Name: "dialect/retry-ignores-context", File: "dialect/retry.go",
		From: "\t\tif !loop.Sleep(ctx, loop.Backoff(attempt-1, p.BaseDelay, p.MaxDelay), nil) {\n\t\t\treturn err\n\t\t}\n",
		To:   "\t\tloop.Sleep(context.Background(), loop.Backoff(attempt-1, p.BaseDelay, p.MaxDelay), nil)\n",
		Pkg:  "./dialect", Run: "^TestRetrierStopsWithContext$"},

	// --- local deadlines measured from the start of the statement that
	// wrote the database's time, and losses that end the batch.
	{Name: "claim/heartbeat-deadline-start", File: "claim/heartbeat.go",
		From: "\tstart := time.Now()\n\theld, err := b.core.cs.Heartbeat(ctx, b.token)\n",
		To:   "\theld, err := b.core.cs.Heartbeat(ctx, b.token)\n\tstart := time.Now()\n",
		Pkg:  "./claim", Run: "TestLocalDeadlineFromStatementStart"},
	{Name: "claim/handler-ignores-row-loss", File: "claim/tx.go",
		From: "b.onRowLoss(i, func(cause error) { cancel(cause) })",
		To:   "b.onLoss(func(cause error) { cancel(cause) })",
		Pkg:  "./claim", Run: "^TestPartialLossRun$/sqlite"},
	{Name: "claim/batch-context-without-hold", File: "claim/context.go",
		From: "context.WithCancelCause(holdctx.With(parent, b.holdErr))",
		To:   "context.WithCancelCause(holdctx.With(parent, func() error { return nil }))",
		Pkg:  "./claim", Run: "^TestHoldCheckAfterFreeze$/sqlite"},
	{Name: "tasklock/hold-check-ignores-clock", File: "tasklock/lease.go",
		From: "\tif !l.k.cfg.Now().Before(l.deadlineNow()) {\n",
		To:   "\tif false {\n",
		Pkg:  "./tasklock", Run: "^TestHoldCheckLease$"},
	{Name: "claim/held-hold-check-ignores-clock", File: "claim/held.go",
		From: "\tif due := b.due.Load(); due != nil && !time.Now().Before(*due) {\n",
		To:   "\tif due := b.due.Load(); false && due != nil {\n",
		Pkg:  "./claim", Run: "^TestHoldCheckHeld$/^postgres$", Env: pg},
	{Name: "claim/claim-deadline-start", File: "claim/claim.go",
		From: "\t\tclaimed = time.Now()\n\t\treturn run(",
		To:   "\t\tdefer func() { claimed = time.Now() }()\n\t\treturn run(",
		Pkg:  "./claim", Run: "TestLocalDeadlineFromStatementStart"},
	{Name: "claim/heartbeat-partial-loss", File: "claim/heartbeat.go",
		From: "\tlostErr := b.closeWritten(\"heartbeat\", missing, allPositions(len(missing)))\n",
		To:   "\tlostErr := b.closeWritten(\"heartbeat\", missing, allPositions(len(missing)))\n\tif lostErr != nil {\n\t\tb.mu.Unlock()\n\t\tb.end(lostErr)\n\t\tb.mu.Lock()\n\t}\n",
		Pkg:  "./claim", Run: "^(TestHeartbeatPartialLoss|TestPartialLossKeepAlive)$/sqlite"},
	{Name: "tasklock/renew-deadline-start", File: "tasklock/lease.go",
		From: "\tstart := cfg.Now()\n\tinfo, err := l.k.ls.Renew(ctx, l.key, l.Owner(), cfg.TTL)\n",
		To:   "\tinfo, err := l.k.ls.Renew(ctx, l.key, l.Owner(), cfg.TTL)\n\tstart := cfg.Now()\n",
		Pkg:  "./tasklock", Run: "TestLeaseDeadlineFromStatementStart"},
	{Name: "tasklock/acquire-deadline-start", File: "tasklock/locker.go",
		From: "\tstart := k.cfg.Now()\n\tinfo, err := k.ls.Acquire(ctx, key, owner, k.cfg.TTL)\n",
		To:   "\tinfo, err := k.ls.Acquire(ctx, key, owner, k.cfg.TTL)\n\tstart := k.cfg.Now()\n",
		Pkg:  "./tasklock", Run: "TestLeaseDeadlineFromStatementStart"},

	// --- time columns: types that do not hold a point in time, integer
	// unix time rounded the unsafe way, delays on whole-second columns.
	{Name: "mysql/date-accepted", File: "dialect/mysql/timecheck.go",
		From: "\tcase c.Type == \"datetime\":\n",
		To:   "\tcase c.Type == \"datetime\" || c.Type == \"date\":\n",
		Pkg:  "./dialect/mysql", Run: "^TestConformance$/TimeColumns", Env: my},
	{Name: "mysql/timestamp-any-zone", File: "dialect/mysql/timecheck.go",
		From: "\tcase c.Type == \"timestamp\" && d.utcSession:\n",
		To:   "\tcase c.Type == \"timestamp\":\n",
		Pkg:  "./dialect/mysql", Run: "^TestTimestampOutsideUTC$", Env: my},
	{Name: "core/int-as-native-time", File: "internal/store/timecols.go",
		From: "if !tc.format.IsUnix() && c.kind() == kindInt && !b.drv.IntTimes() {",
		To:   "if false && !tc.format.IsUnix() && c.kind() == kindInt && !b.drv.IntTimes() {",
		Pkg:  "./dialect/postgres", Run: "^TestConformancePool$/TimeColumns", Env: pg},
	{Name: "core/unix-range", File: "internal/store/timecols.go",
		From: "\tif limit.Before(time.Now().AddDate(1, 0, 0)) {\n",
		To:   "\tif false {\n",
		Pkg:  "./dialect/postgres", Run: "^TestConformancePool$/TimeColumns", Env: pg},
	{Name: "postgres/unix-stale-rounded-up", File: "dialect/postgres/sql.go",
		From: "{{- define \"eago\"}}(({{template \"usnow\"}}{{range .Args}} - {{arg .}}::bigint{{end}}) / {{.Per}}){{end}}",
		To:   "{{- define \"eago\"}}(({{template \"usnow\"}}{{range .Args}} - {{arg .}}::bigint{{end}} + {{.Per}} - 1) / {{.Per}}){{end}}",
		Pkg:  "./dialect/postgres", Run: "^TestConformancePool$/TimeColumns", Env: pg},
	{Name: "sqlite/unix-claim-time-rounded-up", File: "dialect/sqlite/sql.go",
		From: "{{- define \"enow\"}}({{template \"now\"}} / {{.Per}}){{end}}",
		To:   "{{- define \"enow\"}}(({{template \"now\"}} + {{.Per}} - 1) / {{.Per}}){{end}}",
		Pkg:  "./dialect/sqlite", Run: "^TestConformance$/TimeColumns"},
	{Name: "core/run-at-delay-resolution", File: "internal/store/claims.go",
		From: "\treturn d + time.Duration(s.runAtSlack.Load())\n",
		To:   "\treturn d\n",
		Pkg:  "./dialect/mysql", Run: "^TestConformance$/TimeColumns", Env: my},
	// A held batch's deadline without the safety margin: its context
	// ends when the server may already have freed its rows.
	{Name: "claim/held-deadline-margin", File: "claim/held.go",
		From: "return b.lastOK.Add(b.limit - b.margin)",
		To:   "return b.lastOK.Add(b.limit)",
		Pkg:  "./claim", Run: "^TestHeldDeadlineWhenPingsHang$/postgres$", Env: pg},
	// Batch.Err trusting the deadline's timer alone: a process resumed
	// after a freeze sees its batch live and sends again.
	// A held batch's keep-alive that never pings: the server ends an idle
	// transaction at the hold limit, and the local deadline never moves.
	{Name: "claim/held-keepalive-never-pings", File: "claim/held.go",
		From: "\t\treturn b.ping()\n",
		To:   "\t\treturn loop.After(deadline.Sub(now))\n",
		Pkg:  "./claim", Run: "^TestHeldPingsKeepIdleBatch$/^postgres$", Env: pg},
	{Name: "claim/err-ignores-clock", File: "claim/context.go",
		From: "\tif late {\n\t\tb.end(b.deadlineError())\n\t}\n",
		To:   "\t_ = late\n",
		Pkg:  "./claim", Run: "^TestErrAfterFreeze$/sqlite$"},

	// --- outages and renewals: a write of unknown outcome excuses lost
	// rows only while the batch holds them; one failed renewal is retried.
	{Name: "claim/written-before-when-lost", File: "claim/outage.go",
		From: "\treturn !b.lost()\n}",
		To:   "\treturn true\n}",
		Pkg:  "./claim", Run: "^TestUnknownWriteThenLossReported$/sqlite/"},
	{Name: "tasklock/keepalive-gives-up", File: "tasklock/keepalive.go",
		From: "\t\tdefault:\n\t\t\tfailures++\n",
		To:   "\t\tdefault:\n\t\t\treturn loop.End(nil)\n",
		Pkg:  "./tasklock", Run: "^TestKeepAliveOutlastsTransientFailure$/sqlite$"},

	// --- held claims: row locks that other holders skip, parking at
	// MaxAttempts; rows a rolled-back transactional ack left held are
	// released; a table without attempts parks a failure at once. These
	// were caught once only by tests that hung until their timeout, which
	// is now a failure of its own (HUNG).
	{Name: "postgres/held-claim-for-share", File: "dialect/postgres/sql.go",
		From: "FOR NO KEY UPDATE SKIP LOCKED`",
		To:   "FOR SHARE SKIP LOCKED`",
		Pkg:  "./dialect/postgres", Run: "^TestConformancePool$/^Held$", Env: pg},
	{Name: "mysql/held-claim-for-share", File: "dialect/mysql/sql.go",
		From: "FOR UPDATE SKIP LOCKED`,\n\n\tRead:",
		To:   "FOR SHARE SKIP LOCKED`,\n\n\tRead:",
		Pkg:  "./dialect/mysql", Run: "^TestConformance$/^Held$", Env: my},
	{Name: "core/held-park-off-by-one", File: "internal/store/held.go",
		From: "if att+1 >= int64(p.MaxAttempts) {",
		To:   "if att+1 > int64(p.MaxAttempts) {",
		Pkg:  "./dialect/postgres", Run: "^TestConformancePool$/^Held$", Env: pg},
	// A hold whose context ended while its statements returned is handed
	// out: on MySQL the driver had closed the connection, and the batch
	// held nothing.
	{Name: "core/held-hands-out-cut-short", File: "internal/store/held.go",
		From: "if err == nil && ctx.Err() != nil {",
		To:   "if err == nil && ctx.Err() != nil && false {",
		Pkg:  "./dialect/postgres", Run: "^TestConformancePool$/^HeldCutShort$", Env: pg},
	// A failed claim's release that found nothing is not tried again: rows
	// the server marked after the claim returned (MySQL finishes a claim
	// whose connection the driver closed) stay processing until a reaper.
	{Name: "claim/no-late-release", File: "claim/claim.go",
		From: "\t\t\t\tk.releaseLate(ctx, token, claimed)\n",
		To:   "\t\t\t\t_ = claimed\n",
		Pkg:  "./claim", Run: "^TestClaimFinishedLate$/^sqlite$"},
	// A late release that failed with an error that may pass (a server
	// out of connections) ends the late releases: the claim's rows stay
	// processing until a reaper.
	{Name: "claim/late-release-stops-on-outage", File: "claim/claim.go",
		From: "\t\treturn n > 0\n",
		To:   "\t\treturn err != nil || n > 0\n",
		Pkg:  "./claim", Run: "^TestClaimFinishedLate$/^sqlite$/^token-update$/^late-releases-fail$"},
	// A release retried after an outage that finds nothing yet, after a
	// claim of unknown outcome, does not go on late.
	{Name: "claim/retried-release-not-late", File: "claim/claim.go",
		From: "\t\t\tif released == 0 && unknown {\n",
		To:   "\t\t\tif released == 0 && unknown && false {\n",
		Pkg:  "./claim", Run: "^TestClaimFinishedLate$/^sqlite$/^token-update$/^first-release-fails$"},
	// The releases after an acquisition of unknown outcome end at the
	// first error, also one that may pass.
	{Name: "tasklock/late-release-stops-on-error", File: "tasklock/locker.go",
		From: "\t\tif err != nil && (late.IsZero() || dialect.IsPermanent(err)) {\n",
		To:   "\t\tif err != nil {\n",
		Pkg:  "./tasklock", Run: "^TestAcquireFinishedLate$/^sqlite$/^failed-releases-3$"},
	{Name: "tasklock/late-undo-stops-on-error", File: "tasklock/locker.go",
		From: "\t\t\treturn ok\n\t\t})\n",
		To:   "\t\t\treturn ok || err != nil\n\t\t})\n",
		Pkg:  "./tasklock", Run: "^TestAcquireFinishedLate$/^sqlite$/^failed-releases-3$"},
	// A lease acquisition of unknown outcome whose release found no hold
	// is not released again: an acquisition the server made after Acquire
	// returned keeps the key from every holder until the TTL.
	{Name: "tasklock/no-late-release", File: "tasklock/locker.go",
		From: "\t\tif ok || late.IsZero() {\n",
		To:   "\t\tif ok || late.IsZero() || true {\n",
		Pkg:  "./tasklock", Run: "^TestAcquireFinishedLate$/^sqlite$"},
	// A savepoint rollback of a held batch that keeps the rows settled
	// that the rollback undid: the held claim, the one record of the
	// batch's open rows, refuses to fail them, and Holder.Run cannot
	// record the failure of a handler that acked some rows first.
	{Name: "claim/held-savepoint-keeps-settled", File: "internal/store/held.go",
		From: "\th.keys = maps.Clone(h.saved)\n",
		To:   "\t_ = h.saved\n",
		Pkg:  "./claim", Run: "^TestHeldOpenRowsFollowTheStore$/^postgres$", Env: pg},
	// A held ack the store refused before writing (a key of the wrong
	// type) ends the whole batch instead of failing that call.
	{Name: "claim/held-refused-ack-ends-batch", File: "claim/held.go",
		From: "\t\tcase err != nil && !errors.Is(err, dialect.ErrClaimLost):\n",
		To:   "\t\tcase false:\n",
		Pkg:  "./claim", Run: "^TestHeldAckWrongKeyType$/^postgres$", Env: pg},
	// A held batch's fail that gives the backoff the attempts the claim
	// read, as if the claim had counted one: a held claim counts none, so
	// the failure's own attempt is the next.
	{Name: "claim/held-fail-backoff-uncounted", File: "claim/held.go",
		From: "return k.retryDelay(b.attempts(id) + 1)",
		To:   "return k.retryDelay(b.attempts(id))",
		Pkg:  "./claim", Run: "^TestHeldFailRules$/^postgres$", Env: pg},
	{Name: "claim/release-forgets-acktx", File: "claim/batch.go",
		From: "all := append(slices.Clone(idx), b.inTx...)",
		To:   "all := slices.Clone(idx)",
		Pkg:  "./claim", Run: "^TestRunAckTxExactlyOneEffect$/^sqlite$"},
	{Name: "claim/no-attempts-retried-forever", File: "claim/fail.go",
		From: "park: k.spec.Attempts == \"\"}",
		To:   "park: false}",
		Pkg:  "./claim", Run: "^TestCompose$/^sqlite$/^minimal$"},

	// --- scheduled runs: a run is recorded lost only once its lease is
	// gone, and every fire time claim waits for the fire time on the
	// database clock.
	{Name: "store/schedule-marks-live-runs-lost", File: "internal/store/schedulesql.go",
		From: "WHERE {{.Job}} = {{arg \"job\"}} AND {{template \"live\" .}}), '')",
		To:   "WHERE {{.Job}} = {{arg \"job\"}} AND 1 = 0), '')",
		Pkg:  "./schedule", Run: "^TestOverlap$/^sqlite$"},
	{Name: "store/schedule-claims-before-fire-time", File: "internal/store/schedulesql.go",
		From: "AND {{template \"usnow\"}} >= {{arg \"win_from\"}} AND",
		To:   "AND {{arg \"win_from\"}} = {{arg \"win_from\"}} AND",
		Pkg:  "./schedule", Run: "^TestClaimStatements$/^sqlite$"},

	// --- the reaper's leadership: a lost lease is given up and taken
	// again, or a single reaper never sweeps again.
	{Name: "zombie/run-keeps-lost-lease", File: "zombie/reaper.go",
		From: "\t\t\tdrop()\n\t\t}\n\t\tif lease == nil {",
		To:   "\t\t}\n\t\tif lease == nil {",
		Pkg:  "./zombie", Run: "^TestRunRetakesLostLease$/.*/sqlite$"},

	// --- the reaper's own outage: without the grace, it takes on
	// reconnect the rows of holders that could not reach the database
	// either, and their late acks re-run them.
	{Name: "zombie/no-outage-grace", File: "zombie/reaper.go",
		From: "res, err := r.sweep(ctx, r.grace.timeout(r.timeout, start))",
		To:   "res, err := r.sweep(ctx, r.timeout)",
		Pkg:  "./zombie", Run: "^TestOutageGrace$/sqlite$"},

	// --- Run's acks and releases that stop at the local deadline (or at
	// the deadline plus the reap timeout) leave rows whose work was done,
	// or never began, to the reaper: run again, with an attempt counted.
	{Name: "claim/run-ack-stops-at-deadline", File: "claim/outage.go",
		From: "if bounded && b.pastBound(pause) {",
		To:   "if dl, ok := b.Deadline(); ok && !time.Now().Add(pause).Before(dl) {",
		Pkg:  "./claim", Run: "^TestRunAckOutlastsLocalDeadline$/sqlite/lands$"},
	{Name: "claim/run-ack-stops-at-reap-timeout", File: "claim/outage.go",
		From: "if bounded && b.pastBound(pause) {",
		To:   "if b.pastBound(pause) {",
		Pkg:  "./claim", Run: "^TestRunAckOutlastsLocalDeadline$/sqlite/beyond$"},
	{Name: "claim/release-stops-at-deadline", File: "claim/outage.go",
		From: "\t\tb.core.logger.Warn(\"claimlock: release failed; trying again\"",
		To:   "\t\tif dl, ok := b.Deadline(); ok && !time.Now().Add(pause).Before(dl) {\n\t\t\tbreak\n\t\t}\n\t\tb.core.logger.Warn(\"claimlock: release failed; trying again\"",
		Pkg:  "./claim", Run: "^TestRunReleaseOutlastsLocalDeadline$/sqlite/lands$"},
	{Name: "claim/release-stops-at-reap-timeout", File: "claim/outage.go",
		From: "\t\tb.core.logger.Warn(\"claimlock: release failed; trying again\"",
		To:   "\t\tif b.pastBound(pause) {\n\t\t\tbreak\n\t\t}\n\t\tb.core.logger.Warn(\"claimlock: release failed; trying again\"",
		Pkg:  "./claim", Run: "^TestRunReleaseOutlastsLocalDeadline$/sqlite/beyond$"},

	// --- a keep-alive after an outage: waiting for the next tick leaves
	// the rows unheartbeaten for up to an interval after the database is
	// back, while the reaper's clock runs.
	{Name: "claim/heartbeat-waits-next-tick", File: "claim/heartbeat.go",
		From: "next = min(interval, loop.Backoff(failures, outageRetryBase, outageRetryMax))",
		To:   "next = min(interval, loop.Backoff(failures, outageRetryBase, outageRetryMax)) + interval",
		Pkg:  "./claim", Run: "^TestKeepAliveAfterOutage$"},

	// --- fair claim order: the rotating cursor, or rows that go back to
	// pending at once starve every higher key.
	{Name: "store/claims-from-lowest-key", File: "internal/store/cursor.go",
		From: "\tif c.key == nil {\n\t\treturn lowest(kind)\n\t}\n\treturn c.key\n",
		To:   "\treturn lowest(kind)\n",
		Pkg:  "./claim", Run: "^TestFairOrderUnderRepending$/^sqlite$"},

	// --- the coalescer's fold protocol (model/coalesce.pml's mutants, in
	// the code): each loses a change accepted while its key is flushed.
	{Name: "coalesce/bump-processing-status", File: "coalesce/sql.go",
		From: "WHERE change_key = ? AND CASE WHEN status = '\" + statusProcessing + \"' THEN version END = ?\")",
		To:   "WHERE change_key = ? AND version = ?\")",
		Pkg:  "./coalesce", Run: "^TestMarkRacesFlushCompletion$/postgres$", Env: pg},
	{Name: "coalesce/skip-processing", File: "coalesce/coalescer.go",
		From: "case st == statusProcessing && ver > flushed:",
		To:   "case st == statusProcessing:",
		Pkg:  "./coalesce", Run: "^TestChangeDuringFold$/postgres$", Env: pg},
	{Name: "coalesce/no-start-flush", File: "coalesce/sql.go",
		From: "SET flush_version = version WHERE change_key = ANY",
		To:   "SET flush_version = flush_version WHERE change_key = ANY",
		Pkg:  "./coalesce", Run: "^TestChangeDuringFold$/postgres$", Env: pg},
	{Name: "coalesce/ack-without-version", File: "coalesce/tables.go",
		From: "Attempts: \"attempts\", Version: \"version\", RunAt:",
		To:   "Attempts: \"attempts\", RunAt:",
		Pkg:  "./coalesce", Run: "^TestChangeDuringFold$/postgres$", Env: pg},
	{Name: "coalesce/no-bump-held", File: "coalesce/flusher.go",
		From: "if len(recs) == f.cfg.MaxChanges {",
		To:   "if false {",
		Pkg:  "./coalesce", Run: "^TestMaxChanges$/^sqlite$"},
	{Name: "coalesce/read-folded-changes", File: "coalesce/sql.go",
		From: "WHERE change_key = ? AND folded_at IS NULL ORDER BY",
		To:   "WHERE change_key = ? ORDER BY",
		Pkg:  "./coalesce", Run: "^TestAcceptAndFlush$/sqlite$"},
	{Name: "coalesce/stale-equal-sequence", File: "coalesce/sql.go",
		From: "AND source = ? AND last_seq < ?\")",
		To:   "AND source = ? AND last_seq <= ?\")",
		Pkg:  "./coalesce", Run: "^TestAcceptAndFlush$/sqlite$"},
	// The dirty mark after a commit on the caller's context: a caller
	// gone right after the commit leaves its key unmarked.
	{Name: "coalesce/mark-on-caller-context", File: "coalesce/coalescer.go",
		From: "detach.Run(ctx, markTimeout, func(ctx context.Context) {",
		To:   "detach.Run(ctx, markTimeout, func(context.Context) {",
		Pkg:  "./coalesce", Run: "^TestAcceptMarksAfterCallerGone$/sqlite$"},
	// A group that keeps an event id sent twice in one transaction: the
	// batch refuses it whole, and every Accept of the group fails.
	{Name: "coalesce/group-no-split", File: "coalesce/group.go",
		From: "if seen[chs[i].EventID] {",
		To:   "if false && seen[chs[i].EventID] {",
		Pkg:  "./coalesce", Run: "^TestGroupedDuplicatesInOneRun$/sqlite$"},
	// Grouped changes recorded with the results of other changes.
	{Name: "coalesce/group-wrong-result", File: "coalesce/group.go",
		From: "outs[i], errs[i] = res[j].Receipt, res[j].Err",
		To:   "outs[i], errs[i] = res[len(now)-1-j].Receipt, res[len(now)-1-j].Err",
		Pkg:  "./coalesce", Run: "^TestGroupedDuplicatesInOneRun$/sqlite$"},
	// A group whose ack found a key lost commits its other keys' folds
	// and the lost key's with them.
	{Name: "coalesce/group-commit-despite-lost", File: "coalesce/foldgroup.go",
		From: "acked, lost = true, err\n\t\t\treturn nil",
		To:   "acked, lost = true, err\n\t\t\treturn tx.Commit()",
		Pkg:  "./coalesce", Run: "^TestKeysPerTxLostKey$/sqlite$"},
	// A group whose fold failed leaves its keys to the release instead of
	// folding them one per transaction: the good keys wait a round, and
	// the failing key is never failed.
	{Name: "coalesce/group-no-fallback", File: "coalesce/foldgroup.go",
		From: "return false, nil",
		To:   "return true, nil",
		Pkg:  "./coalesce", Run: "^TestKeysPerTxFoldFailure$/sqlite$"},
	// A group marks only some of its changes folded.
	{Name: "coalesce/group-marks-some", File: "coalesce/foldgroup.go",
		From: "recIDs = append(recIDs, r.ID)",
		To:   "recIDs = append(recIDs[:0], r.ID)",
		Pkg:  "./coalesce", Run: "^TestKeysPerTxMaxChanges$/sqlite$"},
	// Dirty marks of several keys lock their rows in the table's order on
	// PostgreSQL, not the keys' byte order of a flush's grouped folds.
	{Name: "coalesce/marks-physical-order", File: "coalesce/sql.go",
		From: "if e != engPostgres {\n\t\treturn batchStmt",
		To:   "if true {\n\t\treturn batchStmt",
		Pkg:  "./coalesce", Run: "^TestMarksLockKeysInByteOrder$/^postgres$", Env: pg},
	// AcceptBatchTx marks its keys in the order of its changes, not the
	// keys' byte order.
	{Name: "coalesce/batch-tx-marks-unsorted", File: "coalesce/batch.go",
		From: "slices.Sort(keys)\n\tkeys = slices.Compact(keys)",
		To:   "keys = slices.Compact(keys)",
		Pkg:  "./coalesce", Run: "^TestAcceptBatchTxMarksInByteOrder$/^mysql$", Env: my},
	// A flush's start locks its batch's keys in the table's order on
	// PostgreSQL, not the marks' byte order.
	{Name: "coalesce/start-flush-table-order", File: "coalesce/sql.go",
		From: "if e == engPostgres {\n\t\ts.startFlush",
		To:   "if false {\n\t\ts.startFlush",
		Pkg:  "./coalesce", Run: "^TestStartFlushLocksKeysInByteOrder$/^postgres$", Env: pg},
	// A held batch's fail gives the store a negative backoff as it is.
	{Name: "claim/held-negative-backoff", File: "claim/held.go",
		From: "return k.retryDelay(b.attempts(id) + 1)",
		To:   "return k.backoff(int(b.attempts(id)) + 1)",
		Pkg:  "./claim", Run: "^TestNegativeBackoff$/^postgres$", Env: pg},
	// Held claims that share a cursor do not take turns: claims started
	// together race along the same keys (the store's side, and MySQL's
	// flag).
	{Name: "store/held-no-turns", File: "internal/store/held.go",
		From: "\t\t\tselect {\n\t\t\tcase c.turn <- struct{}{}:\n\t\t\tcase <-ctx.Done():\n\t\t\t\treturn 0, ctx.Err()\n\t\t\t}\n\t\t\tdefer func() { <-c.turn }()\n",
		To:   "",
		Pkg:  "./dialect/mysql", Run: "^TestConformance$/^HeldTurns$", Env: my},
	{Name: "mysql/held-no-turns", File: "dialect/mysql/sql.go",
		From: "Turns: true,",
		To:   "Turns: false,",
		Pkg:  "./dialect/mysql", Run: "^TestConformance$/^HeldTurns$", Env: my},
	// A claim waiting for its turn does not end with its context.
	{Name: "store/held-turn-ignores-context", File: "internal/store/held.go",
		From: "\t\t\tselect {\n\t\t\tcase c.turn <- struct{}{}:\n\t\t\tcase <-ctx.Done():\n\t\t\t\treturn 0, ctx.Err()\n\t\t\t}\n",
		To:   "\t\t\tc.turn <- struct{}{}\n",
		Pkg:  "./dialect/mysql", Run: "^TestConformance$/^HeldTurns$", Env: my},
	// The cursor stays where it was after a full batch.
	{Name: "store/held-cursor-stays", File: "internal/store/held.go",
		From: "\tcase last > c.key:\n\t\tc.key = last\n",
		To:   "",
		Pkg:  "./dialect/mysql", Run: "^TestConformance$/^HeldTurns$", Env: my},
	// A held claim from the lowest key starts above the first pending key
	// its look found, not at it (MySQL).
	{Name: "store/held-look-past-first", File: "internal/store/held.go",
		From: "a.From = k - 1",
		To:   "a.From = k",
		Pkg:  "./claim", Run: "^TestHeldClaimFromTheFirstPendingKey$/^mysql$/^integer-keys$", Env: my},
	// A held claim of text keys whose look found a pending key holds
	// nothing (MySQL).
	{Name: "store/held-look-text-holds-nothing", File: "internal/store/held.go",
		From: "\n\treturn h.claimWith(ctx, low, a, scan)\n}",
		To:   "\n\treturn 0, nil\n}",
		Pkg:  "./claim", Run: "^TestHeldClaimFromTheFirstPendingKey$/^mysql$/^text-keys$", Env: my},
	// A held batch's ack does not name the primary key once the schema is
	// verified (the store's side, and MySQL's template).
	{Name: "store/held-ack-unhinted", File: "internal/store/held.go",
		From: "to: to, v: s.hinted(ClaimVariant{})}",
		To:   "to: to}",
		Pkg:  "./claim", Run: "^TestHeldAckReadsOnlyItsRows$/^mysql$/^delete$", Env: my},
	{Name: "mysql/held-delete-unhinted", File: "dialect/mysql/sql.go",
		From: "DELETE {{.Table}} FROM {{.Table}}{{template \"keyhint\" .}} WHERE",
		To:   "DELETE {{.Table}} FROM {{.Table}} WHERE",
		Pkg:  "./claim", Run: "^TestHeldAckReadsOnlyItsRows$/^mysql$/^delete$", Env: my},
	// The callers that waited for a check that passed run it again.
	{Name: "checkonce/waiters-check-again", File: "internal/checkonce/checkonce.go",
		From: "\tdefer func() { <-c.turn }()\n\tif c.passed.Load() {\n\t\treturn nil\n\t}\n",
		To:   "\tdefer func() { <-c.turn }()\n",
		Pkg:  "./claim", Run: "^TestSchemaCheckedOnce$/^sqlite$/^together$"},
	// Callers that start together run their checks at once.
	{Name: "checkonce/no-turn", File: "internal/checkonce/checkonce.go",
		From: "turn: make(chan struct{}, 1)",
		To:   "turn: make(chan struct{}, 64)",
		Pkg:  "./tasklock", Run: "^TestAcquisitionsAtOnceCheckOnce$"},
}
