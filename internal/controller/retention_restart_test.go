package controller

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tablectl/tablectl/audit"
	"github.com/tablectl/tablectl/base/clock"
	"github.com/tablectl/tablectl/coup"
	"github.com/tablectl/tablectl/internal/config"
	"github.com/tablectl/tablectl/internal/testenv"
	"github.com/tablectl/tablectl/signedcmd"
)

// TestRestartAfterRetention: a table on a directory trail (a segment per
// gaming day, cut at 06:00) plays a week of simulated days on a fake
// clock, archiving each sealed segment and deleting those past keep_days
// (1) from the box, and is restarted in the middle of each day and after
// each night's cut-over and sweep. Every start succeeds on what is left
// on the box, even once the oldest segment kept starts past half the head
// (where the search for recent command ids used to ask for a row that
// retention had removed); the box's trail verifies with the key; and a
// command accepted just before a restart is still refused as replayed
// after it, so the ids the start reads back are the right ones.
func TestRestartAfterRetention(t *testing.T) {
	testenv.Long(t, "retention over simulated days, a restart after each")
	dir := t.TempDir()
	keys := t.TempDir()
	cpKey, cpPub, err := audit.GenerateKey(keys)
	if err != nil {
		t.Fatal(err)
	}
	sup := newTestSupervisors(t, keys, "alice")
	doc := fmt.Sprintf(`{"table_id":"RET-01","profile":"vip","shoe":{"port":{"path":%q}},
		"audit":{"dir":"trail","archive_dir":"archive","keep_days":1,"checkpoint_key":%q},
		"mqtt":{"listen":"127.0.0.1:0","ws_listen":"off",%s}}`, filepath.Join(dir, "no-shoe"), cpKey, sup.mqttConfig())
	cfg, tc, err := config.Parse([]byte(doc), dir)
	if err != nil {
		t.Fatal(err)
	}
	trail := filepath.Join(dir, "trail")
	clk := clock.NewFake(time.Date(2026, 11, 2, 12, 0, 0, 0, time.UTC))
	logs := &syncBuffer{}
	log := slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
	defer func() {
		if t.Failed() {
			t.Logf("last log lines:\n%s", logs.tail(60))
		}
	}()

	var ctl *Controller
	var stop func()
	start := func(what string) {
		t.Helper()
		var err error
		if ctl, stop, err = runInProcess(t, cfg, tc, log, Hooks{Clock: clk}); err != nil {
			t.Fatalf("%s: start: %v", what, err)
		}
	}
	send := func(c signedcmd.Command) []audit.Record { return handIn(t, ctl, sup.sign(t, c, "alice")) }
	command := func(action string) signedcmd.Command {
		return signedcmd.Command{Table: "RET-01", ID: signedcmd.NewID(), Action: action, Supervisor: "alice", IssuedAt: signedcmd.FormatTime(clk.Now()), Reason: "day's play"}
	}
	accepted := func(rows []audit.Record) bool {
		for _, r := range rows {
			if r.Kind == "command_accepted" {
				return true
			}
		}
		return false
	}

	const days = 7
	pastHalf := 0
	for day := range days {
		start(fmt.Sprintf("day %d", day))
		// The day's play: a supervisor suspends and resumes the table
		// every few minutes.
		var last signedcmd.Command
		for i := range 40 {
			clk.Advance(3 * time.Minute)
			last = command([]string{coup.ActionSuspend, coup.ActionResume}[i%2])
			if rows := send(last); !accepted(rows) {
				t.Fatalf("day %d: %s not accepted: %s", day, last.Action, rowKinds(rows))
			}
		}
		// What the start's sweep leaves on the box: the segment sealed this
		// morning; the one before is more than a day old.
		boxHolds(t, trail, min(day, 1), fmt.Sprintf("day %d", day))
		head := ctl.rec.Store().Head().Seq
		first := int64(1)
		if segs := ctl.rec.Store().SealedSegments(); len(segs) > 0 {
			first = segs[0].Base.Seq + 1
		}
		if first > head/2 {
			pastHalf++
		}
		t.Logf("day %d: head %d, the box keeps rows %d on", day, head, first)
		// A restart in the middle of the day: the last command, sent
		// again, is a replay.
		stop()
		clk.Advance(20 * time.Second)
		start(fmt.Sprintf("day %d, midday", day))
		if rows := send(last); accepted(rows) || !slices.ContainsFunc(rows, func(r audit.Record) bool {
			return r.Kind == audit.KindRejected && strings.Contains(string(r.Body), `"code":"replayed"`)
		}) {
			t.Fatalf("day %d: %s sent again after a restart: %s", day, last.Action, rowKinds(rows))
		}
		// The night: past the gaming day's end the table, between coups,
		// is cut; the sealed segment is archived and those sealed more
		// than a day ago are deleted.
		next := time.Date(2026, 11, 3+day, 7, 0, 0, 0, time.UTC)
		clk.Set(next)
		ctl.rec.CutIfDue(context.Background())
		boxHolds(t, trail, min(day+1, 2), fmt.Sprintf("day %d's cut-over", day))
		stop()
		verifyTrail(t, trail, cpPub)
		clk.Set(next.Add(5 * time.Hour))
	}
	if pastHalf < 2 {
		t.Fatalf("the oldest segment kept started past half the head at %d restarts, want 2 or more: the test did not reach the case", pastHalf)
	}
	start("the last day")
	if !strings.Contains(logs.tail(1<<20), "command ids remembered from the trail") {
		t.Error("no start remembered a command id")
	}
	stop()
}

// boxHolds waits until the directory trail holds sealed segments, each
// archived, and the live one.
func boxHolds(t *testing.T, trail string, sealed int, what string) {
	t.Helper()
	testenv.Eventually(t, guard, fmt.Sprintf("%s: %d sealed segments, all archived, and the live one", what, sealed), func() bool {
		files, err := audit.ListSegments(trail)
		if err != nil || len(files) != sealed+1 {
			return false
		}
		for _, f := range files[:sealed] {
			if !audit.Archived(f) {
				return false
			}
		}
		return true
	})
}

func rowKinds(rows []audit.Record) string {
	var b strings.Builder
	for _, r := range rows {
		fmt.Fprintf(&b, "%d %s %s\n", r.Seq, r.Kind, r.Body)
	}
	return b.String()
}
