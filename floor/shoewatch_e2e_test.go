package floor_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tablectl/tablectl/audit"
	"github.com/tablectl/tablectl/coup"
	"github.com/tablectl/tablectl/floor"
	"github.com/tablectl/tablectl/internal/floorsim"
	"github.com/tablectl/tablectl/internal/floortest"
	"github.com/tablectl/tablectl/internal/testenv"
	"github.com/tablectl/tablectl/shoeread/shoesim"
)

// TestShuffleSuspectTableAndFloor is issue 33's end to end: a simulated
// shoe deals a whole shoe through a pseudo-terminal into a controller
// process, then the same cards cut at a place the seed picks. The table
// raises shuffle_suspect (its own memory of its shoes), and so does the
// floor's witness (its memory of every table's), each naming the shoe
// before.
func TestShuffleSuspectTableAndFloor(t *testing.T) {
	testenv.Long(t, "the floor's shuffle check end to end (a NATS cluster, a controller process)")
	floortest.Cluster(t, 1) // skips or fails here when nats-server is missing
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	var mu sync.Mutex
	var floorAlert *floor.Alert
	f, err := floorsim.Start(ctx, floorsim.Options{Dir: t.TempDir(), Tables: 1, Nodes: 1, Witness: 1,
		CardPace: 10 * time.Millisecond, CoupPace: 500 * time.Millisecond, Seed: 33, Shuffle: shoesim.ShuffleRecut,
		Exe: exe, Env: []string{childEnv + "=1"}, Log: testLog(t),
		OnAlert: func(a floor.Alert) {
			mu.Lock()
			defer mu.Unlock()
			if a.Kind == floor.AlertShuffleSuspect && a.State == "raised" && floorAlert == nil {
				floorAlert = &a
			}
		}})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	table := f.Tables[0]
	floorSeen := func() *floor.Alert { // the witness's goroutine sets it
		mu.Lock()
		defer mu.Unlock()
		return floorAlert
	}
	var tableAlert *coup.Alert
	var fa *floor.Alert
	if err := testenv.WaitFor(ctx, "shuffle_suspect on the table and the floor", func() bool {
		if tableAlert == nil {
			tableAlert = suspectInTrail(t, table.Trail)
		}
		fa = floorSeen()
		return tableAlert != nil && fa != nil
	}); err != nil {
		t.Fatalf("%v: on the table %v, on the floor %v; the trail: %s; the controller's log:\n%s",
			err, tableAlert, fa, trailSummary(table.Trail), table.Log())
	}
	table.StopDealing()
	t.Logf("table: %s", tableAlert.Message)
	t.Logf("floor: %s", fa.Message)
	if tableAlert.Shoe != 2 || !strings.Contains(tableAlert.Message, "of the shoe before this one") {
		t.Errorf("the table's alert: shoe %d, %q", tableAlert.Shoe, tableAlert.Message)
	}
	if fa.Table != table.ID || fa.Tamper || !strings.Contains(fa.Message, "shoe 2 of "+table.ID) ||
		!strings.Contains(fa.Message, "this table's shoe 1") {
		t.Errorf("the floor's alert: %+v", fa)
	}
}

// suspectInTrail is the first shuffle_suspect alert in a table's trail.
func suspectInTrail(t *testing.T, trail string) *coup.Alert {
	t.Helper()
	ctx := context.Background()
	rd, err := audit.OpenReader(ctx, trail)
	if err != nil {
		return nil // not made yet
	}
	defer rd.Close()
	for row, err := range rd.Events(ctx, audit.Query{}) {
		if err != nil {
			return nil
		}
		if row.Kind != string(coup.EvAlert) {
			continue
		}
		var ev coup.Event
		if json.Unmarshal(row.Body, &ev) == nil && ev.Alert != nil && ev.Alert.Kind == coup.AlertShuffleSuspect {
			return ev.Alert
		}
	}
	return nil
}

// trailSummary counts a trail's rows by kind, for a failure's report.
func trailSummary(trail string) string {
	ctx := context.Background()
	rd, err := audit.OpenReader(ctx, trail)
	if err != nil {
		return err.Error()
	}
	defer rd.Close()
	n := map[string]int{}
	var first, last audit.Record
	for row, err := range rd.Events(ctx, audit.Query{}) {
		if err != nil {
			return err.Error()
		}
		n[row.Kind]++
		last = row
		if row.Kind == string(coup.EvAlert) && first.Seq == 0 {
			first = row
		}
	}
	return fmt.Sprintf("%v; first alert, row %d: %.300s; last row %d %s shoe %d: %.200s", n, first.Seq, first.Body, last.Seq, last.Kind, last.Shoe, last.Body)
}
