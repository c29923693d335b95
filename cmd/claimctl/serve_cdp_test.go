package main

// A headless Chromium driven through the DevTools protocol, for the
// browser test of claimctl serve. The protocol runs over a WebSocket; the
// client side of RFC 6455 that it needs (one connection, text messages,
// pings, close) is written here with the standard library, so the module
// gains no dependency and the browser is the only thing to install.

import (
	"bufio"
	"context"
	"crypto/rand"
	"crypto/sha1"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// wsConn is the client end of a WebSocket.
type wsConn struct {
	c   net.Conn
	br  *bufio.Reader
	wmu sync.Mutex
}

// maxWSMessage bounds a message read (a full-page screenshot is a few
// megabytes of base64).
const maxWSMessage = 64 << 20

// wsDial opens a WebSocket to rawURL (ws://host:port/path).
func wsDial(ctx context.Context, rawURL string) (*wsConn, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, err
	}
	if u.Scheme != "ws" {
		return nil, fmt.Errorf("websocket: scheme %q: want ws", u.Scheme)
	}
	c, err := (&net.Dialer{}).DialContext(ctx, "tcp", u.Host)
	if err != nil {
		return nil, err
	}
	kb := make([]byte, 16)
	_, _ = rand.Read(kb)
	key := base64.StdEncoding.EncodeToString(kb)
	req := "GET " + u.RequestURI() + " HTTP/1.1\r\nHost: " + u.Host + "\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n" +
		"Sec-WebSocket-Key: " + key + "\r\nSec-WebSocket-Version: 13\r\n\r\n"
	if dl, ok := ctx.Deadline(); ok {
		_ = c.SetDeadline(dl)
	}
	if _, err := io.WriteString(c, req); err != nil {
		c.Close()
		return nil, err
	}
	br := bufio.NewReader(c)
	res, err := http.ReadResponse(br, nil)
	if err != nil {
		c.Close()
		return nil, err
	}
	res.Body.Close()
	sum := sha1.Sum([]byte(key + "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"))
	if res.StatusCode != http.StatusSwitchingProtocols || res.Header.Get("Sec-WebSocket-Accept") != base64.StdEncoding.EncodeToString(sum[:]) {
		c.Close()
		return nil, fmt.Errorf("websocket: handshake refused: %s", res.Status)
	}
	_ = c.SetDeadline(time.Time{})
	return &wsConn{c: c, br: br}, nil
}

// writeFrame sends one final frame of opcode op, masked as a client must.
func (w *wsConn) writeFrame(op byte, p []byte) error {
	w.wmu.Lock()
	defer w.wmu.Unlock()
	hdr := []byte{0x80 | op}
	switch n := len(p); {
	case n < 126:
		hdr = append(hdr, 0x80|byte(n))
	case n <= 0xffff:
		hdr = append(hdr, 0x80|126, byte(n>>8), byte(n))
	default:
		hdr = append(hdr, 0x80|127)
		hdr = binary.BigEndian.AppendUint64(hdr, uint64(n))
	}
	mask := make([]byte, 4)
	_, _ = rand.Read(mask)
	hdr = append(hdr, mask...)
	body := make([]byte, len(p))
	for i := range p {
		body[i] = p[i] ^ mask[i%4]
	}
	_, err := w.c.Write(append(hdr, body...))
	return err
}

