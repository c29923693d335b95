package plantest

import "fmt"

// Worst keeps the most rows and the longest time one statement took over a
// plan test's runs, for the test's log.
type Worst struct {
	read, ms          float64
	readWhere, msWhen string
}

// Add records one run, labelled label, that read rows in ms milliseconds.
func (w *Worst) Add(label string, rows, ms float64) {
	if rows >= w.read {
		w.read, w.readWhere = rows, label
	}
	if ms >= w.ms {
		w.ms, w.msWhen = ms, label
	}
}

// String is the log line: the most rows and the longest time, each with
// where it happened.
func (w *Worst) String() string {
	return fmt.Sprintf("at most %7.0f rows (%s), %7.2f ms (%s)", w.read, w.readWhere, w.ms, w.msWhen)
}
