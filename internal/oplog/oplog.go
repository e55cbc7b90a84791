// Package oplog makes the logger operators read: a level (--log-level) and
// a format (--log-format text|json), and a handler for the libraries that
// log through slog (the embedded broker, mochi-mqtt) that maps their
// messages to levels that mean something to an operator, drops packet
// dumps and never lets an empty message through.
//
// The levels, as the controller uses them: ERROR the table cannot go on as
// configured (the trail cannot be written); WARN something an operator
// acts on (an alert that suspends the table, a refused command, the shoe's
// link lost); INFO what happened (start, commands accepted, the link up);
// DEBUG every recorded row and the libraries' chatter.
package oplog

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"
)

// Formats of --log-format.
const (
	FormatText = "text"
	FormatJSON = "json"
)

// ParseLevel reads --log-level: debug, info, warn or error.
func ParseLevel(s string) (slog.Level, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(s)); err != nil {
		return 0, fmt.Errorf("log level %q: want debug, info, warn or error", s)
	}
	return l, nil
}

// New is the logger writing to w at level and up, as text or JSON.
func New(w io.Writer, level, format string) (*slog.Logger, error) {
	l, err := ParseLevel(level)
	if err != nil {
		return nil, err
	}
	o := &slog.HandlerOptions{Level: l}
	switch format {
	case FormatText, "":
		return slog.New(slog.NewTextHandler(w, o)), nil
	case FormatJSON:
		return slog.New(slog.NewJSONHandler(w, o)), nil
	}
	return nil, fmt.Errorf("log format %q: want text or json", format)
}

// Library wraps a logger for a third-party part named component: its
// records pass through Map first.
func Library(log *slog.Logger, component string) *slog.Logger {
	return slog.New(&libHandler{next: log.Handler(), component: component}).With("component", component)
}

// Demoted are the library messages that say nothing an operator acts on,
// logged at DEBUG whatever level the library gave them: the broker's own
// start-up chatter and a client's bad packet (the client's problem, and
// the client is told), or a client's keepalive below mochi's liking (one
// a client chooses, as often as it connects: the broker holds it to its own
// bounds anyway, internal/mqttbroker).
var Demoted = map[string]bool{
	"client keepalive is below minimum recommended value and may exhibit connection instability": true,
	"added hook":                 true,
	"attached listener":          true,
	"mochi mqtt starting":        true,
	"mochi mqtt server started":  true,
	"gracefully stopping server": true,
	"mochi mqtt server stopped":  true,
	"stopping hook":              true,
	"error processing packet":    true,
}

// dumps are attribute keys libraries put whole packets under.
var dumps = map[string]bool{"pk": true, "packet": true, "m": true, "data": true}

type libHandler struct {
	next      slog.Handler
	component string
}

func (h *libHandler) Enabled(ctx context.Context, l slog.Level) bool {
	// A message may be demoted, never promoted: ask for the lowest.
	return h.next.Enabled(ctx, slog.LevelDebug) || h.next.Enabled(ctx, l)
}

func (h *libHandler) Handle(ctx context.Context, r slog.Record) error {
	out := Map(r, h.component)
	if !h.next.Enabled(ctx, out.Level) {
		return nil
	}
	return h.next.Handle(ctx, out)
}

func (h *libHandler) WithAttrs(as []slog.Attr) slog.Handler {
	keep := make([]slog.Attr, 0, len(as))
	for _, a := range as {
		if a, ok := clean(a); ok {
			keep = append(keep, a)
		}
	}
	return &libHandler{next: h.next.WithAttrs(keep), component: h.component}
}

func (h *libHandler) WithGroup(name string) slog.Handler {
	return &libHandler{next: h.next.WithGroup(name), component: h.component}
}

// Map is what Library does to one record: demoted messages at DEBUG,
// packet dumps and byte slices left out (their size kept), and an empty
// message named by its component and its first attribute.
func Map(r slog.Record, component string) slog.Record {
	msg, level := r.Message, r.Level
	if Demoted[msg] && level > slog.LevelDebug {
		level = slog.LevelDebug
	}
	var attrs []slog.Attr
	r.Attrs(func(a slog.Attr) bool {
		if a, ok := clean(a); ok {
			attrs = append(attrs, a)
		}
		return true
	})
	if strings.TrimSpace(msg) == "" {
		// mochi-mqtt's listeners log a client connection's read error
		// with no message at WARN: one client's problem, at INFO, and a
		// connection closed at shutdown, at DEBUG.
		msg = component
		if len(attrs) > 0 {
			msg += ": " + attrs[0].Key + " " + attrs[0].Value.String()
		}
		if level > slog.LevelInfo {
			level = slog.LevelInfo
		}
		if strings.Contains(msg, "use of closed network connection") {
			level = slog.LevelDebug
		}
	}
	out := slog.NewRecord(r.Time, level, msg, r.PC)
	out.AddAttrs(attrs...)
	return out
}

// clean leaves out a packet dump, and puts a byte slice's size for its bytes.
func clean(a slog.Attr) (slog.Attr, bool) {
	if dumps[a.Key] {
		return a, false
	}
	if b, ok := a.Value.Any().([]byte); ok {
		return slog.Int(a.Key+"_bytes", len(b)), true
	}
	return a, true
}