// read returns the next text or binary message, answering pings on the
// way; a close frame is io.EOF.
func (w *wsConn) read() ([]byte, error) {
	var msg []byte
	for {
		var h [2]byte
		if _, err := io.ReadFull(w.br, h[:]); err != nil {
			return nil, err
		}
		fin, op := h[0]&0x80 != 0, h[0]&0x0f
		n := uint64(h[1] & 0x7f)
		switch n {
		case 126:
			var b [2]byte
			if _, err := io.ReadFull(w.br, b[:]); err != nil {
				return nil, err
			}
			n = uint64(binary.BigEndian.Uint16(b[:]))
		case 127:
			var b [8]byte
			if _, err := io.ReadFull(w.br, b[:]); err != nil {
				return nil, err
			}
			n = binary.BigEndian.Uint64(b[:])
		}
		var mask []byte
		if h[1]&0x80 != 0 {
			mask = make([]byte, 4)
			if _, err := io.ReadFull(w.br, mask); err != nil {
				return nil, err
			}
		}
		if n > maxWSMessage || uint64(len(msg))+n > maxWSMessage {
			return nil, fmt.Errorf("websocket: message over %d bytes", maxWSMessage)
		}
		p := make([]byte, n)
		if _, err := io.ReadFull(w.br, p); err != nil {
			return nil, err
		}
		if mask != nil {
			for i := range p {
				p[i] ^= mask[i%4]
			}
		}
		switch op {
		case 0x8:
			_ = w.writeFrame(0x8, nil)
			return nil, io.EOF
		case 0x9:
			if err := w.writeFrame(0xA, p); err != nil {
				return nil, err
			}
			continue
		case 0xA:
			continue
		case 0x0, 0x1, 0x2:
			msg = append(msg, p...)
		default:
			return nil, fmt.Errorf("websocket: opcode %#x", op)
		}
		if fin {
			return msg, nil
		}
	}
}

// cdp is a DevTools protocol session on one page target. Events are
// ignored: the test polls the page's state instead.
type cdp struct {
	ws *wsConn

	mu      sync.Mutex
	nextID  int64
	pending map[int64]chan cdpReply
	err     error
	done    chan struct{}
}

