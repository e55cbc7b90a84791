package controller

// TestPitConsoleBrowser is issue 14's pit console, end to end: in headless
// Chromium a supervisor imports their key file once into the pit view of a
// running `tablectl demo` (it stays in the browser, non-extractable),
// suspends the table, voids a finished coup and resumes, every command
// signed in the browser and sent on the table's command topic. The test
// checks the table's replies on the page, the trail (each command recorded
// with its signer, and re-verified against the keyring as surveillance
// would), and what the displays show of the void. Then a key made in the
// browser is refused until it is enrolled: the console shows an enrolment
// request signed with the new key; enrolled on the table box itself
// (`tablectl enrol`'s EnrolFile, unsigned) the running table refuses the
// keyring and records why; signed by the security officer (`tablectl
// keyring sign`), the table reloads it and records it with the key added:
// the next commands signed with it are accepted, no restart.

import (
	"context"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tablectl/tablectl/audit"
	"github.com/tablectl/tablectl/base/clock"
	"github.com/tablectl/tablectl/coup"
	"github.com/tablectl/tablectl/internal/browsertest"
	"github.com/tablectl/tablectl/internal/testenv"
	"github.com/tablectl/tablectl/signedcmd"
)

type consoleEntry struct {
	State string `json:"state"`
	ID    string `json:"id"`
	Text  string `json:"text"`
}

// consoleSend fills the pit console's form as a supervisor would and
// presses SIGN & SEND (and CONFIRM for a void), then waits for the
// table's reply on the page and returns it.
func consoleSend(t *testing.T, pg *browsertest.Page, action string, args map[string]string, want string) consoleEntry {
	t.Helper()
	// The newest entry before the send: the log keeps 20, so its length
	// stops growing on a long retry loop.
	pg.Eval(`(() => { window.__pcTop = window.pitConsole.log[0]; return true; })()`, nil)
	// The form is not emptied here: the console empties it after each
	// send (a reason left in it went into the trail with the next command).
	js := fmt.Sprintf(`(() => { const sel = document.getElementById('pc-action'); sel.value = %q; sel.dispatchEvent(new Event('change'));`, action)
	for k, v := range args {
		js += fmt.Sprintf(`document.getElementById('pc-%s').value = %q;`, k, v)
	}
	js += `document.getElementById('pc-send').click();
		const yes = document.getElementById('pc-confirm-yes'); if (yes && !document.getElementById('pc-confirm').hidden) yes.click(); return true; })()`
	pg.Eval(js, nil)
	var left string
	pg.Eval(`['coup', 'card', 'reason', 'dealer'].map((k) => document.getElementById('pc-' + k).value).join('')`, &left)
	if left != "" {
		t.Errorf("the console's form after %s still holds %q", action, left)
	}
	cond := `window.pitConsole.log[0] !== window.__pcTop && ['accepted', 'refused', 'no-reply', 'error'].includes(document.querySelector('#pc-log li').dataset.state)`
	pg.WaitFor("the table's reply to "+action+" on the console", cond, `document.getElementById('pc-log').innerText`)
	var e consoleEntry
	pg.Eval(`(() => { const li = document.querySelector('#pc-log li'); return {state: li.dataset.state, id: li.dataset.id || '', text: li.innerText}; })()`, &e)
	if want != "" && e.State != want {
		t.Fatalf("%s from the pit console: %s, want %s: %s", action, e.State, want, e.Text)
	}
	return e
}

// needsVoid is the table's refusal of a resume while a misdeal alert
// stands (coup.Table's "alert N (kind) needs coup C voided first").
var needsVoid = regexp.MustCompile(`needs coup (\d+) voided first`)

// consoleResume resumes the table from the console as a supervisor would.
// The demo's dealer looks at the table, then calls "no more bets"; a
// suspension landing in between (as at a real table) makes the table
// ignore the call, and the next card raises a misdeal alert. The table
// then takes a resume only once that coup is voided, so the supervisor
// voids it and resumes again.
func consoleResume(t *testing.T, pg *browsertest.Page, reason string) consoleEntry {
	t.Helper()
	for range 3 {
		e := consoleSend(t, pg, coup.ActionResume, map[string]string{"reason": reason}, "")
		if e.State == "accepted" {
			return e
		}
		m := needsVoid.FindStringSubmatch(e.Text)
		if e.State != "refused" || m == nil {
			t.Fatalf("resume from the pit console: %s, want accepted: %s", e.State, e.Text)
		}
		t.Logf("a misdeal alert stands; voiding coup %s before resuming: %s", m[1], e.Text)
		consoleSend(t, pg, coup.ActionVoid, map[string]string{"coup": m[1], "reason": "misdeal around the suspension"}, "accepted")
	}
	t.Fatal("resume from the pit console: refused three times")
	return consoleEntry{}
}

