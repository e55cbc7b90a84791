package display_test

// Headless Chromium tests of the web display. TestBrowserDisplay runs the
// page against a real broker (the embedded one, and Mosquitto's WebSocket
// listener) fed by a stand-in controller that deals a shoe through
// coup.Table and publishes each state on the retained topics of
// docs/mqtt.md, stopping where a viewer must see something (a card face
// down, a result, a suspension, the broker gone). TestBrowserController
// runs it against the controller's own parts: audit recorder, MQTT
// publisher, roads engine and embedded broker. Both check what a viewer
// sees and save screenshots (TABLECTL_SCREENSHOTS names the folder to keep
// them in).

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"math"
	"math/rand/v2"
	"net"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"

	"github.com/tablectl/tablectl/audit"
	"github.com/tablectl/tablectl/base/mqttconn"
	"github.com/tablectl/tablectl/coup"
	"github.com/tablectl/tablectl/coup/roads"
	"github.com/tablectl/tablectl/display"
	"github.com/tablectl/tablectl/display/mqttpub"
	"github.com/tablectl/tablectl/internal/browsertest"
	"github.com/tablectl/tablectl/internal/mqttbroker"
	"github.com/tablectl/tablectl/internal/mqtttest"
	"github.com/tablectl/tablectl/internal/testenv"
)

const (
	bTable    = "t7"
	bPrefix   = "tablectl/BAC-07" // the table deploy/mosquitto/acl is written for
	bWriter   = "controller"
	bWriterPW = "controller-secret"
	bPitUser  = "pit"
	bPitPass  = "pit-secret-9"
	// bWait bounds one wait for the page; generous, since a loaded 2-core
	// machine runs Chromium, a broker and the test at once.
	bWait = 45 * time.Second
)

// EnvScreenshots names the folder the browser tests keep screenshots in.
const envScreenshots = "TABLECTL_SCREENSHOTS"

func TestBrowserDisplay(t *testing.T) {
	ctx, b := startBrowser(t)
	shots := screenshotDir(t)
	for _, kind := range []string{"embedded", "mosquitto"} {
		t.Run(kind, func(t *testing.T) {
			var br *testBroker
			if kind == "embedded" {
				br = embeddedBroker(t)
			} else {
				br = mosquittoBroker(t)
			}
			runDisplay(ctx, t, b, br, filepath.Join(shots, kind))
		})
	}
}

// startBrowser starts headless Chromium for the test; the context bounds
// the whole test.
func startBrowser(t *testing.T) (context.Context, *browsertest.Browser) {
	t.Helper()
	testenv.Long(t, "the web display's browser tests (Chromium)")
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	t.Cleanup(cancel)
	// One Chromium for every browser test of the package (TestMain).
	b := browsertest.Shared(t)
	b.Timeout = bWait
	return ctx, b
}

func screenshotDir(t *testing.T) string {
	dir := os.Getenv(envScreenshots)
	if dir == "" {
		dir = t.TempDir()
		t.Logf("screenshots go to %s (removed after the test; set %s to keep them)", dir, envScreenshots)
	} else {
		t.Logf("screenshots go to %s", dir)
	}
	return dir
}

// --------------------------------------------------------------- brokers

// testBroker is a broker with a WebSocket listener that a test can stop
// and start again on the same ports.
type testBroker struct {
	tcp, ws string
	// user and pass are the controller's login; public and pit are the
	// browsers' (public is empty on the embedded broker, which lets a client
	// without a login read the public topics).
	user, pass  string
	public, pit display.WebLogin
	stop, start func()
	// allowOrigin lets the page's origin open the broker's WebSocket (the
	// embedded broker checks it; nil where the broker does not).
	allowOrigin func(origin string)
}

func embeddedBroker(t *testing.T) *testBroker {
	opt := mqttbroker.Options{
		TCP: "127.0.0.1:0", WS: "127.0.0.1:0",
		Writer: bWriter, WriterPassword: bWriterPW,
		// The controller's access (internal/controller): the public reads
		// status and public/#, the pit everything.
		Anonymous: mqttbroker.Access{Read: []string{bPrefix + "/status", bPrefix + "/public/#"}},
		Logins: []mqttbroker.Login{{Username: "pit", Password: "pit-mqtt-pw",
			Access: mqttbroker.Access{Read: []string{bPrefix + "/#"}, Write: []string{bPrefix + "/cmd"}}}},
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	}
	var mu sync.Mutex
	b, err := mqttbroker.Start(opt)
	if err != nil {
		t.Fatal(err)
	}
	opt.TCP, opt.WS = b.TCPAddr(), b.WSAddr()
	tb := &testBroker{tcp: b.URL(), ws: b.WSURL(), user: bWriter, pass: bWriterPW,
		pit: display.WebLogin{Username: "pit", Password: "pit-mqtt-pw"}}
	tb.allowOrigin = func(origin string) {
		mu.Lock()
		defer mu.Unlock()
		opt.WSOrigins = append(opt.WSOrigins, origin)
		if err := b.AllowOrigins(origin); err != nil {
			t.Fatal(err)
		}
	}
	tb.stop = func() {
		mu.Lock()
		defer mu.Unlock()
		b.Close()
	}
	tb.start = func() {
		mu.Lock()
		defer mu.Unlock()
		nb, err := mqttbroker.Start(opt)
		if err != nil {
			t.Fatalf("restart the embedded broker: %v", err)
		}
		b = nb
	}
	t.Cleanup(tb.stop)
	return tb
}

// mosquittoBroker runs Mosquitto with a WebSocket listener, the table's
// ACL from deploy/mosquitto and a login for each of its users, so the
// page reads as a public display and as the pit would in production.
func mosquittoBroker(t *testing.T) *testBroker {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	wsPort := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	dir := t.TempDir()
	acl, err := os.ReadFile(filepath.Join("..", "deploy", "mosquitto", "acl"))
	if err != nil {
		t.Fatal(err)
	}
	aclFile := filepath.Join(dir, "acl")
	if err := os.WriteFile(aclFile, acl, 0o600); err != nil {
		t.Fatal(err)
	}
	pwFile := filepath.Join(dir, "passwd")
	logins := map[string]string{"tablectl": bWriterPW, "display-1": "display-pw", "pit-BAC-07": "pit-mqtt-pw"}
	for _, user := range []string{"tablectl", "display-1", "pit-BAC-07"} {
		args := []string{"-b", pwFile, user, logins[user]}
		if user == "tablectl" {
			args = append([]string{"-c"}, args...)
		}
		if out, err := exec.Command("mosquitto_passwd", args...).CombinedOutput(); err != nil {
			t.Fatalf("mosquitto_passwd: %v\n%s", err, out)
		}
	}
	m := mqtttest.StartMosquitto(t, fmt.Sprintf("allow_anonymous false\npassword_file %s\nacl_file %s\nlistener %d 127.0.0.1\nprotocol websockets\n", pwFile, aclFile, wsPort))
	return &testBroker{
		tcp: m.URL, ws: fmt.Sprintf("ws://127.0.0.1:%d/mqtt", wsPort), user: "tablectl", pass: bWriterPW,
		public: display.WebLogin{Username: "display-1", Password: logins["display-1"]},
		pit:    display.WebLogin{Username: "pit-BAC-07", Password: logins["pit-BAC-07"]},
		stop:   m.Stop, start: m.Start,
	}
}

// ---------------------------------------------------------------- feeder

