package floor

import (
	"bytes"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/tablectl/tablectl/audit"
)

// DefaultHeartbeat is how long a table may say nothing before the floor
// calls it silent. A dealing table commits a row every few seconds; an
// idle one (no shoe) says nothing and is reported silent after this.
const DefaultHeartbeat = time.Minute

// Registry is what the floor knows of its tables: each table's checkpoint
// keys (a table's checkpoints verify against these only) and how long it
// may be silent. Tables the registry does not name are still witnessed,
// and alerted as unregistered.
type Registry struct {
	Heartbeat time.Duration
	Tables    map[string]TableEntry

	prepared sync.Map // string(public key) → *audit.CheckpointKey
}

// TableEntry is one registered table.
type TableEntry struct {
	// Keys are the table's checkpoint public keys (two while one replaces
	// the other).
	Keys      []ed25519.PublicKey
	Heartbeat time.Duration
	// PitView is the URL of the table's own pit view, linked from the
	// floor view.
	PitView string
	// Group is the witnesses' group the table is in: the witnesses of a
	// group (tablectl-floor witness --group) take its tables' messages
	// only, through a consumer of their own, so several groups share a
	// floor (docs/floor.md). Empty: the floor's one group.
	Group string
}

// registryJSON is the registry file:
//
//	{"heartbeat": "1m",
//	 "tables": {"BAC-07": {"public_keys": ["<32 bytes, base64>"], "public_key_files": ["BAC-07.pub"], "heartbeat": "30s",
//	                       "pit_view": "https://bac-07.pit.casino.internal/pit", "group": "east"}}}
type registryJSON struct {
	Heartbeat string `json:"heartbeat"`
	Tables    map[string]struct {
		PublicKeys     []string `json:"public_keys"`
		PublicKeyFiles []string `json:"public_key_files"`
		Heartbeat      string   `json:"heartbeat"`
		PitView        string   `json:"pit_view"`
		Group          string   `json:"group"`
	} `json:"tables"`
}

// LoadRegistry reads a registry file; key files are relative to it.
func LoadRegistry(path string) (*Registry, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("registry: %w", err)
	}
	return ParseRegistry(data, filepath.Dir(path))
}

// ParseRegistry reads a registry; dir is where key files are found.
func ParseRegistry(data []byte, dir string) (*Registry, error) {
	if len(data) > 16<<20 {
		return nil, fmt.Errorf("registry: %d bytes", len(data))
	}
	var j registryJSON
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&j); err != nil {
		return nil, fmt.Errorf("registry: %w", err)
	}
	r := &Registry{Heartbeat: DefaultHeartbeat, Tables: map[string]TableEntry{}}
	if j.Heartbeat != "" {
		d, err := time.ParseDuration(j.Heartbeat)
		if err != nil || d <= 0 {
			return nil, fmt.Errorf("registry: heartbeat %q: want a positive duration", j.Heartbeat)
		}
		r.Heartbeat = d
	}
	for id, t := range j.Tables {
		if err := checkTable(id); err != nil {
			return nil, fmt.Errorf("registry: %w", err)
		}
		if err := checkGroup(t.Group); err != nil {
			return nil, fmt.Errorf("registry: table %s: %w", id, err)
		}
		e := TableEntry{Heartbeat: r.Heartbeat, PitView: t.PitView, Group: t.Group}
		if t.Heartbeat != "" {
			d, err := time.ParseDuration(t.Heartbeat)
			if err != nil || d <= 0 {
				return nil, fmt.Errorf("registry: table %s: heartbeat %q: want a positive duration", id, t.Heartbeat)
			}
			e.Heartbeat = d
		}
		for _, k := range t.PublicKeys {
			b, err := base64.StdEncoding.DecodeString(k)
			if err != nil || len(b) != ed25519.PublicKeySize {
				return nil, fmt.Errorf("registry: table %s: public key %.60q: want %d bytes in standard base64", id, k, ed25519.PublicKeySize)
			}
			e.Keys = append(e.Keys, ed25519.PublicKey(b))
		}
		for _, f := range t.PublicKeyFiles {
			if !filepath.IsAbs(f) {
				f = filepath.Join(dir, f)
			}
			k, err := audit.LoadPublicKey(f)
			if err != nil {
				return nil, fmt.Errorf("registry: table %s: %w", id, err)
			}
			e.Keys = append(e.Keys, k)
		}
		if len(e.Keys) == 0 {
			return nil, fmt.Errorf("registry: table %s has no public key", id)
		}
		r.Tables[id] = e
	}
	return r, nil
}

// checkGroup refuses a group name that cannot be a part of a consumer's
// name (one NATS subject token) or is too long to read.
func checkGroup(g string) error {
	if len(g) > 32 {
		return fmt.Errorf("group %.40q: longer than 32 characters", g)
	}
	for _, c := range g {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
			return fmt.Errorf("group %q: only letters, digits, - and _", g)
		}
	}
	return nil
}

// Groups are the witnesses' groups the registry names, sorted.
func (r *Registry) Groups() []string {
	var out []string
	for _, e := range r.Tables {
		if e.Group != "" && !slices.Contains(out, e.Group) {
			out = append(out, e.Group)
		}
	}
	slices.Sort(out)
	return out
}

// GroupTables are the tables of group, sorted; group "" is every table.
func (r *Registry) GroupTables(group string) []string {
	var out []string
	for id, e := range r.Tables {
		if group == "" || e.Group == group {
			out = append(out, id)
		}
	}
	slices.Sort(out)
	return out
}

// inGroup tells whether a witness of group judges table: a witness of
// the floor's one group ("") judges every table.
func (r *Registry) inGroup(table, group string) bool {
	return group == "" || r.Tables[table].Group == group
}

// heartbeat is how long table may be silent.
func (r *Registry) heartbeat(table string) time.Duration {
	if e, ok := r.Tables[table]; ok {
		return e.Heartbeat
	}
	return r.Heartbeat
}

// verify checks c's signature against table's registered keys.
func (r *Registry) verify(table string, c audit.Checkpoint) error {
	e, ok := r.Tables[table]
	if !ok {
		return fmt.Errorf("table %s is not registered: no key to check its checkpoint with", table)
	}
	var last error
	for _, k := range e.Keys {
		if last = c.VerifyWith(r.key(k)); last == nil {
			return nil
		}
	}
	return last
}

// key is pub made ready for the many checkpoints it signs, once: about
// half the time of a check each (audit/internal/edfast).
func (r *Registry) key(pub ed25519.PublicKey) *audit.CheckpointKey {
	if k, ok := r.prepared.Load(string(pub)); ok {
		return k.(*audit.CheckpointKey)
	}
	k, _ := r.prepared.LoadOrStore(string(pub), audit.NewCheckpointKey(pub))
	return k.(*audit.CheckpointKey)
}
