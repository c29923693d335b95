package redisintake

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/claimlock/claimlock/coalesce"
	"github.com/claimlock/claimlock/dialect"
	"github.com/claimlock/claimlock/observe"
)

// MaxVersion is the highest version a [Write] may carry: the scripts
// compare versions as Lua numbers, exact up to 2^53.
const MaxVersion = 1<<53 - 1

// MaxSourceLen bounds [Config.Source].
const MaxSourceLen = 64

// Defaults of [Config].
const (
	DefaultPrefix     = "claimlock:intake:"
	DefaultSource     = "redis"
	DefaultBatchSize  = 64
	DefaultRetryAfter = time.Second
)

// Config configures an [Intake]. Zero values take the documented defaults;
// [New] reports the first bad field in an error wrapping
// [dialect.ErrInvalidConfig].
type Config struct {
	// Prefix starts every Redis key the intake uses: Prefix+"dirty" (the
	// dirty set) and Prefix+"k:"+key (a key's latest state and version);
	// default [DefaultPrefix]. On a Redis Cluster, put a hash tag in it
	// ("{orders}:"): the scripts touch a key's hash and the dirty set
	// together, so every key of one intake lives in one slot.
	Prefix string
	// Source is the coalesce source the intake records its versions under
	// (a key's versions are that source's sequences); default
	// [DefaultSource], at most [MaxSourceLen] bytes. Give each intake
	// sharing coalesce tables a source of its own, and do not write the
	// same keys through [coalesce.Coalescer.Accept] with that source.
	Source string
	// BatchSize is how many dirty keys one [Intake.Drain] moves; default
	// [DefaultBatchSize], at most 10000.
	BatchSize int
	// MaxBacklog, if positive, is how many dirty keys Redis may hold: a
	// write to a clean key beyond it is refused with a
	// [*coalesce.OverloadError] carrying RetryAfter (default
	// [DefaultRetryAfter]). Writes to keys already dirty are accepted: they
	// add no work for the drain.
	MaxBacklog int64
	RetryAfter time.Duration
	// PollMin and PollMax bound the doubling pause of [Intake.Run] while
	// no key is dirty; default 10 ms and 1 s.
	PollMin, PollMax time.Duration
	// Logger receives warnings of Run; nil means slog.Default().
	Logger *slog.Logger
	// Observer, if not nil, is told of every [Intake.Accept] as the
	// coalescer reports its own accepts: an [observe.Event] with Source
	// [observe.SourceCoalesce], Op [coalesce.OpAccept], Table the intake's
	// dirty set (Prefix+"dirty", which tells Redis accepts apart from the
	// coalescer's changes table), Key, Start, Duration, Rows 1 for a write
	// Redis took and 0 for a duplicate or a refusal, and Err (a
	// [*coalesce.StaleError] or [*coalesce.OverloadError] for refusals), so
	// that [coalesce.AcceptResult] and the Prometheus and OpenTelemetry
	// adapters classify them. The drain's moves to SQL are the coalescer's
	// own accepts, reported to its [coalesce.Config.Observer].
	Observer observe.Observer
}

// Write is one client's write of a key's whole state.
type Write struct {
	// Key names the state (a user, a device); 1 to
	// [coalesce.MaxKeyLen] bytes.
	Key string
	// Version orders the key's writes: a write is accepted only above the
	// key's current version (1 to [MaxVersion]).
	Version int64
	// State is the key's whole new state, stored and handed to the fold
	// as given.
	State []byte
}

// Receipt is what [Intake.Accept] returns for a write Redis holds.
type Receipt struct {
	Key     string
	Version int64
	// Duplicate is set for a resend of the key's current version with the
	// same state: nothing was written.
	Duplicate bool
}

// Intake accepts versioned writes of keys' latest states into Redis and
// moves them to a coalescer's tables ([Intake.Drain], [Intake.Run]), where
// the coalescer's flushers fold them into SQL. It is safe for concurrent
// use.
type Intake struct {
	rdb   redis.UniversalClient
	co    *coalesce.Coalescer
	cfg   Config
	dirty string
	// afterRecord, for tests, runs after a version is in SQL and before
	// its dirty mark is compared and deleted.
	afterRecord func(ctx context.Context, key string, version int64)
}