type cdpReply struct {
	Result json.RawMessage `json:"result"`
	Error  *struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

func newCDP(ws *wsConn) *cdp {
	c := &cdp{ws: ws, pending: map[int64]chan cdpReply{}, done: make(chan struct{})}
	go c.readLoop()
	return c
}

func (c *cdp) readLoop() {
	defer close(c.done)
	for {
		msg, err := c.ws.read()
		if err != nil {
			c.mu.Lock()
			c.err = err
			for id, ch := range c.pending {
				close(ch)
				delete(c.pending, id)
			}
			c.mu.Unlock()
			return
		}
		var m struct {
			ID int64 `json:"id"`
			cdpReply
		}
		if json.Unmarshal(msg, &m) != nil || m.ID == 0 {
			continue // an event
		}
		c.mu.Lock()
		ch := c.pending[m.ID]
		delete(c.pending, m.ID)
		c.mu.Unlock()
		if ch != nil {
			ch <- m.cdpReply
		}
	}
}

// call runs method with params and decodes its result into out (if not
// nil).
func (c *cdp) call(ctx context.Context, method string, params, out any) error {
	c.mu.Lock()
	if c.err != nil {
		c.mu.Unlock()
		return c.err
	}
	c.nextID++
	id := c.nextID
	ch := make(chan cdpReply, 1)
	c.pending[id] = ch
	c.mu.Unlock()
	if params == nil {
		params = struct{}{}
	}
	b, err := json.Marshal(map[string]any{"id": id, "method": method, "params": params})
	if err != nil {
		return err
	}
	if err := c.ws.writeFrame(0x1, b); err != nil {
		return err
	}
	select {
	case r, ok := <-ch:
		if !ok {
			return fmt.Errorf("cdp %s: connection closed: %v", method, c.err)
		}
		if r.Error != nil {
			return fmt.Errorf("cdp %s: %d %s", method, r.Error.Code, r.Error.Message)
		}
		if out != nil {
			return json.Unmarshal(r.Result, out)
		}
		return nil
	case <-ctx.Done():
		c.mu.Lock()
		delete(c.pending, id)
		c.mu.Unlock()
		return fmt.Errorf("cdp %s: %w", method, ctx.Err())
	}
}

// eval evaluates a JavaScript expression in the page (awaiting a promise)
// and decodes its value into out (if not nil).
func (c *cdp) eval(ctx context.Context, expr string, out any) error {
	var r struct {
		Result struct {
			Value json.RawMessage `json:"value"`
		} `json:"result"`
		Exception *struct {
			Text      string `json:"text"`
			Exception struct {
				Description string `json:"description"`
			} `json:"exception"`
		} `json:"exceptionDetails"`
	}
	err := c.call(ctx, "Runtime.evaluate", map[string]any{"expression": expr, "returnByValue": true, "awaitPromise": true}, &r)
	if err != nil {
		return err
	}
	if r.Exception != nil {
		return fmt.Errorf("eval %s: %s %s", expr, r.Exception.Text, r.Exception.Exception.Description)
	}
	if out != nil && len(r.Result.Value) > 0 {
		return json.Unmarshal(r.Result.Value, out)
	}
	return nil
}

// browser is a headless Chromium started for a test.
type browser struct {
	*cdp
	cmd *exec.Cmd
	dir string
	out *syncBuffer
}

// chromiumPath returns the Chromium to run: $CLAIMLOCK_CHROMIUM or
// Debian's /usr/bin/chromium. Without one the test skips, saying so, or
// fails under CLAIMLOCK_REQUIRE_BROWSER=1 or CLAIMLOCK_REQUIRE_DB=1.
func chromiumPath(t *testing.T) string {
	t.Helper()
	p := os.Getenv("CLAIMLOCK_CHROMIUM")
	if p == "" {
		p = "/usr/bin/chromium"
	}
	if _, err := os.Stat(p); err != nil {
		msg := fmt.Sprintf("no Chromium at %s (install Debian's chromium package, or set CLAIMLOCK_CHROMIUM): the browser test of claimctl serve did not run", p)
		if os.Getenv("CLAIMLOCK_REQUIRE_BROWSER") == "1" || os.Getenv("CLAIMLOCK_REQUIRE_DB") == "1" {
			t.Fatal(msg)
		}
		t.Skip("SKIPPED: " + msg)
	}
	return p
}

// startBrowser starts headless Chromium on a fresh profile and connects to
// its first page. It is killed (its process group, by its id) and its
// profile removed when the test ends.
func startBrowser(t *testing.T, ctx context.Context) *browser {
	t.Helper()
	path := chromiumPath(t)
	dir, err := os.MkdirTemp("", "claimctl-chromium-")
	if err != nil {
		t.Fatal(err)
	}
	b := &browser{dir: dir, out: &syncBuffer{}}
	b.cmd = exec.Command(path, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
		"--disable-background-networking", "--disable-component-update", "--disable-sync", "--disable-extensions",
		"--hide-scrollbars", "--user-data-dir="+filepath.Join(dir, "profile"), "--remote-debugging-port=0", "--remote-debugging-address=127.0.0.1",
		"--window-size=1200,900", "about:blank")
	b.cmd.Stdout, b.cmd.Stderr = b.out, b.out
	// Everything the browser writes (its profile, crash database, caches,
	// sockets) stays in dir.
	b.cmd.Env = append(os.Environ(), "HOME="+dir, "TMPDIR="+dir, "XDG_CONFIG_HOME="+filepath.Join(dir, "config"),
		"XDG_CACHE_HOME="+filepath.Join(dir, "cache"), "XDG_DATA_HOME="+filepath.Join(dir, "data"))
	b.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := b.cmd.Start(); err != nil {
		os.RemoveAll(dir)
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = b.cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		if b.cdp != nil {
			b.ws.c.Close()
		}
		// The browser's helpers share its process group, except its
		// crash handlers, which detach: they are found by the directory
		// their command line names.
		_ = syscall.Kill(-b.cmd.Process.Pid, syscall.SIGKILL)
		for _, pid := range processesNaming(dir) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		select {
		case <-exited:
		case <-time.After(30 * time.Second):
			t.Errorf("chromium (pid %d) did not exit", b.cmd.Process.Pid)
		}
		if err := os.RemoveAll(dir); err != nil {
			t.Errorf("removing chromium's profile: %v", err)
		}
	})
	// Chromium writes the port it chose and the browser's path here.
	var port string
	deadline := time.Now().Add(time.Minute)
	for {
		data, err := os.ReadFile(filepath.Join(dir, "profile", "DevToolsActivePort"))
		if err == nil {
			if line, _, ok := strings.Cut(string(data), "\n"); ok && line != "" {
				port = line
				break
			}
		}
		select {
		case <-exited:
			t.Fatalf("chromium exited: %s", b.out.String())
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("chromium wrote no DevToolsActivePort within a minute: %s", b.out.String())
		}
	}
	wsURL := ""
	for wsURL == "" {
		res, err := http.Get("http://127.0.0.1:" + port + "/json/list")
		if err == nil {
			var targets []struct{ Type, WebSocketDebuggerURL string }
			err = json.NewDecoder(res.Body).Decode(&targets)
			res.Body.Close()
			for _, tg := range targets {
				if tg.Type == "page" && tg.WebSocketDebuggerURL != "" {
					wsURL = tg.WebSocketDebuggerURL
					break
				}
			}
		}
		if wsURL == "" {
			if time.Now().After(deadline) {
				t.Fatalf("chromium lists no page target: %v %s", err, b.out.String())
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	ws, err := wsDial(cctx, wsURL)
	if err != nil {
		t.Fatal(err)
	}
	b.cdp = newCDP(ws)
	return b
}

// processesNaming returns the processes whose command line contains s.
func processesNaming(s string) []int {
	var out []int
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err == nil && strings.Contains(string(cmdline), s) {
			out = append(out, pid)
		}
	}
	return out
}

// waitFor polls a JavaScript condition until it is true.
func (b *browser) waitFor(t *testing.T, ctx context.Context, what, expr string) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	var last error
	for time.Now().Before(deadline) {
		var ok bool
		last = b.eval(ctx, "!!("+expr+")", &ok)
		if last == nil && ok {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	var state string
	_ = b.eval(ctx, "location.href + '\\n' + document.body.innerText", &state)
	t.Fatalf("waiting for %s (%s): %v; page:\n%s", what, expr, last, state)
}

// navigate loads url and waits for the document.
func (b *browser) navigate(t *testing.T, ctx context.Context, url string) {
	t.Helper()
	if err := b.call(ctx, "Page.navigate", map[string]any{"url": url}, nil); err != nil {
		t.Fatal(err)
	}
	b.waitFor(t, ctx, "the page to load", `location.href === `+jsString(url)+` && document.readyState === "complete"`)
}

// click moves the mouse to the middle of the element expr evaluates to
// and clicks it, as a person would.
func (b *browser) click(t *testing.T, ctx context.Context, expr string) {
	t.Helper()
	var at *struct{ X, Y float64 }
	err := b.eval(ctx, `(() => { const e = (`+expr+`); if (!e) return null; e.scrollIntoView({block: "center"});
		const r = e.getBoundingClientRect(); return {x: r.left + r.width / 2, y: r.top + r.height / 2}; })()`, &at)
	if err != nil || at == nil {
		t.Fatalf("click %s: no such element (%v)", expr, err)
	}
	for _, typ := range []string{"mouseMoved", "mousePressed", "mouseReleased"} {
		p := map[string]any{"type": typ, "x": at.X, "y": at.Y, "button": "left", "clickCount": 1}
		if typ == "mouseMoved" {
			p["button"], p["clickCount"] = "none", 0
		}
		if err := b.call(ctx, "Input.dispatchMouseEvent", p, nil); err != nil {
			t.Fatal(err)
		}
	}
}

// typeText clicks the element expr evaluates to and types text into it.
func (b *browser) typeText(t *testing.T, ctx context.Context, expr, text string) {
	t.Helper()
	b.click(t, ctx, expr)
	if err := b.call(ctx, "Input.insertText", map[string]any{"text": text}, nil); err != nil {
		t.Fatal(err)
	}
}

// screenshot returns a PNG of the whole page.
func (b *browser) screenshot(t *testing.T, ctx context.Context) []byte {
	t.Helper()
	var h float64
	if err := b.eval(ctx, "document.documentElement.scrollHeight", &h); err != nil {
		t.Fatal(err)
	}
	var r struct{ Data string }
	err := b.call(ctx, "Page.captureScreenshot", map[string]any{
		"format": "png", "captureBeyondViewport": true,
		"clip": map[string]any{"x": 0, "y": 0, "width": 1200, "height": h, "scale": 1},
	}, &r)
	if err != nil {
		t.Fatal(err)
	}
	png, err := base64.StdEncoding.DecodeString(r.Data)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(string(png), "\x89PNG\r\n\x1a\n") {
		t.Fatal(errors.New("the screenshot is not a PNG"))
	}
	return png
}

// jsString quotes s as a JavaScript string literal.
func jsString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}
