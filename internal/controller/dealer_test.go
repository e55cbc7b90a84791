package controller

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tablectl/tablectl/audit"
	"github.com/tablectl/tablectl/audit/stats"
	"github.com/tablectl/tablectl/base/clock"
	"github.com/tablectl/tablectl/coup"
	"github.com/tablectl/tablectl/display"
	"github.com/tablectl/tablectl/internal/config"
	"github.com/tablectl/tablectl/internal/selfcheck"
	"github.com/tablectl/tablectl/internal/supervisor"
	"github.com/tablectl/tablectl/internal/testenv"
	"github.com/tablectl/tablectl/shoeread/shoesim"
	"github.com/tablectl/tablectl/signedcmd"
)

// TestDealerSignInOverMQTT: a supervisor signs a dealer in and out with
// signed commands sent as `tablectl dealer-in` sends them; the pit view
// names the dealer, the trail records both, the pit's figures count the
// dealer, and a malformed dealer name is refused before the table sees it.
func TestDealerSignInOverMQTT(t *testing.T) {
	mc := startMQController(t, &config.MQTTSection{Listen: "127.0.0.1:0", WSListen: "127.0.0.1:0"}, 2)
	// The simulated dealer deals both coups at once: wait for them, so the
	// sign-in falls between coups.
	testenv.EventuallyErr(t, mqWait, "the shoe's two coups dealt", func() error {
		if _, pit := mc.ctl.rec.View(); pit.Coup < 2 || (pit.Coup == 2 && pit.Phase != coup.PhaseResult) {
			return fmt.Errorf("coup %d, %s", pit.Coup, pit.Phase)
		}
		return nil
	})
	rep, err := mc.supervise(t, mc.key, supervisor.Request{Action: coup.ActionDealerIn, Dealer: "d-1042"})
	if err != nil || rep.Result != signedcmd.Accepted {
		t.Fatalf("dealer-in: %+v %v", rep, err)
	}
	if _, pit := mc.ctl.rec.View(); pit.Dealer != "d-1042" {
		t.Fatalf("pit view dealer %q", pit.Dealer)
	}
	rep, err = mc.supervise(t, mc.key, supervisor.Request{Action: coup.ActionDealerIn, Dealer: "not a badge"})
	if !errors.Is(err, supervisor.ErrRefused) || rep.Code != signedcmd.CodeMalformed {
		t.Fatalf("a bad dealer name: %+v %v", rep, err)
	}
	rep, err = mc.supervise(t, mc.key, supervisor.Request{Action: coup.ActionDealerOut})
	if err != nil || rep.Result != signedcmd.Accepted {
		t.Fatalf("dealer-out: %+v %v", rep, err)
	}
	if _, pit := mc.ctl.rec.View(); pit.Dealer != "" {
		t.Fatalf("pit view dealer %q after sign-out", pit.Dealer)
	}
	var ins, outs int
	for r, err := range mc.ctl.rec.Store().Events(context.Background(), audit.Query{Kinds: []string{string(coup.EvDealerIn), string(coup.EvDealerOut)}}) {
		if err != nil {
			t.Fatal(err)
		}
		if r.Kind == string(coup.EvDealerIn) {
			ins++
		} else {
			outs++
		}
	}
	if ins != 1 || outs != 1 {
		t.Fatalf("trail holds %d sign-ins and %d sign-outs", ins, outs)
	}
	// The history is read in the background.
	rp, err := mc.ctl.dealers.Load().report()
	testenv.Eventually(t, mqWait, "the dealer figures' history read", func() bool {
		rp, err = mc.ctl.dealers.Load().report()
		return !errors.Is(err, display.ErrNotReady)
	})
	if err != nil {
		t.Fatal(err)
	}
	// The two coups before the sign-in are nobody's; d-1042 was on duty
	// for a moment and dealt none.
	if len(rp.Rows) != 2 || rp.Rows[0].Key != stats.NoDealer || rp.Rows[0].Coups != 2 || rp.Rows[1].Key != "d-1042" || rp.Rows[1].Coups != 0 {
		t.Fatalf("pit figures %+v", rp.Rows)
	}
}

