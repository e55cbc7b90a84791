package controller

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"

	"github.com/tablectl/tablectl/audit"
	"github.com/tablectl/tablectl/coup"
	"github.com/tablectl/tablectl/display/mqttpub"
	"github.com/tablectl/tablectl/internal/config"
	"github.com/tablectl/tablectl/internal/supervisor"
	"github.com/tablectl/tablectl/internal/testenv"
	"github.com/tablectl/tablectl/signedcmd"
)

// TestRetainedCommand: a command published retained on cmd (the pit's
// login may) is never taken again from the broker's store. On the
// embedded broker it is refused outright: not taken, not kept. On
// Debian's Mosquitto with the shipped setup (whose ACL cannot govern the
// retain flag) it is taken live, as any command sent now; when the broker
// delivers it again as retained (the controller's next connection: here it
// is knocked off by its own login and reconnects), the controller ignores
// it and clears it at the broker, so no later subscriber gets it. Each
// refusal is counted (tablectl_commands_screened_total, code retained).
func TestRetainedCommand(t *testing.T) {
	t.Run("embedded", func(t *testing.T) {
		mc := startMQControllerAt(t, "RET-1", &config.MQTTSection{Listen: "127.0.0.1:0", WSListen: "off"}, 1)
		publishRetained(t, mc, mc.url, mc.user, mc.pass, "suspend")
		noRetained(t, mc.url, mc.user, mc.pass, mc.prefix)
		waitScreenedRetained(t, mc, 1)
		if _, pit := mc.ctl.rec.View(); pit.Suspended {
			t.Fatalf("the retained suspend was taken: %s", pit.SuspendReason)
		}
		if n := commandRows(t, mc); n != 0 {
			t.Fatalf("%d command rows for the retained command", n)
		}
	})
	t.Run("mosquitto", func(t *testing.T) {
		users := map[string]string{"tablectl": "tc-secret", "pit-BAC-07": "pit-secret"}
		url, _ := deployedMosquitto(t, users)
		pw := filepath.Join(t.TempDir(), "mqtt.password")
		if err := os.WriteFile(pw, []byte(users["tablectl"]+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		mc := startMQControllerAt(t, "BAC-07", &config.MQTTSection{Broker: url, Prefix: "tablectl/BAC-07", ClientID: "tablectl",
			Username: "tablectl", PasswordFile: pw}, 1)
		id := publishRetained(t, mc, url, "pit-BAC-07", users["pit-BAC-07"], "suspend")
		// Taken live: it was sent now.
		testenv.Eventually(t, guard, "the live command to suspend the table", func() bool { _, pit := mc.ctl.rec.View(); return pit.Suspended })
		// The controller is knocked off by a connection with its own login
		// (a login is its client id) and comes back: the broker delivers
		// the command again, as retained.
		kick := paho.NewClient(paho.NewClientOptions().AddBroker(url).SetClientID("tablectl").SetUsername("tablectl").
			SetPassword(users["tablectl"]).SetAutoReconnect(false))
		if tok := kick.Connect(); !tok.WaitTimeout(mqWait) || tok.Error() != nil {
			t.Fatalf("connect as tablectl: %v", tok.Error())
		}
		kick.Disconnect(0)
		waitScreenedRetained(t, mc, 1)
		noRetained(t, url, "pit-BAC-07", users["pit-BAC-07"], mc.prefix)
		if n := commandRows(t, mc); n != 1 {
			t.Fatalf("%d command rows for command %s, want its one (taken live)", n, id)
		}
	})
}

// publishRetained signs a command of action for mc's table as alice and
// publishes it retained on cmd as the given login; it returns its id.
func publishRetained(t *testing.T, mc *mqController, url, user, pass, action string) string {
	t.Helper()
	key, name, err := supervisor.LoadKey(mc.key)
	if err != nil {
		t.Fatal(err)
	}
	c := signedcmd.Command{Table: mc.ctl.cfg.TableID, ID: signedcmd.NewID(), Action: action, Supervisor: name,
		IssuedAt: signedcmd.FormatTime(time.Now()), Reason: "left retained"}
	if err := c.Sign(key); err != nil {
		t.Fatal(err)
	}
	payload, err := c.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	p := paho.NewClient(paho.NewClientOptions().AddBroker(url).SetClientID(user).SetUsername(user).SetPassword(pass).SetAutoReconnect(false))
	if tok := p.Connect(); !tok.WaitTimeout(mqWait) || tok.Error() != nil {
		t.Fatalf("connect as %s: %v", user, tok.Error())
	}
	defer p.Disconnect(100)
	if tok := p.Publish(mqttpub.Topics{Prefix: mc.prefix}.Topic(mqttpub.TopicCmd), 1, true, payload); !tok.WaitTimeout(mqWait) || tok.Error() != nil {
		t.Fatalf("publish retained: %v", tok.Error())
	}
	return c.ID
}

// noRetained waits until a new subscriber to cmd gets no retained message.
// Each look subscribes to cmd, then to the public tree, which the
// controller keeps retained: the broker sends a subscription's retained
// messages before it takes the next subscription, so once one of the
// public tree's has come, cmd's, had there been one, came before it.
func noRetained(t *testing.T, url, user, pass, prefix string) {
	t.Helper()
	topics := mqttpub.Topics{Prefix: prefix}
	testenv.EventuallyErr(t, mqWait, "no retained command for a later subscriber", func() error {
		got, marked := make(chan []byte, 4), make(chan struct{}, 1)
		c := paho.NewClient(paho.NewClientOptions().AddBroker(url).SetClientID(user + "-later").SetUsername(user).SetPassword(pass).SetAutoReconnect(false))
		if tok := c.Connect(); !tok.WaitTimeout(mqWait) || tok.Error() != nil {
			t.Fatalf("connect as %s: %v", user, tok.Error())
		}
		defer c.Disconnect(0)
		for _, sub := range []struct { // in this order
			topic string
			into  func([]byte)
		}{
			{topics.Topic(mqttpub.TopicCmd), func(b []byte) { got <- b }},
			{topics.Prefix + "/public/#", func([]byte) {
				select {
				case marked <- struct{}{}:
				default:
				}
			}},
		} {
			tok := c.Subscribe(sub.topic, 1, func(_ paho.Client, m paho.Message) {
				if m.Retained() {
					sub.into(m.Payload())
				}
			})
			if !tok.WaitTimeout(mqWait) || tok.Error() != nil {
				t.Fatalf("subscribe %s: %v", sub.topic, tok.Error())
			}
		}
		select {
		case <-marked:
		case <-time.After(5 * time.Second):
			return errors.New("no retained message of the public tree yet")
		}
		select {
		case kept := <-got:
			return fmt.Errorf("a later subscriber still gets a retained command: %s", kept)
		default:
			return nil
		}
	})
}

// waitScreenedRetained waits until the metrics count n retained commands.
func waitScreenedRetained(t *testing.T, mc *mqController, n int) {
	t.Helper()
	re := regexp.MustCompile(`(?m)^tablectl_commands_screened_total\{code="retained"\} (\d+)$`)
	var got int
	testenv.Eventually(t, guard, fmt.Sprintf("%d retained command(s) counted", n), func() bool {
		w := httptest.NewRecorder()
		mc.ctl.metrics.Handler().ServeHTTP(w, httptest.NewRequest("GET", "/metrics", nil))
		b, _ := io.ReadAll(w.Result().Body)
		if m := re.FindSubmatch(b); m != nil {
			got, _ = strconv.Atoi(string(m[1]))
		}
		return got >= n
	})
	if got != n {
		t.Fatalf("%d retained commands counted, want %d", got, n)
	}
}

// commandRows counts the trail's rows of supervisors' commands, taken or
// refused.
func commandRows(t *testing.T, mc *mqController) int {
	t.Helper()
	rd, err := audit.OpenReader(context.Background(), mc.trail)
	if err != nil {
		t.Fatal(err)
	}
	defer rd.Close()
	n := 0
	for rec, err := range rd.Events(context.Background(), audit.Query{}) {
		if err != nil {
			t.Fatal(err)
		}
		if rec.Kind == string(coup.InCmd) || rec.Kind == audit.KindRejected {
			n++
		}
	}
	return n
}
