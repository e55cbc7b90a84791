package controller

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tablectl/tablectl/audit"
	"github.com/tablectl/tablectl/coup"
	"github.com/tablectl/tablectl/display"
	"github.com/tablectl/tablectl/internal/testenv"
	"github.com/tablectl/tablectl/shoeread/shoesim"
	"github.com/tablectl/tablectl/signedcmd"
)

// forgedVoid is the insider's sqlite3 script: a supervisor's void of the
// coup in progress as the three rows after last (in.cmd, command_accepted,
// coup_voided: the next seqs, linked, with correct hashes, the triggers
// untouched).
func forgedVoid(last audit.Record) string {
	prev, script := last, ""
	for _, f := range []struct{ kind, body string }{
		{"in.cmd", `{"command":{"action":"void","by":"mallory","id":"forged-1"},"kind":"in.cmd"}`},
		{"command_accepted", `{"action":"void","by":"mallory","id":"forged-1"}`},
		{"coup_voided", `{"by":"mallory","coup":2}`},
	} {
		row := audit.Record{Seq: prev.Seq + 1, At: prev.At.Add(time.Second), Kind: f.kind, Shoe: prev.Shoe, Coup: prev.Coup, Body: []byte(f.body), PrevHash: prev.Hash}
		row.Hash = row.ComputeHash()
		script += fmt.Sprintf("INSERT INTO events (seq, at, kind, shoe, coup, body, prev_hash, hash) VALUES (%d, '%s', '%s', %d, %d, '%s', '%s', '%s');\n",
			row.Seq, row.At.UTC().Format(time.RFC3339Nano), row.Kind, row.Shoe, row.Coup, row.Body, row.PrevHash, row.Hash)
		prev = row
	}
	return script
}

// forgeVoidLive deals coup 1 and coup 2's first card on r, then runs the
// insider's script (forgedVoid) with the sqlite3 shell on the live trail.
// It returns the head the script was written against and what the shell
// said.
func forgeVoidLive(t *testing.T, r *rig, sqlite3 string) (audit.Head, []byte, error) {
	t.Helper()
	r.deal(reveal(1))
	r.deal(coupCard(2, 2))
	head := r.ctl.rec.Store().Head()
	cmd := exec.Command(sqlite3, "-bail", r.trail)
	cmd.Stdin = strings.NewReader(forgedVoid(lastRow(t, r.trail, head.Seq)))
	out, err := cmd.CombinedOutput()
	return head, out, err
}

// TestFaultTrailLockedLive is the insider's attack on a running table as
// it is: between two cards the controller holds the trail's write lock
// (the next commit's transaction, begun and head-checked ahead of it), so
// the sqlite3 shell's forged void is refused ("database is locked"),
// nothing of it lands, and the table deals on with a trail that verifies.
func TestFaultTrailLockedLive(t *testing.T) {
	sqlite3 := testenv.Command(t, "sqlite3", "sqlite3") // the insider's tool
	r, stop := newFaultRig(t, shoesim.Options{Seed: 911, Coups: 3}, tableConfig(t, nil), faultRig{tampersWithTrail: true})
	head, out, err := forgeVoidLive(t, r, sqlite3)
	if err == nil || !strings.Contains(string(out), "database is locked") {
		t.Fatalf("sqlite3 on the live trail between two cards: %v\n%s\nwant it refused: database is locked", err, out)
	}
	if got := lastRow(t, r.trail, head.Seq); got.Hash != head.Hash {
		t.Fatalf("row %d changed under the refused script", head.Seq)
	}
	_, cs := r.deal(coupCard(2, 3))
	if len(cs) == 0 || cs[0].Records[0].Seq != head.Seq+1 || cs[0].Records[0].PrevHash != head.Hash {
		t.Fatalf("the card after the refused script: %+v, want it at seq %d after the head", cs, head.Seq+1)
	}
	stop()
	if f := verifyFindings(t, r); len(f) != 0 {
		t.Fatalf("verify after the refused attack: %+v", f)
	}
}

