package floor_test

import (
	"context"
	"crypto/ed25519"
	"crypto/tls"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	mqtt "github.com/eclipse/paho.mqtt.golang"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/tablectl/tablectl/audit"
	"github.com/tablectl/tablectl/display/mqttpub"
	"github.com/tablectl/tablectl/floor"
	"github.com/tablectl/tablectl/internal/floorsim"
	"github.com/tablectl/tablectl/internal/floortest"
	"github.com/tablectl/tablectl/internal/testenv"
)

// TestFloorAttacks (issue 30, item 6): a floor as shipped (nats-server
// processes on deploy/nats/floor-node.conf: every listener TLS, the routes
// verifying each other, floor.AuthConfig's logins; two witnesses into
// PostgreSQL, one a tablectl-floor witness process serving the floor view
// over HTTPS; three dealing tables) is attacked as anyone on the floor's
// network could, and as an insider with root on FLOOR-03's box (its
// login, its key):
//
//   - every listener in plaintext (the client port, the MQTT listener,
//     the route port, the floor view), anonymous and with a real login:
//     refused; over TLS anonymous or with a wrong password (NATS, MQTT
//     taking FLOOR-01's client id, the floor view), and the route port
//     over TLS without a certificate of the floor's CA: refused;
//     FLOOR-03's login taking "tablectl-FLOOR-01": FLOOR-01 is not kicked
//     (its id has a part no other login knows);
//   - FLOOR-03's login publishing on FLOOR-01's events, checkpoint and
//     status subjects, on floor/alerts and on the JetStream API (stream
//     deletion, $JS.API.INFO): refused by the broker;
//   - FLOOR-03's login forging rows on its own subjects (the next seqs,
//     right hash and link, unsigned), a checkpoint signed by another key,
//     junk, and a flood of messages up to 1 MiB: none witnessed as
//     FLOOR-03's, quarantined, no tamper alert;
//   - a witness's login deleting the stream and the consumer: refused.
//
// Throughout, FLOOR-01 and FLOOR-02 keep being witnessed (their
// witnessed rows never stand still for 10 s); at the end no table
// carries a tamper alert and every trail matches the witnessed copy
// (VerifyTrail, what `tablectl-floor verify` runs).
// attackFlood is how many messages FLOOR-03's login floods its own
// subjects with (issue 30: 100,000 for the measurement).
var attackFlood = flag.Int("floor.flood", 2000, "the attack test's flood: messages on the insider's own subjects")