// feeder stands in for the controller: it owns a coup.Table and the roads,
// applies the dealer's inputs, and publishes every retained topic that
// changed, as the controller's publisher does (display/mqttpub).
type feeder struct {
	t   *testing.T
	br  *testBroker
	cli paho.Client

	mu      sync.Mutex
	table   *coup.Table
	roads   *roads.Board
	onRoads map[[2]int]bool
	seq     uint32 // the shoe's sentence numbers
	cmds    int
	now     time.Time
	state   string
	last    map[string][]byte
	pitShoe []byte
	// pitShoeFixed replaces the analysis of the table's remaining shoe.
	pitShoeFixed []byte
}

func newFeeder(t *testing.T, br *testBroker) *feeder {
	p, err := coup.BuiltinProfile(coup.ProfileVIP)
	if err != nil {
		t.Fatal(err)
	}
	tab, err := coup.NewTable(coup.DefaultTableConfig(p))
	if err != nil {
		t.Fatal(err)
	}
	f := &feeder{t: t, br: br, table: tab, roads: roads.New(), onRoads: map[[2]int]bool{},
		now: time.Date(2026, 11, 22, 20, 0, 0, 0, time.UTC), state: "online", last: map[string][]byte{}}
	f.connect()
	t.Cleanup(func() { f.cli.Disconnect(100) })
	return f
}

// connect (re)connects to the broker; a restarted broker has lost every
// retained message, so everything is published again.
func (f *feeder) connect() {
	f.t.Helper()
	if f.cli != nil {
		f.cli.Disconnect(0)
	}
	o := paho.NewClientOptions().AddBroker(f.br.tcp).SetClientID(mqtttest.ClientID(f.t, "feeder")).
		SetCleanSession(true).SetAutoReconnect(false).SetConnectTimeout(20 * time.Second)
	if f.br.user != "" {
		o.SetUsername(f.br.user).SetPassword(f.br.pass)
	}
	f.cli = paho.NewClient(o)
	if tok := f.cli.Connect(); !tok.WaitTimeout(30*time.Second) || tok.Error() != nil {
		f.t.Fatalf("feeder: connect to %s: %v", f.br.tcp, tok.Error())
	}
	f.mu.Lock()
	clear(f.last)
	f.mu.Unlock()
}

func (f *feeder) publish(topic string, payload []byte) {
	f.t.Helper()
	tok := f.cli.Publish(bPrefix+"/"+topic, 1, true, payload)
	if !tok.WaitTimeout(30*time.Second) || tok.Error() != nil {
		f.t.Fatalf("feeder: publish %s: %v", topic, tok.Error())
	}
}

func (f *feeder) apply(in coup.Input) []coup.Event {
	f.t.Helper()
	f.mu.Lock()
	in.At = f.now
	evs := f.table.Apply(in)
	analyse := false
	for _, e := range evs {
		switch e.Kind {
		case coup.EvShoeStarted:
			f.roads.Reset()
			analyse = true
		case coup.EvCoupVoided:
			f.roads.Void(e.Coup)
			analyse = true
		case coup.EvCoupResult, coup.EvShoeEnded, coup.EvBurnDone:
			analyse = true
		}
	}
	// A result goes on the public roads once the public may see it.
	if r := f.table.Result(); r != nil && f.table.ResultFinal() {
		key := [2]int{f.table.ShoeNumber(), f.table.CoupNumber()}
		if !f.onRoads[key] {
			f.onRoads[key] = true
			if err := f.roads.Add(key[1], *r); err != nil {
				f.mu.Unlock()
				f.t.Fatal(err)
			}
		}
	}
	if analyse || f.pitShoe == nil {
		f.pitShoe = f.analyse()
	}
	f.mu.Unlock()
	f.sync()
	return evs
}

func (f *feeder) shoeIn(in coup.Input) []coup.Event {
	f.seq++
	in.ShoeSeq = f.seq
	return f.apply(in)
}

func (f *feeder) button(b string) []coup.Event {
	return f.shoeIn(coup.Input{Kind: coup.InButton, Button: b})
}

func (f *feeder) command(c coup.Command) []coup.Event {
	f.t.Helper()
	f.cmds++
	c.ID = fmt.Sprintf("cmd-%d", f.cmds)
	if c.By == "" {
		c.By = "pit-boss"
	}
	evs := f.apply(coup.Input{Kind: coup.InCmd, Command: &c})
	for _, e := range evs {
		if e.Kind == coup.EvCommandRefused {
			f.t.Fatalf("command %s refused: %s", c.Action, e.Reason)
		}
	}
	return evs
}

func (f *feeder) tick(d time.Duration) {
	f.mu.Lock()
	f.now = f.now.Add(d)
	f.mu.Unlock()
	f.apply(coup.Input{Kind: coup.InTick})
}

// setState publishes status as the controller ("online") or as the
// broker's last will ("offline") would.
func (f *feeder) setState(s string) {
	f.mu.Lock()
	f.state = s
	f.mu.Unlock()
	f.sync()
}

// analyse prices the remaining shoe as the publisher does for pit/shoe.
func (f *feeder) analyse() []byte {
	t := f.table
	v := t.PitView()
	comp := t.Remaining()
	ps := mqttpub.PitShoe{Shoe: v.Shoe, Coup: v.Coup, Phase: v.Phase, Decks: comp.Decks(), CardsRemaining: comp.Remaining(),
		Ranks: map[string]int{}, Cards: map[string]int{}, Bets: []mqttpub.BetEV{}, Advantage: []coup.Bet{}}
	for i, n := range comp.Counts() {
		c := coup.CardAt(i)
		ps.Cards[c.String()] += int(n)
		ps.Ranks[c.String()[:1]] += int(n)
	}
	switch {
	case t.ShoeNumber() == 0:
		ps.Note = "no shoe yet"
	case t.Phase() == coup.PhaseNoShoe:
		ps.Note = "the shoe is over"
	default:
		p := t.Config().Profile
		an, err := coup.Analyze(&comp, &p)
		if err != nil {
			ps.Note = err.Error()
			break
		}
		ps.Bets, ps.Advantage = betEVs(an)
	}
	b, err := json.Marshal(ps)
	if err != nil {
		f.t.Fatal(err)
	}
	return b
}

func betEVs(an coup.Analysis) ([]mqttpub.BetEV, []coup.Bet) {
	var bets []mqttpub.BetEV
	adv := []coup.Bet{}
	for _, o := range an.Bets {
		x := mqttpub.BetEV{Bet: o.Bet, PWin: o.PWin, PPush: o.PPush, Priced: o.Priced}
		if o.Priced {
			ev := o.EV
			x.EV = &ev
			x.Advantage = ev > 1e-12
		}
		if x.Advantage {
			adv = append(adv, o.Bet)
		}
		bets = append(bets, x)
	}
	return bets, adv
}

