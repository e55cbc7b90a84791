// Package floortest gives the floor's tests their outside parts: a
// PostgreSQL schema of their own (dropped afterwards) and a NATS cluster on
// loopback (internal/natsserver), each skipped or failed through
// internal/testenv when missing.
package floortest

import (
	"bufio"
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/tablectl/tablectl/internal/natsserver"
	"github.com/tablectl/tablectl/internal/testenv"
)

// PostgresEnv overrides the test database's URL.
const PostgresEnv = "TABLECTL_TEST_POSTGRES"

// PostgresURL is the test database: 127.0.0.1:5432, database test.
func PostgresURL() string {
	if u := os.Getenv(PostgresEnv); u != "" {
		return u
	}
	return "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"
}

// Postgres returns a pool on the test database and a schema name no other
// test uses; the schema is dropped when the test ends.
func Postgres(t testing.TB) (*pgxpool.Pool, string) {
	t.Helper()
	testenv.Listening(t, "127.0.0.1:5432", "PostgreSQL (Debian package postgresql, database test, trust auth for 127.0.0.1)")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cfg, err := pgxpool.ParseConfig(PostgresURL())
	if err != nil {
		t.Fatal(err)
	}
	cfg.MaxConns = 8
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err == nil {
		err = pool.Ping(ctx)
	}
	if err != nil {
		testenv.Missing(t, "PostgreSQL database test at "+PostgresURL()+": "+err.Error())
		return nil, ""
	}
	schema := "t_" + strings.ToLower(rand.Text()[:12])
	t.Cleanup(func() {
		if os.Getenv("TABLECTL_KEEP_SCHEMA") == "" {
			pool.Exec(context.Background(), "DROP SCHEMA IF EXISTS "+pgx.Identifier{schema}.Sanitize()+" CASCADE")
		} else {
			t.Logf("schema %s kept", schema)
		}
		pool.Close()
	})
	return pool, schema
}

// Cluster runs an n-node NATS cluster (JetStream, MQTT listeners) for the
// test; it is stopped when the test ends.
func Cluster(t testing.TB, n int) *natsserver.Cluster { return ClusterAuth(t, n, "") }

// ClusterAuth is Cluster with the nodes' authorization block auth (the
// floor's logins: floor.AuthConfig); empty: anonymous clients.
func ClusterAuth(t testing.TB, n int, auth string) *natsserver.Cluster {
	t.Helper()
	if _, err := natsserver.Binary(); err != nil {
		testenv.Missing(t, err.Error())
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c, err := natsserver.StartAuth(ctx, t.TempDir(), n, auth)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			for i := range c.Nodes {
				t.Logf("nats-server %s said (last lines):\n%s", c.Nodes[i].Name, lastLines(c.Log(i), 20))
			}
		}
		c.Stop()
	})
	return c
}

func lastLines(s string, n int) string {
	l := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(l) > n {
		l = l[len(l)-n:]
	}
	return strings.Join(l, "\n")
}

// PlaintextNATS speaks NATS's protocol in clear to addr (host:port), as a
// client written from the protocol's text would, whatever the server's
// INFO asks: CONNECT (with user and password when given) and PING. It
// returns what the server answered and whether that was PONG (the
// connection taken). A client library would upgrade to TLS when the
// server asks for it; this one does not, so it shows what the server
// does with a client that stays in clear.
func PlaintextNATS(addr, user, password string) (answer string, taken bool) {
	return rawNATS(addr, nil, false, user, password)
}

// TLSNATS is PlaintextNATS over TLS with cfg after the server's INFO (a
// client port's way).
func TLSNATS(addr string, cfg *tls.Config, user, password string) (answer string, taken bool) {
	return rawNATS(addr, cfg, false, user, password)
}

// TLSRoute is PlaintextNATS over TLS with cfg from the first byte (a
// route port's way, which sends its INFO after the handshake): with the
// floor's CA and no client certificate, what a route port that verifies
// its peers refuses.
func TLSRoute(addr string, cfg *tls.Config) (answer string, taken bool) {
	return rawNATS(addr, cfg, true, "", "")
}

func rawNATS(addr string, cfg *tls.Config, tlsFirst bool, user, password string) (answer string, taken bool) {
	raw, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		return "dial: " + err.Error(), false
	}
	defer raw.Close()
	raw.SetDeadline(time.Now().Add(10 * time.Second))
	var c net.Conn = raw
	upgrade := func() error {
		cfg = cfg.Clone()
		cfg.ServerName, _, _ = net.SplitHostPort(addr)
		tc := tls.Client(raw, cfg)
		if err := tc.Handshake(); err != nil {
			return err
		}
		c = tc
		return nil
	}
	if cfg != nil && tlsFirst {
		if err := upgrade(); err != nil {
			return "TLS handshake: " + err.Error(), false
		}
	}
	r := bufio.NewReader(c)
	info, err := r.ReadString('\n')
	if err != nil {
		return "no INFO: " + err.Error(), false
	}
	if cfg != nil && !tlsFirst {
		if err := upgrade(); err != nil {
			return "TLS handshake: " + err.Error(), false
		}
		r = bufio.NewReader(c)
	}
	connect, _ := json.Marshal(map[string]any{"verbose": false, "pedantic": false, "tls_required": false, "user": user, "pass": password, "protocol": 1})
	if _, err := fmt.Fprintf(c, "CONNECT %s\r\nPING\r\n", connect); err != nil {
		return "write: " + err.Error(), false
	}
	answer, err = r.ReadString('\n')
	if err != nil {
		answer = fmt.Sprintf("%s(then %v; INFO said %.80s)", answer, err, strings.TrimSpace(info))
	}
	return strings.TrimSpace(answer), strings.HasPrefix(answer, "PONG")
}

// PlaintextMQTT sends an MQTT 3.1.1 CONNECT in clear to addr, with the
// login when given, and returns what came back and whether it was a
// CONNACK accepting the connection.
func PlaintextMQTT(addr, clientID, user, password string) (answer string, taken bool) {
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		return "dial: " + err.Error(), false
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	str := func(s string) []byte { return append([]byte{byte(len(s) >> 8), byte(len(s))}, s...) }
	flags := byte(0x02) // clean session
	body := append([]byte{}, str("MQTT")...)
	payload := str(clientID)
	if user != "" {
		flags |= 0xC0
		payload = append(append(payload, str(user)...), str(password)...)
	}
	body = append(append(body, 4, flags, 0, 30), payload...)
	pkt := append([]byte{0x10, byte(len(body))}, body...)
	if _, err := c.Write(pkt); err != nil {
		return "write: " + err.Error(), false
	}
	resp := make([]byte, 4)
	n, err := io.ReadFull(c, resp)
	if err != nil {
		return fmt.Sprintf("% x (then %v)", resp[:n], err), false
	}
	return fmt.Sprintf("CONNACK % x", resp), resp[0] == 0x20 && resp[3] == 0
}
