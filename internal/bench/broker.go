package bench

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/tablectl/tablectl/internal/freeport"
	"github.com/tablectl/tablectl/internal/mosquitto"
)

// benchBrokerConf is the private broker's configuration. Its queue is
// unbounded (max_queued_messages 0): MQTT has no flow control from a
// subscriber back to a publisher, so a broker with Mosquitto's default
// limit of 1,000 queued messages drops messages for a subscriber that
// falls behind a burst, and the bench would wait for rows that never come.
// With no limit a slow subscriber is queued for, and the measured rate is
// the slowest part's. The in-flight window is deploy/mosquitto's.
const benchBrokerConf = `# written by tablectl bench
listener %d 127.0.0.1
allow_anonymous true
# Run as root, mosquitto would switch to its own user; nothing here needs it.
user root
persistence false
max_queued_messages 0
max_inflight_messages 100
log_dest stderr
log_type error
log_type warning
log_type notice
# "running" is said at information level.
log_type information
connection_messages false
`

// benchBroker is a Mosquitto the bench starts for itself.
type benchBroker struct {
	url  string
	proc *mosquitto.Process
}

// startBenchBroker starts Mosquitto on a free loopback port with its
// configuration in dir, and returns once it says it is running.
func startBenchBroker(dir string) (*benchBroker, error) {
	port, err := freeport.Loopback()
	if err != nil {
		return nil, err
	}
	conf := filepath.Join(dir, "mosquitto.conf")
	if err := os.WriteFile(conf, fmt.Appendf(nil, benchBrokerConf, port), 0o600); err != nil {
		return nil, err
	}
	p, err := mosquitto.Start(conf, 10*time.Second)
	if err != nil {
		return nil, fmt.Errorf("the bench starts its own broker (or give --broker): %w", err)
	}
	return &benchBroker{url: fmt.Sprintf("tcp://127.0.0.1:%d", port), proc: p}, nil
}

// dropped reports whether the broker said it dropped messages.
func (b *benchBroker) dropped() bool { return strings.Contains(b.proc.Log(), "being dropped") }

func (b *benchBroker) output() string { return b.proc.Log() }

func (b *benchBroker) stop() { b.proc.Kill() }