// sync publishes every retained topic whose payload changed.
func (f *feeder) sync() {
	f.t.Helper()
	f.mu.Lock()
	t := f.table
	pub, pit := t.PublicView(), t.PitView()
	msgs := map[string]any{
		"status": mqttpub.Status{State: f.state, Table: bTable, Phase: pub.Phase, Shoe: pub.Shoe, Coup: pub.Coup,
			Suspended: pub.Suspended, SuspendReason: pub.SuspendReason, ShoeDriver: "v1", ShoeLink: pub.Link, Audit: "ok"},
		"public/coup": pub,
		"pit/coup":    pit,
		"public/shoe": mqttpub.PublicShoe{Shoe: pub.Shoe, Coup: pub.Coup, Phase: pub.Phase, CardsDealt: pub.CardsDealt,
			CardsRemaining: pub.Remaining, CutCardSeen: pub.CutCardSeen, LastCoup: pub.LastCoup},
		"public/roads": f.roads.Snapshot(),
	}
	if f.state == "offline" {
		msgs["status"] = mqttpub.Status{State: "offline", Table: bTable}
	}
	active := mqttpub.ActiveAlerts{Alerts: []mqttpub.Alert{}}
	for _, a := range t.Alerts() {
		active.Alerts = append(active.Alerts, mqttpub.Alert{State: mqttpub.AlertRaised, ID: strconv.Itoa(a.ID), Source: mqttpub.SourceTable,
			Kind: string(a.Kind), Suspends: true, Shoe: a.Shoe, Coup: a.Coup, Message: a.Message, Needs: a.Needs, At: f.now})
	}
	msgs["pit/alerts/active"] = active
	payloads := map[string][]byte{}
	for topic, v := range msgs {
		b, err := json.Marshal(v)
		if err != nil {
			f.mu.Unlock()
			f.t.Fatalf("%s: %v", topic, err)
		}
		payloads[topic] = b
	}
	payloads["pit/shoe"] = f.pitShoe
	if f.pitShoeFixed != nil {
		payloads["pit/shoe"] = f.pitShoeFixed
	}
	var out []string
	for topic, b := range payloads {
		if string(f.last[topic]) != string(b) {
			f.last[topic] = b
			out = append(out, topic)
		}
	}
	f.mu.Unlock()
	// Status last, as a reader would expect of a state change.
	slices.SortFunc(out, func(a, b string) int {
		if (a == "status") != (b == "status") {
			if a == "status" {
				return 1
			}
			return -1
		}
		return strings.Compare(a, b)
	})
	for _, topic := range out {
		f.publish(topic, payloads[topic])
	}
}

// View, Recall and Failing make the feeder the controller's display.Source.
func (f *feeder) View() (coup.View, coup.View) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.table.PublicView(), f.table.PitView()
}

func (f *feeder) Recall() []coup.CoupRecord {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.table.Recall()
}

func (f *feeder) Failing() error { return nil }

func (f *feeder) snapshot() (coup.View, roads.View, []coup.CoupRecord) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.table.PublicView(), f.roads.Snapshot(), f.table.Recall()
}

// ---------------------------------------------------------------- dealer

// dealer deals a shuffled 8-deck shoe the way a dealer following the
// tableau does, and keeps every coup's result as scored from the cards.
type dealer struct {
	deck    []coup.Card
	next    int
	cutPos  int
	cutDone bool
}

func newDealer(seed uint64) *dealer {
	deck := make([]coup.Card, 0, 8*coup.CardCount)
	for range 8 {
		for i := range coup.CardCount {
			deck = append(deck, coup.CardAt(i))
		}
	}
	rng := rand.New(rand.NewPCG(seed, seed^0x5eed))
	rng.Shuffle(len(deck), func(i, j int) { deck[i], deck[j] = deck[j], deck[i] })
	return &dealer{deck: deck, cutPos: len(deck) - 16}
}

func (d *dealer) draw() coup.Card { c := d.deck[d.next]; d.next++; return c }

// dealTable is a table the dealer deals to: the feeder, or the real
// recorder.
type dealTable interface {
	// deal hands the table one input from the shoe.
	deal(in coup.Input)
	// pause lets time pass (the result stands, then betting opens).
	pause(d time.Duration)
	// pitView is the table now, every card shown.
	pitView() coup.View
}

func (f *feeder) deal(in coup.Input)    { f.shoeIn(in) }
func (f *feeder) pause(d time.Duration) { f.tick(d) }
func (f *feeder) pitView() coup.View    { _, pit := f.View(); return pit }
func cardInput(c coup.Card) coup.Input  { return coup.Input{Kind: coup.InCard, Card: &c} }
func buttonInput(b string) coup.Input   { return coup.Input{Kind: coup.InButton, Button: b} }

func (d *dealer) startShoe(t *testing.T, tb dealTable) {
	t.Helper()
	tb.deal(buttonInput(coup.ButtonNewShoe))
	first := d.draw()
	tb.deal(cardInput(first))
	n := int(first.Rank)
	if first.Rank >= coup.Ten {
		n = 10
	}
	for range n {
		tb.deal(cardInput(d.draw()))
	}
	tb.deal(buttonInput(coup.ButtonBurnDone))
	if ph := tb.pitView().Phase; ph != coup.PhaseBettingOpen {
		t.Fatalf("after the burn: phase %s", ph)
	}
}

// dealCoup closes betting and deals the coup's cards; before each card,
// each(i, c) may deal it itself (and says so). It returns the cards dealt
// and the result they make, scored here from the cards.
func (d *dealer) dealCoup(t *testing.T, tb dealTable, each func(i int, c coup.Card) bool) ([]coup.Card, coup.Result) {
	t.Helper()
	tb.deal(buttonInput(coup.ButtonNoMoreBets))
	var cards []coup.Card
	for {
		v := tb.pitView()
		if v.Phase == coup.PhaseResult {
			break
		}
		if v.Phase != coup.PhaseDealing && v.Phase != coup.PhaseBettingClosed {
			t.Fatalf("coup %d: phase %s while dealing (alerts %+v)", v.Coup, v.Phase, v.Alerts)
		}
		if !d.cutDone && d.next >= d.cutPos {
			tb.deal(coup.Input{Kind: coup.InCut})
			d.cutDone = true
		}
		c := d.draw()
		cards = append(cards, c)
		if each == nil || !each(len(cards)-1, c) {
			tb.deal(cardInput(c))
		}
	}
	r, err := coup.Score(cards)
	if err != nil {
		t.Fatal(err)
	}
	return cards, r
}

// finish reveals the coup and lets its result stand its time.
func (d *dealer) finish(tb dealTable) {
	tb.deal(buttonInput(coup.ButtonReveal))
	tb.pause(3 * time.Second)
}

// ------------------------------------------------------------------ page

var sideColour = map[coup.Side]string{coup.SideBanker: "red", coup.SidePlayer: "blue", coup.SideTie: "green"}

// ------------------------------------------------------------- the test

