// Package freeport picks a loopback TCP port for a child process to listen
// on (a test's Mosquitto, a NATS node). A port from the kernel's
// ephemeral range (what listening on :0 gives) can be taken between the
// pick and the child's bind, not only by another listener but by any
// outgoing connection's source port: with a floor's worth of connections
// open, a table's Mosquitto failed with "Address already in use" (CI,
// TestFloorProof). So the port is picked at random below that range,
// where the kernel hands out no port on its own, and checked free.
package freeport

import (
	"fmt"
	"math/rand/v2"
	"net"
	"strconv"
)

// The ports picked: below Linux's default ephemeral range (32768-60999)
// and above the usual services'.
const (
	low  = 20000
	high = 32767
)

// Loopback returns a port nothing listens on now on 127.0.0.1, below the
// ephemeral range; after many ports found taken, one the kernel gives.
func Loopback() (int, error) {
	for range 100 {
		p := low + rand.IntN(high-low+1)
		ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p)))
		if err != nil {
			continue // taken
		}
		ln.Close()
		return p, nil
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("freeport: %w", err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}
