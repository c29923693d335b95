// Package netfault is a TCP proxy between a test and a database server
// that can fail the way networks and servers do: refuse every connection
// (the server is down: its port is closed), drop a connection right after
// a statement was written to it, and answer slowly (a loaded server or a
// long network path). It is for tests only.
package netfault

import (
	"bytes"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// Proxy forwards connections from its own address to a target server.
type Proxy struct {
	t      testing.TB
	target string
	addr   string

	mu      sync.Mutex
	ln      net.Listener        // nil while down
	conns   map[net.Conn]func() // live client connections and how to close both ends
	marker  []byte              // armed by DropAfterWrite
	fold    bool                // the marker matches in any letter case
	downFor time.Duration       // after the drop, the server is away this long
	delay   atomic.Int64        // each reply is held back this long (ns)
	stopped bool                // the test ended: Up does nothing
	wg      sync.WaitGroup
}

// New starts a proxy to target (host:port) and stops it when the test ends.
func New(t testing.TB, target string) *Proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	p := &Proxy{t: t, target: target, addr: ln.Addr().String(), ln: ln, conns: map[net.Conn]func(){}}
	p.serve(ln)
	t.Cleanup(func() {
		p.mu.Lock()
		p.stopped = true
		p.mu.Unlock()
		p.Down()
		p.wg.Wait()
	})
	return p
}

// Addr is the proxy's address (host:port); it stays the same across Down
// and Up.
func (p *Proxy) Addr() string { return p.addr }

// Down closes the listening port and every connection, as a server that
// died would: connects are refused until Up.
func (p *Proxy) Down() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ln != nil {
		p.ln.Close()
		p.ln = nil
	}
	for _, closeBoth := range p.conns {
		closeBoth()
	}
	clear(p.conns)
}

// IsUp reports whether the proxy accepts connections.
func (p *Proxy) IsUp() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.ln != nil
}

// Up listens on the proxy's address again. It may be called from any
// goroutine (a timer's): a failure is reported with t.Errorf.
func (p *Proxy) Up() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ln != nil || p.stopped {
		return
	}
	var ln net.Listener
	var err error
	for range 100 { // the closed port may take a moment to be free again
		if ln, err = net.Listen("tcp", p.addr); err == nil {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err != nil {
		p.t.Errorf("netfault: listen again on %s: %v", p.addr, err)
		return
	}
	p.ln = ln
	p.serve(ln)
}

// DropAfterWrite arms the proxy: on the next connection whose request
// contains marker, the request after it (a prepared statement's execution,
// or the statement itself if marker and statement come in one write) is
// forwarded to the server, and then, once the server had time to run it,
// the connection is closed before any reply gets back: a connection broken
// after the statement was written. One connection only.
func (p *Proxy) DropAfterWrite(marker string) { p.DropAfterWriteThenDown(marker, 0) }

// DropAfterWriteThenDown is DropAfterWrite, and then the proxy goes down
// (as with Down) for d, at the moment it drops the connection: a server
// that died with the statement.
func (p *Proxy) DropAfterWriteThenDown(marker string, d time.Duration) {
	p.mu.Lock()
	p.marker, p.fold = []byte(marker), false
	p.downFor = d
	p.mu.Unlock()
}

// Disarm undoes a DropAfterWrite whose marker no request has matched yet,
// and reports whether it was still armed.
func (p *Proxy) Disarm() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	armed := p.marker != nil
	p.marker = nil
	return armed
}

// DropAfterWriteFold is DropAfterWrite with a marker that matches as a
// whole word in any letter case (drivers write COMMIT as "commit" or
// "COMMIT", and "commit" must not match "read committed").
func (p *Proxy) DropAfterWriteFold(marker string) {
	p.mu.Lock()
	p.marker, p.fold = bytes.ToLower([]byte(marker)), true
	p.downFor = 0
	p.mu.Unlock()
}

// Delay holds back every reply the server sends from now on by d (zero:
// none), the handshake's included, so that every statement and every new
// connection takes at least that long.
func (p *Proxy) Delay(d time.Duration) { p.delay.Store(int64(d)) }