func runDisplay(ctx context.Context, t *testing.T, b *browsertest.Browser, br *testBroker, shots string) {
	f := newFeeder(t, br)
	f.sync() // the controller's first state: online, no shoe

	h, err := display.WebHandler(display.WebConfig{
		Table: bTable, BrokerWS: br.ws, Prefix: bPrefix, Public: br.public, Pit: br.pit,
		PitUser: bPitUser, PitPassword: bPitPass, Recall: f,
	}, display.Handler(f))
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	if br.allowOrigin != nil {
		br.allowOrigin(srv.URL)
	}

	pub := b.OpenContext(ctx, t, srv.URL+"/", 1920, 1080, nil)
	auth := "Basic " + base64.StdEncoding.EncodeToString([]byte(bPitUser+":"+bPitPass))
	pit := b.OpenContext(ctx, t, srv.URL+"/pit", 1920, 1080, map[string]string{"Authorization": auth})

	for _, pg := range []*browsertest.Page{pub, pit} {
		pg.WaitFor("the page to connect and read the retained state",
			`document.getElementById('conn').dataset.state === 'online' && document.getElementById('table-state').textContent === 'LIVE'`,
			`[document.getElementById('conn').dataset.state, document.getElementById('table-state').textContent, document.getElementById('conn-detail').textContent]`)
		pg.WaitFor("the page to say there is no shoe", `document.getElementById('phase').textContent === 'WAITING FOR A NEW SHOE'`, `document.getElementById('phase').textContent`)
	}
	var pitShown bool
	pit.Eval(`getComputedStyle(document.getElementById('pit')).display !== 'none' && getComputedStyle(document.querySelector('.pit-tag')).display !== 'none'`, &pitShown)
	var pubPit bool
	pub.Eval(`getComputedStyle(document.getElementById('pit')).display !== 'none'`, &pubPit)
	if !pitShown || pubPit {
		t.Fatalf("pit section shown on the pit page %v, on the public page %v", pitShown, pubPit)
	}

	// The shoe: burn, then coup 1 step by step.
	d := newDealer(7)
	d.startShoe(t, f)
	pub.WaitFor("betting to open", `document.getElementById('phase').textContent === 'PLACE YOUR BETS' && document.getElementById('coup-no').textContent === '1'`,
		`[document.getElementById('phase').textContent, document.getElementById('coup-no').textContent]`)

	var results []coup.Result
	cards, r := d.dealCoup(t, f, func(i int, c coup.Card) bool {
		if i != 1 {
			return false
		}
		// One card out, face down: the public sees a card back and
		// nothing of its identity; the pit sees it, marked not revealed.
		first := d.deck[d.next-2]
		pub.WaitFor("the first card, face down", `document.querySelectorAll('#player-cards .slot').length === 1 && document.querySelector('#player-cards .card.back') !== null`,
			`document.getElementById('player-cards').innerHTML`)
		var faces int
		pub.Eval(`document.querySelectorAll('[data-card]').length`, &faces)
		if faces != 0 || pub.Text("#player-point") != "" {
			t.Errorf("public page shows %d card faces and point %q before the reveal", faces, pub.Text("#player-point"))
		}
		var html string
		pub.Eval(`document.getElementById('live').innerText`, &html)
		if strings.Contains(html, first.String()) {
			t.Errorf("public page text holds the hidden card %s: %q", first, html)
		}
		pit.WaitFor("the pit to see the hidden card", fmt.Sprintf(`document.querySelector('#player-cards .card.face.unrevealed[data-card=%q]') !== null`, first.String()),
			`document.getElementById('player-cards').innerHTML`)
		return false
	})
	player, banker, err := coup.Hands(cards)
	if err != nil {
		t.Fatal(err)
	}
	pub.WaitFor("every card of coup 1 face down", fmt.Sprintf(`document.querySelectorAll('#player-cards .card.back').length === %d && document.querySelectorAll('#banker-cards .card.back').length === %d`, len(player), len(banker)),
		`[document.getElementById('player-cards').innerHTML.length, document.getElementById('banker-cards').innerHTML.length]`)
	pub.WaitFor("the public to await the reveal", `document.getElementById('phase').textContent === 'AWAITING REVEAL' && !(`+browsertest.Visible("result")+`)`,
		`[document.getElementById('phase').textContent, document.getElementById('result-text').textContent]`)
	// The pit sees the result before the public does, and is told so.
	pit.WaitFor("the pit to see the unrevealed result", `document.getElementById('phase').textContent === 'AWAITING REVEAL' && document.getElementById('result-tags').textContent.includes('PIT ONLY') && `+browsertest.Visible("result"),
		`document.getElementById('phase').textContent`)
	pub.SaveScreenshot(shots, "public-1-face-down", false)

	d.finish(f) // the reveal, then the next coup opens after the result time
	results = append(results, r)
	// The reveal and the next coup come in one burst; the result of coup
	// 1 is checked from the roads, and the banner on a coup left standing
	// below.

	// Coup 2: reveal and look at the table before the result time ends.
	_, r = d.dealCoup(t, f, nil)
	f.button(coup.ButtonReveal)
	results = append(results, r)
	want := map[coup.Side]string{coup.SideBanker: "BANKER WINS", coup.SidePlayer: "PLAYER WINS", coup.SideTie: "TIE"}[r.Winner]
	wantPts := fmt.Sprintf("%d – %d", r.PlayerPoint, r.BankerPoint)
	if r.Winner == coup.SideBanker {
		wantPts = fmt.Sprintf("%d – %d", r.BankerPoint, r.PlayerPoint)
	}
	var wantCards []string
	for _, c := range append(slices.Clone(r.Player), r.Banker...) {
		wantCards = append(wantCards, c.String())
	}
	// The points and cards too: coup 1's banner may still stand with the
	// same winner's words when coup 2's reveal is waited for.
	shown := `Array.from(document.querySelectorAll('#player-cards .card.face, #banker-cards .card.face')).map(c => c.dataset.card).join(' ')`
	pub.WaitFor("the result banner", browsertest.Visible("result")+fmt.Sprintf(` && document.getElementById('result-text').textContent === %q && document.getElementById('result-points').textContent === %q && %s === %q`,
		want, wantPts, shown, strings.Join(wantCards, " ")),
		`[document.getElementById('result').hidden, document.getElementById('result-text').textContent, document.getElementById('result-points').textContent, `+shown+`]`)
	var res struct {
		BG     string   `json:"bg"`
		Points string   `json:"points"`
		Tags   string   `json:"tags"`
		PLeft  float64  `json:"pleft"`
		BLeft  float64  `json:"bleft"`
		Cards  []string `json:"cards"`
		Colors []string `json:"colors"`
		PPoint string   `json:"ppoint"`
		BPoint string   `json:"bpoint"`
	}
	pub.Eval(`(() => {
		const cards = Array.from(document.querySelectorAll('#player-cards .card.face, #banker-cards .card.face'));
		return {bg: getComputedStyle(document.getElementById('result')).backgroundColor,
			points: document.getElementById('result-points').textContent, tags: document.getElementById('result-tags').textContent,
			pleft: document.getElementById('hand-player').getBoundingClientRect().left, bleft: document.getElementById('hand-banker').getBoundingClientRect().left,
			cards: cards.map(c => c.dataset.card), colors: cards.map(c => getComputedStyle(c).color),
			ppoint: document.getElementById('player-point').textContent, bpoint: document.getElementById('banker-point').textContent};
	})()`, &res)
	if got := browsertest.Colour(res.BG); got != sideColour[r.Winner] {
		t.Errorf("result banner for %s is %s (%s)", r.Winner, got, res.BG)
	}
	if res.Points != wantPts || res.PPoint != strconv.Itoa(r.PlayerPoint) || res.BPoint != strconv.Itoa(r.BankerPoint) {
		t.Errorf("points shown %q, player %q, banker %q; want %q, %d, %d", res.Points, res.PPoint, res.BPoint, wantPts, r.PlayerPoint, r.BankerPoint)
	}
	if (r.PlayerPair || r.BankerPair || r.Natural()) != (res.Tags != "") {
		t.Errorf("result tags %q for pairs %v/%v natural %v", res.Tags, r.PlayerPair, r.BankerPair, r.Natural())
	}
	if !(res.PLeft < res.BLeft) {
		t.Errorf("Player is not left of Banker: %v, %v", res.PLeft, res.BLeft)
	}
	if !slices.Equal(res.Cards, wantCards) {
		t.Errorf("cards shown %v, want %v", res.Cards, wantCards)
	}
	for i, c := range res.Cards {
		want := "black"
		if strings.HasSuffix(c, "H") || strings.HasSuffix(c, "D") {
			want = "red"
		}
		if got := browsertest.Colour(res.Colors[i]); got != want {
			t.Errorf("card %s is drawn %s (%s), want %s", c, got, res.Colors[i], want)
		}
	}
	pub.SaveScreenshot(shots, "public-2-result", false)
	f.tick(3 * time.Second)

	// The rest of the shoe, with an unreadable card and a suspension.
	for f.table.Phase() != coup.PhaseNoShoe {
		n := f.table.CoupNumber()
		switch n {
		case 4:
			_, r = d.dealCoup(t, f, func(i int, c coup.Card) bool {
				if i != 2 {
					return false
				}
				// The shoe cannot read the third card: the table stops.
				f.shoeIn(coup.Input{Kind: coup.InCard, Unreadable: true})
				pub.WaitFor("the SUSPENDED banner", browsertest.Visible("banner-suspended"), `document.getElementById('banner-suspended').outerHTML`)
				pit.WaitFor("the unreadable-card alert", `document.querySelector('#alert-list li.suspends') !== null && document.getElementById('alert-list').textContent.includes('UNREADABLE CARD') && document.getElementById('alert-list').textContent.includes('needs card')`,
					`document.getElementById('alert-list').textContent`)
				pit.WaitFor("the pit's banner to say what holds the table", browsertest.Visible("banner-suspended")+` && document.getElementById('suspend-reason').textContent.includes('unreadable') && document.getElementById('suspend-reason').textContent.includes('needs card')`,
					`document.getElementById('suspend-reason').textContent`)
				pit.WaitFor("the unreadable card on the pit's table", `document.querySelector('.card.back.unreadable') !== null`, `document.getElementById('player-cards').innerHTML`)
				pit.SaveScreenshot(shots, "pit-unreadable-card", false)
				f.command(coup.Command{Action: coup.ActionCard, Card: &c, Reason: "read from the card"})
				return true
			})
			pub.WaitFor("the banner to go once the card is entered", `!(`+browsertest.Visible("banner-suspended")+`)`, `document.getElementById('table-state').textContent`)
			pit.WaitFor("the alert to clear", `document.querySelector('#alert-list li.suspends') === null`, `document.getElementById('alert-list').textContent`)
		case 8:
			// Between coups a supervisor suspends the table.
			f.command(coup.Command{Action: coup.ActionSuspend, Reason: "dispute at seat 3"})
			// The public reads a reason of the fixed list and no bets-open
			// wording; the supervisor's note is the pit's.
			pub.WaitFor("the SUSPENDED banner with the public reason", browsertest.Visible("banner-suspended")+` && document.getElementById('suspend-reason').textContent.startsWith('TABLE CHECK') && document.getElementById('phase').textContent === 'NO BETS · GAME PAUSED'`,
				`[document.getElementById('banner-suspended').textContent, document.getElementById('phase').textContent]`)
			pit.WaitFor("the pit's banner with the supervisor's note", `document.getElementById('suspend-reason').textContent === 'dispute at seat 3'`,
				`document.getElementById('banner-suspended').textContent`)
			var txt string
			pub.Eval(`document.body.innerText`, &txt)
			if strings.Contains(txt, "dispute") || strings.Contains(txt, "PLACE YOUR BETS") {
				t.Errorf("the suspended public page says %q", txt)
			}
			var ban struct {
				W, H, VW float64
				Text     string
				Pill     string
				BG       string
			}
			pub.Eval(`(() => { const b = document.getElementById('banner-suspended'); const r = b.getBoundingClientRect();
				return {W: r.width, H: r.height, VW: window.innerWidth, Text: b.textContent, Pill: document.getElementById('table-state').textContent,
					BG: getComputedStyle(b).backgroundImage}; })()`, &ban)
			if ban.W < 0.95*ban.VW || ban.H < 80 || !strings.Contains(ban.Text, "TABLE SUSPENDED") || ban.Pill != "SUSPENDED" {
				t.Errorf("suspended banner %.0fx%.0f of a %.0f wide page, text %q, state %q: not unmistakable", ban.W, ban.H, ban.VW, ban.Text, ban.Pill)
			}
			pub.SaveScreenshot(shots, "public-3-suspended", false)
			f.command(coup.Command{Action: coup.ActionResume})
			pub.WaitFor("the banner to go on resume", `!(`+browsertest.Visible("banner-suspended")+`) && document.getElementById('table-state').textContent === 'LIVE'`,
				`document.getElementById('table-state').textContent`)
			_, r = d.dealCoup(t, f, nil)
		default:
			_, r = d.dealCoup(t, f, nil)
		}
		results = append(results, r)
		if seen, last := f.table.CutCardSeen(); seen && n == last {
			// The shoe's last coup: the whole scoreboard and a result.
			f.button(coup.ButtonReveal)
			pub.WaitFor("the last coup's result on the bead plate", fmt.Sprintf(`document.querySelectorAll('#road-bead .cell.bead').length === %d && %s`, len(results), browsertest.Visible("result")),
				`document.querySelectorAll('#road-bead .cell.bead').length`)
			// The predictions are for the next coup: checked while the
			// shoe still has one.
			_, rdNow, _ := f.snapshot()
			checkPredictions(t, pub, rdNow)
			pub.SaveScreenshot(shots, "public-4-last-coup", false)
			f.tick(3 * time.Second)
			continue
		}
		d.finish(f)
	}

	view, rd, recall := f.snapshot()
	if len(rd.BeadPlate) != len(results) {
		t.Fatalf("the roads hold %d coups, the dealer dealt %d", len(rd.BeadPlate), len(results))
	}
	pub.WaitFor("every coup on the bead plate", fmt.Sprintf(`document.querySelectorAll('#road-bead .cell.bead').length === %d && document.getElementById('phase').textContent === 'SHOE OVER · WAITING FOR A NEW SHOE'`, len(results)),
		`document.querySelectorAll('#road-bead .cell.bead').length`)
	pub.NoProblems()
	checkBeadPlate(t, pub, results)
	checkBigRoad(t, pub, rd)
	for _, road := range []struct {
		id    string
		cells []roads.DerivedCell
		prop  string
	}{
		{"road-bigeye", rd.Grid.BigEyeBoy, "borderTopColor"},
		{"road-small", rd.Grid.SmallRoad, "backgroundColor"},
		{"road-roach", rd.Grid.CockroachPig, "backgroundColor"},
	} {
		checkDerived(t, pub, road.id, road.cells, road.prop)
	}
	checkStats(t, pub, results)
	// Between shoes there is no next coup: no prediction shows.
	var marks []string
	pub.Eval(`document.getElementById('predict').dataset.off === 'true' ? Array.from(document.querySelectorAll('#predict .mk')).map((m) => m.dataset.colour) : ['on']`, &marks)
	if strings.Join(marks, "") != "" {
		t.Errorf("predictions between shoes: %v", marks)
	}
	if got, want := pub.Text("#cards-dealt"), strconv.Itoa(view.CardsDealt); got != want {
		t.Errorf("cards dealt shown %s, want %s", got, want)
	}
	if got, want := pub.Text("#cards-remaining"), strconv.Itoa(view.Remaining); got != want {
		t.Errorf("cards remaining shown %s, want %s", got, want)
	}
	if got := pub.Text("#cut-card"); !view.CutCardSeen || got != fmt.Sprintf("CUT CARD OUT · LAST COUP %d", view.LastCoup) {
		t.Errorf("cut card shown %q (seen %v, last coup %d)", got, view.CutCardSeen, view.LastCoup)
	}
	pub.SaveScreenshot(shots, "public-5-shoe-over", false)

	// The pit: recall of the last 10 coups, and the EV of a shoe that
	// favours the player.
	checkRecall(t, pit, recall)
	checkEV(t, f, pit)
	pit.NoProblems()
	pit.SaveScreenshot(shots, "pit-shoe-dealt", true)

	// The controller goes away: the broker publishes its last will.
	f.setState("offline")
	pub.WaitFor("the OFFLINE banner", browsertest.Visible("banner-offline")+` && document.getElementById('table-state').textContent === 'OFFLINE' && document.getElementById('phase').textContent === 'NO BETS · TABLE OFFLINE'`,
		`document.getElementById('table-state').textContent`)
	pub.SaveScreenshot(shots, "public-6-offline", false)

	// The broker restarts: the page notices, reconnects on its own, and
	// shows the state the controller publishes again.
	br.stop()
	pub.WaitFor("the page to notice the broker is gone", `document.getElementById('conn').dataset.state !== 'online' && `+browsertest.Visible("banner-conn"),
		`document.getElementById('conn').dataset.state`)
	pub.SaveScreenshot(shots, "public-7-no-connection", false)
	br.start()
	f.connect()
	f.setState("online")
	d2 := newDealer(8)
	d2.startShoe(t, f)
	for _, pg := range []*browsertest.Page{pub, pit} {
		pg.WaitFor("the page to reconnect and show the new shoe",
			`document.getElementById('conn').dataset.state === 'online' && document.getElementById('table-state').textContent === 'LIVE' && document.getElementById('shoe-no').textContent === '2' && document.getElementById('phase').textContent === 'PLACE YOUR BETS' && document.querySelectorAll('#road-bead .cell').length === 0`,
			`[document.getElementById('conn').dataset.state, document.getElementById('table-state').textContent, document.getElementById('shoe-no').textContent, document.getElementById('phase').textContent]`)
		var shown bool
		pg.Eval(browsertest.Visible("banner-conn"), &shown)
		if shown {
			t.Errorf("the no-connection banner stays after reconnecting: %q", pg.Text("#banner-conn"))
		}
	}
	pub.NoProblems()
	pit.NoProblems()
}

