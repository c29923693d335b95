//go:build race

package claim_test

// raceEnabled: with the race detector, modernc's SQLite (pure Go, so
// instrumented too) runs some 30 times slower, and the stress sizes shrink.
const raceEnabled = true
