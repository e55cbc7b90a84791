package main

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/tablectl/tablectl/internal/testenv"
)

// floorOnly are the modules only the floor runs (cmd/tablectl-floor): a
// table box ships none of them.
var floorOnly = []string{
	"github.com/nats-io/nats-server",
	"github.com/nats-io/nats.go",
	"github.com/nats-io/jwt",
	"github.com/jackc/pgx",
	"github.com/antithesishq/",
	"github.com/tablectl/tablectl/floor",
	"github.com/tablectl/tablectl/internal/floorsim",
	"github.com/tablectl/tablectl/internal/natsserver",
}

// TestNoFloorInTheTable: the table's binary carries no part of the floor
// (issue 30: every table box shipped a NATS server and a PostgreSQL
// driver it never used).
func TestNoFloorInTheTable(t *testing.T) {
	gobin, err := exec.LookPath("go")
	if err != nil {
		testenv.Missing(t, "the go command on PATH, to list tablectl's dependencies")
	}
	out, err := exec.Command(gobin, "list", "-deps", "github.com/tablectl/tablectl/cmd/tablectl").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	deps := strings.Fields(string(out))
	if len(deps) < 50 {
		t.Fatalf("go list -deps listed %d packages: not tablectl's", len(deps))
	}
	for _, d := range deps {
		for _, f := range floorOnly {
			if d == f || strings.HasPrefix(d, strings.TrimSuffix(f, "/")+"/") || strings.HasPrefix(d, f) && strings.HasSuffix(f, "/") {
				t.Errorf("cmd/tablectl depends on %s (floor only: it belongs in cmd/tablectl-floor)", d)
			}
		}
	}
}
