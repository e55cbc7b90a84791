package controller

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tablectl/tablectl/audit"
	"github.com/tablectl/tablectl/coup"
	"github.com/tablectl/tablectl/internal/config"
	"github.com/tablectl/tablectl/internal/testenv"
	"github.com/tablectl/tablectl/signedcmd"
)

// TestKeyringOnlySigned is issue 31's insider with root on the table box,
// against a running controller (embedded broker, a directory trail):
//   - the keyring at start is recorded (ctl.keyring: its hash, the officer's
//     key id, alice added);
//   - root enrols mallory in the keyring file (tablectl enrol): the table
//     refuses the unsigned keyring, records why (ctl.keyring_refused), and
//     mallory's command is refused as an unknown key;
//   - root signs it with a key of his own: refused, not an authority;
//   - the officer signs it: taken, recorded with mallory added, and
//     mallory's command is accepted;
//   - root puts back the keyring of before (signed, an older serial):
//     refused, the keys in use stay; and a restart on it is refused too,
//     saying why;
//   - alice's second key, labelled by the officer beside a labelled first,
//     signs a command recorded with its label;
//   - at a segment's cut-over the keys in force are recorded again at the
//     head of the new segment.
func TestKeyringOnlySigned(t *testing.T) {
	dir, keys := t.TempDir(), t.TempDir()
	cpKey, cpPub, err := audit.GenerateKey(keys)
	if err != nil {
		t.Fatal(err)
	}
	sup := newTestSupervisors(t, keys, "alice")
	officerID := audit.KeyID(sup.officer.Public().(ed25519.PublicKey))
	first, err := os.ReadFile(sup.keyring) // serial 1, alice alone
	if err != nil {
		t.Fatal(err)
	}
	doc := fmt.Sprintf(`{"table_id":"KR-01","profile":"vip","shoe":{"port":{"path":%q}},
		"audit":{"dir":"trail","checkpoint_key":%q},
		"mqtt":{"listen":"127.0.0.1:0","ws_listen":"off",%s}}`, filepath.Join(dir, "no-shoe"), cpKey, sup.mqttConfig())
	cfg, tc, err := config.Parse([]byte(doc), dir)
	if err != nil {
		t.Fatal(err)
	}
	logs := &syncBuffer{}
	log := slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
	defer func() {
		if t.Failed() {
			t.Logf("last log lines:\n%s", logs.tail(60))
		}
	}()
	var ctl *Controller
	var stop func()
	start := func() (err error) {
		ctl, stop, err = runInProcess(t, cfg, tc, log, Hooks{})
		return err
	}
	if err := start(); err != nil {
		t.Fatal(err)
	}
	rows := func(kind string) []audit.Record {
		t.Helper()
		var out []audit.Record
		for rec, err := range ctl.rec.Store().Events(context.Background(), audit.Query{Kinds: []string{kind}}) {
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, rec)
		}
		return out
	}
	keyringRows := func() []signedcmd.KeyringBody {
		var out []signedcmd.KeyringBody
		for _, r := range rows(signedcmd.KindKeyring) {
			var b signedcmd.KeyringBody
			if err := json.Unmarshal(r.Body, &b); err != nil {
				t.Fatal(err)
			}
			out = append(out, b)
		}
		return out
	}
	names := func(ks []signedcmd.KeyringKey) string {
		var out []string
		for _, k := range ks {
			out = append(out, k.Name+"/"+k.Key)
		}
		return strings.Join(out, ",")
	}
	// send signs c as name with key and hands it to the controller as the
	// broker would; it returns the rows recorded for it.
	send := func(name string, key ed25519.PrivateKey, action string) []audit.Record {
		t.Helper()
		c := signedcmd.Command{Table: "KR-01", ID: signedcmd.NewID(), Action: action, Supervisor: name, IssuedAt: signedcmd.FormatTime(time.Now())}
		if err := c.Sign(key); err != nil {
			t.Fatal(err)
		}
		b, _ := c.Marshal()
		var out []audit.Record
		for _, rec := range handIn(t, ctl, b) {
			if strings.Contains(string(rec.Body), c.ID) {
				out = append(out, rec)
			}
		}
		return out
	}
	outcome := func(recs []audit.Record) string {
		for _, r := range recs {
			switch r.Kind {
			case string(coup.EvCommandDone):
				return "accepted"
			case audit.KindRejected:
				var b signedcmd.RejectedBody
				json.Unmarshal(r.Body, &b)
				return b.Code
			}
		}
		return "no row"
	}
	waitRows := func(kind string, n int, what string) {
		t.Helper()
		testenv.Eventually(t, guard, what, func() bool { return len(rows(kind)) >= n })
	}
	// Each change of the file is a new modification time for the watch:
	// wait until a file written now is stamped later than the keyring
	// (the filesystem's clock moves in ticks of a few milliseconds).
	replace := func(do func()) {
		t.Helper()
		kf, err := os.Stat(sup.keyring)
		if err != nil {
			t.Fatal(err)
		}
		probe := filepath.Join(filepath.Dir(sup.keyring), "mtime-probe") // on the keyring's filesystem
		testenv.Eventually(t, guard, "the filesystem's clock past the keyring's modification time", func() bool {
			pf, err := writeStat(probe)
			if err != nil {
				t.Fatal(err)
			}
			return pf.ModTime().After(kf.ModTime())
		})
		do()
	}

	// At start.
	kr := keyringRows()
	if len(kr) != 1 || kr[0].Reason != signedcmd.KeyringAtStart || kr[0].Authority != officerID || kr[0].Serial != 1 || names(kr[0].Added) != "alice/" {
		t.Fatalf("the keyring at start: %+v", kr)
	}

	// Root enrols mallory on the box.
	malloryPub, mallory, _ := ed25519.GenerateKey(nil)
	replace(func() {
		if err := signedcmd.EnrolFile(sup.keyring, signedcmd.Enrolment{Name: "mallory", PublicKey: malloryPub}); err != nil {
			t.Fatal(err)
		}
	})
	waitRows(signedcmd.KindKeyringRefused, 1, "the unsigned keyring refused")
	var ref signedcmd.KeyringRefusedBody
	json.Unmarshal(rows(signedcmd.KindKeyringRefused)[0].Body, &ref)
	if !strings.Contains(ref.Error, "not signed") || ref.SHA256 == "" || ref.Reason != signedcmd.KeyringReloaded {
		t.Errorf("refusal row %+v", ref)
	}
	if got := outcome(send("mallory", mallory, coup.ActionSuspend)); got != signedcmd.CodeUnknownKey {
		t.Fatalf("mallory enrolled on the box: %s", got)
	}
	// Root signs it with a key of his own.
	_, rootKey, _ := ed25519.GenerateKey(nil)
	replace(func() {
		if _, err := signedcmd.SignKeyringFile(sup.keyring, "", rootKey, 0, time.Now()); err != nil {
			t.Fatal(err)
		}
	})
	waitRows(signedcmd.KindKeyringRefused, 2, "root's own signature refused")
	if got := outcome(send("mallory", mallory, coup.ActionSuspend)); got != signedcmd.CodeUnknownKey {
		t.Fatalf("mallory signed in by root: %s", got)
	}
	// The officer signs it (say mallory is a real supervisor).
	replace(func() {
		if err := os.WriteFile(sup.keyring, first, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := signedcmd.EnrolFile(sup.keyring, signedcmd.Enrolment{Name: "mallory", PublicKey: malloryPub}); err != nil {
			t.Fatal(err)
		}
		if _, err := signedcmd.SignKeyringFile(sup.keyring, "", sup.officer, 0, time.Now()); err != nil {
			t.Fatal(err)
		}
	})
	waitRows(signedcmd.KindKeyring, 2, "the officer's keyring taken")
	// The trail says so before the keys are used (the watch records the
	// keyring, then swaps it in): wait for the swap too, not the row alone.
	testenv.Eventually(t, guard, "the officer's keyring in use", func() bool { return ctl.keys.Meta().Serial == 2 })
	kr = keyringRows()
	if r := kr[1]; r.Reason != signedcmd.KeyringReloaded || r.Serial != 2 || r.Authority != officerID || names(r.Added) != "mallory/" || len(r.Removed) != 0 || len(r.Keys) != 2 {
		t.Fatalf("the reload's row: %+v", r)
	}
	if got := outcome(send("mallory", mallory, coup.ActionSuspend)); got != "accepted" {
		t.Fatalf("mallory signed in by the officer: %s", got)
	}
	// The keyring of before put back: older, refused.
	replace(func() {
		if err := os.WriteFile(sup.keyring, first, 0o644); err != nil {
			t.Fatal(err)
		}
	})
	waitRows(signedcmd.KindKeyringRefused, 3, "the older keyring refused")
	json.Unmarshal(rows(signedcmd.KindKeyringRefused)[2].Body, &ref)
	if !strings.Contains(ref.Error, "serial 1, and serial 2 is in force") {
		t.Errorf("rollback refused with %q", ref.Error)
	}
	if got := outcome(send("mallory", mallory, coup.ActionResume)); got != "accepted" {
		t.Fatalf("mallory after the rollback was refused: %s", got)
	}
	// A restart on it is refused, saying why.
	stop()
	err = start()
	if !errors.Is(err, signedcmd.ErrKeyringRollback) || !strings.Contains(err.Error(), "mqtt.keyring") {
		t.Fatalf("a start on the older keyring: %v", err)
	}

	// The officer gives alice a second key: both labelled.
	alice2Pub, alice2, _ := ed25519.GenerateKey(nil)
	// The officer's draft: alice's first key labelled, mallory, and
	// alice's second key; signed with serial 3, after the 2 in force.
	var kj map[string]any
	json.Unmarshal(first, &kj)
	kj["keys"].([]any)[0].(map[string]any)["key"] = "laptop"
	b, _ := json.Marshal(kj)
	if err := os.WriteFile(sup.keyring, b, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, e := range []signedcmd.Enrolment{{Name: "mallory", PublicKey: malloryPub}, {Name: "alice", Label: "pit-pc-2", PublicKey: alice2Pub}} {
		if err := signedcmd.EnrolFile(sup.keyring, e); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := signedcmd.SignKeyringFile(sup.keyring, "", sup.officer, 3, time.Now()); err != nil {
		t.Fatal(err)
	}
	if err := start(); err != nil {
		t.Fatal(err)
	}
	kr = keyringRows()
	if r := kr[len(kr)-1]; r.Reason != signedcmd.KeyringAtStart || r.Serial != 3 || names(r.Added) != "alice/pit-pc-2" || names(r.Changed) != "alice/laptop" {
		t.Fatalf("the restart's row: %+v", r)
	}
	recs := send("alice", alice2, coup.ActionSuspend)
	if outcome(recs) != "accepted" || !slices.ContainsFunc(recs, func(r audit.Record) bool {
		return r.Kind == string(coup.InCmd) && strings.Contains(string(r.Body), `"key":"pit-pc-2"`) && strings.Contains(string(r.Body), `"by":"alice"`)
	}) {
		t.Fatalf("alice's second key: %s", rowKinds(recs))
	}

	// A cut-over: the new segment opens with the keys in force.
	if err := ctl.rec.Cut(context.Background()); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, guard, "the keyring at the new segment's head", func() bool {
		kr := keyringRows()
		return kr[len(kr)-1].Reason == signedcmd.KeyringInForce
	})
	kr = keyringRows()
	segs := ctl.rec.Store().SealedSegments()
	if r := kr[len(kr)-1]; r.Serial != 3 || len(r.Added)+len(r.Removed)+len(r.Changed) != 0 || len(r.Keys) != 3 {
		t.Fatalf("the segment's row: %+v", r)
	}
	if seg := rows(signedcmd.KindKeyring); seg[len(seg)-1].Seq <= segs[len(segs)-1].Head.Seq {
		t.Fatalf("the segment's keyring row %d is not in the new segment (the sealed one ends at %d)", seg[len(seg)-1].Seq, segs[len(segs)-1].Head.Seq)
	}
	stop()
	verifyTrail(t, filepath.Join(dir, "trail"), cpPub)
	// Surveillance replays the trail, keyring rows and all, and
	// re-verifies every command against the keyring.
	rd, err := audit.OpenReader(context.Background(), filepath.Join(dir, "trail"))
	if err != nil {
		t.Fatal(err)
	}
	defer rd.Close()
	// Once the controller has stopped, no row can be on its way: the new
	// segment holds one row of the keys in force, not two.
	inForce := 0
	for r, err := range rd.Events(context.Background(), audit.Query{From: segs[len(segs)-1].Head.Seq + 1, Kinds: []string{signedcmd.KindKeyring}}) {
		var b signedcmd.KeyringBody
		if err != nil || json.Unmarshal(r.Body, &b) != nil {
			t.Fatalf("the new segment's keyring rows: %v", err)
		}
		if b.Reason == signedcmd.KeyringInForce {
			inForce++
		}
	}
	if inForce != 1 {
		t.Errorf("%d rows of the keys in force in the segment one cut-over opened, want 1", inForce)
	}
	rp, err := audit.Replay(rd.Events(context.Background(), audit.Query{}), tc, audit.ReplayVisitor{})
	if err != nil {
		t.Fatal(err)
	}
	if d := rp.Differences(); len(d) > 0 {
		t.Fatalf("replay: %d differences, first %+v", len(d), d[0])
	}
	now, err := signedcmd.LoadKeyring(sup.keyring)
	if err != nil {
		t.Fatal(err)
	}
	if checked, forged, err := signedcmd.CheckTrail(rd.Events(context.Background(), audit.Query{}), "KR-01", now); err != nil || len(forged) > 0 || checked != 3 {
		t.Fatalf("recorded commands: %d checked, forged %+v, %v", checked, forged, err)
	}
}

// writeStat writes a byte to path and returns what the filesystem says of
// it: its modification time is the filesystem's clock.
func writeStat(path string) (os.FileInfo, error) {
	if err := os.WriteFile(path, []byte{1}, 0o600); err != nil {
		return nil, err
	}
	return os.Stat(path)
}
