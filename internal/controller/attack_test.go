package controller

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"

	"github.com/tablectl/tablectl/coup"
	"github.com/tablectl/tablectl/display/mqttpub"
	"github.com/tablectl/tablectl/internal/browsertest"
	"github.com/tablectl/tablectl/internal/mqtttest"
	"github.com/tablectl/tablectl/internal/supervisor"
	"github.com/tablectl/tablectl/internal/testenv"
	"github.com/tablectl/tablectl/signedcmd"
)

// attackTally counts the attacks a test tries and those the table refuses.
type attackTally struct {
	t     *testing.T
	mu    sync.Mutex
	tried []string
	held  []string
}

// try records an attack and whether it was refused; one that got through
// fails the test.
func (a *attackTally) try(name string, refused bool, detail string) {
	a.t.Helper()
	a.mu.Lock()
	defer a.mu.Unlock()
	a.tried = append(a.tried, name)
	if refused {
		a.held = append(a.held, name)
		return
	}
	a.t.Errorf("attack got through: %s (%s)", name, detail)
}

// faceDownCard reports whether a coup view shows a card face down with its
// identity, or a result before every card is face up.
func faceDownCard(payload []byte) bool {
	var v coup.View
	if json.Unmarshal(payload, &v) != nil {
		return false
	}
	hidden := false
	for _, c := range slices.Concat(v.Player, v.Banker) {
		if c.Hidden {
			hidden = true
			if c.Card != nil {
				return true
			}
		}
	}
	return hidden && (v.Result != nil || len(v.Outcomes) > 0)
}

// attackSite is a web server of another origin, as any page a browser on
// the table's machine may show: its page loads mqtt.js and tries to read
// the pit over the broker's WebSocket, and keeps score in window.attack.
func attackSite(t *testing.T, mqttJS []byte, ws, prefix string) *httptest.Server {
	t.Helper()
	script := fmt.Sprintf(`
const WS = %q, PREFIX = %q;
window.attack = {wsOpened: false, wsFailed: false, connected: false, granted: [], pit: 0, pub: 0, other: 0, errors: []};
const raw = new WebSocket(WS, 'mqtt');
raw.onopen = () => { attack.wsOpened = true; raw.close(); };
raw.onerror = () => { attack.wsFailed = true; };
const c = mqtt.connect(WS, {clientId: 'evil' + Math.random().toString(16).slice(2, 10), protocolVersion: 4,
  reconnectPeriod: 500, connectTimeout: 3000});
c.on('connect', () => {
  attack.connected = true;
  // One at a time: mqtt.js fails a whole subscribe when one filter is
  // refused.
  for (const f of ['#', PREFIX + '/#', PREFIX + '/pit/#', PREFIX + '/+/coup', PREFIX + '/cmd/#', PREFIX + '/public/#']) {
    c.subscribe(f, {qos: 0}, (err, granted) => {
      attack.granted.push(f + ' ' + (err ? 'refused' : (granted || []).map(g => g.qos).join(',')));
    });
  }
  // QoS 0: a refused QoS 1 publish costs an MQTT 3.1.1 client its
  // connection, and the page would read nothing more.
  c.publish(PREFIX + '/cmd', '{"forged":"from a web page"}', {qos: 0});
});
c.on('error', (e) => { attack.errors.push(String(e)); });
c.on('message', (topic) => {
  if (topic.startsWith(PREFIX + '/pit/')) attack.pit++;
  else if (topic.startsWith(PREFIX + '/public/')) attack.pub++;
  else attack.other++;
});
`, ws, prefix)
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprint(w, `<!doctype html><title>a page</title><script src="/mqtt.min.js"></script><script src="/attack.js"></script>`)
	})
	mux.HandleFunc("GET /mqtt.min.js", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/javascript")
		w.Write(mqttJS)
	})
	mux.HandleFunc("GET /attack.js", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/javascript")
		fmt.Fprint(w, script)
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv
}

