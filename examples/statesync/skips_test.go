package main

import (
	"testing"

	"github.com/claimlock/claimlock/internal/testkit/dbtest"
)

// TestMain reports the tests that skipped for want of a database server.
func TestMain(m *testing.M) { dbtest.Main(m) }
