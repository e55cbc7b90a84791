package natsserver_test

import (
	"bytes"
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/tablectl/tablectl/floor"
	"github.com/tablectl/tablectl/internal/floortest"
	"github.com/tablectl/tablectl/internal/natsserver"
	"github.com/tablectl/tablectl/internal/testenv"
)

// The node configuration the tests and the demo run is the one shipped.
func TestNodeTemplateIsShipped(t *testing.T) {
	shipped, err := os.ReadFile("../../deploy/nats/floor-node.conf")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(shipped, []byte(natsserver.NodeTemplate)) {
		t.Fatal("internal/natsserver/floor-node.conf and deploy/nats/floor-node.conf differ: copy one onto the other")
	}
}

// floorTLS makes a CA and a loopback certificate, as tablectl-floor init
// does.
func floorTLS(t *testing.T) natsserver.TLS {
	dir := t.TempDir()
	ca, err := floor.EnsureCA(dir)
	if err != nil {
		t.Fatal(err)
	}
	cert, key, err := ca.EnsureCert(dir, "node", []string{"127.0.0.1", "localhost"})
	if err != nil {
		t.Fatal(err)
	}
	return natsserver.TLS{CAFile: ca.CertFile, CertFile: cert, KeyFile: key}
}

// TestFloor runs the shipped template as nats-server processes (the
// tests' and a floor's way) and in this process (the demo's): TLS with
// the CA and the login connects, plaintext is refused, the routes carry
// a stream of three replicas.
func TestFloor(t *testing.T) {
	for _, embedded := range []bool{false, true} {
		t.Run(map[bool]string{false: "processes", true: "embedded"}[embedded], func(t *testing.T) {
			if !embedded {
				if _, err := natsserver.Binary(); err != nil {
					testenv.Missing(t, err.Error())
					return
				}
			}
			testFloor(t, embedded)
		})
	}
}

func testFloor(t *testing.T, embedded bool) {
	tl := floorTLS(t)
	logins := floor.Logins{Admin: floor.NATSLogin{User: "admin", Password: strings.Repeat("a", 26)}}
	auth, err := floor.AuthConfig(logins, floor.Subjects{}, floor.DefaultStream, floor.DefaultStatusStream, floor.DefaultConsumer)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, err := natsserver.StartFloor(ctx, t.TempDir(), natsserver.Options{Nodes: 3, Auth: auth, TLS: tl, Embedded: embedded})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Stop()
	nc, err := nats.Connect(c.URLs(), nats.RootCAs(tl.CAFile), nats.UserInfo("admin", logins.Admin.Password), nats.Timeout(floor.ConnectTimeout))
	if err != nil {
		t.Fatalf("TLS and the admin's login: %v", err)
	}
	defer nc.Close()
	// The routes are up over their TLS: a stream of three replicas is made.
	js, _ := jetstream.New(nc)
	// (A cluster just started answers the first requests late: each try
	// bounded, tried again.)
	testenv.EventuallyErr(t, 45*time.Second, "a stream of 3 replicas over the TLS routes", func() error {
		tctx, tcancel := context.WithTimeout(ctx, 3*time.Second)
		defer tcancel()
		_, err := js.CreateOrUpdateStream(tctx, jetstream.StreamConfig{Name: "R3", Subjects: []string{"r3.>"}, Replicas: 3})
		return err
	})
	// In clear, even with the admin's login: refused on the client port
	// and the MQTT listener.
	nd := c.Nodes[0]
	if said, taken := floortest.PlaintextNATS(strings.TrimPrefix(nd.URL(), "tls://"), "admin", logins.Admin.Password); taken {
		t.Error("a plaintext NATS client with the admin's login was taken")
	} else {
		t.Logf("NATS in plaintext: %s", said)
	}
	if said, taken := floortest.PlaintextMQTT(nd.MQTTAddr(), "x", "admin", logins.Admin.Password); taken {
		t.Error("a plaintext MQTT client with the admin's login was taken")
	} else {
		t.Logf("MQTT in plaintext: %s", said)
	}
}

// TestPlaintextClients: the raw clients the floor's attacks use are
// taken by a node without TLS and logins (so their refusal on a floor
// is the floor's doing, not theirs).
func TestPlaintextClients(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, err := natsserver.StartEmbedded(ctx, t.TempDir(), 1)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Stop()
	nd := c.Nodes[0]
	if said, taken := floortest.PlaintextNATS(strings.TrimPrefix(nd.URL(), "nats://"), "", ""); !taken {
		t.Errorf("NATS without TLS or logins refused the plaintext client: %s", said)
	}
	if said, taken := floortest.PlaintextMQTT(nd.MQTTAddr(), "x", "", ""); !taken {
		t.Errorf("MQTT without TLS or logins refused the plaintext client: %s", said)
	}
}
