package freeport

import (
	"net"
	"strconv"
	"testing"
)

// TestLoopback: the ports are below the ephemeral range, and free: a
// listener can take each at once.
func TestLoopback(t *testing.T) {
	for range 50 {
		p, err := Loopback()
		if err != nil {
			t.Fatal(err)
		}
		if p < low || p > high {
			t.Fatalf("port %d, want %d-%d", p, low, high)
		}
		ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p)))
		if err != nil {
			t.Fatalf("port %d is not free: %v", p, err)
		}
		ln.Close()
	}
}
