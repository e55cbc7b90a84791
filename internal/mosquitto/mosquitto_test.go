package mosquitto

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tablectl/tablectl/internal/freeport"
	"github.com/tablectl/tablectl/internal/testenv"
)

func writeConf(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "mosquitto.conf")
	if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestStartAndKill: Start returns with the listener open; Kill closes it.
func TestStartAndKill(t *testing.T) {
	testenv.Command(t, "mosquitto", "mosquitto")
	port, err := freeport.Loopback()
	if err != nil {
		t.Fatal(err)
	}
	conf := writeConf(t, fmt.Sprintf("listener %d 127.0.0.1\nallow_anonymous true\nuser root\nlog_dest stderr\nlog_type information\n", port))
	p, err := Start(conf, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	c, err := net.DialTimeout("tcp", addr, 2*time.Second)
	if err != nil {
		p.Kill()
		t.Fatalf("Start returned but %s does not answer: %v\n%s", addr, err, p.Log())
	}
	c.Close()
	if !strings.Contains(p.Log(), "running") {
		t.Errorf("log lacks the running line:\n%s", p.Log())
	}
	p.Kill()
	if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
		c.Close()
		t.Fatalf("%s still answers after Kill", addr)
	}
}

// TestStartRefusesABadConfig: a broker that will not start is an error
// that says what it said.
func TestStartRefusesABadConfig(t *testing.T) {
	testenv.Command(t, "mosquitto", "mosquitto")
	conf := writeConf(t, "log_dest stderr\nno_such_option 1\n")
	p, err := Start(conf, 10*time.Second)
	if err == nil {
		p.Kill()
		t.Fatal("a broker with a bad configuration started")
	}
	if !strings.Contains(err.Error(), "no_such_option") {
		t.Fatalf("error %q does not carry the broker's complaint", err)
	}
}
