package selfcheck

import (
	"crypto/ed25519"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tablectl/tablectl/audit"
	"github.com/tablectl/tablectl/coup"
)

type fixture struct {
	dir, exe, cfg, extra, manifest, pub string
	key                                 ed25519.PrivateKey
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	d := t.TempDir()
	f := &fixture{dir: d, exe: filepath.Join(d, "tablectl"), cfg: filepath.Join(d, "tablectl.json"), extra: filepath.Join(d, "supervisors.json"),
		manifest: filepath.Join(d, "manifest.json"), pub: filepath.Join(d, "manifest.pub")}
	write(t, f.exe, "\x7fELF pretend program")
	write(t, f.cfg, `{"table_id":"T1"}`)
	write(t, f.extra, `{"keys":[]}`)
	priv := filepath.Join(d, "build.key")
	if _, err := audit.WriteKeyPair(priv, f.pub); err != nil {
		t.Fatal(err)
	}
	k, err := audit.LoadPrivateKey(priv)
	if err != nil {
		t.Fatal(err)
	}
	f.key = k
	f.sign(t, f.key)
	return f
}

func (f *fixture) sign(t *testing.T, key ed25519.PrivateKey) {
	t.Helper()
	m, err := Make([]Entry{{RoleExecutable, f.exe, "/usr/bin/tablectl"}, {RoleConfig, f.cfg, ""}, {RoleFile, f.extra, ""}}, key, time.Date(2026, 11, 25, 13, 0, 0, 0, time.UTC))
	if err != nil {
		t.Fatal(err)
	}
	b, err := m.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	write(t, f.manifest, string(b))
}

func (f *fixture) checker() Checker {
	return Checker{Manifest: f.manifest, PublicKey: f.pub, Require: true, Executable: f.exe, Config: f.cfg}
}

func write(t *testing.T, path, s string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestCheckMatches(t *testing.T) {
	f := newFixture(t)
	got := f.checker().Check()
	if got.Result != coup.SelfCheckOK || got.Detail != "" || got.Key != audit.KeyID(f.key.Public().(ed25519.PublicKey)) || len(got.Manifest) != 64 || len(got.Files) != 3 {
		t.Fatalf("%+v", got)
	}
	// The executable is matched by content wherever it is.
	c := f.checker()
	c.Executable = filepath.Join(f.dir, "copy")
	data, _ := os.ReadFile(f.exe)
	write(t, c.Executable, string(data))
	if got := c.Check(); got.Result != coup.SelfCheckOK {
		t.Fatalf("a copy: %+v", got)
	}
}

// TestCheckFails: every way the program, its config or the manifest can
// differ from what was signed is a failure that says what.
func TestCheckFails(t *testing.T) {
	for _, tt := range []struct {
		name   string
		spoil  func(t *testing.T, f *fixture, c *Checker)
		detail string
	}{
		{"a byte of the executable", func(t *testing.T, f *fixture, c *Checker) {
			data, _ := os.ReadFile(f.exe)
			data[3] ^= 1
			write(t, f.exe, string(data))
		}, "is not the signed one"},
		{"the config", func(t *testing.T, f *fixture, c *Checker) { write(t, f.cfg, `{"table_id":"T2"}`) }, "config file"},
		{"another file", func(t *testing.T, f *fixture, c *Checker) { write(t, f.extra, `{"keys":[1]}`) }, "supervisors.json differs"},
		{"another file gone", func(t *testing.T, f *fixture, c *Checker) { os.Remove(f.extra) }, "cannot be read"},
		{"the manifest missing", func(t *testing.T, f *fixture, c *Checker) { os.Remove(f.manifest) }, "no manifest"},
		{"the public key missing", func(t *testing.T, f *fixture, c *Checker) { os.Remove(f.pub) }, "public key"},
		{"a hash in the manifest", func(t *testing.T, f *fixture, c *Checker) {
			data, _ := os.ReadFile(f.manifest)
			m := string(data)
			i := strings.Index(m, `"sha256": "`) + len(`"sha256": "`)
			b := []byte(m)
			if b[i] == 'a' {
				b[i] = 'b'
			} else {
				b[i] = 'a'
			}
			write(t, f.manifest, string(b))
		}, "signature does not verify"},
		{"signed by another key", func(t *testing.T, f *fixture, c *Checker) {
			_, other, _ := ed25519.GenerateKey(nil)
			f.sign(t, other)
		}, "not the configured key"},
		{"not JSON", func(t *testing.T, f *fixture, c *Checker) { write(t, f.manifest, "hello") }, "not valid"},
		{"the executable unreadable", func(t *testing.T, f *fixture, c *Checker) { c.Executable = filepath.Join(f.dir, "none") }, "executable cannot be read"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t)
			c := f.checker()
			tt.spoil(t, f, &c)
			got := c.Check()
			if got.Result != coup.SelfCheckFailed || !strings.Contains(got.Detail, tt.detail) {
				t.Fatalf("%+v, want failed with %q", got, tt.detail)
			}
		})
	}
}

func TestUnsignedBuild(t *testing.T) {
	f := newFixture(t)
	c := f.checker()
	c.Manifest = filepath.Join(f.dir, "absent.json")
	c.Require = false
	got := c.Check()
	if got.Result != coup.SelfCheckUnsigned || len(got.Files) != 2 || got.Files[0].SHA256 == "" {
		t.Fatalf("%+v", got)
	}
	// The running image hashes (the test binary).
	c.Executable = ""
	if got := c.Check(); got.Result != coup.SelfCheckUnsigned || got.Files[0].SHA256 == "" {
		t.Fatalf("running image: %+v", got)
	}
}

func TestMakeRefuses(t *testing.T) {
	f := newFixture(t)
	for _, es := range [][]Entry{
		{{RoleConfig, f.cfg, ""}},             // no executable
		{{"library", f.exe, ""}},              // unknown role
		{{RoleExecutable, f.dir + "/no", ""}}, // missing file
	} {
		if _, err := Make(es, f.key, time.Now()); err == nil {
			t.Errorf("%+v made", es)
		}
	}
	if _, err := Make([]Entry{{RoleExecutable, f.exe, ""}}, nil, time.Now()); err == nil {
		t.Error("made with no key")
	}
}

func FuzzParse(f *testing.F) {
	pub, priv, _ := ed25519.GenerateKey(nil)
	dir := f.TempDir()
	exe := filepath.Join(dir, "x")
	os.WriteFile(exe, []byte("x"), 0o644)
	m, err := Make([]Entry{{RoleExecutable, exe, ""}}, priv, time.Now())
	if err != nil {
		f.Fatal(err)
	}
	b, _ := m.Marshal()
	f.Add(b)
	f.Add([]byte(`{"version":1}`))
	f.Add([]byte(`[]`))
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := Parse(data, pub)
		if err == nil {
			// Only a signature of our key passes, and it covers the files.
			if msg, err := m.SigningBytes(); err != nil || m.KeyID != audit.KeyID(pub) || len(msg) == 0 {
				t.Fatalf("accepted %q", data)
			}
		}
	})
}
