package main

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"net/http"
	"strings"
	"sync"
	"time"
)

// Sessions and the action token.
//
// Every visitor gets a session cookie (HttpOnly, SameSite=Strict) holding a
// random identifier; its CSRF token is an HMAC of the identifier under a
// key drawn at start-up, so sessions that have not logged in cost the
// server nothing. Logging in with the action token starts a new session
// (a fresh identifier, so a planted cookie never becomes a logged-in one)
// that the server remembers for sessionTTL. A session is named in the log
// by a label drawn at login, never by its identifier, which is a
// credential.

const (
	sessionCookie = "claimctl_session"
	sessionTTL    = 12 * time.Hour
	// maxSessions bounds the logged-in sessions kept: a login beyond it
	// ends the session closest to its expiry.
	maxSessions = 1000
	// csrfHeader carries the CSRF token of a JSON request; forms send the
	// csrf field.
	csrfHeader = "X-CSRF-Token"
	// maxAuthFailures failed logins or bearer tokens per authWindow are
	// answered; more are refused unchecked until the window ends.
	maxAuthFailures = 10
	authWindow      = time.Minute
)

// randomID returns n random bytes, base64url-encoded.
func randomID(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b) // crypto/rand.Read never fails
	return base64.RawURLEncoding.EncodeToString(b)
}

// validID reports whether s has the shape of a session identifier.
func validID(s string) bool {
	if len(s) != 43 {
		return false
	}
	_, err := base64.RawURLEncoding.DecodeString(s)
	return err == nil
}

// authSession is a logged-in session.
type authSession struct {
	label   string
	expires time.Time
}

// sessions holds the CSRF key, the logged-in sessions and the count of
// recent authentication failures.
type sessions struct {
	csrfKey []byte

	mu          sync.Mutex
	auth        map[string]authSession
	failures    int
	windowStart time.Time
}

func newSessions() *sessions {
	key := make([]byte, 32)
	_, _ = rand.Read(key)
	return &sessions{csrfKey: key, auth: map[string]authSession{}}
}

// csrf returns the CSRF token of session id.
func (s *sessions) csrf(id string) string {
	m := hmac.New(sha256.New, s.csrfKey)
	m.Write([]byte("claimctl csrf\x00" + id))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// checkCSRF reports whether token is session id's CSRF token.
func (s *sessions) checkCSRF(id, token string) bool {
	return id != "" && token != "" && hmac.Equal([]byte(s.csrf(id)), []byte(token))
}

// login starts a logged-in session and returns its identifier and label.
func (s *sessions) login(now time.Time) (id, label string) {
	id = randomID(32)
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	label = hex.EncodeToString(b)
	s.mu.Lock()
	defer s.mu.Unlock()
	for k, a := range s.auth {
		if now.After(a.expires) {
			delete(s.auth, k)
		}
	}
	if len(s.auth) >= maxSessions {
		var oldest string
		for k, a := range s.auth {
			if oldest == "" || a.expires.Before(s.auth[oldest].expires) {
				oldest = k
			}
		}
		delete(s.auth, oldest)
	}
	s.auth[id] = authSession{label: label, expires: now.Add(sessionTTL)}
	return id, label
}

// loggedIn returns the label of session id if it is logged in.
func (s *sessions) loggedIn(id string, now time.Time) (string, bool) {
	if id == "" {
		return "", false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	a, ok := s.auth[id]
	if !ok || now.After(a.expires) {
		delete(s.auth, id)
		return "", false
	}
	return a.label, true
}

// logout ends session id and returns its label ("" if it was not logged
// in).
func (s *sessions) logout(id string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	a := s.auth[id]
	delete(s.auth, id)
	return a.label
}

// limited reports whether authentication attempts are refused now, after
// too many failures.
func (s *sessions) limited(now time.Time) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if now.Sub(s.windowStart) >= authWindow {
		s.windowStart, s.failures = now, 0
	}
	return s.failures >= maxAuthFailures
}

// failed counts an authentication failure.
func (s *sessions) failed(now time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if now.Sub(s.windowStart) >= authWindow {
		s.windowStart, s.failures = now, 0
	}
	s.failures++
}

// sessionID returns the session identifier of r's cookie, "" if it has
// none of the right shape.
func sessionID(r *http.Request) string {
	c, err := r.Cookie(sessionCookie)
	if err != nil || !validID(c.Value) {
		return ""
	}
	return c.Value
}

// setSession sends the session cookie of id: HttpOnly (scripts never see
// it), SameSite=Strict (other sites' pages never send it), Secure on TLS.
func setSession(w http.ResponseWriter, r *http.Request, id string, maxAge int) {
	http.SetCookie(w, &http.Cookie{
		Name: sessionCookie, Value: id, Path: "/", HttpOnly: true, SameSite: http.SameSiteStrictMode,
		Secure: r.TLS != nil, MaxAge: maxAge,
	})
}

// ensureSession returns r's session identifier, starting a session (a new
// cookie) when r has none.
func ensureSession(w http.ResponseWriter, r *http.Request) string {
	if id := sessionID(r); id != "" {
		return id
	}
	id := randomID(32)
	setSession(w, r, id, 0)
	return id
}

// actionToken is the configured action token, kept as its hash so that a
// comparison takes the same time whatever the length of the guess.
type actionToken struct {
	set  bool
	hash [32]byte
}

func newActionToken(token string) actionToken {
	if token == "" {
		return actionToken{}
	}
	return actionToken{set: true, hash: sha256.Sum256([]byte(token))}
}

// matches reports whether guess is the token.
func (t actionToken) matches(guess string) bool {
	h := sha256.Sum256([]byte(guess))
	return t.set && subtle.ConstantTimeCompare(h[:], t.hash[:]) == 1
}

// bearer returns the token of r's Authorization header and whether it has
// one.
func bearer(r *http.Request) (string, bool) {
	h := r.Header.Get("Authorization")
	if h == "" {
		return "", false
	}
	scheme, tok, ok := strings.Cut(h, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", true
	}
	return strings.TrimSpace(tok), true
}
