package config

import (
	"crypto/ed25519"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tablectl/tablectl/audit"
	"github.com/tablectl/tablectl/internal/selfcheck"
	"github.com/tablectl/tablectl/signedcmd"
)

// TestConfigKeysDocumented: docs/configuration.md has a row for every key
// of the config struct, and no row for a key the struct lacks.
func TestConfigKeysDocumented(t *testing.T) {
	doc, err := os.ReadFile("../../docs/configuration.md")
	if err != nil {
		t.Fatal(err)
	}
	var documented []string
	for _, m := range regexp.MustCompile("(?m)^\\| `([a-z_.]+)` \\|").FindAllStringSubmatch(string(doc), -1) {
		documented = append(documented, m[1])
	}
	keys := Keys()
	for _, k := range keys {
		if !slices.Contains(documented, k) {
			t.Errorf("docs/configuration.md lacks %s", k)
		}
	}
	for _, k := range documented {
		if !slices.Contains(keys, k) {
			t.Errorf("docs/configuration.md documents %s, which the config does not have", k)
		}
	}
	if len(keys) < 50 {
		t.Errorf("only %d keys found", len(keys))
	}
}

// TestCheckConfig: each bad config gives its findings with line, column
// and key path; a good one with no checkpoint key starts, with a warning.
func TestCheckConfig(t *testing.T) {
	dir := t.TempDir()
	write := func(name, s string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	write("pw", "secret\n")
	_, authority := writeSignedKeyring(t, filepath.Join(dir, "keyring.json"))
	write("officer.pub", string(must(os.ReadFile(authority))))
	draft := write("draft.json", `{"keys":[]}`)
	if _, err := signedcmd.SignKeyringFile(draft, filepath.Join(dir, "stranger.json"), newKey(t), 0, time.Now()); err != nil {
		t.Fatal(err)
	}
	base := `{
  "table_id": "T1",
  "profile": "vip",
  "shoe": {"port": {"path": "/dev/ttyUSB0"}},
  "audit": {"path": "trail.db"%s},
  "mqtt": {"broker": "tcp://127.0.0.1:1883", "password_file": "pw", "keyring": "keyring.json", "keyring_authority": "officer.pub"}
}
`
	for _, tt := range []struct {
		name, doc string
		ok        bool
		want      []string
	}{
		{"unsigned", strings.Replace(base, "%s", "", 1), true,
			[]string{"warning: audit.checkpoint_key: not set: the trail will not be signed"}},
		{"syntax", "{\n  \"table_id\": \"T1\",\n  \"profile\": \"vip\"\n  \"audit\": {}\n}\n", false,
			[]string{"4:3: error: JSON: invalid character '\"' after object key:value pair"}},
		{"truncated", "{\n  \"table_id\": \"T1\",\n", false, []string{"3:1: error: JSON: the document ends early"}},
		{"bad duration", "{\"table_id\": \"T1\", \"profile\": \"vip\",\n \"shoe\": {\"port\": {\"path\": \"/dev/x\",\n   \"silent_after\": \"3 s\"}}, \"audit\": {\"path\": \"t.db\"}}", false,
			[]string{`3:4: error: shoe.port.silent_after: duration "3 s"`}},
		{"wrong type", "{\"table_id\": \"T1\", \"profile\": \"vip\", \"mqtt\": {\"queue\": \"big\"}, \"audit\": {\"path\": \"t.db\"}}", false,
			[]string{"1:47: error: mqtt.queue: a JSON string where an integer is wanted"}},
		{"unknown key", "{\"table_id\": \"T1\",\n \"http\": {\"listen\": \"127.0.0.1:0\", \"tls\": true}}", false,
			[]string{"2:36: error: http.tls: unknown key"}},
		{"missing files", strings.Replace(base, "%s", `, "checkpoint_key": "nokey.pem"`, 1), false,
			[]string{"5:33: error: audit.checkpoint_key: "}},
		{"semantic", strings.Replace(strings.Replace(base, "%s", "", 1), `"vip"`, `"baccarat"`, 1), false,
			[]string{"3:3: error: profile: "}},
		{"segments", strings.Replace(base, `"path": "trail.db"%s`, `"dir": "trail", "segment_cutover": "05:30", "segment_zone": "Europe/Malta", "archive_dir": "archive", "keep_days": 30`, 1), true, nil},
		{"path moved into dir", strings.Replace(base, "%s", `, "dir": "trail"`, 1), true, nil},
		{"bad cutover", strings.Replace(base, `"path": "trail.db"%s`, `"dir": "trail", "segment_cutover": "6am"`, 1), false,
			[]string{`error: audit.segment_cutover: "6am": want HH:MM`}},
		{"keep without archive", strings.Replace(base, `"path": "trail.db"%s`, `"dir": "trail", "keep_days": 7`, 1), false,
			[]string{"error: audit.keep_days: deletes archived segments: set audit.archive_dir or audit.archive_command"}},
		{"segments of a file", strings.Replace(base, "%s", `, "keep_days": 7, "archive_dir": "a"`, 1), false,
			[]string{"error: audit.path: segment_cutover, segment_zone, segment_every_shoes, archive_dir, archive_command and keep_days go with audit.dir"}},
		{"unsigned keyring", strings.Replace(strings.Replace(base, "%s", "", 1), `"keyring.json"`, `"draft.json"`, 1), false,
			[]string{"error: mqtt.keyring: ", "the keyring is not signed by the security officer"}},
		{"keyring of another officer", strings.Replace(strings.Replace(base, "%s", "", 1), `"keyring.json"`, `"stranger.json"`, 1), false,
			[]string{"error: mqtt.keyring: ", "not a keyring authority here"}},
		{"keyring without authority", strings.Replace(strings.Replace(base, "%s", "", 1), `, "keyring_authority": "officer.pub"`, ``, 1), false,
			[]string{"mqtt.keyring_authority is required with mqtt.keyring"}},
		{"open http", strings.Replace(strings.Replace(base, "%s", "", 1), `"table_id": "T1",`, `"table_id": "T1", "http": {"listen": "0.0.0.0:8080"},`, 1), true,
			[]string{"warning: http.listen: 0.0.0.0:8080 is reachable off this box without TLS"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			fs, ok := Check(write(tt.name+".json", tt.doc))
			var lines []string
			for _, f := range fs {
				lines = append(lines, f.String())
			}
			all := strings.Join(lines, "\n")
			if ok != tt.ok {
				t.Errorf("ok %v, want %v:\n%s", ok, tt.ok, all)
			}
			for _, w := range tt.want {
				if !strings.Contains(all, w) {
					t.Errorf("findings lack %q:\n%s", w, all)
				}
			}
		})
	}
}

// TestLoadConfigSays: tablectl run's error names the line, column and key.
func TestLoadConfigSays(t *testing.T) {
	p := filepath.Join(t.TempDir(), "c.json")
	os.WriteFile(p, []byte("{\"table_id\": \"T1\", \"profile\": \"vip\",\n \"table\": {\"result_time\": \"soon\"}, \"audit\": {\"path\": \"t.db\"}}"), 0o600)
	_, _, err := Load(p)
	if err == nil || !strings.Contains(err.Error(), `2:12: error: table.result_time: duration "soon"`) {
		t.Fatalf("%v", err)
	}
}

func FuzzLocate(f *testing.F) {
	for _, s := range []string{`{}`, `{"shoe":{"port":{"baud":"x"}}}`, `{"a":`, `[1]`, `{"mqtt":null}`, `{"profile":{"x":1}}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, fd := range Locate(data) {
			if fd.Line < 0 || fd.Col < 0 || fd.Message == "" {
				t.Fatalf("finding %+v", fd)
			}
		}
		keyOffsets(data)
	})
}

// TestCheckConfigSelfCheck: config check runs the start-up self-check as
// the controller would (this program as the executable): a failure is an
// error, since the table would start but refuse to deal; no manifest with
// require off is a warning (an unsigned development build).
func TestCheckConfigSelfCheck(t *testing.T) {
	dir := t.TempDir()
	key, pub := filepath.Join(dir, "build.key"), filepath.Join(dir, "build.pub")
	if _, err := audit.WriteKeyPair(key, pub); err != nil {
		t.Fatal(err)
	}
	priv, err := audit.LoadPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	other := filepath.Join(dir, "other-exe")
	if err := os.WriteFile(other, []byte("not this program"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name    string
		require bool
		// sign lists the executable the manifest covers, "" for no manifest.
		sign   string
		edit   bool // the config changed after signing
		ok     bool
		want   string
		absent string
	}{
		{name: "unsigned dev build", require: false, ok: true,
			want: "warning: self_check.require: off, and no manifest at " + filepath.Join(dir, "unsigned dev build.manifest")},
		{name: "no manifest, require", require: true, ok: false,
			want: "error: self_check: the self-check would fail, so the table would start but refuse to deal (self_check_failed): no manifest"},
		{name: "signed", require: true, sign: self, ok: true, absent: "self_check"},
		{name: "config edited", require: true, sign: self, edit: true, ok: false,
			want: "is not the signed one (a changed config needs a manifest re-signed by the build key's holder"},
		{name: "another executable", require: true, sign: other, ok: false,
			want: "error: self_check: the self-check would fail, so the table would start but refuse to deal (self_check_failed): the executable"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cfg := filepath.Join(dir, tt.name+".json")
			manifest := filepath.Join(dir, tt.name+".manifest")
			doc := fmt.Sprintf(`{"table_id": "T1", "profile": "vip", "shoe": {"port": {"path": "/dev/ttyUSB0"}}, "audit": {"path": "trail.db"},
  "mqtt": {"disabled": true},
  "self_check": {"manifest": %q, "public_key": %q, "require": %v}}
`, manifest, pub, tt.require)
			if err := os.WriteFile(cfg, []byte(doc), 0o600); err != nil {
				t.Fatal(err)
			}
			if tt.sign != "" {
				m, err := selfcheck.Make([]selfcheck.Entry{{Role: selfcheck.RoleExecutable, Path: tt.sign}, {Role: selfcheck.RoleConfig, Path: cfg}}, priv, time.Now())
				if err != nil {
					t.Fatal(err)
				}
				b, _ := m.Marshal()
				if err := os.WriteFile(manifest, b, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			if tt.edit {
				if err := os.WriteFile(cfg, []byte(strings.Replace(doc, "/dev/ttyUSB0", "/dev/ttyUSB1", 1)), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			fs, ok := Check(cfg)
			var lines []string
			for _, f := range fs {
				lines = append(lines, f.String())
			}
			all := strings.Join(lines, "\n")
			if ok != tt.ok {
				t.Errorf("ok %v, want %v:\n%s", ok, tt.ok, all)
			}
			if tt.want != "" && !strings.Contains(all, tt.want) {
				t.Errorf("findings lack %q:\n%s", tt.want, all)
			}
			if tt.absent != "" && strings.Contains(all, tt.absent) {
				t.Errorf("findings name %q:\n%s", tt.absent, all)
			}
		})
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// newKey is an Ed25519 key of the test's own.
func newKey(t *testing.T) ed25519.PrivateKey {
	t.Helper()
	_, priv, err := ed25519.GenerateKey(nil)
	if err != nil {
		t.Fatal(err)
	}
	return priv
}
