package main

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"
)

// printTable writes a header and rows as aligned columns.
func printTable(w io.Writer, header []string, rows [][]string) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, strings.Join(header, "\t"))
	for _, r := range rows {
		fmt.Fprintln(tw, strings.Join(r, "\t"))
	}
	return tw.Flush()
}

// printJSON writes v as indented JSON.
func printJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// age formats a duration for people: to the millisecond below a second, to
// the tenth of a second below a minute, to the second above; "-" for a
// negative (unknown) one.
func age(d time.Duration) string {
	switch {
	case d < 0:
		return "-"
	case d < time.Second:
		return d.Round(time.Millisecond).String()
	case d < time.Minute:
		return d.Round(100 * time.Millisecond).String()
	}
	return d.Round(time.Second).String()
}

// seconds is a duration in seconds for JSON, to the millisecond.
func seconds(d time.Duration) float64 {
	return float64(d.Milliseconds()) / 1000
}

// cut shortens s to n characters for a table cell.
func cut(s string, n int) string {
	s = oneLine(s)
	if r := []rune(s); len(r) > n {
		return string(r[:n-1]) + "…"
	}
	return s
}

// actionResult is the JSON of an action.
type actionResult struct {
	Action string `json:"action"`
	Table  string `json:"table"`
	Scope  string `json:"scope,omitempty"`
	Rows   int64  `json:"rows"`
	Parked int64  `json:"parked,omitempty"`
	// Warning is what the operator should know of the result (an unpark
	// in a finished task).
	Warning string `json:"warning,omitempty"`
}

// report prints an action's result: r with -json, else the human line.
func (e *env) report(r actionResult, human string) error {
	if e.o.JSON {
		return printJSON(e.out, r)
	}
	_, err := fmt.Fprintln(e.out, human)
	return err
}
