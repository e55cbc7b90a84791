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

	"github.com/tablectl/tablectl/internal/mqtttest"
	"github.com/tablectl/tablectl/internal/testenv"
)

// TestSendCommandNotAllowed: a command to a table the login may not
// command says the broker did not allow it, at once, rather than "no
// reply" after the timeout (issue 15).
func TestSendCommandNotAllowed(t *testing.T) {
	dir := t.TempDir()
	pw, acl := filepath.Join(dir, "passwd"), filepath.Join(dir, "acl")
	if out, err := exec.Command(testenv.Command(t, "mosquitto_passwd", "mosquitto"), "-c", "-b", pw, "sup", "pw").CombinedOutput(); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	os.WriteFile(acl, []byte("user sup\ntopic write tablectl/T-A/cmd\ntopic read tablectl/T-A/cmd/reply\n"), 0o600)
	m := mqtttest.StartMosquitto(t, "allow_anonymous false\npassword_file "+pw+"\nacl_file "+acl)
	topics := Topics{Prefix: "tablectl/T-B"}
	conn, err := Dial(ConnOptions{Broker: m.URL, ClientID: mqtttest.ClientID(t, "sup"), Username: "sup", Password: "pw",
		Subscribe: []string{topics.Topic(TopicCmdReply)}, ConnectTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(100 * time.Millisecond)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	start := time.Now()
	_, err = SendCommand(ctx, conn, topics, []byte(`{}`), "id-1")
	if !errors.Is(err, ErrNotAllowed) || !strings.Contains(err.Error(), "tablectl/T-B/cmd/reply") {
		t.Fatalf("err %v", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("took %v", d)
	}
}
