// Package logtail keeps the newest part of a log that several goroutines
// write, so that a child process's or a test's failure can show its last
// lines without the whole run's log held in memory.
package logtail

import (
	"strings"
	"sync"
)

// DefaultKeep is what a Buffer with Keep 0 keeps: 64 KiB.
const DefaultKeep = 64 << 10

// Buffer is an io.Writer that keeps the last Keep bytes written to it
// (DefaultKeep when Keep is 0). The zero Buffer is ready to use.
type Buffer struct {
	Keep int

	mu sync.Mutex
	b  []byte
}

func (l *Buffer) Write(p []byte) (int, error) {
	keep := l.Keep
	if keep <= 0 {
		keep = DefaultKeep
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.b = append(l.b, p...)
	if len(l.b) > keep {
		l.b = append([]byte(nil), l.b[len(l.b)-keep:]...)
	}
	return len(p), nil
}

// String is what the buffer holds.
func (l *Buffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return string(l.b)
}

// Lines is the last n whole lines of s (what follows its last newline is
// not a whole line).
func Lines(s string, n int) string {
	lines := strings.SplitAfter(s, "\n")
	lines = lines[:len(lines)-1]
	return strings.Join(lines[max(0, len(lines)-n):], "")
}
