package display_test

import (
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"log/slog"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tablectl/tablectl/audit"
	"github.com/tablectl/tablectl/audit/stats"
	"github.com/tablectl/tablectl/base/mqttconn"
	"github.com/tablectl/tablectl/coup"
	"github.com/tablectl/tablectl/display"
	"github.com/tablectl/tablectl/display/mqttpub"
	"github.com/tablectl/tablectl/internal/mqtttest"
)

// TestBrowserRecallWhileSuspended: with a dealer signed in and twelve
// coups dealt, a misdeal suspends the table; the pit view still recalls
// the last 10 coups, shows the one the supervisor picks in the coup panel
// under a RECALL banner that says it is not the live game (the suspension
// banner stays up), and goes back to the live table on request. The
// header names the dealer on duty, and the pit's dealer table has her
// figures: 12 coups, 1 misdeal, 100/12 = 8.33 misdeals per 100 coups.
func TestBrowserRecallWhileSuspended(t *testing.T) {
	ctx, b := startBrowser(t)
	br := embeddedBroker(t)
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	p, err := coup.BuiltinProfile(coup.ProfileVIP)
	if err != nil {
		t.Fatal(err)
	}
	tc := coup.DefaultTableConfig(p)
	var publisher atomic.Pointer[mqttpub.Publisher]
	rec, err := audit.OpenRecorder(ctx, filepath.Join(t.TempDir(), "trail.db"), audit.RecorderOptions{
		Table: bTable, Config: tc, Logger: quiet,
		OnCommit: func(c audit.Commit) {
			if p := publisher.Load(); p != nil {
				p.Commit(c)
			}
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rec.Close() })
	topics := mqttpub.Topics{Prefix: bPrefix}
	conn, err := mqttconn.Dial(mqttconn.ConnOptions{
		Broker: br.tcp, ClientID: mqtttest.ClientID(t, "tablectl"), Username: br.user, Password: br.pass,
		WillTopic: topics.Topic(mqttpub.TopicStatus), WillPayload: mqttpub.Offline(bTable), Logger: quiet,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(time.Second) })
	pub, err := mqttpub.New(mqttpub.Options{
		Table: bTable, Topics: topics, Client: conn, Trail: rec.Store(), Config: tc, From: rec.Store().Head().Seq,
		Driver: "v1", Logger: quiet,
	})
	if err != nil {
		t.Fatal(err)
	}
	publisher.Store(pub)
	pctx, cancelPub := context.WithCancel(ctx)
	pubDone := make(chan error, 1)
	go func() { pubDone <- pub.Run(pctx) }()
	t.Cleanup(func() { cancelPub(); <-pubDone })

	h, err := display.WebHandler(display.WebConfig{
		Table: bTable, BrokerWS: br.ws, Prefix: bPrefix, Pit: br.pit, PitUser: bPitUser, PitPassword: bPitPass, Recall: rec,
		DealerStats: func() (stats.Report, error) {
			return stats.Compute(rec.Store().Events(ctx, audit.Query{Kinds: stats.Kinds}), stats.Options{})
		},
	}, display.Handler(rec))
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	br.allowOrigin(srv.URL)
	auth := "Basic " + base64.StdEncoding.EncodeToString([]byte(bPitUser+":"+bPitPass))
	pit := b.OpenContext(ctx, t, srv.URL+"/pit", 1920, 1080, map[string]string{"Authorization": auth})
	pg := b.OpenContext(ctx, t, srv.URL+"/", 1920, 1080, nil)

	tb := &recorderTable{t: t, ctx: ctx, rec: rec, now: time.Date(2026, 11, 25, 21, 0, 0, 0, time.UTC)}
	tb.submit(coup.Input{Kind: coup.InCmd, Command: &coup.Command{ID: "in-1", Action: coup.ActionDealerIn, By: "alice", Dealer: "d-1042"}})
	d := newDealer(18)
	d.startShoe(t, tb)
	for range 12 {
		d.dealCoup(t, tb, nil)
		d.finish(tb)
	}
	// A card while betting is open: a misdeal, the table suspended.
	tb.deal(cardInput(d.draw()))
	if v := tb.pitView(); !v.Suspended {
		t.Fatal("the misdeal did not suspend the table")
	}
	recall := rec.Recall()
	if len(recall) != coup.RecallDepth {
		t.Fatalf("recall holds %d coups while suspended", len(recall))
	}
	pit.WaitFor("the suspended table, its dealer and its recall", `!document.getElementById('banner-suspended').hidden && document.getElementById('dealer').textContent === 'd-1042' && document.querySelectorAll('#recall-table tbody tr').length === 10`,
		`[document.getElementById('banner-suspended').hidden, document.getElementById('dealer').textContent, document.querySelectorAll('#recall-table tbody tr').length]`)
	checkRecall(t, pit, recall)
	// The dealer's figures: twelve coups, one misdeal.
	pit.WaitFor("the dealer's figures", `(() => { const tr = document.querySelector('#dealer-table tbody tr[data-dealer="d-1042"]'); return !!tr && tr.children[1].textContent === '12' && tr.children[4].textContent === '8.33'; })()`,
		`Array.from(document.querySelectorAll('#dealer-table tbody tr')).map((tr) => tr.textContent)`)
	if mode := pit.Text("#banner-recall"); mode != "" {
		var hidden bool
		pit.Eval(`document.getElementById('banner-recall').hidden`, &hidden)
		if !hidden {
			t.Fatal("the recall banner shows before a coup is picked")
		}
	}

	// The supervisor picks the oldest coup of the ten.
	old := recall[0]
	pit.Eval(fmt.Sprintf(`document.querySelector('#recall-table tbody tr[data-coup="%d"]').click(), true`, old.Coup), new(bool))
	pit.WaitFor("recall mode", fmt.Sprintf(`document.body.dataset.mode === 'recall' && !document.getElementById('banner-recall').hidden && document.getElementById('phase').textContent.startsWith('RECALL · SHOE %d COUP %d')`, old.Shoe, old.Coup),
		`[document.body.dataset.mode, document.getElementById('phase').textContent]`)
	banner := pit.Text("#banner-recall")
	for _, want := range []string{"RECALL", "NOT THE LIVE GAME", fmt.Sprintf("COUP %d", old.Coup), "DEALER d-1042", "BACK TO LIVE"} {
		if !strings.Contains(banner, want) {
			t.Errorf("recall banner %q lacks %q", banner, want)
		}
	}
	var shown []string
	pit.Eval(`Array.from(document.querySelectorAll('#player-cards .card, #banker-cards .card')).map((c) => c.dataset.card || '')`, &shown)
	var want []string
	for _, c := range append(append([]coup.Card{}, old.Result.Player...), old.Result.Banker...) {
		want = append(want, c.String())
	}
	if strings.Join(shown, " ") != strings.Join(want, " ") {
		t.Errorf("recall shows cards %v, coup %d had %v", shown, old.Coup, want)
	}
	var suspendedShown bool
	pit.Eval(`!document.getElementById('banner-suspended').hidden`, &suspendedShown)
	if !suspendedShown {
		t.Error("the suspension banner went away in recall mode")
	}
	pit.SaveScreenshot(screenshotDir(t), "pit-recall-while-suspended", false)

	// The public display never enters recall mode.
	var pubMode string
	pg.Eval(`document.body.dataset.mode || ''`, &pubMode)
	if pubMode == "recall" {
		t.Error("the public display is in recall mode")
	}

	pit.Eval(`document.getElementById('recall-exit').click(), true`, new(bool))
	pit.WaitFor("the live game again", `document.body.dataset.mode === 'live' && document.getElementById('banner-recall').hidden && !document.getElementById('phase').textContent.startsWith('RECALL')`,
		`[document.body.dataset.mode, document.getElementById('phase').textContent]`)

	// A card drawn while the table is suspended, then the coup voided: the
	// recall lists it and the misdeal's card (drawn while betting was
	// open), each marked, in their places.
	tb.deal(cardInput(d.draw()))
	tb.submit(coup.Input{Kind: coup.InCmd, Command: &coup.Command{ID: "void-1", Action: coup.ActionVoid, By: "alice"}})
	voided := rec.Recall()[coup.RecallDepth-1]
	if !voided.Voided || len(voided.Strays) != 2 {
		t.Fatalf("the voided coup's record: %+v", voided)
	}
	pit.WaitFor("the stray in the recall, marked", fmt.Sprintf(`(() => { const tr = document.querySelector('#recall-table tbody tr'); return tr.dataset.coup === '%d' && tr.querySelectorAll('.c.stray').length === 2 && tr.textContent.includes('OPEN') && tr.textContent.includes('SUSP'); })()`, voided.Coup),
		`document.querySelector('#recall-table tbody tr').outerHTML`)
	// By keyboard: the row takes the focus, shows it, and Enter recalls it.
	var kb struct {
		Tab     int
		Focused bool
		Outline string
	}
	pit.Eval(`(() => { const tr = document.querySelector('#recall-table tbody tr'); tr.focus();
		const r = {Tab: tr.tabIndex, Focused: document.activeElement === tr, Outline: getComputedStyle(tr).outlineStyle};
		tr.dispatchEvent(new KeyboardEvent('keydown', {key: 'Enter', bubbles: true})); return r; })()`, &kb)
	if kb.Tab != 0 || !kb.Focused || kb.Outline == "none" {
		t.Errorf("a recall row by keyboard: tabindex %d, focused %v, outline %q", kb.Tab, kb.Focused, kb.Outline)
	}
	pit.WaitFor("recall by Enter", fmt.Sprintf(`document.body.dataset.mode === 'recall' && document.getElementById('phase').textContent.startsWith('RECALL · SHOE %d COUP %d')`, voided.Shoe, voided.Coup),
		`document.getElementById('phase').textContent`)
	pit.SaveScreenshot(screenshotDir(t), "pit-recall-stray", false)
	pit.NoProblems()
}