func TestPitConsoleBrowser(t *testing.T) {
	testenv.Long(t, "the pit console in Chromium against the demo")
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	shots := os.Getenv(envDemoScreenshots)
	if shots == "" {
		shots = t.TempDir()
	} else {
		shots = filepath.Join(shots, "pit-console")
	}
	browser := browsertest.Shared(t)
	browser.Timeout = demoBrowserWait

	dctx, stopDemo := context.WithCancel(ctx)
	defer stopDemo()
	ready := make(chan DemoInfo, 1)
	var logs mqBuffer
	done := make(chan error, 1)
	go func() {
		// Betting stays open 1.5s between coups: time for a suspend to
		// land between coups, as a supervisor's would.
		done <- Demo(dctx, DemoOptions{Dir: filepath.Join(t.TempDir(), "demo"), Table: "DEMO", Profile: demoBrowserProfile,
			MQTTListen: "127.0.0.1:0", MQTTWS: "127.0.0.1:0", HTTP: "127.0.0.1:0", Pace: demoBrowserPace, CoupPace: 1500 * time.Millisecond,
			Seed: demoBrowserSeed, Shoes: 1, ResultTime: time.Millisecond, Ready: func(i DemoInfo) { ready <- i }, LogTo: &logs})
	}()
	var info DemoInfo
	select {
	case info = <-ready:
	case err := <-done:
		t.Fatalf("demo stopped: %v\n%s", err, logs.String())
	case <-time.After(demoBrowserWait):
		t.Fatalf("demo not ready:\n%s", logs.String())
	}
	stopped := false
	stop := func() {
		if !stopped {
			stopped = true
			stopDemo()
			awaitStop(t, "the demo", done, demoBrowserWait, logs.String)
		}
	}
	defer stop()

	pitAuth := "Basic " + base64.StdEncoding.EncodeToString([]byte("pit:"+info.PitPassword))
	pit := browser.OpenContext(ctx, t, info.HTTP+"/pit", 1920, 1080, map[string]string{"Authorization": pitAuth})
	pub := browser.OpenContext(ctx, t, info.HTTP+"/", 1280, 720, nil)
	pit.WaitFor("the pit view and its console", `document.body.dataset.loading === 'false' && window.pitConsole !== undefined && document.getElementById('pc-key-import') !== null`,
		`[document.body.dataset.loading, document.getElementById('pit-console').innerText]`)
	if pit.Text("#pc-send") != "SIGN & SEND" {
		t.Errorf("the console's send button says %q", pit.Text("#pc-send"))
	}

	// The supervisor's key file, imported once: after that the page keeps
	// a key it cannot give back.
	pem, err := os.ReadFile(info.Key)
	if err != nil {
		t.Fatal(err)
	}
	priv, err := audit.LoadPrivateKey(info.Key)
	if err != nil {
		t.Fatal(err)
	}
	pit.Eval(fmt.Sprintf(`(() => { document.getElementById('pc-key-name').value = 'demo'; document.getElementById('pc-key-pem').value = %q;
		document.getElementById('pc-key-import').click(); return true; })()`, string(pem)), nil)
	pit.WaitFor("the imported key", `window.pitConsole.signer() !== null`, `document.getElementById('pit-console').innerText`)
	var key struct {
		Name, ID, Pub string
		Extractable   bool
		PEMLeft       bool
	}
	pit.Eval(`(() => { const s = window.pitConsole.signer(); return {Name: s.name, ID: s.id, Pub: s.pub, Extractable: s.key.extractable,
		PEMLeft: document.documentElement.innerHTML.includes('BEGIN PRIVATE KEY')}; })()`, &key)
	wantPub := priv.Public().(ed25519.PublicKey)
	if got, _ := base64.StdEncoding.DecodeString(key.Pub); !wantPub.Equal(ed25519.PublicKey(got)) || key.Name != "demo" || key.Extractable || key.PEMLeft {
		t.Fatalf("imported key: %+v (want the demo key, not extractable, the PEM gone from the page)", key)
	}
	if !strings.Contains(pit.Text("#pc-key"), key.ID) {
		t.Errorf("the console does not show the key id %s: %q", key.ID, pit.Text("#pc-key"))
	}
	// The key stays in the browser: after a reload it is there, still
	// not extractable.
	pit.Navigate(info.HTTP + "/pit")
	pit.WaitFor("the key after a reload", `window.pitConsole !== undefined && window.pitConsole.signer() !== null && window.pitConsole.signer().key.extractable === false && document.body.dataset.loading === 'false'`,
		`document.getElementById('pit-console').innerText`)

	// Betting open after two coups: suspend the table.
	pit.WaitFor("two coups dealt, betting open", `document.querySelectorAll('#recall-table tbody tr').length >= 2 && window.tableDisplay.state.coup && window.tableDisplay.state.coup.phase === 'betting_open'`,
		`[document.querySelectorAll('#recall-table tbody tr').length, window.tableDisplay.state.coup && window.tableDisplay.state.coup.phase]`)
	susp := consoleSend(t, pit, coup.ActionSuspend, map[string]string{"reason": "pit console: dispute at seat 2"}, "accepted")
	pub.WaitFor("the public SUSPENDED banner", browsertest.Visible("banner-suspended"), `document.getElementById('table-state').textContent`)
	pit.WaitFor("the supervisor's note on the pit's banner", `document.getElementById('suspend-reason').textContent === 'pit console: dispute at seat 2'`, `document.getElementById('suspend-reason').textContent`)
	if got := pub.Text("#banner-suspended"); strings.Contains(got, "dispute") {
		t.Errorf("the public banner shows the supervisor's note: %q", got)
	}

	// Void the newest finished coup of this shoe, as the recall shows it
	// now the table is suspended (on a slow machine more than two coups
	// may have been dealt by now, and the recall shows only the last 10).
	var last int
	pit.Eval(`Number(document.querySelector('#recall-table tbody tr').dataset.coup)`, &last)
	if last < 2 {
		t.Fatalf("the recall's newest coup is %d", last)
	}
	n := strconv.Itoa(last)
	pub.WaitFor("coup "+n+" on the bead plate", `document.querySelector('#road-bead .cell[data-coup="`+n+`"]') !== null`, ``)
	void := consoleSend(t, pit, coup.ActionVoid, map[string]string{"coup": n, "reason": "pit console: card exposed"}, "accepted")
	if !strings.Contains(void.Text, "by demo") || !strings.Contains(void.Text, "recorded at seq") {
		t.Errorf("the console's void entry: %q", void.Text)
	}
	pit.WaitFor("coup "+n+" voided in the recall", `document.querySelector('#recall-table tr.voided[data-coup="`+n+`"]') !== null`, `document.getElementById('recall-table').innerText`)
	pub.WaitFor("coup "+n+" gone from the public bead plate", `document.querySelector('#road-bead .cell[data-coup="`+n+`"]') === null`, ``)
	// A void the table cannot do: refused, with the table's reason shown.
	bad := consoleSend(t, pit, coup.ActionVoid, map[string]string{"coup": "99", "reason": "no such coup"}, "refused")
	if !strings.Contains(bad.Text, signedcmd.CodeTable) {
		t.Errorf("a refused void shows %q", bad.Text)
	}
	pit.SaveScreenshot(shots, "pit-console-void", false)
	res := consoleResume(t, pit, "dispute settled")
	pub.WaitFor("the table live again", `!(`+browsertest.Visible("banner-suspended")+`) && document.getElementById('table-state').textContent === 'LIVE'`, `document.getElementById('table-state').textContent`)

	// A key made in this browser: only its public half leaves. The table
	// refuses it until it is enrolled; enrolled, the table's verifier
	// accepts what the browser signs.
	pit.Eval(`window.pitConsole.generate('ann').then(() => true)`, nil)
	var ann struct {
		Pub         string
		Extractable bool
		Wire        string
	}
	pit.Eval(`window.pitConsole.sign({action: 'suspend', reason: 'signed by a browser key: ü <&> "quoted"\n'}).then((s) => ({Pub: window.pitConsole.signer().pub,
		Extractable: window.pitConsole.signer().key.extractable, Wire: s.wire}))`, &ann)
	if ann.Extractable {
		t.Error("a key made in the browser is extractable")
	}
	consoleSend(t, pit, coup.ActionSuspend, map[string]string{"reason": "not enrolled yet"}, "refused")
	if txt := pit.Text("#pc-log li"); !strings.Contains(txt, signedcmd.CodeUnknownKey) {
		t.Errorf("a key not in the keyring: %q", txt)
	}
	// The enrolment request on the page: ann's key, signed with it.
	pit.WaitFor("the enrolment request", `document.getElementById('pc-enrol-request').textContent.includes('"sig"')`, `(document.querySelector('.pc-enrol') || {}).innerText`)
	pit.SaveScreenshot(shots, "pit-console", false)
	reqText := pit.Text("#pc-enrol-request")
	req, pubKey, err := signedcmd.ParseRequest([]byte(reqText))
	if err != nil || req.Name != "ann" || req.Table != "DEMO" || base64.StdEncoding.EncodeToString(pubKey) != ann.Pub {
		t.Fatalf("the console's enrolment request %+v: %v\n%s", req, err, reqText)
	}
	now := time.Now().UTC()
	enrolment := signedcmd.Enrolment{Name: "ann", PublicKey: pubKey, NotBefore: now.Add(-time.Hour), NotAfter: now.Add(time.Hour)}
	// The table's own verifier, on a keyring with ann enrolled, accepts
	// what the browser signed.
	keyring := filepath.Join(t.TempDir(), "supervisors.json")
	demoRing, err := os.ReadFile(info.Keyring)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyring, demoRing, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := signedcmd.EnrolFile(keyring, enrolment); err != nil {
		t.Fatal(err)
	}
	kr, err := signedcmd.LoadKeyring(keyring)
	if err != nil {
		t.Fatal(err)
	}
	ver, err := signedcmd.NewVerifier(signedcmd.VerifierOptions{Table: "DEMO", Keys: kr, Clock: clock.Real})
	if err != nil {
		t.Fatal(err)
	}
	if v, err := ver.Verify([]byte(ann.Wire)); err != nil || v.Command.Supervisor != "ann" || v.Command.Reason != "signed by a browser key: ü <&> \"quoted\"\n" {
		t.Errorf("the table's verifier on a command signed in the browser with an enrolled key: %+v, %v\n%s", v.Command, err, ann.Wire)
	}
	// Enrolled in the running demo's keyring on the box (tablectl enrol):
	// unsigned, the table refuses it, and ann is still unknown.
	if err := signedcmd.EnrolFile(info.Keyring, enrolment); err != nil {
		t.Fatal(err)
	}
	waitRow(t, info.Trail, signedcmd.KindKeyringRefused, "the table's refusal of the unsigned keyring", nil)
	consoleSend(t, pit, coup.ActionSuspend, map[string]string{"reason": "enrolled on the box"}, "refused")
	if txt := pit.Text("#pc-log li"); !strings.Contains(txt, signedcmd.CodeUnknownKey) {
		t.Errorf("ann after an unsigned enrolment: %q", txt)
	}
	// The officer signs it: the table reloads it and takes ann's
	// commands, no restart.
	officer, err := audit.LoadPrivateKey(info.Officer)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := signedcmd.SignKeyringFile(info.Keyring, "", officer, 0, time.Now()); err != nil {
		t.Fatal(err)
	}
	waitRow(t, info.Trail, signedcmd.KindKeyring, "the table's reload of the signed keyring", func(r audit.Record) bool {
		var b signedcmd.KeyringBody
		return json.Unmarshal(r.Body, &b) == nil && b.Reason == signedcmd.KeyringReloaded
	})
	// The row is written just before the keys are taken: a command in
	// between is unknown once more, and sent again.
	testenv.EventuallyErr(t, demoBrowserWait, "ann's suspend after her enrolment accepted", func() error {
		e := consoleSend(t, pit, coup.ActionSuspend, map[string]string{"reason": "ann, enrolled"}, "")
		if e.State != "accepted" && !strings.Contains(e.Text, signedcmd.CodeUnknownKey) {
			t.Fatalf("ann's suspend after her enrolment: %s", e.Text)
		}
		if e.State != "accepted" {
			return errors.New(e.Text)
		}
		return nil
	})
	annResume := consoleResume(t, pit, "ann resumes")
	if !strings.Contains(annResume.Text, "by ann") {
		t.Errorf("ann's resume: %q", annResume.Text)
	}
	// The dealer on record, signed in from the console (issue 18): taken
	// only between coups, so a sign-in landing mid-coup is refused and
	// sent again, as a supervisor would.
	testenv.EventuallyErr(t, demoBrowserWait, "dealer sign-in from the console accepted", func() error {
		if e := consoleSend(t, pit, coup.ActionDealerIn, map[string]string{"dealer": "d-1042", "reason": "shift start"}, ""); e.State != "accepted" {
			return errors.New(e.Text)
		}
		return nil
	})
	pit.WaitFor("the dealer on duty in the pit view's header", `document.getElementById('dealer').textContent === 'd-1042'`, `document.getElementById('dealer').textContent`)
	pit.NoProblems()
	pub.NoProblems()

	// The trail: every command the console sent is recorded with its
	// signer and verifies against the keyring, long after the fact.
	stop()
	r, err := audit.OpenReader(ctx, info.Trail)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	// The demo's keyring, ann enrolled: every command recorded verifies.
	demoKeys, err := signedcmd.LoadKeyring(info.Keyring)
	if err != nil {
		t.Fatal(err)
	}
	// Every keyring the table loaded is in the trail: at start (the demo
	// supervisor), the one refused and why, and the reload that added ann,
	// signed by the officer.
	var loaded []signedcmd.KeyringBody
	var refusedWhy []string
	for rec, err := range r.Events(ctx, audit.Query{Kinds: []string{signedcmd.KindKeyring, signedcmd.KindKeyringRefused}}) {
		if err != nil {
			t.Fatal(err)
		}
		if rec.Kind == signedcmd.KindKeyringRefused {
			var b signedcmd.KeyringRefusedBody
			json.Unmarshal(rec.Body, &b)
			refusedWhy = append(refusedWhy, b.Error)
			continue
		}
		var b signedcmd.KeyringBody
		json.Unmarshal(rec.Body, &b)
		loaded = append(loaded, b)
	}
	officerID := audit.KeyID(officer.Public().(ed25519.PublicKey))
	if len(loaded) != 2 || loaded[0].Reason != signedcmd.KeyringAtStart || loaded[1].Reason != signedcmd.KeyringReloaded ||
		len(loaded[1].Added) != 1 || loaded[1].Added[0].Name != "ann" || loaded[1].Authority != officerID || loaded[1].SHA256 != demoKeys.Meta().Hash {
		t.Errorf("keyring rows: %+v", loaded)
	}
	if len(refusedWhy) == 0 || !strings.Contains(refusedWhy[0], "not signed") {
		t.Errorf("refused keyring rows: %q", refusedWhy)
	}
	checked, forged, err := signedcmd.CheckTrail(r.Events(ctx, audit.Query{}), "DEMO", demoKeys)
	if err != nil || len(forged) > 0 || checked < 5 {
		t.Errorf("recorded commands: %d checked, forged %+v, %v", checked, forged, err)
	}
	found := map[string]bool{}
	for rec, err := range r.Events(ctx, audit.Query{}) {
		if err != nil {
			t.Fatal(err)
		}
		if rec.Kind != string(coup.InCmd) {
			continue
		}
		for _, e := range []consoleEntry{susp, void, res, annResume} {
			if strings.Contains(string(rec.Body), e.ID) {
				found[e.ID] = true
				if signer := map[bool]string{true: `"ann"`, false: `"demo"`}[e.ID == annResume.ID]; !strings.Contains(string(rec.Body), signer) {
					t.Errorf("row %d records command %s without its signer: %s", rec.Seq, e.ID, rec.Body)
				}
			}
		}
	}
	for _, e := range []consoleEntry{susp, void, res, annResume} {
		if !found[e.ID] {
			t.Errorf("command %s (%s) is not in the trail", e.ID, e.Text)
		}
	}
}

// waitRow waits until the trail at path holds a row of kind (that ok
// takes, if ok is not nil).
func waitRow(t *testing.T, path, kind, what string, ok func(audit.Record) bool) {
	t.Helper()
	ctx := context.Background()
	testenv.Eventually(t, demoBrowserWait, fmt.Sprintf("%s: a %s row", what, kind), func() bool {
		rd, err := audit.OpenReader(ctx, path)
		if err != nil {
			t.Fatal(err)
		}
		defer rd.Close()
		for r, err := range rd.Events(ctx, audit.Query{Kinds: []string{kind}}) {
			if err == nil && (ok == nil || ok(r)) {
				return true
			}
		}
		return false
	})
}