type beadSeen struct {
	Coup  int    `json:"coup"`
	Class string `json:"cls"`
	Text  string `json:"text"`
	BG    string `json:"bg"`
	Col   string `json:"col"`
	Row   string `json:"row"`
	BP    bool   `json:"bp"`
	PP    bool   `json:"pp"`
}

func checkBeadPlate(t *testing.T, pg *browsertest.Page, results []coup.Result) {
	t.Helper()
	var cells []beadSeen
	pg.Eval(`Array.from(document.querySelectorAll('#road-bead .cell.bead')).map(e => ({coup: +e.dataset.coup, cls: e.className,
		text: e.textContent, bg: getComputedStyle(e).backgroundColor, col: e.style.gridColumn, row: e.style.gridRow,
		bp: e.querySelector('.pair.bp') !== null, pp: e.querySelector('.pair.pp') !== null}))`, &cells)
	if len(cells) != len(results) {
		t.Fatalf("bead plate shows %d cells, want %d", len(cells), len(results))
	}
	letters := map[coup.Side]string{coup.SideBanker: "B", coup.SidePlayer: "P", coup.SideTie: "T"}
	for i, c := range cells {
		r := results[i]
		want := beadSeen{Coup: i + 1, Class: "cell bead " + r.Winner.String(), Text: letters[r.Winner],
			Col: strconv.Itoa(i/6 + 1), Row: strconv.Itoa(i%6 + 1), BP: r.BankerPair, PP: r.PlayerPair}
		if i == len(cells)-1 {
			want.Class += " newest" // the newest result is marked, as boards blink it
		}
		got := c
		got.BG = ""
		if got != want {
			t.Errorf("bead %d: %+v, want %+v", i, got, want)
		}
		if browsertest.Colour(c.BG) != sideColour[r.Winner] {
			t.Errorf("bead %d (%s) is %s (%s)", i, r.Winner, browsertest.Colour(c.BG), c.BG)
		}
	}
	var dots struct{ BP, PP []string }
	pg.Eval(`({BP: Array.from(document.querySelectorAll('#road-bead .pair.bp')).map(e => getComputedStyle(e).backgroundColor),
		PP: Array.from(document.querySelectorAll('#road-bead .pair.pp')).map(e => getComputedStyle(e).backgroundColor)})`, &dots)
	for _, c := range dots.BP {
		if browsertest.Colour(c) != "red" {
			t.Errorf("banker pair dot is %s", c)
		}
	}
	for _, c := range dots.PP {
		if browsertest.Colour(c) != "blue" {
			t.Errorf("player pair dot is %s", c)
		}
	}
}

