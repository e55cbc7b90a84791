package controller

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/tablectl/tablectl/audit"
	"github.com/tablectl/tablectl/audit/stats"
	signedcmd "github.com/tablectl/tablectl/command"
	"github.com/tablectl/tablectl/coup"
	"github.com/tablectl/tablectl/internal/clock"
	"github.com/tablectl/tablectl/internal/selfcheck"
	"github.com/tablectl/tablectl/internal/supervisor"
)

// TestDealerSignInOverMQTT: a supervisor signs a dealer in and out with
// signed commands sent as `tablectl dealer-in` sends them; the pit view
// names the dealer, the trail records both, the pit's figures count the
// dealer, and a malformed dealer name is refused before the table sees it.
func TestDealerSignInOverMQTT(t *testing.T) {
	mc := startMQController(t, &MQTTSection{Listen: "127.0.0.1:0", WSListen: "127.0.0.1:0"}, 2)
	// The simulated dealer deals both coups at once: wait for them, so the
	// sign-in falls between coups.
	deadline := time.Now().Add(mqWait)
	for {
		_, pit := mc.ctl.rec.View()
		if pit.Coup > 2 || (pit.Coup == 2 && pit.Phase == coup.PhaseResult) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the shoe's two coups were not dealt: %+v", pit)
		}
		time.Sleep(20 * time.Millisecond)
	}
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
	rp, err := mc.ctl.dealers.Load().report()
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
	cfg, tc, err := LoadConfig(cfgFile)
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
	for deadline := time.Now().Add(mqWait); ctl.checker.state() != coup.SelfCheckFailed; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("health says %s", ctl.checker.state())
		}
	}
	os.WriteFile(cfgFile, []byte(doc), 0o644)
	tick()
	check(next, coup.SelfCheckOK)
	if _, pit := ctl.rec.View(); pit.Suspended {
		t.Fatalf("still suspended after a passing check: %+v", pit.Alerts)
	}
}
