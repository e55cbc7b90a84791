// Package floortest gives the floor's tests their outside parts: a
// PostgreSQL schema of their own (dropped afterwards) and a NATS cluster on
// loopback (internal/natsserver), each skipped or failed through
// internal/testenv when missing.
package floortest

import (
	"context"
	"crypto/rand"
	"fmt"
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

var _ = fmt.Sprintf