// visibleWindow is the first grid column a road of capacity columns shows:
// the last ones, with an empty column after the newest (as casino boards
// keep one for the next result) when the road is wider than two.
func visibleWindow(lastCol, capacity int) int {
	spare := 0
	if capacity > 2 {
		spare = 1
	}
	return max(0, lastCol+1+spare-capacity)
}

func roadCapacity(t *testing.T, pg *browsertest.Page, id string) int {
	t.Helper()
	var capacity int
	pg.Eval(fmt.Sprintf(`+document.getElementById(%q).dataset.capacity`, id), &capacity)
	return capacity
}

func checkBigRoad(t *testing.T, pg *browsertest.Page, rd roads.View) {
	t.Helper()
	capacity := roadCapacity(t, pg, "road-big")
	if capacity < 25 {
		t.Errorf("the big road shows only %d columns on a 1920x1080 screen", capacity)
	}
	last := -1
	for _, c := range rd.Grid.BigRoad {
		last = max(last, c.Col)
	}
	off := visibleWindow(last, capacity)
	type seen struct {
		Coup   int    `json:"coup"`
		Class  string `json:"cls"`
		Ties   int    `json:"ties"`
		Col    string `json:"col"`
		Row    string `json:"row"`
		Border string `json:"border"`
		Slash  string `json:"slash"`
	}
	var cells []seen
	pg.Eval(`Array.from(document.querySelectorAll('#road-big .cell.bigroad')).map(e => ({coup: +e.dataset.coup, cls: e.className, ties: +e.dataset.ties,
		col: e.style.gridColumn, row: e.style.gridRow, border: getComputedStyle(e).borderTopColor,
		slash: e.querySelector('.tie-slash') ? getComputedStyle(e.querySelector('.tie-slash')).backgroundColor : ''}))`, &cells)
	var want []roads.BigRoadCell
	for _, c := range rd.Grid.BigRoad {
		if c.Col >= off {
			want = append(want, c)
		}
	}
	if len(cells) != len(want) {
		t.Fatalf("big road shows %d cells, want %d (capacity %d, %d cells in all)", len(cells), len(want), capacity, len(rd.Grid.BigRoad))
	}
	newest := 0
	for _, w := range want {
		newest = max(newest, w.Coup)
	}
	for i, c := range cells {
		w := want[i]
		ties := w.Ties + w.LeadingTies
		class := "cell bigroad " + w.Result.String()
		if w.Coup == newest {
			class += " newest" // the newest result is marked, as boards blink it
		}
		if c.Coup != w.Coup || c.Class != class || c.Ties != ties ||
			c.Col != strconv.Itoa(w.Col-off+1) || c.Row != strconv.Itoa(w.Row+1) {
			t.Errorf("big road cell %d: %+v, want %+v at column %d", i, c, w, w.Col-off+1)
		}
		if w.Result != coup.SideTie && browsertest.Colour(c.Border) != sideColour[w.Result] {
			t.Errorf("big road cell %d (%s) is drawn %s", i, w.Result, c.Border)
		}
		if (ties > 0) != (c.Slash != "") || (ties > 0 && browsertest.Colour(c.Slash) != "green") {
			t.Errorf("big road cell %d with %d ties has tie slash %q", i, ties, c.Slash)
		}
	}
}