// TestSelfCheckPeriodic: the check runs again every self_check.every; a
// config file changed on disk while the table runs is caught by the next
// check, which suspends the table, and putting it back clears the alert
// at the check after.
func TestSelfCheckPeriodic(t *testing.T) {
	dir := t.TempDir()
	cfgFile := filepath.Join(dir, "tablectl.json")
	doc := `{"table_id":"SELF-02","profile":"vip","shoe":{"port":{"path":"` + filepath.Join(dir, "no-shoe") + `"}},
		"audit":{"path":"trail.db"},"mqtt":{"disabled":true},
		"self_check":{"manifest":"manifest.json","public_key":"manifest.pub","require":true,"every":"1h"}}`
	if err := os.WriteFile(cfgFile, []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	priv := filepath.Join(t.TempDir(), "build.key")
	if _, err := audit.WriteKeyPair(priv, filepath.Join(dir, "manifest.pub")); err != nil {
		t.Fatal(err)
	}
	key, _ := audit.LoadPrivateKey(priv)
	self, _ := os.Executable()
	m, err := selfcheck.Make([]selfcheck.Entry{{Role: selfcheck.RoleExecutable, Path: self}, {Role: selfcheck.RoleConfig, Path: cfgFile}}, key, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	b, _ := m.Marshal()
	os.WriteFile(filepath.Join(dir, "manifest.json"), b, 0o644)
	cfg, tc, err := config.Load(cfgFile)
	if err != nil {
		t.Fatal(err)
	}
	clk := clock.NewFake(time.Date(2026, 11, 25, 8, 0, 0, 0, time.UTC))
	commits := newCommitLog()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ctl, err := Start(ctx, cfg, tc, mqQuiet(), Hooks{Clock: clk, OnCommit: commits.add})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- ctl.Run(ctx) }()
	defer func() { cancel(); <-done }()
	check := func(from int, want string) int {
		t.Helper()
		wctx, wcancel := context.WithTimeout(ctx, mqWait)
		defer wcancel()
		i, err := commits.await(wctx, from, func(c audit.Commit) bool { return c.Input.Kind == coup.InSelfCheck })
		if err != nil {
			t.Fatalf("no self-check recorded: %v", err)
		}
		if got := commits.since(i)[0].Input.Check; got.Result != want {
			t.Fatalf("self-check %+v, want %s", got, want)
		}
		return i + 1
	}
	next := check(0, coup.SelfCheckOK)
	if _, pit := ctl.rec.View(); pit.Suspended {
		t.Fatalf("suspended after a passing check: %+v", pit.Alerts)
	}
	tick := func() {
		t.Helper()
		wctx, wcancel := context.WithTimeout(ctx, mqWait)
		defer wcancel()
		if _, err := clk.WaitArmed(wctx, time.Hour); err != nil {
			t.Fatal(err)
		}
		clk.Advance(time.Hour)
	}
	if err := os.WriteFile(cfgFile, []byte(doc+" "), 0o644); err != nil {
		t.Fatal(err)
	}
	tick()
	next = check(next, coup.SelfCheckFailed)
	if _, pit := ctl.rec.View(); !pit.Suspended || len(pit.Alerts) != 1 || pit.Alerts[0].Kind != coup.AlertSelfCheck {
		t.Fatalf("after a failed periodic check: %+v", pit)
	}
	// /health takes the result once Submit returns, just after the commit
	// the test saw.
	testenv.Eventually(t, mqWait, "/health to say the self-check failed", func() bool { return ctl.checker.state() == coup.SelfCheckFailed })
	os.WriteFile(cfgFile, []byte(doc), 0o644)
	tick()
	check(next, coup.SelfCheckOK)
	if _, pit := ctl.rec.View(); pit.Suspended {
		t.Fatalf("still suspended after a passing check: %+v", pit.Alerts)
	}
}

// TestDealerFiguresReadBehindTheCards: the figures per dealer read the
// trail's history in the background (start-up does not wait for them),
// and every row counts once, in order, whether it was in the history read,
// committed before the read began, or committed while it ran. The history
// is a shoe dealt through a controller; the figures are held to
// stats.Compute over the whole trail.
func TestDealerFiguresReadBehindTheCards(t *testing.T) {
	r := newRig(t, shoesim.Options{Seed: 411, Coups: 4}, tableConfig(t, nil))
	r.deal(reveal(4))
	ctx := context.Background()
	var recs []audit.Record
	for rec, err := range r.ctl.rec.Store().Events(ctx, audit.Query{Kinds: stats.Kinds}) {
		if err != nil {
			t.Fatal(err)
		}
		recs = append(recs, rec)
	}
	want, err := stats.Compute(recordsOf(recs), stats.Options{By: stats.ByDealer})
	if err != nil {
		t.Fatal(err)
	}
	if want.Total.Coups != 4 {
		t.Fatalf("the trail's figures count %d coups, want 4", want.Total.Coups)
	}
	wantJSON, _ := json.Marshal(want)
	same := func(what string, d *dealerStats) {
		t.Helper()
		rep, err := d.report()
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if got, _ := json.Marshal(rep); string(got) != string(wantJSON) {
			t.Errorf("%s: figures\n%s\nwant\n%s", what, got, wantJSON)
		}
	}
	commit := func(d *dealerStats, rs []audit.Record) {
		for _, rec := range rs {
			d.commit(audit.Commit{Records: []audit.Record{rec}})
		}
	}
	// The controller's own figures, read in the background at its start.
	testenv.Eventually(t, mqWait, "the controller's dealer figures read", func() bool {
		_, err := r.ctl.dealers.Load().report()
		return !errors.Is(err, display.ErrNotReady)
	})
	same("the controller's figures", r.ctl.dealers.Load())

	// Every split of the rows between the history, the commits before the
	// read and those during it.
	for split := 0; split <= len(recs); split++ {
		var upTo int64
		if split > 0 {
			upTo = recs[split-1].Seq
		}
		d := newDealerStats(upTo)
		before, during := (len(recs)-split)/3, 0
		if split > 0 { // an empty history is not read at all
			during = (len(recs) - split) / 3
		}
		commit(d, recs[split:split+before])
		if _, err := d.report(); !errors.Is(err, display.ErrNotReady) {
			t.Fatalf("split %d: before the read, report says %v; want not ready", split, err)
		}
		rows := func(yield func(audit.Record, error) bool) {
			for i, rec := range recs[:split] {
				if i == split/2 {
					commit(d, recs[split+before:split+before+during])
				}
				if !yield(rec, nil) {
					return
				}
			}
		}
		done := make(chan error)
		go func() { done <- d.load(ctx, rows) }() // its thread goes to nice 19 and dies with the goroutine
		if err := <-done; err != nil {
			t.Fatalf("split %d: load: %v", split, err)
		}
		commit(d, recs[split+before+during:])
		same(fmt.Sprintf("split %d (%d rows in the history, %d committed before the read, %d during it)", split, split, before, during), d)
	}

	// A history that cannot be read is an error the pit view shows.
	d := newDealerStats(9)
	broken := func(yield func(audit.Record, error) bool) { yield(audit.Record{}, errors.New("disk I/O error")) }
	if err := d.load(ctx, broken); err == nil {
		t.Fatal("load of a failing read: no error")
	}
	if _, err := d.report(); err == nil || !strings.Contains(err.Error(), "disk I/O error") {
		t.Errorf("report after a failed read: %v", err)
	}
}
