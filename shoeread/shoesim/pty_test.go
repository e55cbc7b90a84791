package shoesim

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/creack/pty"
	"go.bug.st/serial"
)

// The symlink follows the pseudo-terminal: there while plugged in, gone
// while unplugged, at the new device after a replug, gone after Close.
func TestPTYLink(t *testing.T) {
	link := filepath.Join(t.TempDir(), "by-id", "shoe")
	if err := os.MkdirAll(filepath.Dir(link), 0o755); err != nil {
		t.Fatal(err)
	}
	p, err := OpenPTY(link)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	first := p.Path()
	if !strings.HasPrefix(first, "/dev/pts/") {
		t.Fatalf("Path() = %q, want /dev/pts/N", first)
	}
	if target, err := os.Readlink(link); err != nil || target != first {
		t.Fatalf("link -> %q, %v; want %q", target, err, first)
	}
	if err := p.Unplug(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(link); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("link while unplugged: %v, want it gone", err)
	}
	if _, err := os.Stat(first); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("%s while unplugged: %v, want it gone", first, err)
	}
	if p.Path() != "" {
		t.Fatalf("Path() while unplugged = %q", p.Path())
	}
	if err := p.Replug(); err != nil {
		t.Fatal(err)
	}
	if target, err := os.Readlink(link); err != nil || target != p.Path() {
		t.Fatalf("link after replug -> %q, %v; want %q", target, err, p.Path())
	}
	entries, _ := os.ReadDir(filepath.Dir(link))
	if len(entries) != 1 {
		t.Fatalf("link directory holds %d entries, want the link alone (no temporary left)", len(entries))
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(link); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("link after Close: %v, want it gone", err)
	}
	if err := p.Replug(); err == nil {
		t.Fatal("Replug after Close succeeded")
	}
}

func TestPTYRefusesToReplaceAFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "config.json")
	if err := os.WriteFile(path, []byte("{}"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := OpenPTY(path); err == nil || !strings.Contains(err.Error(), "not a symlink") {
		t.Fatalf("OpenPTY over a file: %v", err)
	}
	if b, _ := os.ReadFile(path); string(b) != "{}" {
		t.Fatal("the file was touched")
	}
}

// What the shoe writes before anyone opens the port waits in the terminal,
// byte for byte (raw mode: no CR/LF translation), for the reader that
// opens it with go.bug.st/serial.
func TestPTYRawBeforeOpen(t *testing.T) {
	p, err := OpenPTY("")
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	want := []byte("$HB,1*17\r\n\r\x00\xff$CARD,2,KH*17\r\n")
	ctx := context.Background()
	if err := p.Write(ctx, want); err != nil {
		t.Fatal(err)
	}
	port, err := serial.Open(p.Path(), &serial.Mode{BaudRate: 115200})
	if err != nil {
		t.Fatal(err)
	}
	defer port.Close()
	if err := port.SetReadTimeout(10 * time.Second); err != nil { // a guard only
		t.Fatal(err)
	}
	got := make([]byte, 0, len(want))
	buf := make([]byte, 64)
	for len(got) < len(want) {
		n, err := port.Read(buf)
		if err != nil || n == 0 {
			t.Fatalf("read after %q: %d, %v", got, n, err)
		}
		got = append(got, buf[:n]...)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("read %q, want %q", got, want)
	}
}

// A write blocked on a full terminal (nobody reading) gives up when its
// context ends, and when the line is unplugged.
func TestPTYBlockedWriteEnds(t *testing.T) {
	p, err := OpenPTY("")
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	big := bytes.Repeat([]byte("x"), 1<<20) // far beyond the terminal's buffer
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- p.Write(ctx, big) }()
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("Write = %v, want context.Canceled", err)
	}
	go func() { done <- p.Write(context.Background(), big) }()
	if err := p.Unplug(); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err == nil {
		t.Fatal("a write blocked across an unplug succeeded")
	}
}

// Port writes a shoe's bytes to a serial device; here the slave side of a
// pseudo-terminal whose master the test reads.
func TestPort(t *testing.T) {
	m, s, err := pty.Open()
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	name := s.Name()
	if err := makeRaw(s); err != nil {
		t.Fatal(err)
	}
	defer s.Close() // keep the pair alive across the Port's unplug
	p, err := OpenPort(name, 9600)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	ctx := context.Background()
	if err := p.Write(ctx, []byte(" [Game]<Card:4S> ")); err != nil {
		t.Fatal(err)
	}
	if err := p.Unplug(); err != nil {
		t.Fatal(err)
	}
	if err := p.Write(ctx, []byte("lost")); err == nil {
		t.Fatal("write while unplugged succeeded")
	}
	if err := p.Replug(); err != nil {
		t.Fatal(err)
	}
	if err := p.Write(ctx, []byte(" [Game]<Card:9H> ")); err != nil {
		t.Fatal(err)
	}
	want := " [Game]<Card:4S>  [Game]<Card:9H> "
	got := make([]byte, len(want))
	if _, err := io.ReadFull(m, got); err != nil {
		t.Fatal(err)
	}
	if string(got) != want {
		t.Fatalf("read %q, want %q", got, want)
	}
	if _, err := OpenPort(filepath.Join(t.TempDir(), "nothing"), 9600); err == nil {
		t.Fatal("OpenPort of a missing device succeeded")
	}
}
