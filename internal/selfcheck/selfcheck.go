// Package selfcheck is program self-authentication (N.J.A.C. 13:69O-1.5,
// GLI-24): a manifest of SHA-256 hashes of the controller's executable and
// configuration, signed at build time with an Ed25519 key, and the check
// the controller runs at start and periodically that what runs is what was
// signed.
//
// The manifest is JSON:
//
//	{"version":1,"made":"2026-11-25T13:00:00Z","key_id":"...",
//	 "files":[{"role":"executable","path":"/usr/bin/tablectl","sha256":"..."},
//	          {"role":"config","path":"/etc/tablectl/tablectl.json","sha256":"..."}],
//	 "sig":"<base64>"}
//
// sig is the key's signature of SigningDomain followed by the canonical
// JSON (docs/audit.md) of the manifest without its sig. The executable is
// matched by content, not path (the running image, /proc/self/exe); the
// configuration by content among the "config" entries; every "file" entry
// by its path.
//
// What it proves, and what it cannot: a program or configuration changed
// by anyone who does not hold the signing key is caught, at start and
// within the check interval. Someone who can replace the executable, the
// manifest and the public key together can forge all three; the hashes
// every check records in the trail are the outside check against that (a
// test lab or the witnesses compare them with the certified build's).
package selfcheck

import (
	"bytes"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"time"

	"github.com/tablectl/tablectl/audit"
	"github.com/tablectl/tablectl/coup"
)

// SigningDomain opens the signed bytes, so a manifest signature is never
// taken for a signature of anything else.
const SigningDomain = "tablectl-manifest-v1\n"

// Version is the manifest format's version.
const Version = 1

// MaxManifest bounds a manifest file.
const MaxManifest = 64 << 10

// Roles of the files a manifest lists.
const (
	RoleExecutable = "executable"
	RoleConfig     = "config"
	RoleFile       = "file"
)

// Default places, as the Debian package installs them.
const (
	DefaultManifest  = "/usr/lib/tablectl/manifest.json"
	DefaultPublicKey = "/usr/lib/tablectl/manifest.pub"
)

// Manifest is the signed list of hashes.
type Manifest struct {
	Version int             `json:"version"`
	Made    string          `json:"made"`
	KeyID   string          `json:"key_id"`
	Files   []coup.FileHash `json:"files"`
	Sig     string          `json:"sig,omitempty"`
}

// Entry is a file to put in a manifest: its role and path.
type Entry struct {
	Role string
	Path string
	// As is the path the manifest records (where the package installs the
	// file); empty records Path.
	As string
}

// HashFile returns the hex SHA-256 of the file at path.
func HashFile(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", fmt.Errorf("selfcheck: %w", err)
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", fmt.Errorf("selfcheck: hash %s: %w", path, err)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// Make hashes the entries and signs the manifest with key: the build's
// step that writes the manifest for a given binary (tablectl manifest sign).
func Make(entries []Entry, key ed25519.PrivateKey, made time.Time) (Manifest, error) {
	if len(key) != ed25519.PrivateKeySize {
		return Manifest{}, errors.New("selfcheck: the signing key is not an Ed25519 private key")
	}
	m := Manifest{Version: Version, Made: made.UTC().Format(time.RFC3339), KeyID: audit.KeyID(key.Public().(ed25519.PublicKey))}
	exe := false
	for _, e := range entries {
		switch e.Role {
		case RoleExecutable:
			exe = true
		case RoleConfig, RoleFile:
		default:
			return Manifest{}, fmt.Errorf("selfcheck: role %q: want executable, config or file", e.Role)
		}
		sum, err := HashFile(e.Path)
		if err != nil {
			return Manifest{}, err
		}
		p := e.As
		if p == "" {
			p = e.Path
		}
		if abs, err := filepath.Abs(p); err == nil {
			p = abs
		}
		m.Files = append(m.Files, coup.FileHash{Role: e.Role, Path: p, SHA256: sum})
	}
	if !exe {
		return Manifest{}, errors.New("selfcheck: a manifest must cover the executable")
	}
	msg, err := m.SigningBytes()
	if err != nil {
		return Manifest{}, err
	}
	m.Sig = base64.StdEncoding.EncodeToString(ed25519.Sign(key, msg))
	return m, nil
}

// SigningBytes are the bytes the signature covers.
func (m Manifest) SigningBytes() ([]byte, error) {
	m.Sig = ""
	canon, err := audit.CanonicalJSON(m)
	if err != nil {
		return nil, fmt.Errorf("selfcheck: %w", err)
	}
	return append([]byte(SigningDomain), canon...), nil
}

// Marshal writes the manifest as its file holds it.
func (m Manifest) Marshal() ([]byte, error) {
	b, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("selfcheck: %w", err)
	}
	return append(b, '\n'), nil
}