func TestFloorAttacks(t *testing.T) {
	testenv.Long(t, "the floor's attack test (nats-server, PostgreSQL, three controllers; a minute)")
	_, schema := floortest.Postgres(t)
	floortest.Cluster(t, 1) // skips or fails here when nats-server is missing
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	floorExe := buildFloorBinary(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	f, err := floorsim.Start(ctx, floorsim.Options{Logins: true, Dir: t.TempDir(), Tables: 3, Nodes: 3, Witness: 2,
		CardPace: 50 * time.Millisecond, CoupPace: 250 * time.Millisecond, Seed: 30,
		Postgres: floortest.PostgresURL(), Schema: schema, Exe: exe, Env: []string{childEnv + "=1"},
		WitnessExe: floorExe, WitnessProcs: map[int]bool{1: true}, WitnessHTTP: true,
		Heartbeat: time.Minute, Log: testLog(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	schemaQ := f.Store.(*floor.PGStore).Schema()
	// witnessedTo is how far a table is witnessed (0 on an error: the
	// watcher runs off the test's goroutine).
	witnessedTo := func(table string) int64 {
		var n int64
		f.Pool.QueryRow(ctx, `SELECT coalesce(max(contig),0) FROM `+schemaQ+`.tables WHERE table_id = $1`, table).Scan(&n)
		return n
	}
	// Witnessing watched while the attacks run.
	watchCtx, stopWatch := context.WithCancel(ctx)
	var watchErr error
	var longest time.Duration
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		last := map[string]int64{}
		moved := map[string]time.Time{}
		defer func() {
			t.Logf("the honest tables' longest standstill of witnessing: %s", longest.Round(100*time.Millisecond))
		}()
		// A sampling of the honest tables' progress every 200 ms, not a
		// wait: it measures the longest standstill.
		tick := time.NewTicker(200 * time.Millisecond)
		defer tick.Stop()
		for watchCtx.Err() == nil {
			for _, tb := range []string{"FLOOR-01", "FLOOR-02"} {
				c := witnessedTo(tb)
				if c > last[tb] || moved[tb].IsZero() {
					if !moved[tb].IsZero() {
						longest = max(longest, time.Since(moved[tb]))
					}
					last[tb], moved[tb] = c, time.Now()
				} else if time.Since(moved[tb]) > 10*time.Second && watchErr == nil {
					watchErr = fmt.Errorf("%s's witnessed rows stood still at %d for %s during the attacks", tb, c, time.Since(moved[tb]).Round(time.Second))
				}
			}
			select {
			case <-watchCtx.Done():
			case <-tick.C:
			}
		}
	}()
	waitFor(t, ctx, 90*time.Second, "three tables witnessed", func() bool {
		return witnessedTo("FLOOR-01") > 20 && witnessedTo("FLOOR-02") > 20 && witnessedTo("FLOOR-03") > 20
	})
	url := f.Cluster.URLs()
	// l3 is the insider's: FLOOR-03's login, which it holds.
	l3 := f.Logins.Tables["FLOOR-03"]
	attackListeners(t, f, l3)
	// The insider on FLOOR-03's box: its login.
	// Taking FLOOR-01's session with it: the id it can guess is not the
	// one FLOOR-01 uses, so FLOOR-01 is not kicked off.
	lostBefore := strings.Count(f.Tables[0].Log(), "connection lost")
	for _, nd := range f.Cluster.Nodes {
		mq := mqtt.NewClient(mqtt.NewClientOptions().AddBroker(nd.MQTTURL()).SetTLSConfig(floorTLS(t, f)).SetClientID("tablectl-FLOOR-01").
			SetUsername(l3.User).SetPassword(l3.Password).SetConnectRetry(false))
		if tok := mq.Connect(); tok.WaitTimeout(10*time.Second) && tok.Error() == nil {
			mq.Disconnect(250)
		}
	}
	violations := make(chan error, 64)
	nc3, err := nats.Connect(url, append(f.NATSOptions(l3), nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
		select {
		case violations <- err:
		default:
		}
	}))...)
	if err != nil {
		t.Fatal(err)
	}
	defer nc3.Close()
	for _, subject := range []string{"tablectl.FLOOR-01.pit.events", "tablectl.FLOOR-01.pit.checkpoint", "tablectl.FLOOR-01.status",
		floor.AlertsSubject, "$JS.API.STREAM.DELETE." + floor.DefaultStream, "$JS.API.CONSUMER.DELETE." + floor.DefaultStream + "." + floor.DefaultConsumer, "$JS.API.INFO"} {
		nc3.Publish(subject, []byte(`{"phase":"spoofed","shoe":9,"coup":99}`))
		nc3.Flush()
		select {
		case err := <-violations:
			if !strings.Contains(strings.ToLower(err.Error()), "permissions violation") {
				t.Errorf("FLOOR-03 on %s: %v", subject, err)
			}
		case <-time.After(10 * time.Second):
			t.Errorf("FLOOR-03 published on %s: no permissions violation", subject)
		}
	}
	// On its own subjects: forged next rows (unsigned), a checkpoint of
	// another key, junk, a flood up to 1 MiB (refused over the stream's
	// max_msg_size).
	js3, _ := jetstream.New(nc3)
	var forged [][]byte
	var prev audit.Hash
	for seq := int64(1 << 20); seq < 1<<20+2; seq++ {
		r := floor.Row{Table: "FLOOR-03", Seq: seq, At: time.Now().UTC().Format(time.RFC3339Nano), Kind: "card_dealt", Body: []byte(`{"card":"9H"}`), PrevHash: prev}
		r.Hash = r.ComputeHash()
		prev = r.Hash
		b, err := mqttpub.MarshalEvent(mqttpub.Event{Seq: r.Seq, At: time.Now().UTC(), Kind: r.Kind, Body: r.Body, PrevHash: r.PrevHash, Hash: r.Hash})
		if err != nil {
			t.Fatal(err)
		}
		forged = append(forged, b)
	}
	_, otherKey, _ := ed25519.GenerateKey(nil)
	ocp := audit.Checkpoint{Table: "FLOOR-03", Seq: 1 << 21, HeadHash: prev, SignedAt: time.Now().UTC(), KeyID: "other"}
	ocp.Signature = ed25519.Sign(otherKey, ocp.Message())
	cp, _ := json.Marshal(ocp)
	big := make([]byte, 1<<20)
	pubCtx, pubCancel := context.WithTimeout(ctx, 30*time.Second+time.Duration(*attackFlood)*time.Millisecond)
	defer pubCancel()
	for k := range *attackFlood {
		var subject string
		var data []byte
		switch {
		case k%100 == 0:
			subject, data = "tablectl.FLOOR-03.pit.events", big
		case k%3 == 0:
			subject, data = "tablectl.FLOOR-03.pit.checkpoint", cp
		case k%3 == 1:
			subject, data = "tablectl.FLOOR-03.pit.events", forged[k%2]
		default:
			subject, data = "tablectl.FLOOR-03.pit.events", []byte("not json")
		}
		js3.PublishAsync(subject, data)
	}
	select {
	case <-js3.PublishAsyncComplete():
	case <-pubCtx.Done():
		t.Error("the flood was not taken")
	}
	// A witness's login: no deleting.
	wl := f.WitnessLogin(0)
	ncw, err := nats.Connect(url, f.NATSOptions(wl)...)
	if err != nil {
		t.Fatal(err)
	}
	defer ncw.Close()
	jsw, _ := jetstream.New(ncw)
	for _, del := range []func(context.Context) error{
		func(ctx context.Context) error { return jsw.DeleteStream(ctx, floor.DefaultStream) },
		func(ctx context.Context) error {
			return jsw.DeleteConsumer(ctx, floor.DefaultStream, floor.DefaultConsumer)
		},
	} {
		dctx, dcancel := context.WithTimeout(ctx, 2*time.Second)
		if del(dctx) == nil {
			t.Error("the witness's login deleted the stream or its consumer")
		}
		dcancel()
	}
	if n := strings.Count(f.Tables[0].Log(), "connection lost"); n != lostBefore {
		t.Errorf("FLOOR-01 lost its broker connection %d times during the attacks (a session taken over?):\n%s", n-lostBefore, f.Tables[0].Log())
	}
	// The honest tables deal on and are witnessed past the attacks.
	at1, at2 := witnessedTo("FLOOR-01"), witnessedTo("FLOOR-02")
	waitFor(t, ctx, 60*time.Second, "FLOOR-01 and FLOOR-02 witnessed past the attacks", func() bool {
		return witnessedTo("FLOOR-01") > at1+20 && witnessedTo("FLOOR-02") > at2+20
	})
	stopWatch()
	wg.Wait()
	if watchErr != nil {
		t.Error(watchErr)
	}
	// No tamper alert on any table; FLOOR-03's forgeries quarantined.
	rows, err := f.Pool.Query(ctx, `SELECT table_id, kind, message FROM `+schemaQ+`.alerts WHERE tamper`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var table, kind, msg string
		rows.Scan(&table, &kind, &msg)
		t.Errorf("a tamper alert on %s: %s %s", table, kind, msg)
	}
	rows.Close()
	var quarantined int64
	f.Pool.QueryRow(ctx, `SELECT coalesce(sum(count),0) FROM `+schemaQ+`.quarantine WHERE table_id = 'FLOOR-03'`).Scan(&quarantined)
	if quarantined == 0 {
		t.Error("nothing of FLOOR-03's forgeries quarantined: the attack did not reach the witness")
	}
	for _, tb := range f.Tables {
		r, err := audit.OpenReader(ctx, tb.Trail)
		if err != nil {
			t.Fatal(err)
		}
		rep, err := floor.VerifyTrail(ctx, r, f.Store, tb.ID)
		r.Close()
		if err != nil {
			t.Fatal(err)
		}
		if !rep.OK() || rep.NothingWitnessed {
			var b strings.Builder
			rep.WriteText(&b)
			t.Errorf("%s against the witness:\n%s", tb.ID, b.String())
		}
	}
}

// floorTLS is a client's TLS on the floor: its CA trusted, no certificate.
func floorTLS(t *testing.T, f *floorsim.Floor) *tls.Config {
	t.Helper()
	c, err := floor.ClientTLS(f.TLS.CAFile)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// attackListeners tries every listener of the floor as anyone on its
// network could: each in plaintext (anonymous, and with a real login that
// a plaintext client would give away), over TLS anonymous and with a wrong
// password, the route port over TLS without a certificate of the floor's
// CA, the floor view in plain HTTP and over HTTPS without its login. Every
// one must be refused; the same with the right login over TLS is taken (so
// a refusal is the floor's doing, not a broken client).
func attackListeners(t *testing.T, f *floorsim.Floor, l3 floor.NATSLogin) {
	t.Helper()
	cfg := floorTLS(t, f)
	wrong := floor.NATSLogin{User: l3.User, Password: strings.ToUpper(l3.Password) + "x"}
	refused := func(what string, said string, taken bool) {
		t.Helper()
		if taken {
			t.Errorf("%s: taken (%s)", what, said)
		} else {
			t.Logf("refused: %s: %.160s", what, said)
		}
	}
	for _, nd := range f.Cluster.Nodes {
		client := strings.TrimPrefix(nd.URL(), "tls://")
		route := fmt.Sprintf("127.0.0.1:%d", nd.RoutePort)
		said, taken := floortest.PlaintextNATS(client, "", "")
		refused(nd.Name+" client port, plaintext, anonymous", said, taken)
		said, taken = floortest.PlaintextNATS(client, l3.User, l3.Password)
		refused(nd.Name+" client port, plaintext, FLOOR-03's login", said, taken)
		said, taken = floortest.TLSNATS(client, cfg, "", "")
		refused(nd.Name+" client port, TLS, anonymous", said, taken)
		said, taken = floortest.TLSNATS(client, cfg, wrong.User, wrong.Password)
		refused(nd.Name+" client port, TLS, a wrong password", said, taken)
		if said, taken := floortest.TLSNATS(client, cfg, l3.User, l3.Password); !taken {
			t.Errorf("%s client port, TLS, FLOOR-03's login: refused (%s): the raw client is broken", nd.Name, said)
		}
		said, taken = floortest.PlaintextMQTT(nd.MQTTAddr(), "tablectl-FLOOR-01", "", "")
		refused(nd.Name+" MQTT, plaintext, anonymous as tablectl-FLOOR-01", said, taken)
		said, taken = floortest.PlaintextMQTT(nd.MQTTAddr(), "x-"+l3.User, l3.User, l3.Password)
		refused(nd.Name+" MQTT, plaintext, FLOOR-03's login", said, taken)
		for _, l := range []floor.NATSLogin{{}, wrong} {
			o := mqtt.NewClientOptions().AddBroker(nd.MQTTURL()).SetTLSConfig(cfg).SetClientID("tablectl-FLOOR-01").SetConnectRetry(false).SetConnectTimeout(10 * time.Second)
			if l.User != "" {
				o.SetUsername(l.User).SetPassword(l.Password)
			}
			mq := mqtt.NewClient(o)
			tok := mq.Connect()
			ok := tok.WaitTimeout(15*time.Second) && tok.Error() == nil
			if ok {
				mq.Disconnect(0)
			}
			refused(fmt.Sprintf("%s MQTT, TLS, as tablectl-FLOOR-01 with login %q (anonymous or a wrong password)", nd.Name, l.User), fmt.Sprint(tok.Error()), ok)
		}
		// The same client with FLOOR-03's login and an id of its own is
		// taken: the refusals above are the login's.
		mq := mqtt.NewClient(mqtt.NewClientOptions().AddBroker(nd.MQTTURL()).SetTLSConfig(cfg).SetClientID("x-" + l3.User).
			SetUsername(l3.User).SetPassword(l3.Password).SetConnectRetry(false).SetConnectTimeout(10 * time.Second))
		if tok := mq.Connect(); !tok.WaitTimeout(15*time.Second) || tok.Error() != nil {
			t.Errorf("%s MQTT, TLS, FLOOR-03's login: refused (%v): the MQTT client is broken", nd.Name, tok.Error())
		} else {
			mq.Disconnect(0)
		}
		said, taken = floortest.PlaintextNATS(route, "", "")
		refused(nd.Name+" route port, plaintext", said, taken)
		said, taken = floortest.TLSRoute(route, cfg)
		refused(nd.Name+" route port, TLS without a certificate of the floor's CA", said, taken)
	}
	// The floor view of the witness process: HTTPS with its login only.
	view := f.ViewAddr(1)
	if view == "" {
		t.Fatal("witness 2 serves no floor view")
	}
	web := &http.Client{Transport: &http.Transport{TLSClientConfig: cfg}, Timeout: 10 * time.Second}
	get := func(c *http.Client, url string, l floor.Login) (int, string, error) {
		req, _ := http.NewRequest("GET", url, nil)
		if l.User != "" {
			req.SetBasicAuth(l.User, l.Password)
		}
		resp, err := c.Do(req)
		if err != nil {
			return 0, "", err
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		return resp.StatusCode, string(b), nil
	}
	var code int
	testenv.EventuallyErr(t, 30*time.Second, "the floor view over HTTPS with its login", func() error {
		var err error
		code, _, err = get(web, "https://"+view+"/floor.json", f.ViewLogin)
		if err == nil && code != http.StatusOK {
			err = fmt.Errorf("%d", code)
		}
		return err
	})
	code, body, err := get(http.DefaultClient, "http://"+view+"/floor.json", f.ViewLogin)
	refused("the floor view, plain HTTP, with its login", fmt.Sprintf("%d %v %.80s", code, err, body), code == http.StatusOK || strings.Contains(body, "FLOOR-01"))
	for _, l := range []floor.Login{{}, {User: f.ViewLogin.User, Password: f.ViewLogin.Password + "x"}} {
		code, body, err := get(web, "https://"+view+"/floor.json", l)
		refused(fmt.Sprintf("the floor view, HTTPS, login %q (none or a wrong password)", l.User), fmt.Sprintf("%d %v", code, err), code != http.StatusUnauthorized || strings.Contains(body, "FLOOR-01"))
	}
}