func (p *Proxy) serve(ln net.Listener) {
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		for {
			client, err := ln.Accept()
			if err != nil {
				return
			}
			server, err := net.Dial("tcp", p.target)
			if err != nil {
				client.Close()
				continue
			}
			closeBoth := sync.OnceFunc(func() { client.Close(); server.Close() })
			p.mu.Lock()
			if p.ln != ln { // went down meanwhile
				p.mu.Unlock()
				closeBoth()
				return
			}
			p.conns[client] = closeBoth
			p.mu.Unlock()
			p.wg.Add(2)
			cut := new(atomic.Bool) // no more replies reach the client
			go p.requests(client, server, closeBoth, cut)
			go func() {
				defer p.wg.Done()
				defer closeBoth()
				buf := make([]byte, 64<<10)
				for {
					n, err := server.Read(buf)
					if err == nil && cut.Load() {
						continue // swallowed: the connection is about to drop
					}
					if d := time.Duration(p.delay.Load()); n > 0 && d > 0 {
						time.Sleep(d)
					}
					if n > 0 && !cut.Load() {
						if _, werr := client.Write(buf[:n]); werr != nil {
							return
						}
					}
					if err != nil {
						return
					}
				}
			}()
		}
	}()
}

// requests forwards the client's writes, and drops the connection after
// the write that follows the marker when armed.
func (p *Proxy) requests(client, server net.Conn, closeBoth func(), cut *atomic.Bool) {
	defer p.wg.Done()
	defer func() {
		closeBoth()
		p.mu.Lock()
		delete(p.conns, client)
		p.mu.Unlock()
	}()
	seen := false
	buf := make([]byte, 64<<10)
	for {
		n, err := client.Read(buf)
		if n > 0 {
			drop := false
			if seen {
				drop = true
			} else {
				p.mu.Lock()
				if p.marker != nil && contains(buf[:n], p.marker, p.fold) {
					p.marker = nil
					seen = true
					// A statement sent with its text in one write
					// (simple protocol, or parse and execute
					// together) is dropped after this write.
					drop = executes(buf[:n])
				}
				p.mu.Unlock()
			}
			if drop {
				cut.Store(true)
			}
			if _, werr := server.Write(buf[:n]); werr != nil {
				return
			}
			if drop {
				time.Sleep(100 * time.Millisecond)
				p.mu.Lock()
				d := p.downFor
				p.mu.Unlock()
				if d > 0 {
					p.Down()
					time.AfterFunc(d, p.Up)
				}
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// contains reports marker in b; with fold, in any letter case and as a
// whole word ("commit" is not found in "committed").
func contains(b, marker []byte, fold bool) bool {
	if !fold {
		return bytes.Contains(b, marker)
	}
	lower := bytes.ToLower(b)
	for i := 0; ; {
		j := bytes.Index(lower[i:], marker)
		if j < 0 {
			return false
		}
		start, end := i+j, i+j+len(marker)
		if (start == 0 || !isWordByte(lower[start-1])) && (end == len(lower) || !isWordByte(lower[end])) {
			return true
		}
		i = start + 1
	}
}

func isWordByte(c byte) bool { return c == '_' || 'a' <= c && c <= 'z' || '0' <= c && c <= '9' }

// executes reports a write that runs its statement at once rather than
// only preparing it: a PostgreSQL simple query ('Q'), or a parse sent with
// its Execute of the unnamed portal ('E', length 9, "", no row limit), or a
// MySQL COM_QUERY (a three-byte length, a sequence number, then command
// 0x03) in any of the write's packets (go-sql-driver/mysql writes a
// COM_STMT_CLOSE and the next COM_QUERY together).
func executes(b []byte) bool {
	return len(b) > 0 && b[0] == 'Q' ||
		bytes.Contains(b, []byte{'E', 0, 0, 0, 9, 0, 0, 0, 0, 0}) ||
		mysqlQuery(b)
}

// mysqlQuery reports a MySQL COM_QUERY among the packets of b.
func mysqlQuery(b []byte) bool {
	for len(b) > 4 {
		if b[3] == 0 && b[4] == 0x03 {
			return true
		}
		n := 4 + (int(b[0]) | int(b[1])<<8 | int(b[2])<<16)
		if n > len(b) {
			return false
		}
		b = b[n:]
	}
	return false
}
