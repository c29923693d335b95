//go:build !race

package claim_test

const raceEnabled = false
