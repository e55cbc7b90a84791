package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tablectl/tablectl/coup"
)

func TestDeployExampleConfigParses(t *testing.T) {
	data, err := os.ReadFile("../../deploy/tablectl.json")
	if err != nil {
		t.Fatal(err)
	}
	c, tc, err := Parse(data, "/etc/tablectl")
	if err != nil {
		t.Fatal(err)
	}
	if c.TableID != "BAC-07" || tc.Profile.Name != coup.ProfileVIP || tc.Profile.Limits.MinTotal != 1000 ||
		tc.ResultTime != 3*time.Second || c.Shoe.Port.Baud != 115200 {
		t.Fatalf("parsed %+v %+v", c, tc)
	}
}

func TestConfigErrors(t *testing.T) {
	tests := []struct {
		name, doc, want string
	}{
		{"unknown field", `{"table_id":"T","profile":"vip","audit":{"path":"a.db"},"shoe":{"port":{"path":"/dev/x"}},"colour":"red"}`, "unknown field"},
		{"no table", `{"profile":"vip","audit":{"path":"a.db"},"shoe":{"port":{"path":"/dev/x"}}}`, "table_id is required"},
		{"bad profile", `{"table_id":"T","profile":"baccarat-royale","audit":{"path":"a.db"},"shoe":{"port":{"path":"/dev/x"}}}`, "unknown rule profile"},
		{"bad driver", `{"table_id":"T","profile":"vip","audit":{"path":"a.db"},"shoe":{"driver":"morse","port":{"path":"/dev/x"}}}`, "shoe.driver"},
		{"no port", `{"table_id":"T","profile":"vip","audit":{"path":"a.db"},"shoe":{}}`, "shoe.port"},
		{"no trail", `{"table_id":"T","profile":"vip","shoe":{"port":{"path":"/dev/x"}}}`, "audit.path"},
		{"bad burn", `{"table_id":"T","profile":"vip","table":{"burn":"lots"},"audit":{"path":"a.db"},"shoe":{"port":{"path":"/dev/x"}}}`, "burn rule"},
		{"bad key URI", `{"table_id":"T","profile":"vip","audit":{"path":"a.db","checkpoint_key":"pkcs11:token=t;object=cp?pin-value=1"},"shoe":{"port":{"path":"/dev/x"}}}`, "audit.checkpoint_key: pkcs11 URI: pin-value is refused"},
		{"trailing", `{"table_id":"T","profile":"vip","audit":{"path":"a.db"},"shoe":{"port":{"path":"/dev/x"}}} {}`, "after the JSON"},
		{"client limit with a broker", `{"table_id":"T","profile":"vip","audit":{"path":"a.db"},"shoe":{"port":{"path":"/dev/x"}},"mqtt":{"broker":"tcp://h:1883","client_command_burst":5}}`, "limit clients at the broker"},
		{"display language", `{"table_id":"T","profile":"vip","audit":{"path":"a.db"},"shoe":{"port":{"path":"/dev/x"}},"http":{"display_language":"klingon"}}`, "http.display_language"},
		{"negative client interval", `{"table_id":"T","profile":"vip","audit":{"path":"a.db"},"shoe":{"port":{"path":"/dev/x"}},"mqtt":{"client_command_every":"-1s"}}`, "client_command_every"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, _, err := Parse([]byte(tt.doc), "/tmp")
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err %v, want %q", err, tt.want)
			}
		})
	}
	c, _, err := Parse([]byte(`{"table_id":"T","profile":"classic","audit":{"path":"trail.db"},"shoe":{"port":{"path":"/dev/x"}}}`), "/srv/t")
	if err != nil || c.Audit.Path != filepath.Join("/srv/t", "trail.db") {
		t.Fatalf("relative path: %v %q", err, c.Audit.Path)
	}
	// The embedded broker limits each client's commands by default.
	c, _, err = Parse([]byte(`{"table_id":"T","profile":"classic","audit":{"path":"trail.db"},"shoe":{"port":{"path":"/dev/x"}},"mqtt":{}}`), "/srv/t")
	if err != nil || c.MQTT.ClientCommandBurst != DefaultClientCommandBurst || time.Duration(c.MQTT.ClientCommandEvery) != DefaultClientCommandEvery {
		t.Fatalf("embedded broker's client limit: %v %+v", err, c.MQTT)
	}
}