// TestFaultTrailTamperedLive is the same attack made in the moment the
// write lock is free, after a commit and before the next transaction
// begins (held open here: Hooks.TrailFreeBetweenCommits). The controller
// must not take the rows in: its next write finds them, suspends the table
// with trail_tampered naming them, records and signs nothing more; a
// restart refuses the trail; verify names the rows, and the forged void
// does not verify against the keyring.
func TestFaultTrailTamperedLive(t *testing.T) {
	sqlite3 := testenv.Command(t, "sqlite3", "sqlite3") // the insider's tool
	failures := make(chan error, 32)
	r, stop := newFaultRig(t, shoesim.Options{Seed: 911, Coups: 3}, tableConfig(t, nil), faultRig{tampersWithTrail: true, trailFreeBetweenCommits: true,
		onWriteFailure: func(err error, v coup.View) {
			if v.SuspendReason != "audit trail tampered" {
				err = fmt.Errorf("view suspended %v (%q): %w", v.Suspended, v.SuspendReason, err)
			}
			select {
			case failures <- err:
			default:
			}
		}})
	head, out, err := forgeVoidLive(t, r, sqlite3)
	if err != nil {
		t.Fatalf("sqlite3 on the live trail: %v\n%s", err, out)
	}

	// The dealer's next card: the controller's next write.
	to := coupCard(2, 3)
	r.gate.release(t, r.simEnded, &r.simErr, to.what, func(op gateOp) bool { return !op.Replug && to.is(op.Sent) })
	select {
	case err = <-failures:
	case <-time.After(guard):
		t.Fatal("the card after the forged rows: no failure reported")
	}
	var te *audit.TamperError
	if !errors.As(err, &te) || te.From != head.Seq+1 || te.To != head.Seq+3 || !slices.Equal(te.Kinds, []string{"in.cmd", "command_accepted", "coup_voided"}) {
		t.Fatalf("the card after the forged rows: %v; want a TamperError naming rows %d to %d", err, head.Seq+1, head.Seq+3)
	}
	t.Logf("reported: %v", err)
	w := httptest.NewRecorder()
	display.Handler(r.ctl.rec).ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/health", nil))
	if w.Code != http.StatusServiceUnavailable || !strings.Contains(w.Body.String(), `"trail_tampered"`) {
		t.Fatalf("/health after tampering: %d %s", w.Code, w.Body.String())
	}
	if got := r.ctl.rec.Store().Head(); got != head {
		t.Fatalf("the store's head moved from %+v to %+v", head, got)
	}
	stop()

	// Nothing was signed over the forged rows, so verify names them.
	if f := verifyFindings(t, r); len(f) != 1 || f[0].Kind != audit.FindingUnsignedRows || f[0].Seq != head.Seq+1 {
		t.Fatalf("verify after tampering: %+v", f)
	}
	// A restart refuses the trail.
	key, err := audit.LoadPrivateKey(r.privKey)
	if err != nil {
		t.Fatal(err)
	}
	if rec, err := audit.OpenRecorder(context.Background(), r.trail, audit.RecorderOptions{Table: "FAULT-01", Config: r.tc, Key: key, Logger: mqQuiet()}); err == nil || !strings.Contains(err.Error(), "unsigned_rows") {
		if err == nil {
			rec.Close()
		}
		t.Fatalf("restart on the tampered trail: %v, want it refused for unsigned_rows", err)
	}
	// The forged void carries no signature the keyring can verify.
	kr, err := signedcmd.ParseKeyring([]byte(`{"keys":[]}`))
	if err != nil {
		t.Fatal(err)
	}
	rd, err := audit.OpenReader(context.Background(), r.trail)
	if err != nil {
		t.Fatal(err)
	}
	defer rd.Close()
	_, forged, err := signedcmd.CheckTrail(rd.Events(context.Background(), audit.Query{From: head.Seq + 1}), "FAULT-01", kr)
	if err != nil || len(forged) != 1 || forged[0].Seq != head.Seq+1 {
		t.Fatalf("re-verifying the forged void: %+v %v", forged, err)
	}
}

// verifyFindings verifies the rig's trail with its public key.
func verifyFindings(t *testing.T, r *rig) []audit.Finding {
	t.Helper()
	pub, err := audit.LoadPublicKey(r.pubKey)
	if err != nil {
		t.Fatal(err)
	}
	rep, err := audit.Verify(context.Background(), r.trail, audit.VerifyOptions{PublicKeys: []ed25519.PublicKey{pub}})
	if err != nil {
		t.Fatal(err)
	}
	return rep.Findings
}

// lastRow reads row seq of the trail.
func lastRow(t *testing.T, trail string, seq int64) audit.Record {
	t.Helper()
	rd, err := audit.OpenReader(context.Background(), trail)
	if err != nil {
		t.Fatal(err)
	}
	defer rd.Close()
	for rec, err := range rd.Events(context.Background(), audit.Query{From: seq, To: seq}) {
		if err != nil {
			t.Fatal(err)
		}
		return rec
	}
	t.Fatalf("row %d missing", seq)
	return audit.Record{}
}