// pageScore is window.attack.
type pageScore struct {
	WSOpened  bool     `json:"wsOpened"`
	WSFailed  bool     `json:"wsFailed"`
	Connected bool     `json:"connected"`
	Granted   []string `json:"granted"`
	Pit       int      `json:"pit"`
	Pub       int      `json:"pub"`
	Other     int      `json:"other"`
	Errors    []string `json:"errors"`
}

// TestBrokerAttacks does to the demo's embedded broker, while it deals,
// what an attacker did to it on main (issue 12): a web page of another
// origin opens its WebSocket and subscribes to pit/#; a client without a
// login subscribes to the pit, the table and everything, and publishes a
// command and a forged status; clients connect with the controller's
// client id to knock it off. Every one must be refused, while the pit's own
// login, a page of an allowed origin and a public subscriber show that
// coups were dealt face down and that what is allowed still works.
func TestBrokerAttacks(t *testing.T) {
	testenv.Long(t, "attacks on the demo's broker (Chromium, paho)")
	browser := browsertest.Start(t)
	mqttJS, err := os.ReadFile(filepath.Join("..", "..", "display", "web", "vendor", "mqtt.min.js"))
	if err != nil {
		t.Fatal(err)
	}
	// The WebSocket's address must be known to the pages before the demo
	// starts, and an allowed origin to the demo: take a free port for it.
	wsAddr := freeAddr(t)
	const prefix = "tablectl/DEMO"
	evil := attackSite(t, mqttJS, "ws://"+wsAddr+"/mqtt", prefix)
	friend := attackSite(t, mqttJS, "ws://"+wsAddr+"/mqtt", prefix)
	d := startDemoWith(t, DemoOptions{Seed: 5, MQTTWS: wsAddr, Pace: 10 * time.Millisecond, Shoes: 40, WSOrigins: []string{friend.URL}})
	info := d.info
	if info.Prefix != prefix || info.WS != "ws://"+wsAddr+"/mqtt" {
		t.Fatalf("demo at %s %s", info.Prefix, info.WS)
	}
	controllerID := "tablectl-" + info.Table // MQTTSection.Complete's default
	a := &attackTally{t: t}

	// The controls: the pit's login reads everything, the public reads the
	// public tree; status is watched for the controller going offline.
	pit := mqtttest.Subscribe(t, mqtttest.SubOptions{URL: info.MQTT, Username: info.PitBrokerUser, Password: info.PitBrokerPassword,
		Topics: []string{prefix + "/#"}})
	public := mqtttest.Subscribe(t, mqtttest.SubOptions{URL: info.MQTT, Topics: []string{prefix + "/public/#", prefix + "/status"}})
	if r := slices.Concat(pit.Refused(), public.Refused()); len(r) > 0 {
		t.Fatalf("allowed subscriptions refused: %v", r)
	}

	// A client without a login, and one with a name the broker does not
	// know, subscribe to what the pit reads.
	secret := []string{"#", prefix + "/#", prefix + "/pit/#", prefix + "/pit/coup", prefix + "/+/coup", prefix + "/cmd", prefix + "/cmd/reply"}
	anon := mqtttest.Subscribe(t, mqtttest.SubOptions{URL: info.MQTT, Topics: secret})
	stranger := mqtttest.Subscribe(t, mqtttest.SubOptions{URL: info.MQTT, Username: "display", Password: "guess", Topics: []string{prefix + "/pit/#"}})
	for _, s := range []struct {
		who  string
		sub  *mqtttest.Subscriber
		want []string
	}{{"anonymous", anon, secret}, {"unknown user", stranger, []string{prefix + "/pit/#"}}} {
		refused := s.sub.Refused()
		for _, topic := range s.want {
			a.try(s.who+" subscribes to "+topic, slices.Contains(refused, topic), "subscription granted")
		}
	}

	// The web pages: one of a foreign origin, one of an allowed one.
	evilPage := browser.Open(t, evil.URL+"/", 800, 600, nil)
	friendPage := browser.Open(t, friend.URL+"/", 800, 600, nil)

	// The controller's client id, without its credentials.
	for _, login := range []struct{ user, pass string }{{"", ""}, {info.PitBrokerUser, info.PitBrokerPassword}, {"tablectl", "guess"}} {
		c := paho.NewClient(paho.NewClientOptions().AddBroker(info.MQTT).SetClientID(controllerID).SetUsername(login.user).
			SetPassword(login.pass).SetAutoReconnect(false).SetConnectRetry(false).SetConnectTimeout(5 * time.Second))
		tok := c.Connect()
		ok := tok.WaitTimeout(10 * time.Second)
		if ok && tok.Error() == nil {
			c.Disconnect(0)
		}
		a.try(fmt.Sprintf("connect as the controller's client id %s with login %q", controllerID, login.user), ok && tok.Error() != nil,
			fmt.Sprint("connect error ", tok.Error()))
	}
	// Forged messages without a login: a command and the controller's
	// status (QoS 0, which the broker drops in silence; a refused QoS 1
	// publish ends the connection).
	mqtttest.Publish(t, info.MQTT, "", "", prefix+"/cmd", 0, []byte(`{"forged":"anonymous"}`))
	mqtttest.Publish(t, info.MQTT, "", "", prefix+"/status", 0, []byte(`{"state":"offline","table":"DEMO","forged":true}`))

	// Coups are dealt meanwhile: wait for the pit to see three more with
	// cards face down, and for the pages to have done their worst.
	faceDownSeen := func(ms []mqtttest.Msg) int {
		n := 0
		for _, m := range ms {
			if m.Topic == prefix+"/"+mqttpub.TopicPitCoup && faceDownCard(m.Payload) {
				n++
			}
		}
		return n
	}
	before := faceDownSeen(pit.Messages())
	friendPage.WaitFor("the allowed page to connect and read the public tree", `window.attack && attack.connected && attack.pub > 0 && attack.granted.length === 6`,
		`JSON.stringify(window.attack)`)
	evilPage.WaitFor("the foreign page's WebSocket to be refused or to connect", `window.attack && (attack.wsFailed || attack.connected)`, `JSON.stringify(window.attack)`)
	defer func() {
		if t.Failed() { // what the pit saw last, and the demo's log, say why
			ms := pit.Messages()
			for _, m := range ms[max(0, len(ms)-25):] {
				t.Logf("pit saw %s %.300s", m.Topic, m.Payload)
			}
			t.Logf("demo log:\n%s", d.logs.String())
		}
	}()
	pit.Wait(mqWait, "three more coups dealt face down", func(ms []mqtttest.Msg) bool { return faceDownSeen(ms) >= before+3 })
	// What got through, had anything, went out before the next public
	// message: wait until the controls, the public subscriber and the
	// allowed page, have read one.
	var friendBefore pageScore
	friendPage.Eval(`window.attack`, &friendBefore)
	seen := len(public.Messages())
	public.Wait(mqWait, "a public message after the three coups", func(ms []mqtttest.Msg) bool { return len(ms) > seen })
	friendPage.WaitFor("the allowed page to read a public message after the three coups", fmt.Sprintf(`attack.pub > %d`, friendBefore.Pub),
		`JSON.stringify(window.attack)`)

	var evilScore, friendScore pageScore
	evilPage.Eval(`window.attack`, &evilScore)
	friendPage.Eval(`window.attack`, &friendScore)
	a.try("a page of a foreign origin opens the broker's WebSocket", !evilScore.WSOpened && evilScore.WSFailed, fmt.Sprintf("%+v", evilScore))
	a.try("a page of a foreign origin connects over MQTT", !evilScore.Connected, fmt.Sprintf("%+v", evilScore))
	a.try("a page of a foreign origin reads pit/#", evilScore.Pit == 0 && evilScore.Pub == 0 && evilScore.Other == 0, fmt.Sprintf("%+v", evilScore))
	// The allowed origin connects, as a display may; the pit stays shut.
	slices.Sort(friendScore.Granted)
	wantGranted := []string{"# refused", prefix + "/# refused", prefix + "/+/coup refused", prefix + "/cmd/# refused", prefix + "/pit/# refused", prefix + "/public/# 0"}
	a.try("a page of an allowed origin subscribes to the pit", slices.Equal(friendScore.Granted, wantGranted), fmt.Sprintf("granted %q", friendScore.Granted))
	a.try("a page of an allowed origin reads pit/#", friendScore.Pit == 0 && friendScore.Other == 0, fmt.Sprintf("%+v", friendScore))
	if !friendScore.WSOpened || !friendScore.Connected || friendScore.Pub == 0 {
		t.Errorf("the allowed origin's page could not read the public tree (the control): %+v", friendScore)
	}

	a.try("anonymous subscriber receives a pit or command message", len(anon.Messages()) == 0, fmt.Sprint(len(anon.Messages()), " messages"))
	a.try("unknown user receives a pit message", len(stranger.Messages()) == 0, fmt.Sprint(len(stranger.Messages()), " messages"))
	var replies, offline, publicCoups, leaks int
	for _, m := range pit.Messages() {
		if m.Topic == prefix+"/"+mqttpub.TopicCmdReply {
			replies++ // any reply: a forged command reached the controller
		}
	}
	for _, m := range public.Messages() {
		switch m.Topic {
		case prefix + "/" + mqttpub.TopicStatus:
			if strings.Contains(string(m.Payload), `"offline"`) {
				offline++
			}
		case prefix + "/" + mqttpub.TopicPublicCoup:
			publicCoups++
			if faceDownCard(m.Payload) {
				leaks++
			}
		}
	}
	a.try("commands without a login (paho, web page) reach the controller", replies == 0, fmt.Sprint(replies, " replies on cmd/reply"))
	a.try("the controller knocked off or its status forged offline", offline == 0, fmt.Sprint(offline, " offline statuses"))
	a.try("a face-down card on public/coup", leaks == 0 && publicCoups > 0, fmt.Sprintf("%d of %d public/coup messages", leaks, publicCoups))

	// The pit view's page gets the pit's login only behind its password.
	code, _ := httpStatus(t, info.HTTP+"/pit/display.json", "")
	a.try("read the pit's broker login without the pit's password", code == http.StatusUnauthorized, fmt.Sprint("HTTP ", code))
	if s := displaySettings(t, info.HTTP+"/display.json", ""); s["password"] != nil {
		t.Errorf("the public page's settings hold a password: %v", s)
	}
	auth := "Basic " + base64.StdEncoding.EncodeToString([]byte("pit:"+info.PitPassword))
	if s := displaySettings(t, info.HTTP+"/pit/display.json", auth); s["username"] != info.PitBrokerUser || s["password"] != info.PitBrokerPassword {
		t.Errorf("the pit page's settings do not hold the pit's broker login: %v", s)
	}

	// The controller is still the one publishing, on its own connection:
	// it answers a supervisor's resync after every attack (the dealer may
	// be waiting at a suspended table by now, so new coups are not the
	// test).
	key, name, err := supervisor.LoadKey(info.Key)
	if err != nil {
		t.Fatal(err)
	}
	n := len(pit.Messages())
	if _, err := supervisor.Send(context.Background(), supervisor.Options{Broker: info.MQTT, Table: info.Table, Prefix: info.Prefix,
		Key: key, Name: name, Username: info.PitBrokerUser, Password: info.PitBrokerPassword, Logger: mqQuiet()},
		supervisor.Request{Action: signedcmd.ActionResync, From: 1}); err != nil {
		t.Fatalf("the controller after the attacks: %v", err)
	}
	pit.Wait(mqWait, "the controller publishing on", func(ms []mqtttest.Msg) bool { return len(ms) > n })
	t.Logf("attacks tried %d, refused %d; meanwhile the pit saw %d pit/coup messages with a face-down card, the public %d public/coup messages, none giving a card away",
		len(a.tried), len(a.held), faceDownSeen(pit.Messages()), publicCoups)
	for _, name := range a.tried {
		t.Logf("  refused: %v  %s", slices.Contains(a.held, name), name)
	}
}

// displaySettings fetches a page's display.json.
func displaySettings(t *testing.T, url, auth string) map[string]any {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var s map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&s); err != nil {
		t.Fatalf("%s: %d %v", url, resp.StatusCode, err)
	}
	return s
}

// freeAddr is a loopback address with a port free a moment ago.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}
