package floorbridge

import (
	"os"
	"strings"
	"testing"
)

func template(t *testing.T) string {
	b, err := os.ReadFile("../../deploy/mosquitto/bridge.conf")
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestConf: the shipped template made a table's bridge says what was
// given, each once, and two bridges of one table get different client ids.
func TestConf(t *testing.T) {
	o := Options{Table: "BAC-09", Addrs: []string{"10.0.0.1:8883", "10.0.0.2:8883"}, User: "bridge-BAC-09", Password: "abcdefghijklmnopqrstuvwxyz", CAFile: "/etc/mosquitto/tablectl/floor-ca.crt"}
	a, err := Conf(template(t), o)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := Conf(template(t), o)
	va, vb := Values(a), Values(b)
	for k, want := range map[string]string{"address": "10.0.0.1:8883 10.0.0.2:8883", "remote_username": o.User, "remote_password": o.Password,
		"bridge_cafile": o.CAFile, "bridge_insecure": "false"} {
		if va[k] != want {
			t.Errorf("%s %q, want %q", k, va[k], want)
		}
	}
	if va["remote_clientid"] == vb["remote_clientid"] || !strings.HasPrefix(va["remote_clientid"], "bridge-BAC-09-") {
		t.Errorf("client ids %q and %q: want bridge-BAC-09- and a random part, different each time", va["remote_clientid"], vb["remote_clientid"])
	}
	if strings.Contains(a, "BAC-07") || !strings.Contains(a, "topic tablectl/BAC-09/pit/# out 1") {
		t.Errorf("not the table's topics:\n%s", a)
	}
}

// TestConfRefuses: what would make a bridge that is not the floor's
// (no login, no CA, a value Mosquitto would split or cut, a table id the
// floor cannot carry, a template without a key line or with a client
// certificate or bridge_insecure true) is refused.
func TestConfRefuses(t *testing.T) {
	good := Options{Table: "BAC-09", Addrs: []string{"n1:8883"}, User: "bridge-BAC-09", Password: "abcdefghijklmnopqrstuvwxyz", CAFile: "/ca.crt"}
	tmpl := template(t)
	for _, c := range []struct {
		name string
		edit func(*Options, *string)
	}{
		{"no password", func(o *Options, _ *string) { o.Password = "" }},
		{"no CA", func(o *Options, _ *string) { o.CAFile = "" }},
		{"no node", func(o *Options, _ *string) { o.Addrs = nil }},
		{"a password with a blank", func(o *Options, _ *string) { o.Password = "abc def" }},
		{"a password with a line break", func(o *Options, _ *string) { o.Password = "abc\nbridge_insecure true" }},
		{"an address with a comment", func(o *Options, _ *string) { o.Addrs = []string{"n1:8883#x"} }},
		{"a table id with a dot", func(o *Options, _ *string) { o.Table = "BAC.09" }},
		{"no bridge_cafile line", func(_ *Options, s *string) {
			*s = strings.Replace(*s, "bridge_cafile /etc/mosquitto/tablectl/floor-ca.crt\n", "", 1)
		}},
		{"two address lines", func(_ *Options, s *string) { *s += "address x:1\n" }},
		{"a client certificate", func(_ *Options, s *string) { *s += "bridge_certfile /x.crt\n" }},
	} {
		t.Run(c.name, func(t *testing.T) {
			o, s := good, tmpl
			c.edit(&o, &s)
			if out, err := Conf(s, o); err == nil {
				t.Fatalf("taken:\n%s", out)
			}
		})
	}
	if _, err := Conf(tmpl, good); err != nil {
		t.Fatalf("the good one refused: %v", err)
	}
}