func invalid(field, format string, args ...any) error {
	return fmt.Errorf("redisintake: %w: %s: %s", dialect.ErrInvalidConfig, field, fmt.Sprintf(format, args...))
}

// New returns an intake writing to rdb and draining into co. It does not
// touch Redis or the database. Errors wrap [dialect.ErrInvalidConfig]
// naming the bad field.
func New(rdb redis.UniversalClient, co *coalesce.Coalescer, cfg Config) (*Intake, error) {
	switch {
	case rdb == nil:
		return nil, invalid("rdb", "is nil")
	case co == nil:
		return nil, invalid("co", "is nil")
	case len(cfg.Source) > MaxSourceLen:
		return nil, invalid("Source", "must be at most %d bytes, got %d", MaxSourceLen, len(cfg.Source))
	case cfg.BatchSize < 0 || cfg.BatchSize > 10000:
		return nil, invalid("BatchSize", "must be between 0 and 10000, got %d", cfg.BatchSize)
	case cfg.MaxBacklog < 0, cfg.RetryAfter < 0, cfg.PollMin < 0, cfg.PollMax < 0:
		return nil, invalid("MaxBacklog, RetryAfter, PollMin, PollMax", "must not be negative")
	}
	if cfg.Prefix == "" {
		cfg.Prefix = DefaultPrefix
	}
	if cfg.Source == "" {
		cfg.Source = DefaultSource
	}
	if cfg.BatchSize == 0 {
		cfg.BatchSize = DefaultBatchSize
	}
	if cfg.RetryAfter == 0 {
		cfg.RetryAfter = DefaultRetryAfter
	}
	if cfg.PollMin == 0 {
		cfg.PollMin = 10 * time.Millisecond
	}
	if cfg.PollMax == 0 {
		cfg.PollMax = time.Second
	}
	if cfg.PollMax < cfg.PollMin {
		return nil, invalid("PollMax", "%v is below PollMin %v", cfg.PollMax, cfg.PollMin)
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &Intake{rdb: rdb, co: co, cfg: cfg, dirty: cfg.Prefix + "dirty"}, nil
}

// stateKey is the Redis key of key's hash.
func (in *Intake) stateKey(key string) string { return in.cfg.Prefix + "k:" + key }

// observeAccept reports an accept of key that started at start, with the
// receipt and error it returned.
func (in *Intake) observeAccept(ctx context.Context, start time.Time, key string, r *Receipt, err *error) {
	rows := 0
	if *err == nil && !r.Duplicate {
		rows = 1
	}
	in.cfg.Observer.Observe(ctx, observe.Event{Source: observe.SourceCoalesce, Op: coalesce.OpAccept, Table: in.dirty,
		Key: key, Start: start, Duration: time.Since(start), Rows: rows, Err: *err})
}

// Accept writes w's state and version and marks its key dirty, in one
// Redis script, if w.Version is above the key's current version. It
// returns
//
//   - a receipt with Duplicate set for a resend of the current version
//     with the same state (nothing written);
//   - a [*coalesce.StaleError] (matching [coalesce.ErrStale]; Source is
//     the intake's, Current the key's version in Redis) for a version not
//     above the current one, or the current version with another state;
//   - a [*coalesce.OverloadError] (matching [coalesce.ErrOverloaded]) when
//     [Config.MaxBacklog] keys are dirty and w's key is not;
//   - an error wrapping [dialect.ErrInvalidConfig] for a write out of
//     bounds.
//
// When Accept returns a receipt, Redis holds the write: it reaches SQL
// unless Redis loses it first (see the package documentation on the
// source of truth). Intermediate versions overwritten before a drain
// never reach SQL: the intake keeps the latest state only.
func (in *Intake) Accept(ctx context.Context, w Write) (r Receipt, err error) {
	if in.cfg.Observer != nil {
		defer in.observeAccept(ctx, time.Now(), w.Key, &r, &err)
	}
	switch {
	case w.Key == "" || len(w.Key) > coalesce.MaxKeyLen:
		return Receipt{}, invalid("Write.Key", "must be 1 to %d bytes, got %d", coalesce.MaxKeyLen, len(w.Key))
	case w.Version < 1 || w.Version > MaxVersion:
		return Receipt{}, invalid("Write.Version", "must be 1 to %d, got %d", int64(MaxVersion), w.Version)
	}
	res, err := acceptScript.Run(ctx, in.rdb, []string{in.stateKey(w.Key), in.dirty},
		w.Version, w.State, w.Key, in.cfg.MaxBacklog).Int64Slice()
	if err != nil {
		return Receipt{}, fmt.Errorf("redisintake: accept: %w", err)
	}
	if len(res) != 2 {
		return Receipt{}, fmt.Errorf("redisintake: accept: the script answered %v", res)
	}
	switch res[0] {
	case acceptWritten:
		return Receipt{Key: w.Key, Version: w.Version}, nil
	case acceptDuplicate:
		return Receipt{Key: w.Key, Version: w.Version, Duplicate: true}, nil
	case acceptStale:
		return Receipt{}, &coalesce.StaleError{Key: w.Key, Source: in.cfg.Source, Seq: w.Version, Current: res[1]}
	case acceptFull:
		return Receipt{}, &coalesce.OverloadError{RetryAfter: in.cfg.RetryAfter, Backlog: res[1]}
	}
	return Receipt{}, fmt.Errorf("redisintake: accept: the script answered %v", res)
}

// Versions returns key's accepted version (its version in Redis, zero when
// Redis has none) and its persisted version (the highest version folded
// into SQL by the coalescer's flushers, [coalesce.Coalescer.Versions]).
// persisted >= v means the state of version v, or a later one, is in SQL.
func (in *Intake) Versions(ctx context.Context, key string) (accepted, persisted int64, err error) {
	v, err := in.rdb.HGet(ctx, in.stateKey(key), "v").Int64()
	if err != nil && !errors.Is(err, redis.Nil) {
		return 0, 0, fmt.Errorf("redisintake: versions: %w", err)
	}
	_, persisted, err = in.co.Versions(ctx, key)
	if err != nil {
		return 0, 0, fmt.Errorf("redisintake: versions: %w", err)
	}
	return v, persisted, nil
}

// Backlog returns the number of dirty keys in Redis (written and not yet
// moved to SQL) and how long ago the oldest of them became dirty, on the
// Redis clock. Keys moved to SQL and not yet folded are the coalescer's
// backlog ([coalesce.Coalescer.Backlog]).
func (in *Intake) Backlog(ctx context.Context) (dirty int64, oldest time.Duration, err error) {
	dirty, err = in.rdb.ZCard(ctx, in.dirty).Result()
	if err != nil || dirty == 0 {
		return dirty, 0, wrapBacklog(err)
	}
	first, err := in.rdb.ZRangeWithScores(ctx, in.dirty, 0, 0).Result()
	if err != nil || len(first) == 0 {
		return dirty, 0, wrapBacklog(err)
	}
	now, err := in.rdb.Time(ctx).Result()
	if err != nil {
		return dirty, 0, wrapBacklog(err)
	}
	age := time.Duration(now.UnixMilli()-int64(first[0].Score)) * time.Millisecond
	return dirty, max(age, 0), nil
}

func wrapBacklog(err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("redisintake: backlog: %w", err)
}

// eventID names version v of key from source in the coalescer's changes
// table: the same for every attempt to move it, so a move repeated after
// a crash is recognised as a duplicate. The key is hashed to keep the id
// within [coalesce.MaxEventIDLen] whatever its length.
func eventID(source, key string, v int64) string {
	h := sha256.Sum256([]byte(source + "\x00" + key))
	return "redis:" + hex.EncodeToString(h[:20]) + ":" + strconv.FormatInt(v, 10)
}
