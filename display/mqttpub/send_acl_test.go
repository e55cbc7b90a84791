package mqttpub

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tablectl/tablectl/base/mqttconn"
	"github.com/tablectl/tablectl/internal/mqttbroker"
	"github.com/tablectl/tablectl/internal/mqtttest"
	"github.com/tablectl/tablectl/internal/testenv"
)

// TestSendCommandNotAllowed: on the embedded broker, a command to a table
// the login may not command says the broker did not allow it, at once,
// rather than "connection lost" and "no reply" after the timeout (issue 15).
func TestSendCommandNotAllowed(t *testing.T) {
	b, err := mqttbroker.Start(mqttbroker.Options{TCP: "127.0.0.1:0", Writer: "tablectl", WriterPassword: "w",
		Logins: []mqttbroker.Login{{Username: "pit", Password: "pw", Access: mqttbroker.Access{
			Read: []string{"tablectl/T-A/#"}, Write: []string{"tablectl/T-A/cmd"}}}}})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	for _, prefix := range []string{"tablectl/T-B", "tablectl/T-A/x"} {
		topics := Topics{Prefix: prefix}
		conn, err := mqttconn.Dial(mqttconn.ConnOptions{Broker: b.URL(), ClientID: mqtttest.ClientID(t, "pit"), Username: "pit", Password: "pw",
			Subscribe: []string{topics.Topic(TopicCmdReply)}, ConnectTimeout: 5 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		start := time.Now()
		_, err = SendCommand(ctx, conn, topics, []byte(`{}`), "id-1")
		cancel()
		conn.Close(100 * time.Millisecond)
		if !errors.Is(err, ErrNotAllowed) || !strings.Contains(err.Error(), prefix+"/cmd") {
			t.Errorf("%s: err %v", prefix, err)
		}
		if d := time.Since(start); d > 5*time.Second {
			t.Errorf("%s: took %v", prefix, d)
		}
	}
}

// TestSendCommandNotAllowedMosquitto: Mosquitto (MQTT 3.1.1) grants a
// subscription it will never deliver and drops a publish its ACL refuses
// without a word, so only the timeout can say it; it names the ACL.
func TestSendCommandNotAllowedMosquitto(t *testing.T) {
	dir := t.TempDir()
	pw, acl := filepath.Join(dir, "passwd"), filepath.Join(dir, "acl")
	if out, err := exec.Command(testenv.Command(t, "mosquitto_passwd", "mosquitto"), "-c", "-b", pw, "sup", "pw").CombinedOutput(); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	os.WriteFile(acl, []byte("user sup\ntopic write tablectl/T-A/cmd\ntopic read tablectl/T-A/cmd/reply\n"), 0o600)
	m := mqtttest.StartMosquitto(t, "allow_anonymous false\npassword_file "+pw+"\nacl_file "+acl)
	topics := Topics{Prefix: "tablectl/T-B"}
	conn, err := mqttconn.Dial(mqttconn.ConnOptions{Broker: m.URL, ClientID: mqtttest.ClientID(t, "sup"), Username: "sup", Password: "pw",
		Subscribe: []string{topics.Topic(TopicCmdReply)}, ConnectTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(100 * time.Millisecond)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	start := time.Now()
	_, err = SendCommand(ctx, conn, topics, []byte(`{}`), "id-1")
	if err == nil || !strings.Contains(err.Error(), "no reply") || !strings.Contains(err.Error(), "ACL") {
		t.Fatalf("err %v", err)
	}
	_ = start
}
