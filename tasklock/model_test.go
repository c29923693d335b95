package tasklock_test

import (
	"testing"

	"github.com/anishathalye/porcupine"
	"github.com/stretchr/testify/require"
)

// The mutex model used by the contention test rejects the histories it
// exists to catch.
func TestMutexModelRejectsViolations(t *testing.T) {
	t.Parallel()
	acq := func(c int, call, ret int64, fence int64) porcupine.Operation {
		return porcupine.Operation{ClientId: c, Input: mutexInput{client: c}, Call: call, Output: mutexOutput{ok: fence > 0, fence: fence}, Return: ret}
	}
	rel := func(c int, call, ret int64, fence int64) porcupine.Operation {
		return porcupine.Operation{ClientId: c, Input: mutexInput{release: true, client: c, fence: fence}, Call: call, Output: mutexOutput{ok: true}, Return: ret}
	}
	cases := map[string]struct {
		ok      bool
		history []porcupine.Operation
	}{
		"sequential holders":   {true, []porcupine.Operation{acq(0, 0, 1, 1), rel(0, 2, 3, 1), acq(1, 4, 5, 2), rel(1, 6, 7, 2)}},
		"concurrent attempts":  {true, []porcupine.Operation{acq(0, 0, 10, 1), acq(1, 0, 10, 0), rel(0, 11, 12, 1)}},
		"two holders overlap":  {false, []porcupine.Operation{acq(0, 0, 1, 1), acq(1, 2, 3, 2), rel(0, 4, 5, 1), rel(1, 6, 7, 2)}},
		"fence not increasing": {false, []porcupine.Operation{acq(0, 0, 1, 2), rel(0, 2, 3, 2), acq(1, 4, 5, 2), rel(1, 6, 7, 2)}},
		"held while free":      {false, []porcupine.Operation{acq(0, 0, 1, 1), rel(0, 2, 3, 1), acq(1, 4, 5, 0)}},
		"release by non-owner": {false, []porcupine.Operation{acq(0, 0, 1, 1), rel(1, 2, 3, 1)}},
	}
	for name, tc := range cases {
		require.Equal(t, tc.ok, porcupine.CheckOperations(mutexModel, tc.history), name)
	}
}