func checkDerived(t *testing.T, pg *browsertest.Page, id string, grid []roads.DerivedCell, prop string) {
	t.Helper()
	capacity := roadCapacity(t, pg, id)
	last := -1
	for _, c := range grid {
		last = max(last, c.Col)
	}
	off := visibleWindow(last, capacity)
	var want []roads.DerivedCell
	for _, c := range grid {
		if c.Col >= off {
			want = append(want, c)
		}
	}
	type seen struct {
		Class  string `json:"cls"`
		Col    string `json:"col"`
		Row    string `json:"row"`
		Colour string `json:"colour"`
	}
	var cells []seen
	pg.Eval(fmt.Sprintf(`Array.from(document.querySelectorAll('#%s .cell')).map(e => ({cls: e.firstChild.className, col: e.style.gridColumn, row: e.style.gridRow,
		colour: getComputedStyle(e.firstChild).%s}))`, id, prop), &cells)
	if len(cells) != len(want) {
		t.Fatalf("%s shows %d marks, want %d (capacity %d)", id, len(cells), len(want), capacity)
	}
	for i, c := range cells {
		w := want[i]
		if c.Col != strconv.Itoa(w.Col-off+1) || c.Row != strconv.Itoa(w.Row+1) || !strings.HasSuffix(c.Class, " "+w.Colour.String()) {
			t.Errorf("%s mark %d: %+v, want %+v", id, i, c, w)
		}
		if browsertest.Colour(c.Colour) != w.Colour.String() {
			t.Errorf("%s mark %d (%s) is drawn %s", id, i, w.Colour, c.Colour)
		}
	}
}

// checkStats counts the results itself and reads the statistics panel.
func checkStats(t *testing.T, pg *browsertest.Page, results []coup.Result) {
	t.Helper()
	count := map[coup.Side]int{}
	pairsB, pairsP, naturals := 0, 0, 0
	for _, r := range results {
		count[r.Winner]++
		if r.BankerPair {
			pairsB++
		}
		if r.PlayerPair {
			pairsP++
		}
		if r.Natural() {
			naturals++
		}
	}
	for side, name := range map[coup.Side]string{coup.SideBanker: "banker", coup.SidePlayer: "player", coup.SideTie: "tie"} {
		pct := math.Round(1000*float64(count[side])/float64(len(results))) / 10
		if got, want := pg.Text("#stat-"+name+" .stat-count"), strconv.Itoa(count[side]); got != want {
			t.Errorf("%s count shown %s, want %s", name, got, want)
		}
		if got, want := pg.Text("#stat-"+name+" .stat-pct"), fmt.Sprintf("%.1f%%", pct); got != want {
			t.Errorf("%s share shown %s, want %s", name, got, want)
		}
	}
	for id, want := range map[string]int{"#stat-banker-pairs b": pairsB, "#stat-player-pairs b": pairsP, "#stat-naturals b": naturals, "#stat-coups b": len(results)} {
		if got := pg.Text(id); got != strconv.Itoa(want) {
			t.Errorf("%s shown %s, want %d", id, got, want)
		}
	}
}

func checkPredictions(t *testing.T, pg *browsertest.Page, rd roads.View) {
	t.Helper()
	for side, p := range map[string]roads.DerivedPrediction{"banker": rd.Predict.Banker, "player": rd.Predict.Player} {
		var marks []struct {
			Road   string `json:"road"`
			Colour string `json:"colour"`
			CSS    string `json:"css"`
		}
		pg.Eval(fmt.Sprintf(`Array.from(document.querySelectorAll('#predict-%s .mk')).map(e => ({road: e.dataset.road, colour: e.dataset.colour,
			css: e.classList.contains('bigeye') ? getComputedStyle(e).borderTopColor : getComputedStyle(e).backgroundColor}))`, side), &marks)
		want := map[string]roads.Colour{"big_eye_boy": p.BigEyeBoy, "small_road": p.SmallRoad, "cockroach_pig": p.CockroachPig}
		if len(marks) != 3 {
			t.Fatalf("%s prediction shows %d marks", side, len(marks))
		}
		for _, m := range marks {
			w := want[m.Road]
			if w == roads.ColourNone {
				if m.Colour != "" {
					t.Errorf("%s? %s predicts %q, want nothing", side, m.Road, m.Colour)
				}
				continue
			}
			if m.Colour != w.String() || browsertest.Colour(m.CSS) != w.String() {
				t.Errorf("%s? %s shows %q drawn %s, want %s", side, m.Road, m.Colour, m.CSS, w)
			}
		}
	}
}

func checkRecall(t *testing.T, pg *browsertest.Page, recall []coup.CoupRecord) {
	t.Helper()
	if len(recall) != coup.RecallDepth {
		t.Fatalf("table recall holds %d coups", len(recall))
	}
	newest := recall[len(recall)-1]
	pg.WaitFor("the recall of the last 10 coups", fmt.Sprintf(`document.querySelectorAll('#recall-table tbody tr').length === 10 && document.querySelector('#recall-table tbody tr').dataset.coup === '%d'`, newest.Coup),
		`[document.querySelectorAll('#recall-table tbody tr').length, document.getElementById('recall-note').textContent]`)
	var rows []struct {
		Coup  string `json:"coup"`
		Cards int    `json:"cards"`
		Text  string `json:"text"`
		Res   string `json:"res"`
	}
	pg.Eval(`Array.from(document.querySelectorAll('#recall-table tbody tr')).map(tr => ({coup: tr.dataset.coup,
		cards: tr.children[1].querySelectorAll('.c').length, text: tr.children[1].textContent, res: tr.children[4].textContent}))`, &rows)
	suit := map[coup.Suit]string{coup.Spades: "♠", coup.Hearts: "♥", coup.Diamonds: "♦", coup.Clubs: "♣"}
	for i, row := range rows {
		rec := recall[len(recall)-1-i]
		var text strings.Builder
		for _, dc := range rec.Cards {
			rank := dc.Card.String()[:1]
			if rank == "T" {
				rank = "10"
			}
			text.WriteString(rank + suit[dc.Card.Suit])
		}
		wantRes := strings.ToUpper(rec.Result.Winner.String()) + fmt.Sprintf("P%d B%d", rec.Result.PlayerPoint, rec.Result.BankerPoint)
		if row.Coup != strconv.Itoa(rec.Coup) || row.Cards != len(rec.Cards) || row.Text != text.String() || row.Res != wantRes {
			t.Errorf("recall row %d: %+v, want coup %d, %d cards %s, %s", i, row, rec.Coup, len(rec.Cards), text.String(), wantRes)
		}
	}
}

