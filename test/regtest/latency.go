package regtest

import (
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Latency is a TCP proxy on 127.0.0.1 that makes a loopback connection
// behave like one across a wide-area network with round trip RTT: every
// byte reaches the other side half a round trip after it was sent (in
// both directions), and a new connection carries nothing for one round
// trip (TCP's handshake, which the kernel answers at once on loopback).
// Bandwidth is not limited. It stands between a client and a registry (or
// a counting Proxy in front of one): point clients at Host.
type Latency struct {
	// Host is "127.0.0.1:PORT" of the proxy.
	Host string
	rtt  atomic.Int64 // nanoseconds
	up   string
	l    net.Listener
	wg   sync.WaitGroup
	mu   sync.Mutex
	open map[net.Conn]bool
	done bool
}

// NewLatency starts a latency-adding proxy to upstream ("127.0.0.1:PORT")
// and stops it when the test ends.
func NewLatency(t testing.TB, upstream string, rtt time.Duration) *Latency {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &Latency{Host: l.Addr().String(), up: upstream, l: l, open: map[net.Conn]bool{}}
	p.rtt.Store(int64(rtt))
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(p.Close)
	return p
}

// SetRTT changes the round trip for the connections opened from now on.
func (p *Latency) SetRTT(rtt time.Duration) { p.rtt.Store(int64(rtt)) }

// Close stops accepting and closes every connection.
func (p *Latency) Close() {
	p.mu.Lock()
	p.done = true
	for c := range p.open {
		c.Close()
	}
	p.mu.Unlock()
	p.l.Close()
	p.wg.Wait()
}

func (p *Latency) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.done {
		c.Close()
		return false
	}
	p.open[c] = true
	return true
}

func (p *Latency) untrack(c net.Conn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.open, c)
	c.Close()
}

func (p *Latency) accept() {
	defer p.wg.Done()
	for {
		c, err := p.l.Accept()
		if err != nil {
			return
		}
		if !p.track(c) {
			return
		}
		p.wg.Add(1)
		go p.serve(c)
	}
}

// serve relays one connection, each direction delayed by half the round
// trip; the client's first bytes wait a whole round trip more (the
// handshake).
func (p *Latency) serve(c net.Conn) {
	defer p.wg.Done()
	defer p.untrack(c)
	u, err := net.Dial("tcp", p.up)
	if err != nil {
		return
	}
	if !p.track(u) {
		return
	}
	defer p.untrack(u)
	rtt := time.Duration(p.rtt.Load())
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); delayed(u, c, rtt/2, time.Now().Add(rtt+rtt/2)) }()
	go func() { defer wg.Done(); delayed(c, u, rtt/2, time.Time{}) }()
	wg.Wait()
}

// chunk is what one read got and when it may be written on.
type chunk struct {
	b  []byte
	at time.Time
}

// delayed copies src to dst, each chunk written delay after it was read
// (and not before notBefore); at the end of src it closes dst's writing
// side. Reading goes on while earlier chunks wait (a bounded queue), so
// the delay does not limit throughput.
func delayed(dst, src net.Conn, delay time.Duration, notBefore time.Time) {
	q := make(chan chunk, 256)
	go func() {
		defer close(q)
		for {
			buf := make([]byte, 32<<10)
			n, err := src.Read(buf)
			if n > 0 {
				at := time.Now().Add(delay)
				if at.Before(notBefore) {
					at = notBefore
				}
				q <- chunk{buf[:n], at}
			}
			if err != nil {
				return
			}
		}
	}()
	broken := false
	for ch := range q {
		if broken {
			continue // drain so the reader ends
		}
		time.Sleep(time.Until(ch.at))
		if _, err := dst.Write(ch.b); err != nil {
			broken = true
			src.Close()
		}
	}
	if tc, ok := dst.(*net.TCPConn); ok {
		tc.CloseWrite()
		return
	}
	dst.Close()
}