// Parse reads a manifest strictly and checks its signature with pub.
func Parse(data []byte, pub ed25519.PublicKey) (Manifest, error) {
	var m Manifest
	if len(data) > MaxManifest {
		return m, fmt.Errorf("selfcheck: the manifest is over %d bytes", MaxManifest)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&m); err != nil {
		return m, fmt.Errorf("selfcheck: the manifest is not valid: %w", err)
	}
	if dec.More() {
		return m, errors.New("selfcheck: text after the manifest")
	}
	if m.Version != Version {
		return m, fmt.Errorf("selfcheck: manifest version %d: this build reads %d", m.Version, Version)
	}
	if len(pub) != ed25519.PublicKeySize {
		return m, errors.New("selfcheck: no public key to check the manifest with")
	}
	if m.KeyID != audit.KeyID(pub) {
		return m, fmt.Errorf("selfcheck: the manifest was signed by key %s, not the configured key %s", m.KeyID, audit.KeyID(pub))
	}
	sig, err := base64.StdEncoding.Strict().DecodeString(m.Sig)
	if err != nil || len(sig) != ed25519.SignatureSize {
		return m, errors.New("selfcheck: the manifest's signature is malformed")
	}
	msg, err := m.SigningBytes()
	if err != nil {
		return m, err
	}
	if !ed25519.Verify(pub, msg, sig) {
		return m, errors.New("selfcheck: the manifest's signature does not verify")
	}
	for _, f := range m.Files {
		if !slices.Contains([]string{RoleExecutable, RoleConfig, RoleFile}, f.Role) || len(f.SHA256) != 64 {
			return m, fmt.Errorf("selfcheck: manifest entry %q (%s) is malformed", f.Path, f.Role)
		}
	}
	return m, nil
}

// Checker checks the running program and its configuration against the
// manifest. Its zero paths take the defaults.
type Checker struct {
	// Manifest and PublicKey are the manifest file and the PEM public key
	// of the key that signs it.
	Manifest  string
	PublicKey string
	// Require makes a missing manifest a failure. Without it a missing
	// manifest is SelfCheckUnsigned: a development build.
	Require bool
	// Executable is the file to check as the executable; empty is the
	// running image (/proc/self/exe on Linux).
	Executable string
	// Config is the config file the controller read; empty when it runs
	// on embedded defaults.
	Config string
}

// Check hashes the executable, the configuration and every file of the
// manifest, and says whether they match. It never fails: a problem is a
// SelfCheckFailed result whose Detail says what.
func (c Checker) Check() coup.SelfCheck {
	mpath, kpath := c.Manifest, c.PublicKey
	if mpath == "" {
		mpath = DefaultManifest
	}
	if kpath == "" {
		kpath = DefaultPublicKey
	}
	res := coup.SelfCheck{Result: coup.SelfCheckFailed}
	fail := func(format string, args ...any) coup.SelfCheck {
		res.Detail = fmt.Sprintf(format, args...)
		return res
	}
	// The hashes of what runs are recorded whatever the outcome.
	exe, name := c.Executable, c.Executable
	if exe == "" {
		exe, name = runningImage()
	}
	exeSum, err := HashFile(exe)
	if err != nil {
		return fail("the executable cannot be read: %v", err)
	}
	exe = name
	res.Files = append(res.Files, coup.FileHash{Role: RoleExecutable, Path: exe, SHA256: exeSum})
	var cfgSum string
	if c.Config != "" {
		if cfgSum, err = HashFile(c.Config); err != nil {
			return fail("the config file cannot be read: %v", err)
		}
		res.Files = append(res.Files, coup.FileHash{Role: RoleConfig, Path: c.Config, SHA256: cfgSum})
	}
	data, err := os.ReadFile(mpath)
	if errors.Is(err, fs.ErrNotExist) && !c.Require {
		res.Result, res.Detail = coup.SelfCheckUnsigned, "no manifest at "+mpath+": a development build"
		return res
	}
	if err != nil {
		return fail("no manifest: %v", err)
	}
	sum := sha256.Sum256(data)
	res.Manifest = hex.EncodeToString(sum[:])
	pub, err := audit.LoadPublicKey(kpath)
	if err != nil {
		return fail("the manifest's public key: %v", err)
	}
	res.Key = audit.KeyID(pub)
	m, err := Parse(data, pub)
	if err != nil {
		return fail("%v", err)
	}
	wantExe, wantCfg := false, c.Config == ""
	var bad []string
	for _, f := range m.Files {
		switch f.Role {
		case RoleExecutable:
			wantExe = wantExe || f.SHA256 == exeSum
		case RoleConfig:
			wantCfg = wantCfg || f.SHA256 == cfgSum
		case RoleFile:
			got, err := HashFile(f.Path)
			if err != nil {
				bad = append(bad, fmt.Sprintf("%s cannot be read", f.Path))
				continue
			}
			res.Files = append(res.Files, coup.FileHash{Role: RoleFile, Path: f.Path, SHA256: got})
			if got != f.SHA256 {
				bad = append(bad, f.Path+" differs")
			}
		}
	}
	if !wantExe {
		bad = append([]string{"the executable " + exe + " (sha256 " + exeSum[:16] + "...) is not the signed one"}, bad...)
	}
	if !wantCfg {
		bad = append(bad, "the config file "+c.Config+" is not the signed one")
	}
	if len(bad) > 0 {
		return fail("%s", joinClip(bad))
	}
	res.Result = coup.SelfCheckOK
	return res
}

// runningImage is the file of the program running now, and its name: on
// Linux the image itself, even if its path has since been replaced.
func runningImage() (file, name string) {
	name, err := os.Executable()
	if err != nil {
		name = os.Args[0]
	}
	if runtime.GOOS == "linux" {
		return "/proc/self/exe", name
	}
	return name, name
}

func joinClip(s []string) string {
	const max = 400
	var b bytes.Buffer
	for i, x := range s {
		if i > 0 {
			b.WriteString("; ")
		}
		b.WriteString(x)
		if b.Len() > max {
			return b.String()[:max] + "..."
		}
	}
	return b.String()
}
