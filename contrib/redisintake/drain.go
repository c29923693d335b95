package redisintake

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"time"

	"github.com/claimlock/claimlock/coalesce"
	"github.com/claimlock/claimlock/dialect"
)

// Drain moves up to [Config.BatchSize] dirty keys, oldest first, from
// Redis to the coalescer's tables and returns how many it looked at. For
// each key:
//
//  1. read its latest state and version from Redis;
//  2. record them with [coalesce.Coalescer.Accept] as a change of the
//     intake's Source whose sequence is the version and whose event id
//     names (source, key, version): committed in SQL, the key dirty for
//     the coalescer's flushers. A version already recorded (a drain that
//     died before step 3) is a duplicate; a version not above one SQL has
//     is a stale refusal: either way SQL holds it or a later one, and
//     nothing is written;
//  3. compare-and-delete the key's dirty mark in Redis: deleted only if
//     the key's version is still the one recorded, so a write accepted
//     during the drain keeps the key dirty for the next one. When SQL had
//     a later version (Redis lost writes it had moved; logged as a
//     warning), the key's version in Redis is raised to SQL's, so that
//     older versions are refused at once from then on.
//
// A crash between any two steps leaves the key dirty in Redis, and the
// next drain repeats steps 1 to 3 without recording anything twice. An
// older version never replaces a newer one in SQL: the coalescer refuses
// a sequence not above its source's last, and its flushers fold one key's
// changes in sequence order. Several drains may run at once, in any
// processes: two that move the same key record it once.
//
// A refusal of the coalescer's backpressure ([coalesce.ErrOverloaded])
// ends the round with that error, leaving the remaining keys dirty; other
// errors of one key are joined and returned after the round.
func (in *Intake) Drain(ctx context.Context) (int, error) {
	keys, err := in.rdb.ZRange(ctx, in.dirty, 0, int64(in.cfg.BatchSize-1)).Result()
	if err != nil {
		return 0, fmt.Errorf("redisintake: drain: %w", err)
	}
	var errs []error
	for _, key := range keys {
		err := in.move(ctx, key)
		if err == nil {
			continue
		}
		errs = append(errs, fmt.Errorf("key %q: %w", key, err))
		if errors.Is(err, coalesce.ErrOverloaded) || ctx.Err() != nil {
			break
		}
	}
	if len(errs) > 0 {
		return len(keys), fmt.Errorf("redisintake: drain: %w", errors.Join(errs...))
	}
	return len(keys), nil
}

// move records key's latest version in SQL and compare-and-deletes its
// dirty mark.
func (in *Intake) move(ctx context.Context, key string) error {
	vals, err := in.rdb.HMGet(ctx, in.stateKey(key), "v", "p").Result()
	if err != nil {
		return err
	}
	mark := ""  // the version whose recording clears the mark; none for a key with no hash
	raise := "" // SQL's version, when above Redis's
	var v int64
	if s, ok := vals[0].(string); ok {
		p, _ := vals[1].(string)
		if v, err = strconv.ParseInt(s, 10, 64); err != nil {
			return fmt.Errorf("version %q in Redis: %w", s, err)
		}
		_, err = in.co.Accept(ctx, coalesce.Change{
			Key: key, EventID: eventID(in.cfg.Source, key, v),
			Source: in.cfg.Source, Seq: v, Payload: []byte(p),
		})
		var stale *coalesce.StaleError
		if errors.As(err, &stale) {
			// SQL has this version (its change pruned) or a later one
			// (Redis lost writes it had moved): nothing to record, and
			// Redis learns SQL's version.
			if stale.Current > v {
				raise = strconv.FormatInt(stale.Current, 10)
			}
			err = nil
		}
		if err != nil {
			return err
		}
		mark = s
	}
	if in.afterRecord != nil {
		in.afterRecord(ctx, key, v)
	}
	n, err := cleanScript.Run(ctx, in.rdb, []string{in.stateKey(key), in.dirty}, mark, key, raise).Int64()
	if err == nil && raise != "" && n >= 0 {
		// Not when the version moved: then another drain recorded a
		// later version before this one, and Redis lost nothing.
		in.cfg.Logger.Warn("redisintake: SQL has a later version than Redis: Redis lost writes; the older state is not applied",
			"key", key, "redis", v, "sql", raise)
	}
	return err
}

// Run drains until ctx ends, then returns nil: it calls [Intake.Drain] in a
// loop, pausing with a jittered, doubling backoff between PollMin and
// PollMax while no key is dirty, and PollMax after an error (logged).
// Errors that running again cannot cure ([dialect.IsPermanent]) stop it.
// Run the coalescer's flushers ([coalesce.Flusher.Run]) beside it: they
// fold what it moves.
func (in *Intake) Run(ctx context.Context) error {
	idle := 0
	for ctx.Err() == nil {
		n, err := in.Drain(ctx)
		var pause time.Duration
		switch {
		case ctx.Err() != nil:
			return nil
		case err != nil && dialect.IsPermanent(err):
			return err
		case err != nil:
			in.cfg.Logger.Warn("redisintake: drain", "err", err)
			pause = in.cfg.PollMax
		case n == 0:
			d := idlePause(in.cfg.PollMin, in.cfg.PollMax, idle)
			pause = d/2 + rand.N(d/2+1)
			idle++
		default:
			idle = 0
		}
		if pause > 0 {
			t := time.NewTimer(pause)
			select {
			case <-ctx.Done():
			case <-t.C:
			}
			t.Stop()
		}
	}
	return nil
}

// Latest returns the change of the highest version among a fold's
// changes: the key's latest state moved by the intake, which is what a
// fold of whole states writes (the others are older states). It returns
// false for no changes.
func Latest(changes []coalesce.Record) (coalesce.Record, bool) {
	if len(changes) == 0 {
		return coalesce.Record{}, false
	}
	best := changes[0]
	for _, ch := range changes[1:] {
		if ch.Seq > best.Seq {
			best = ch
		}
	}
	return best, true
}

// idlePause is PollMin doubled idle times, capped at PollMax; it doubles
// only while below the cap, so that no PollMin (hours included) overflows.
func idlePause(pollMin, pollMax time.Duration, idle int) time.Duration {
	d := pollMin
	for i := 0; i < idle && d < pollMax; i++ {
		if d > pollMax/2 {
			return pollMax
		}
		d *= 2
	}
	return min(d, pollMax)
}
