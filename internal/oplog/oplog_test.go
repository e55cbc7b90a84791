package oplog

import (
	"bytes"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"testing"
)

func TestNew(t *testing.T) {
	for _, tt := range []struct {
		level, format string
		debug, info   bool
		json          bool
	}{
		{"debug", "text", true, true, false},
		{"info", "json", false, true, true},
		{"WARN", "", false, false, false},
		{"error", "json", false, false, true},
	} {
		var b bytes.Buffer
		l, err := New(&b, tt.level, tt.format)
		if err != nil {
			t.Fatal(err)
		}
		l.Debug("d")
		l.Info("i")
		l.Error("e", "k", 1)
		out := b.String()
		if strings.Contains(out, "msg=d") || strings.Contains(out, `"msg":"d"`) {
			if !tt.debug {
				t.Errorf("%s: debug shown", tt.level)
			}
		} else if tt.debug {
			t.Errorf("%s: debug hidden", tt.level)
		}
		if got := strings.Contains(out, "msg=i") || strings.Contains(out, `"msg":"i"`); got != tt.info {
			t.Errorf("%s: info shown %v", tt.level, got)
		}
		if tt.json {
			for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
				if !json.Valid([]byte(line)) {
					t.Errorf("not JSON: %q", line)
				}
			}
		}
	}
	for _, bad := range [][2]string{{"loud", "text"}, {"info", "xml"}} {
		if _, err := New(&bytes.Buffer{}, bad[0], bad[1]); err == nil {
			t.Errorf("%v accepted", bad)
		}
	}
}

type packet struct {
	Payload []byte
	Topic   string
}

// TestLibrary: the embedded broker's messages as mochi-mqtt logs them come
// out at levels that mean something, without packet dumps or empty
// messages.
func TestLibrary(t *testing.T) {
	var b bytes.Buffer
	base := slog.New(slog.NewTextHandler(&b, &slog.HandlerOptions{Level: slog.LevelInfo}))
	l := Library(base, "mqtt-broker")
	pk := packet{Payload: []byte("a long payload that would be dumped as decimal bytes"), Topic: "t"}
	l.Warn("error processing packet", "error", errors.New("protocol violation"), "client", "c1", "pk", pk)
	l.Info("attached listener", "id", "t1")
	l.Warn("", "error", errors.New("read tcp 127.0.0.1:1884->127.0.0.1:5000: connection reset by peer"))
	l.Warn("", "error", errors.New("read tcp 127.0.0.1:1884->127.0.0.1:5001: use of closed network connection"))
	l.Info("client failed authentication check", "username", "x", "raw", []byte{1, 2, 3})
	out := b.String()
	for _, bad := range []string{"error processing packet", "attached listener", "Payload", "[97 32", `msg=""`, "use of closed"} {
		if strings.Contains(out, bad) {
			t.Errorf("output has %q:\n%s", bad, out)
		}
	}
	for _, want := range []string{`level=INFO msg="mqtt-broker: error read tcp 127.0.0.1:1884->127.0.0.1:5000: connection reset by peer" component=mqtt-broker`, "client failed authentication check", "raw_bytes=3"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	// At debug the demoted ones show, still without the dump.
	b.Reset()
	l = Library(slog.New(slog.NewTextHandler(&b, &slog.HandlerOptions{Level: slog.LevelDebug})), "mqtt-broker")
	l.Warn("error processing packet", "client", "c1", "pk", pk)
	if out := b.String(); !strings.Contains(out, `level=DEBUG msg="error processing packet"`) || strings.Contains(out, "Payload") {
		t.Errorf("debug: %s", out)
	}
}
