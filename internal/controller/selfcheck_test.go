package controller

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tablectl/tablectl/audit"
	"github.com/tablectl/tablectl/coup"
	"github.com/tablectl/tablectl/display"
	"github.com/tablectl/tablectl/internal/config"
	"github.com/tablectl/tablectl/internal/selfcheck"
	"github.com/tablectl/tablectl/shoeread/shoesim"
)

// swapMark is a string of this program (the unsigned build's log line in
// selfcheck.go) whose bytes the swapped-binary test changes: a byte of the
// program's data, so the changed program still runs.
const swapMark = "unsigned development build (no manifest; self_check.require is off)"

// signedCopy copies this test binary (which runs as `tablectl run` under
// childEnv) into dir, signs a manifest for it and the rig's config with a
// new build key, and points the rig's config at the manifest with
// self_check.require on. It returns the copy's path.
func signedCopy(t *testing.T, r *processRig) string {
	t.Helper()
	dir := filepath.Dir(r.config)
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(self)
	if err != nil {
		t.Fatal(err)
	}
	exe := filepath.Join(dir, "tablectl")
	if err := os.WriteFile(exe, data, 0o755); err != nil {
		t.Fatal(err)
	}
	var cfg map[string]any
	raw, err := os.ReadFile(r.config)
	if err != nil || json.Unmarshal(raw, &cfg) != nil {
		t.Fatalf("config: %v", err)
	}
	priv, pub := filepath.Join(t.TempDir(), "build.key"), filepath.Join(dir, "manifest.pub")
	if _, err := audit.WriteKeyPair(priv, pub); err != nil {
		t.Fatal(err)
	}
	cfg["self_check"] = map[string]any{"manifest": "manifest.json", "public_key": "manifest.pub", "require": true, "every": "1m"}
	raw, _ = json.MarshalIndent(cfg, "", "  ")
	if err := os.WriteFile(r.config, raw, 0o644); err != nil {
		t.Fatal(err)
	}
	key, err := audit.LoadPrivateKey(priv)
	if err != nil {
		t.Fatal(err)
	}
	m, err := selfcheck.Make([]selfcheck.Entry{{Role: selfcheck.RoleExecutable, Path: exe}, {Role: selfcheck.RoleConfig, Path: r.config}}, key, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	b, _ := m.Marshal()
	if err := os.WriteFile(filepath.Join(dir, "manifest.json"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	return exe
}

// swapByte writes a copy of exe with one byte of its data changed.
func swapByte(t *testing.T, exe string) string {
	t.Helper()
	data, err := os.ReadFile(exe)
	if err != nil {
		t.Fatal(err)
	}
	i := bytes.Index(data, []byte(swapMark))
	if i < 0 {
		t.Fatalf("%q is not in the program", swapMark)
	}
	data[i] = 'U' // "unsigned" becomes "Unsigned"
	swapped := exe + "-swapped"
	if err := os.WriteFile(swapped, data, 0o755); err != nil {
		t.Fatal(err)
	}
	return swapped
}

// checksIn are the self-checks the trail records, and the events after.
func checksIn(rows []audit.Record) (checks []coup.SelfCheck, evs map[coup.EventKind]int, alerts map[coup.AlertKind]int) {
	evs, alerts = map[coup.EventKind]int{}, map[coup.AlertKind]int{}
	for _, row := range rows {
		if in, ok := inputOf(row); ok && in.Kind == coup.InSelfCheck {
			checks = append(checks, *in.Check)
			continue
		}
		evs[coup.EventKind(row.Kind)]++
		if row.Kind == string(coup.EvAlert) {
			var e struct{ Alert coup.Alert }
			json.Unmarshal(row.Body, &e)
			alerts[e.Alert.Kind]++
		}
	}
	return checks, evs, alerts
}

// TestSelfCheckSwappedBinary runs `tablectl run` from a signed copy of the
// program, and from the same copy with one byte changed. The signed one
// records a passing start-up check and deals a coup; the changed one
// records a failed check, is suspended before the shoe's port opens, and
// refuses to deal: every card the dealer draws is a misdeal alert, no card
// is placed and no coup has a result.
func TestSelfCheckSwappedBinary(t *testing.T) {
	t.Parallel()
	t.Run("signed", func(t *testing.T) {
		t.Parallel()
		r := newProcessRig(t, shoesim.Options{Seed: 418, Coups: 2})
		r.exe = signedCopy(t, r)
		r.start()
		r.deal(reveal(1))
		checks, evs, alerts := checksIn(r.rows)
		if len(checks) != 1 || checks[0].Result != coup.SelfCheckOK || !checks[0].Start || checks[0].Key == "" || len(checks[0].Files) != 2 {
			t.Fatalf("self-checks %+v", checks)
		}
		if evs[coup.EvCoupResult] != 1 || len(alerts) != 0 {
			t.Fatalf("the signed program did not deal coup 1: events %v alerts %v", evs, alerts)
		}
		r.stop()
	})
	t.Run("one byte swapped", func(t *testing.T) {
		t.Parallel()
		r := newProcessRig(t, shoesim.Options{Seed: 418, Coups: 2})
		r.exe = swapByte(t, signedCopy(t, r))
		r.start()
		r.deal(coupCard(1, lastCard(r.plan, 1)))
		checks, evs, alerts := checksIn(r.rows)
		if len(checks) != 1 || checks[0].Result != coup.SelfCheckFailed || !strings.Contains(checks[0].Detail, "is not the signed one") {
			t.Fatalf("self-checks %+v", checks)
		}
		if alerts[coup.AlertSelfCheck] != 1 || alerts[coup.AlertCardSuspended] == 0 {
			t.Fatalf("alerts %v", alerts)
		}
		for _, k := range []coup.EventKind{coup.EvBurnCard, coup.EvBurnDone, coup.EvBettingClosed, coup.EvCardDealt, coup.EvCoupResult, coup.EvResumed} {
			if evs[k] != 0 {
				t.Errorf("the swapped program dealt: %d %s events", evs[k], k)
			}
		}
		// The first row after the start is the check, before any input
		// from the shoe.
		for _, row := range r.rows {
			if in, ok := inputOf(row); ok {
				if in.Kind != coup.InSelfCheck {
					t.Fatalf("the first input is %s, not the self-check", in.Kind)
				}
				break
			}
		}
		r.stop()
	})
}

// TestSelfCheckHealthAndMetrics: a failed start-up check shows in /health
// (503, self_check_failed), in the metrics, and as the active alert, and
// resume is refused; the demo's unsigned build says "unsigned".
func TestSelfCheckHealthAndMetrics(t *testing.T) {
	dir := t.TempDir()
	other := filepath.Join(dir, "other-program")
	os.WriteFile(other, []byte("not this program"), 0o755)
	priv, pub := filepath.Join(dir, "build.key"), filepath.Join(dir, "manifest.pub")
	if _, err := audit.WriteKeyPair(priv, pub); err != nil {
		t.Fatal(err)
	}
	key, _ := audit.LoadPrivateKey(priv)
	m, err := selfcheck.Make([]selfcheck.Entry{{Role: selfcheck.RoleExecutable, Path: other}}, key, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	b, _ := m.Marshal()
	os.WriteFile(filepath.Join(dir, "manifest.json"), b, 0o644)
	doc := `{"table_id":"SELF-01","profile":"vip","shoe":{"port":{"path":"` + filepath.Join(dir, "no-shoe") + `"}},
		"audit":{"path":"trail.db"},"mqtt":{"disabled":true},"http":{"listen":"127.0.0.1:0"},
		"self_check":{"manifest":"manifest.json","public_key":"manifest.pub","require":true}}`
	cfg, tc, err := config.Parse([]byte(doc), dir)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ctl, err := Start(ctx, cfg, tc, slog.New(slog.NewTextHandler(io.Discard, nil)), Hooks{})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- ctl.Run(ctx) }()
	defer func() { cancel(); <-done }()
	base := "http://" + ctl.ln.Addr().String()
	resp, err := http.Get(base + "/health")
	if err != nil {
		t.Fatal(err)
	}
	var h display.Health
	json.NewDecoder(resp.Body).Decode(&h)
	resp.Body.Close()
	if resp.StatusCode != 503 || h.Status != display.HealthSelfCheckFailed || h.SelfCheck != coup.SelfCheckFailed {
		t.Fatalf("health %d %+v", resp.StatusCode, h)
	}
	resp, err = http.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{`tablectl_self_check{result="failed"} 1`, `tablectl_self_check{result="ok"} 0`, `tablectl_self_checks_total{result="failed"} 1`, `tablectl_alerts_total{kind="self_check_failed"} 1`} {
		if !bytes.Contains(body, []byte(want)) {
			t.Errorf("metrics lack %s", want)
		}
	}
	_, pit := ctl.rec.View()
	if !pit.Suspended || len(pit.Alerts) != 1 || pit.Alerts[0].Kind != coup.AlertSelfCheck || pit.Alerts[0].Needs != coup.NeedsSelfCheck {
		t.Fatalf("pit view %+v", pit)
	}
	// No command changes the game, each refused with the reason; a
	// suspension is still taken.
	for i, action := range []string{coup.ActionResume, coup.ActionShoeStart, coup.ActionDealerIn, coup.ActionVoid} {
		cm, err := ctl.rec.Submit(ctx, coup.Input{Kind: coup.InCmd, Command: &coup.Command{ID: fmt.Sprint("r", i), Action: action, By: "alice", Dealer: "d-1"}})
		if err != nil || len(cm.Events) != 1 || cm.Events[0].Kind != coup.EvCommandRefused || !strings.Contains(cm.Events[0].Reason, "self-check") {
			t.Fatalf("%s: %v %+v", action, err, cm.Events)
		}
	}
	cm, err := ctl.rec.Submit(ctx, coup.Input{Kind: coup.InCmd, Command: &coup.Command{ID: "s1", Action: coup.ActionSuspend, By: "alice"}})
	if err != nil || len(cm.Events) == 0 || cm.Events[0].Kind != coup.EvCommandDone {
		t.Fatalf("suspend: %v %+v", err, cm.Events)
	}
}

func TestSelfCheckEveryBounds(t *testing.T) {
	for every, ok := range map[string]bool{`"24h"`: true, `"1m"`: true, `"25h"`: false, `"30s"`: false, `"48h"`: false} {
		doc := `{"table_id":"T","profile":"vip","shoe":{"port":{"path":"/dev/null"}},"audit":{"path":"t.db"},"mqtt":{"disabled":true},"self_check":{"every":` + every + `}}`
		c, _, err := config.Parse([]byte(doc), t.TempDir())
		if (err == nil) != ok {
			t.Errorf("every %s: %v", every, err)
		}
		if ok && c.SelfCheck.Manifest != selfcheck.DefaultManifest {
			t.Errorf("manifest %q", c.SelfCheck.Manifest)
		}
	}
	c, _, err := config.Parse([]byte(`{"table_id":"T","profile":"vip","shoe":{"port":{"path":"/dev/null"}},"audit":{"path":"t.db"},"mqtt":{"disabled":true}}`), "/etc/tablectl")
	if err != nil || time.Duration(c.SelfCheck.Every) != 24*time.Hour || c.SelfCheck.Require {
		t.Fatalf("defaults: %+v %v", c.SelfCheck, err)
	}
}
