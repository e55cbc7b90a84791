package main

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"
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
	url string
	cmd *exec.Cmd

	mu  sync.Mutex
	log strings.Builder
}

// startBenchBroker starts Mosquitto on a free loopback port with its
// configuration in dir, and returns once it says it is running.
func startBenchBroker(dir string) (*benchBroker, error) {
	bin, err := exec.LookPath("mosquitto")
	if err != nil {
		return nil, fmt.Errorf("the bench starts its own Mosquitto (or give --broker): %w", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	conf := filepath.Join(dir, "mosquitto.conf")
	if err := os.WriteFile(conf, fmt.Appendf(nil, benchBrokerConf, port), 0o600); err != nil {
		return nil, err
	}
	b := &benchBroker{url: fmt.Sprintf("tcp://127.0.0.1:%d", port), cmd: exec.Command(bin, "-c", conf)}
	stderr, err := b.cmd.StderrPipe()
	if err != nil {
		return nil, err
	}
	if err := b.cmd.Start(); err != nil {
		return nil, fmt.Errorf("start mosquitto: %w", err)
	}
	running := make(chan bool, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		said := false
		for sc.Scan() {
			b.mu.Lock()
			b.log.WriteString(sc.Text() + "\n")
			b.mu.Unlock()
			if !said && strings.Contains(sc.Text(), " running") {
				said = true
				running <- true
			}
		}
		if !said {
			running <- false
		}
		io.Copy(io.Discard, stderr)
	}()
	select {
	case ok := <-running:
		if ok {
			return b, nil
		}
	case <-time.After(10 * time.Second):
	}
	b.stop()
	return nil, fmt.Errorf("mosquitto did not start:\n%s", b.output())
}

// dropped reports whether the broker said it dropped messages.
func (b *benchBroker) dropped() bool { return strings.Contains(b.output(), "being dropped") }

func (b *benchBroker) output() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.log.String()
}

func (b *benchBroker) stop() {
	b.cmd.Process.Kill()
	b.cmd.Wait()
}
