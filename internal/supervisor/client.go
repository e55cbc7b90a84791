package supervisor

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/tablectl/tablectl/internal/smallfile"
)

// DefaultClientConfig is where `tablectl init` writes the box's client
// config, and where the supervisor's commands look for it.
const DefaultClientConfig = "/etc/tablectl/client.json"

// maxClientConfig bounds the client config's size.
const maxClientConfig = 16 << 10

// ClientConfig is what a supervisor's command needs to reach one table:
// the broker, the table, the broker login and its TLS. `tablectl init`
// writes one for the box (DefaultClientConfig, the box's own Mosquitto and
// the supervisors' login); a workstation keeps one per table. Files it
// names are relative to the file's own folder unless absolute. Command
// line flags override each field.
type ClientConfig struct {
	Broker string `json:"broker"`
	Table  string `json:"table"`
	// Prefix is the table's topic prefix; empty is tablectl/<table>.
	Prefix string `json:"prefix,omitempty"`
	// Username and PasswordFile are the broker login (Mosquitto's
	// supervisor-<table>, made by init).
	Username     string `json:"username,omitempty"`
	PasswordFile string `json:"password_file,omitempty"`
	// CAFile is the CA that signs the broker's certificate (ssl://);
	// CertFile and KeyFile a client certificate, if the broker wants one.
	CAFile   string `json:"ca_file,omitempty"`
	CertFile string `json:"cert_file,omitempty"`
	KeyFile  string `json:"key_file,omitempty"`
}

// LoadClientConfig reads a client config; unknown keys are errors (a
// mistyped key would otherwise be silently ignored). A missing file is an
// error that wraps fs.ErrNotExist.
func LoadClientConfig(path string) (ClientConfig, error) {
	var c ClientConfig
	data, err := smallfile.Read(path, maxClientConfig)
	if err != nil {
		return c, err
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&c); err != nil {
		return c, fmt.Errorf("client config %s: %w", path, err)
	}
	dir := filepath.Dir(path)
	for _, p := range []*string{&c.PasswordFile, &c.CAFile, &c.CertFile, &c.KeyFile} {
		if *p != "" && !filepath.IsAbs(*p) {
			*p = filepath.Join(dir, *p)
		}
	}
	return c, nil
}

// WriteClientConfig writes c to path, mode 0600, never over a file.
func WriteClientConfig(path string, c ClientConfig) error {
	b, err := json.MarshalIndent(c, "", "  ")
	if err != nil {
		return err
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	if _, err := f.Write(append(b, '\n')); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// IsNotExist reports whether err is a missing file.
func IsNotExist(err error) bool { return errors.Is(err, fs.ErrNotExist) }
