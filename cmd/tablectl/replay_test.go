package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tablectl/tablectl/audit"
	"github.com/tablectl/tablectl/base/clock"
	"github.com/tablectl/tablectl/base/mqttconn"
	"github.com/tablectl/tablectl/coup"
	"github.com/tablectl/tablectl/internal/mqtttest"
)

var updateReplay = flag.Bool("update-replay", false, "rewrite the replay golden files")

// writeTrail records two coups (the first voided after it completed, the
// second with an unreadable card entered by hand) through the recorder.
func writeTrail(t *testing.T, path string) { writeTrailCut(t, path, nil) }

// writeTrailCut is writeTrail; with segments, path is a directory trail
// cut over between the two coups.
func writeTrailCut(t *testing.T, path string, segments *audit.SegmentPolicy) {
	t.Helper()
	ctx := context.Background()
	p, _ := coup.BuiltinProfile(coup.ProfileVIP)
	rec, err := audit.OpenRecorder(ctx, path, audit.RecorderOptions{Table: "T9", Config: coup.DefaultTableConfig(p),
		Clock: clock.NewStepping(time.Date(2026, 11, 22, 20, 0, 1, 0, time.UTC), time.Second), Logger: discardLogger(), Segments: segments})
	if err != nil {
		t.Fatal(err)
	}
	defer rec.Close()
	seq := uint32(0)
	shoe := func(in coup.Input) {
		seq++
		in.ShoeSeq = seq
		if _, err := rec.Submit(ctx, in); err != nil {
			t.Fatal(err)
		}
	}
	card := func(list string) {
		for _, s := range strings.Split(list, ",") {
			if s == "??" {
				shoe(coup.Input{Kind: coup.InCard, Unreadable: true})
				continue
			}
			c, err := coup.ParseCard(s)
			if err != nil {
				t.Fatal(err)
			}
			shoe(coup.Input{Kind: coup.InCard, Card: &c})
		}
	}
	btn := func(b string) { shoe(coup.Input{Kind: coup.InButton, Button: b}) }
	cmd := func(c coup.Command) {
		if _, err := rec.Submit(ctx, coup.Input{Kind: coup.InCmd, Command: &c}); err != nil {
			t.Fatal(err)
		}
	}
	btn(coup.ButtonNewShoe)
	card("2S,9C,9D")
	btn(coup.ButtonBurnDone)
	btn(coup.ButtonNoMoreBets)
	card("9S,7H,KD,KC")
	btn(coup.ButtonReveal)
	if segments != nil {
		if err := rec.Cut(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := rec.Submit(ctx, coup.Input{Kind: coup.InTick, At: time.Date(2026, 11, 22, 21, 0, 0, 0, time.UTC)}); err != nil {
		t.Fatal(err)
	}
	cmd(coup.Command{ID: "c1", Action: coup.ActionVoid, Coup: 1, By: "anna", Reason: "wrong shoe order"})
	btn(coup.ButtonNoMoreBets)
	card("6S,6H,??")
	kd := coup.Card{Rank: coup.Seven, Suit: coup.Diamonds}
	cmd(coup.Command{ID: "c2", Action: coup.ActionCard, Card: &kd, By: "anna"})
	card("KC,5H")
	btn(coup.ButtonReveal)
}

func TestReplayAndRecallGolden(t *testing.T) {
	path := filepath.Join(t.TempDir(), "trail.db")
	writeTrail(t, path)
	for _, tt := range []struct {
		args   []string
		golden string
	}{
		{[]string{"replay", "--db", path}, "replay.txt"},
		{[]string{"replay", "--db", path, "--coup", "2", "--json"}, "replay-coup2.jsonl"},
		{[]string{"recall", "--db", path}, "recall.txt"},
	} {
		var out, errb bytes.Buffer
		if code := run(tt.args, &out, &errb); code != 0 {
			t.Fatalf("%v: exit %d: %s", tt.args, code, errb.String())
		}
		golden := filepath.Join("testdata", "replay", tt.golden)
		if *updateReplay {
			os.MkdirAll(filepath.Dir(golden), 0o755)
			os.WriteFile(golden, out.Bytes(), 0o644)
		}
		want, err := os.ReadFile(golden)
		if err != nil {
			t.Fatal(err)
		}
		if out.String() != string(want) {
			t.Errorf("%v:\n got:\n%s\nwant:\n%s", tt.args, out.String(), want)
		}
	}
}

// TestSegmentsCommands: replay, recall, audit verify and audit export take
// a directory of segments (the same trail cut over between its two coups),
// or its files comma-separated, and read across the boundary: recall gives
// the single file's golden coups, from the directory and from the newest
// segment alone; verify passes, and finds files given out of order.
func TestSegmentsCommands(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "trail")
	writeTrailCut(t, dir, &audit.SegmentPolicy{Cutover: 6 * time.Hour})
	files, err := audit.ListSegments(dir)
	if err != nil || len(files) != 2 {
		t.Fatalf("segments %v %v, want 2", files, err)
	}
	want, err := os.ReadFile(filepath.Join("testdata", "replay", "recall.txt"))
	if err != nil {
		t.Fatal(err)
	}
	runOK := func(args ...string) string {
		t.Helper()
		var out, errb bytes.Buffer
		if code := run(args, &out, &errb); code != 0 {
			t.Fatalf("%v: exit %d: %s%s", args, code, out.String(), errb.String())
		}
		return out.String()
	}
	for _, db := range []string{dir, strings.Join(files, ","), files[1]} {
		if got := runOK("recall", "--db", db); got != string(want) {
			t.Errorf("recall --db %s:\n%s\nwant:\n%s", db, got, want)
		}
	}
	if out := runOK("replay", "--db", dir); !strings.Contains(out, "coup 1") || !strings.Contains(out, "coup 2") || strings.Contains(out, "DIFFERENCE") {
		t.Errorf("replay across segments:\n%s", out)
	}
	if out := runOK("audit", "verify", "--db", dir, "--no-signatures"); !strings.HasPrefix(out, "OK: ") || !strings.Contains(out, " in 2 segments,") {
		t.Errorf("verify: %s", out)
	}
	lines := strings.Split(strings.TrimSpace(runOK("audit", "export", "--db", dir)), "\n")
	for i, l := range lines {
		var r audit.Record
		if err := json.Unmarshal([]byte(l), &r); err != nil || r.Seq != int64(i+1) {
			t.Fatalf("export line %d: seq %d %v", i, r.Seq, err)
		}
	}
	var out, errb bytes.Buffer
	if code := run([]string{"audit", "verify", "--no-signatures", "--db", files[1] + "," + files[0]}, &out, &errb); code == 0 || !strings.Contains(out.String(), "segment_order") {
		t.Fatalf("verify of reordered files: exit %d\n%s%s", code, out.String(), errb.String())
	}
}

// TestReplayFlagsDifference appends, through the store itself (so the chain
// is whole), a result the rules do not derive: replay must flag it and exit 1.
func TestReplayFlagsDifference(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "trail.db")
	writeTrail(t, path)
	st, err := audit.Open(ctx, path, audit.Options{Logger: discardLogger()})
	if err != nil {
		t.Fatal(err)
	}
	kh := coup.Card{Rank: coup.King, Suit: coup.Hearts}
	if _, err := st.AppendBatch(ctx, []audit.Event{
		{Kind: string(coup.InCard), Shoe: 1, Coup: 2, Body: coup.Input{Kind: coup.InCard, At: time.Date(2026, 11, 22, 22, 0, 0, 0, time.UTC), Card: &kh, ShoeSeq: 99}},
		{Kind: string(coup.EvCoupResult), Shoe: 1, Coup: 2, Body: map[string]string{"winner": "banker"}},
	}); err != nil {
		t.Fatal(err)
	}
	st.Close()
	var out, errb bytes.Buffer
	if code := run([]string{"replay", "--db", path}, &out, &errb); code != 1 || !strings.Contains(out.String(), "DIFFERENCE") {
		t.Fatalf("exit %d\n%s\n%s", code, out.String(), errb.String())
	}
}

func discardLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// TestReplayPublish republishes a trail to the broker on 127.0.0.1:1883 and
// reads the replayed events back under the replay prefix.
func TestReplayPublish(t *testing.T) {
	path := filepath.Join(t.TempDir(), "trail.db")
	writeTrail(t, path)
	url := mqtttest.Shared(t)
	prefix := fmt.Sprintf("tablectl-test/replay-%d", time.Now().UnixNano())
	sub, err := mqttconn.Dial(mqttconn.ConnOptions{Broker: url, ClientID: "replay-sub-" + prefix[len(prefix)-8:],
		Subscribe: []string{prefix + "/pit/events"}, Inbox: 1024})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close(time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := sub.WaitConnected(ctx); err != nil {
		t.Fatal(err)
	}
	var out, errb bytes.Buffer
	if code := run([]string{"replay", "--db", path, "--publish", "--prefix", prefix, "--speed", "0"}, &out, &errb); code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	if !strings.Contains(out.String(), "53 rows republished") {
		t.Fatalf("output %q", out.String())
	}
	var last int64
	for last < 53 {
		select {
		case m := <-sub.Messages():
			var ev struct{ Seq int64 }
			if err := json.Unmarshal(m.Payload, &ev); err != nil {
				t.Fatal(err)
			}
			if ev.Seq != last+1 {
				t.Fatalf("event %d after %d", ev.Seq, last)
			}
			last = ev.Seq
		case <-ctx.Done():
			t.Fatalf("only %d events replayed", last)
		}
	}
}

// TestReplayServeRefusesExposed: `replay --serve` off loopback without a
// password file and TLS exits 1 saying what is missing, before it serves
// anything; an empty password file is refused too.
func TestReplayServeRefusesExposed(t *testing.T) {
	path := filepath.Join(t.TempDir(), "trail.db")
	writeTrail(t, path)
	empty := filepath.Join(t.TempDir(), "empty")
	os.WriteFile(empty, []byte("\n"), 0o600)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"replay", "--db", path, "--serve", "0.0.0.0:0"}, "is off loopback with no password (tablectl replay --http-password-file) and no TLS"},
		{[]string{"replay", "--db", path, "--serve", "127.0.0.1:0", "--http-password-file", empty}, "empty"},
	} {
		var out, errb bytes.Buffer
		if code := run(tc.args, &out, &errb); code != 1 || !strings.Contains(errb.String(), tc.want) || strings.Contains(out.String(), "surveillance viewer of") {
			t.Errorf("%v: exit %d\nstdout %s\nstderr %s", tc.args, code, out.String(), errb.String())
		}
	}
}
