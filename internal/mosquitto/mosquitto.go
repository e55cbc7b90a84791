// Package mosquitto runs a Mosquitto broker as a child process: the bench
// measures against one of its own, and tests stop and restart one to play
// a broker outage. The configuration is the caller's.
package mosquitto

import (
	"bufio"
	"fmt"
	"io"
	"os/exec"
	"strings"
	"sync"
	"time"
)

// Process is a running Mosquitto.
type Process struct {
	cmd *exec.Cmd

	mu  sync.Mutex
	log strings.Builder
}

// Start runs `mosquitto -c conf` and returns once the broker says it is
// running, which it does once its listeners are open. The configuration
// must log to stderr at information level (the "running" line). A broker
// that exits or stays silent for wait is an error carrying what it said.
func Start(conf string, wait time.Duration) (*Process, error) {
	bin, err := exec.LookPath("mosquitto")
	if err != nil {
		return nil, fmt.Errorf("mosquitto is not installed: %w", err)
	}
	p := &Process{cmd: exec.Command(bin, "-c", conf)}
	stderr, err := p.cmd.StderrPipe()
	if err != nil {
		return nil, err
	}
	if err := p.cmd.Start(); err != nil {
		return nil, fmt.Errorf("start mosquitto: %w", err)
	}
	running := make(chan bool, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		said := false
		for sc.Scan() {
			line := sc.Text()
			p.mu.Lock()
			p.log.WriteString(line + "\n")
			p.mu.Unlock()
			if !said && strings.Contains(line, " running") {
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
			return p, nil
		}
		p.cmd.Wait()
		return nil, fmt.Errorf("mosquitto did not start:\n%s", p.Log())
	case <-time.After(wait):
		p.Kill()
		return nil, fmt.Errorf("mosquitto silent for %s:\n%s", wait, p.Log())
	}
}

// Kill kills the broker, as a crash or a power cut would: no clean
// shutdown, no last words to clients.
func (p *Process) Kill() {
	p.cmd.Process.Kill()
	p.cmd.Wait()
}

// Log is what the broker has written so far.
func (p *Process) Log() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.log.String()
}
