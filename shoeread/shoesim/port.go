package shoesim

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"go.bug.st/serial"
)

// DefaultBaud is the line speed for each protocol: what docs/shoe-protocol.md
// recommends for v1, what the Bee-Tek shoe prints at.
var DefaultBaud = map[string]int{ProtocolV1: 115200, ProtocolBeetek: 9600}

// Port is a real serial port as the shoe's line, for a simulator wired to
// the controller through a null-modem cable or a virtual port pair. Unplug
// closes it and Replug opens it again: the far side sees silence, not a
// vanished device.
type Port struct {
	name string
	mode *serial.Mode

	mu   sync.Mutex
	port serial.Port // nil while unplugged
}

// OpenPort opens the serial port name at baud, 8N1.
func OpenPort(name string, baud int) (*Port, error) {
	p := &Port{name: name, mode: &serial.Mode{BaudRate: baud, DataBits: 8, Parity: serial.NoParity, StopBits: serial.OneStopBit}}
	if err := p.Replug(); err != nil {
		return nil, err
	}
	return p, nil
}

// Path is the port's name.
func (p *Port) Path() string { return p.name }

// Write sends b whole. A serial port does not block for long, so ctx is
// only checked between writes.
func (p *Port) Write(ctx context.Context, b []byte) error {
	p.mu.Lock()
	port := p.port
	p.mu.Unlock()
	if port == nil {
		return errors.New("serial port is unplugged")
	}
	for len(b) > 0 {
		if err := ctx.Err(); err != nil {
			return err
		}
		n, err := port.Write(b)
		if err != nil {
			return fmt.Errorf("serial port %s: %w", p.name, err)
		}
		b = b[n:]
	}
	return nil
}

// Unplug closes the port.
func (p *Port) Unplug() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.port == nil {
		return nil
	}
	err := p.port.Close()
	p.port = nil
	return err
}

// Replug opens the port again.
func (p *Port) Replug() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.port != nil {
		return nil
	}
	port, err := serial.Open(p.name, p.mode)
	if err != nil {
		return fmt.Errorf("open serial port %s: %w", p.name, err)
	}
	p.port = port
	return nil
}

// Close closes the port for good.
func (p *Port) Close() error { return p.Unplug() }