// checkEV publishes the exact analysis of a shoe rich in tens and faces
// (pairs and ties come often) and looks for the advantage warning.
func checkEV(t *testing.T, f *feeder, pg *browsertest.Page) {
	t.Helper()
	shoe, err := coup.NewShoe(8)
	if err != nil {
		t.Fatal(err)
	}
	// Every ace to nine gone, and two of each ten and face: 96 cards
	// worth nothing are left.
	for i := range coup.CardCount {
		c := coup.CardAt(i)
		gone := 8
		if c.Rank >= coup.Ten {
			gone = 2
		}
		for range gone {
			if err := shoe.Remove(c); err != nil {
				t.Fatal(err)
			}
		}
	}
	ranks := map[string]int{}
	for i, n := range shoe.Counts() {
		ranks[coup.CardAt(i).String()[:1]] += int(n)
	}
	p := f.table.Config().Profile
	an, err := coup.Analyze(&shoe, &p)
	if err != nil {
		t.Fatal(err)
	}
	bets, adv := betEVs(an)
	if len(adv) == 0 {
		t.Fatalf("test shoe gives the player no advantage: %+v", bets)
	}
	ps := mqttpub.PitShoe{Shoe: 1, Decks: 8, CardsRemaining: shoe.Remaining(), Ranks: ranks,
		Bets: bets, Advantage: adv}
	b, err := json.Marshal(ps)
	if err != nil {
		t.Fatal(err)
	}
	f.mu.Lock()
	f.pitShoeFixed = b
	f.mu.Unlock()
	f.sync()
	pg.WaitFor("the EV table with the advantage marked", fmt.Sprintf(`document.querySelectorAll('#ev-table tbody tr').length === %d && document.querySelectorAll('#ev-table tbody tr.adv').length === %d && %s`,
		len(bets), len(adv), browsertest.Visible("banner-advantage")), `[document.querySelectorAll('#ev-table tbody tr').length, document.querySelectorAll('#ev-table tbody tr.adv').length]`)
	var rows []struct {
		Bet string `json:"bet"`
		Adv bool   `json:"adv"`
		BG  string `json:"bg"`
		EV  string `json:"ev"`
	}
	pg.Eval(`Array.from(document.querySelectorAll('#ev-table tbody tr')).map(tr => ({bet: tr.dataset.bet, adv: tr.classList.contains('adv'),
		bg: getComputedStyle(tr.children[0]).backgroundColor, ev: tr.children[3].textContent}))`, &rows)
	for i, row := range rows {
		bet := bets[i]
		if row.Bet != string(bet.Bet) || row.Adv != bet.Advantage {
			t.Errorf("EV row %d: %+v, want %s advantage %v", i, row, bet.Bet, bet.Advantage)
		}
		if bet.Advantage && browsertest.Colour(row.BG) != "gold" {
			t.Errorf("advantage row %s is not highlighted: %s", bet.Bet, row.BG)
		}
		if bet.EV != nil {
			ev := *bet.EV * 100
			if ev == 0 {
				ev = 0 // JavaScript writes -0 as 0
			}
			want := fmt.Sprintf("%.3f%%", ev)
			if *bet.EV > 0 {
				want = "+" + want
			}
			if row.EV != want {
				t.Errorf("EV of %s shown %q, want %q", bet.Bet, row.EV, want)
			}
		} else if row.EV != "not priced" {
			t.Errorf("unpriced %s shows EV %q", bet.Bet, row.EV)
		}
	}
	detail := pg.Text("#advantage-detail")
	for _, a := range adv {
		name := map[coup.Bet]string{coup.BetTie: "Tie", coup.BetPlayerPair: "Player Pair", coup.BetBankerPair: "Banker Pair"}[a]
		if name != "" && !strings.Contains(detail, name) {
			t.Errorf("advantage banner %q does not name %s", detail, a)
		}
	}
}

// ------------------------------------------------- the controller's stack

// recorderTable deals to the parts a running controller is made of
// (cmd/tablectl's startController and startMQTT): the audit recorder on a
// SQLite trail, the MQTT publisher reading what it commits, the roads
// engine behind public/roads, and the embedded broker.
type recorderTable struct {
	t   *testing.T
	ctx context.Context
	rec *audit.Recorder
	mu  sync.Mutex
	seq uint32
	now time.Time
}

func (r *recorderTable) submit(in coup.Input) {
	r.t.Helper()
	r.mu.Lock()
	in.At = r.now
	r.mu.Unlock()
	if _, err := r.rec.Submit(r.ctx, in); err != nil {
		r.t.Fatalf("record %s: %v", in, err)
	}
}

func (r *recorderTable) deal(in coup.Input) {
	r.seq++
	in.ShoeSeq = r.seq
	r.submit(in)
}

func (r *recorderTable) pause(d time.Duration) {
	r.mu.Lock()
	r.now = r.now.Add(d)
	r.mu.Unlock()
	r.submit(coup.Input{Kind: coup.InTick})
}

func (r *recorderTable) pitView() coup.View { _, pit := r.rec.View(); return pit }

func TestBrowserController(t *testing.T) {
	ctx, b := startBrowser(t)
	shots := filepath.Join(screenshotDir(t), "controller")
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
	stopPub := sync.OnceValue(func() error {
		cancelPub()
		return <-pubDone
	})
	t.Cleanup(func() { stopPub() })

	h, err := display.WebHandler(display.WebConfig{
		Table: bTable, BrokerWS: br.ws, Prefix: bPrefix, Pit: br.pit, PitUser: bPitUser, PitPassword: bPitPass, Recall: rec,
	}, display.Handler(rec))
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	br.allowOrigin(srv.URL)
	pg := b.OpenContext(ctx, t, srv.URL+"/", 1920, 1080, nil)
	auth := "Basic " + base64.StdEncoding.EncodeToString([]byte(bPitUser+":"+bPitPass))
	pit := b.OpenContext(ctx, t, srv.URL+"/pit", 1920, 1080, map[string]string{"Authorization": auth})

	tb := &recorderTable{t: t, ctx: ctx, rec: rec, now: time.Date(2026, 11, 22, 21, 0, 0, 0, time.UTC)}
	d := newDealer(11)
	d.startShoe(t, tb)
	pg.WaitFor("the page to show the controller's table", `document.getElementById('table-state').textContent === 'LIVE' && document.getElementById('phase').textContent === 'PLACE YOUR BETS'`,
		`[document.getElementById('conn').dataset.state, document.getElementById('table-state').textContent, document.getElementById('phase').textContent]`)
	var results []coup.Result
	for tb.pitView().Phase != coup.PhaseNoShoe {
		_, r := d.dealCoup(t, tb, nil)
		results = append(results, r)
		d.finish(tb)
	}
	pg.WaitFor("the whole shoe on the bead plate", fmt.Sprintf(`document.querySelectorAll('#road-bead .cell.bead').length === %d && document.getElementById('phase').textContent === 'SHOE OVER · WAITING FOR A NEW SHOE'`, len(results)),
		`document.querySelectorAll('#road-bead .cell.bead').length`)
	checkBeadPlate(t, pg, results)
	checkStats(t, pg, results)
	checkRecall(t, pit, rec.Recall())
	pit.WaitFor("the pit's shoe analysis", `document.getElementById('ev-note').textContent === 'the shoe is over'`, `document.getElementById('ev-note').textContent`)
	pg.SaveScreenshot(shots, "public-shoe-dealt", false)
	pit.SaveScreenshot(shots, "pit-shoe-dealt", true)

	// The broker restarts: the publisher and the page both come back on
	// their own, and the next shoe shows.
	br.stop()
	pg.WaitFor("the page to notice the broker is gone", `document.getElementById('conn').dataset.state !== 'online'`, `document.getElementById('conn').dataset.state`)
	br.start()
	d2 := newDealer(12)
	d2.startShoe(t, tb)
	for _, p := range []*browsertest.Page{pg, pit} {
		p.WaitFor("the page to reconnect and show the new shoe", `document.getElementById('conn').dataset.state === 'online' && document.getElementById('shoe-no').textContent === '2' && document.getElementById('phase').textContent === 'PLACE YOUR BETS' && document.querySelectorAll('#road-bead .cell').length === 0`,
			`[document.getElementById('conn').dataset.state, document.getElementById('shoe-no').textContent, document.getElementById('phase').textContent]`)
	}

	// The controller stops: it says so on status, and the page shows it.
	if err := stopPub(); err != nil {
		t.Errorf("publisher: %v", err)
	}
	pg.WaitFor("the OFFLINE banner", browsertest.Visible("banner-offline"), `document.getElementById('table-state').textContent`)
	pg.NoProblems()
	pit.NoProblems()
}
