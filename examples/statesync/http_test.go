package main

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/claimlock/claimlock/internal/testkit/dbtest"
)

// do sends one request to h and returns the status, the Retry-After header
// and the JSON body decoded into a map.
func do(t *testing.T, h http.Handler, method, path, body string) (int, string, map[string]any) {
	t.Helper()
	req := httptest.NewRequest(method, path, strings.NewReader(body))
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	var m map[string]any
	if rec.Body.Len() > 0 && strings.HasPrefix(rec.Header().Get("Content-Type"), "application/json") {
		require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &m), rec.Body.String())
	}
	return rec.Code, rec.Header().Get("Retry-After"), m
}

// TestHTTP drives the handlers on every engine: accepted changes (202 and
// their version), a resent event id (200 and the first receipt), a stale
// sequence (409 and the current version, nothing recorded), the state
// before and after a flush (accepted and persisted versions), backpressure
// (429 with Retry-After, nothing recorded, accepted again once flushed)
// and bad requests (400).
func TestHTTP(t *testing.T) {
	t.Parallel()
	for _, e := range engines() {
		t.Run(e.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			o, err := parseFlags(append(e.args(t), "-http", ":0", "-max-backlog", "2"), io.Discard)
			require.NoError(t, err)
			o.pressureInterval = time.Nanosecond // measure the backlog at every request
			a, err := open(ctx, o)
			require.NoError(t, err)
			defer a.close()
			require.NoError(t, a.setup(ctx)) // a fresh database: empty tables
			h := a.handler()

			post := func(key, id, source string, seq, delta int64) (int, string, map[string]any) {
				t.Helper()
				b, err := json.Marshal(changeRequest{Key: key, EventID: id, Source: source, Seq: seq, Delta: delta})
				require.NoError(t, err)
				return do(t, h, http.MethodPost, "/changes", string(b))
			}
			state := func(key string) map[string]any {
				t.Helper()
				code, _, m := do(t, h, http.MethodGet, "/state/"+key, "")
				require.Equal(t, http.StatusOK, code, m)
				return m
			}

			code, _, r1 := post("user:42", "evt-1", "phone", 1, 5)
			require.Equal(t, http.StatusAccepted, code, r1)
			require.EqualValues(t, 1, r1["version"])
			require.Equal(t, "evt-1", r1["event_id"])
			code, _, r2 := post("user:42", "evt-2", "phone", 2, 7)
			require.Equal(t, http.StatusAccepted, code, r2)
			require.EqualValues(t, 2, r2["version"])
			require.NotEqual(t, r1["id"], r2["id"])

			// A client retry of evt-2, even with another delta: the first
			// receipt.
			code, _, dup := post("user:42", "evt-2", "phone", 2, 1000)
			require.Equal(t, http.StatusOK, code, dup)
			require.Equal(t, true, dup["duplicate"])
			require.Equal(t, r2["id"], dup["id"])
			require.EqualValues(t, 2, dup["version"])

			// An old sequence of the same source: 409 with the current
			// version.
			code, _, stale := post("user:42", "evt-old", "phone", 2, 1)
			require.Equal(t, http.StatusConflict, code, stale)
			require.EqualValues(t, 2, stale["version"])
			require.Contains(t, stale["error"], "stale sequence")

			// Accepted, not folded yet.
			s := state("user:42")
			require.EqualValues(t, 2, s["accepted"])
			require.EqualValues(t, 0, s["persisted"])
			require.EqualValues(t, 0, s["total"])

			n, err := a.flusher.Flush(ctx)
			require.NoError(t, err)
			require.Equal(t, 1, n)
			s = state("user:42")
			require.EqualValues(t, 2, s["accepted"])
			require.EqualValues(t, 2, s["persisted"])
			require.EqualValues(t, 12, s["total"], "evt-1 and evt-2 once each; the duplicate and the stale change not at all")
			require.EqualValues(t, 1, s["writes"], "one state write for both")

			// Backpressure: -max-backlog 2 tolerates two dirty keys.
			for _, k := range []string{"a", "b", "c"} {
				code, _, m := post(k, "evt-"+k, "phone", 1, 1)
				require.Equal(t, http.StatusAccepted, code, m)
			}
			code, retry, over := post("d", "evt-d", "phone", 1, 1)
			require.Equal(t, http.StatusTooManyRequests, code, over)
			require.Equal(t, "1", retry)
			require.Contains(t, over["error"], "overloaded")
			require.EqualValues(t, 0, state("d")["accepted"], "a refused change is not recorded")
			for {
				n, err := a.flusher.Flush(ctx)
				require.NoError(t, err)
				if n == 0 {
					break
				}
			}
			code, _, m := post("d", "evt-d", "phone", 1, 1)
			require.Equal(t, http.StatusAccepted, code, m)
			require.Nil(t, m["duplicate"], "the refused change was not recorded")

			// A key never seen.
			s = state("nobody")
			require.EqualValues(t, 0, s["accepted"])
			require.EqualValues(t, 0, s["total"])

			// Bad requests.
			for _, body := range []string{`{`, `{"key":"k","event_id":"x","delta":"1"}`, `{"key":"k","event_id":"x","color":1}`,
				`{"event_id":"x","delta":1}`, `{"key":"k","delta":1}`, `{"key":"` + strings.Repeat("k", 200) + `","event_id":"x"}`} {
				code, _, m := do(t, h, http.MethodPost, "/changes", body)
				require.Equal(t, http.StatusBadRequest, code, "%s: %v", body, m)
				require.NotEmpty(t, m["error"])
			}
			code, _, _ = do(t, h, http.MethodGet, "/changes", "")
			require.Equal(t, http.StatusMethodNotAllowed, code)
		})
	}
}

// TestServe runs -http on SQLite: a change posted to the listening server
// is folded by its flushers, and the server stops when its context ends.
func TestServe(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"-dsn", dbtest.SQLitePath(t), "-http", addr}, io.Discard, io.Discard)
	}()

	base := "http://" + addr
	var resp *http.Response
	require.Eventually(t, func() bool {
		resp, err = http.Post(base+"/changes", "application/json", strings.NewReader(`{"key":"k","event_id":"e","source":"s","seq":1,"delta":3}`))
		return err == nil
	}, 30*time.Second, 20*time.Millisecond)
	resp.Body.Close()
	require.Equal(t, http.StatusAccepted, resp.StatusCode)
	require.Eventually(t, func() bool {
		resp, err := http.Get(base + "/state/k")
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		var v stateView
		return json.NewDecoder(resp.Body).Decode(&v) == nil && v.Persisted == 1 && v.Total == 3
	}, 30*time.Second, 20*time.Millisecond)

	cancel()
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(30 * time.Second):
		t.Fatal("the server did not stop")
	}
}
