// Package provision makes what a new table box needs before its controller
// can start (`tablectl init`): the checkpoint key pair, the MQTT passwords
// of the controller, the pit and the screens, Mosquitto's password file
// and ACL for the table, the HTTP pit password, the security officer's key
// pair (when the box has no keyring authority yet), and a first
// supervisor's key pair and keyring, signed with the officer's key. Paths come from the controller's config file.
//
// Policy: it never overwrites (a file that exists is kept and reported);
// what the service reads is root-owned, mode 0640, group Options.Group, so
// the service reads it and cannot change it; what must leave the box (the
// supervisor's private key, the screens' passwords) goes to
// Options.Handoff, mode 0600, and the report says where each goes.
package provision

import (
	"bytes"
	"crypto/pbkdf2"
	"crypto/rand"
	"crypto/sha512"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/tablectl/tablectl/audit"
	"github.com/tablectl/tablectl/internal/config"
	"github.com/tablectl/tablectl/internal/floorbridge"
	"github.com/tablectl/tablectl/internal/pkcs11signer"
	"github.com/tablectl/tablectl/internal/supervisor"
	"github.com/tablectl/tablectl/signedcmd"
)

// Options say where things go.
type Options struct {
	// Config is the controller's config file; the paths it names are made.
	Config string
	// Supervisor names the first supervisor (keyring entry with every action).
	Supervisor string
	// Handoff is the folder for what must be copied off the box.
	Handoff string
	// Mosquitto is Mosquitto's config folder (/etc/mosquitto): the
	// password file tablectl.passwd and tablectl/acl go there; empty
	// leaves Mosquitto alone.
	Mosquitto string
	// MosquittoACL is the ACL template (deploy/mosquitto/acl, in the
	// package /usr/share/tablectl/mosquitto/acl), its table BAC-07.
	MosquittoACL string
	// Floor bridges the box's Mosquitto to the floor (a floor's table
	// only): FloorLogin is the table's floor login, the password file
	// tablectl-floor init made for it (bridge-<id>.password), FloorCA the
	// floor's CA (its ca.crt), FloorNodes every floor node's MQTT
	// listener (host:port), Bridge the bridge template
	// (deploy/mosquitto/bridge.conf). Init writes <Mosquitto>/conf.d/
	// tablectl-bridge.conf (0600: it holds the password) and copies the
	// CA beside the ACL.
	FloorLogin, FloorCA, Bridge string
	FloorNodes                  []string
	// Group owns the files the service reads ("tablectl"); empty, or not
	// running as root, leaves the group alone.
	Group string
	// Rand is the randomness of keys and passwords; nil is crypto/rand.
	Rand io.Reader
}

// Step is one thing init did or found.
type Step struct {
	Path string
	What string
	// Kept: the file was there and was left alone.
	Kept bool
}

// Handoff is something to copy off the box, and to whom.
type Handoff struct {
	Path, To string
}

// Report is what Run did.
type Report struct {
	Table   string
	Steps   []Step
	Handoff []Handoff
	// Next are the steps left to the operator.
	Next []string
}

// ErrNotPath: the checkpoint key is a PKCS#11 URI, made in its token.
var errToken = errors.New("the checkpoint key is in a PKCS#11 token: make it there (docs/audit.md)")

// Run makes what is missing.
func Run(o Options) (Report, error) {
	if o.Rand == nil {
		o.Rand = rand.Reader
	}
	c, _, err := config.Load(o.Config)
	if err != nil {
		return Report{}, err
	}
	if o.Supervisor == "" {
		return Report{}, errors.New("a first supervisor's name is needed (--supervisor)")
	}
	if o.Handoff == "" {
		return Report{}, errors.New("a handoff folder is needed (--handoff)")
	}
	p := &run{o: o, r: Report{Table: c.TableID}}
	p.gid = -1
	if o.Group != "" && os.Geteuid() == 0 {
		g, err := user.LookupGroup(o.Group)
		if err != nil {
			return Report{}, fmt.Errorf("group %s: %w", o.Group, err)
		}
		p.gid, _ = strconv.Atoi(g.Gid)
	}
	if err := os.MkdirAll(o.Handoff, 0o700); err != nil {
		return p.r, err
	}
	if err := os.Chmod(o.Handoff, 0o700); err != nil {
		return p.r, err
	}

	// The checkpoint key: its private half stays, its public half goes to
	// whoever verifies the trail.
	switch k := c.Audit.CheckpointKey; {
	case k == "":
		p.r.Next = append(p.r.Next, "audit.checkpoint_key is not set: the trail is not signed; set it and run init again")
	case pkcs11signer.IsURI(k):
		p.r.Next = append(p.r.Next, errToken.Error())
	default:
		pub := pubPath(k)
		if p.exists(k, "checkpoint key") {
			break
		}
		if err := os.MkdirAll(filepath.Dir(k), 0o750); err != nil {
			return p.r, err
		}
		if _, err := audit.WriteKeyPair(k, pub); err != nil {
			return p.r, fmt.Errorf("checkpoint key: %w", err)
		}
		if err := p.serviceReads(k); err != nil {
			return p.r, err
		}
		p.made(k, "checkpoint key (private; signs the trail's checkpoints, never leaves the box)")
		p.made(pub, "checkpoint public key")
		p.handoff(pub, "surveillance and the auditors: tablectl audit verify --pubkey FILE")
	}

	// Passwords: the controller's own, the pages' broker logins, the pit
	// view's HTTP password.
	pw := map[string]string{} // login -> password, for Mosquitto
	if m := c.MQTT; m != nil && m.Broker != "" {
		if err := p.secret(m.PasswordFile, "mqtt.password_file (the controller's broker password)", m.Username, pw); err != nil {
			return p.r, err
		}
	}
	if err := p.secret(c.HTTP.PitBrokerPasswordFile, "http.pit_broker_password_file", c.HTTP.PitBrokerUser, pw); err != nil {
		return p.r, err
	}
	if err := p.secret(c.HTTP.DisplayPasswordFile, "http.display_password_file", c.HTTP.DisplayUser, pw); err != nil {
		return p.r, err
	}
	if err := p.secret(c.HTTP.PitPasswordFile, "http.pit_password_file (the pit view's HTTP password)", "", nil); err != nil {
		return p.r, err
	}
	if c.HTTP.PitPasswordFile != "" && !p.kept(c.HTTP.PitPasswordFile) {
		p.handoff(c.HTTP.PitPasswordFile, "the pit supervisors (user "+c.HTTP.PitUser+" at the web display's /pit)")
	}

	// The security officer's key, which signs the keyring, and the first
	// supervisor.
	if c.MQTT != nil && c.MQTT.Keyring != "" {
		officer, err := p.officer(c.MQTT.KeyringAuthority)
		if err != nil {
			return p.r, err
		}
		if err := p.firstSupervisor(c.MQTT.Keyring, officer); err != nil {
			return p.r, err
		}
	}

	if h := c.HTTP; h.CertFile != "" {
		if _, err := os.Stat(h.CertFile); err != nil {
			p.r.Next = append(p.r.Next, fmt.Sprintf("put the table's TLS certificate and key at %s and %s (root, group %s, mode 0640) for the web display's HTTPS", h.CertFile, h.KeyFile, or(o.Group, "the service's")))
		}
	}
	if o.Mosquitto != "" && c.MQTT != nil && c.MQTT.Broker != "" {
		if err := p.mosquitto(c.TableID, pw); err != nil {
			return p.r, err
		}
		if err := p.clientConfig(c); err != nil {
			return p.r, err
		}
	}
	if o.FloorLogin != "" {
		if err := p.floorBridge(c.TableID); err != nil {
			return p.r, fmt.Errorf("the bridge to the floor: %w", err)
		}
	}
	return p.r, nil
}

// BridgeFile is where init writes the box's bridge to the floor, under
// Mosquitto's config folder (Debian's mosquitto.conf includes conf.d).
const BridgeFile = "conf.d/tablectl-bridge.conf"

// floorBridge writes the box's Mosquitto bridge to the floor from the
// table's floor login (internal/floorbridge: the same generator as the
// floor's tests' bridges), and copies the floor's CA it verifies the
// floor's nodes with.
func (p *run) floorBridge(table string) error {
	o := p.o
	switch {
	case o.Mosquitto == "":
		return errors.New("the bridge is Mosquitto's: --mosquitto is needed")
	case o.FloorCA == "" || len(o.FloorNodes) == 0 || o.Bridge == "":
		return errors.New("--floor-login needs --floor-ca (the floor's ca.crt), --floor-node (each node's MQTT listener, host:8883) and the bridge template")
	}
	user := strings.TrimSuffix(filepath.Base(o.FloorLogin), ".password")
	if want := "bridge-" + table; user != want {
		return fmt.Errorf("%s is the floor login %s's; this box is table %s, whose login is %s (tablectl-floor init's %s.password)", o.FloorLogin, user, table, want, want)
	}
	b, err := os.ReadFile(o.FloorLogin)
	if err != nil {
		return err
	}
	password := string(bytes.TrimSpace(b))
	caPEM, err := os.ReadFile(o.FloorCA)
	if err != nil {
		return err
	}
	if blk, _ := pem.Decode(caPEM); blk == nil || blk.Type != "CERTIFICATE" {
		return fmt.Errorf("%s: no PEM certificate (the floor's ca.crt)", o.FloorCA)
	}
	tmpl, err := os.ReadFile(o.Bridge)
	if err != nil {
		return err
	}
	ca := filepath.Join(o.Mosquitto, "tablectl", "floor-ca.crt")
	conf := filepath.Join(o.Mosquitto, BridgeFile)
	text, err := floorbridge.Conf(string(tmpl), floorbridge.Options{Table: table, Addrs: o.FloorNodes, User: user, Password: password, CAFile: ca})
	if err != nil {
		return err
	}
	if !p.exists(ca, "the floor's CA") {
		if err := os.MkdirAll(filepath.Dir(ca), 0o755); err != nil {
			return err
		}
		if err := writeNew(ca, caPEM, 0o644); err != nil {
			return err
		}
		p.made(ca, "the floor's CA: the bridge verifies the floor's nodes with it")
	}
	if p.exists(conf, "the bridge to the floor (remove it to have it written again)") {
		return nil
	}
	if err := os.MkdirAll(filepath.Dir(conf), 0o755); err != nil {
		return err
	}
	if err := writeNew(conf, []byte(text), 0o600); err != nil {
		return err
	}
	if err := mosquittoOwns(conf); err != nil {
		return err
	}
	p.made(conf, fmt.Sprintf("the bridge to the floor: %s over TLS as %s", strings.Join(o.FloorNodes, ", "), user))
	p.r.Next = append(p.r.Next, fmt.Sprintf("systemctl restart mosquitto: the bridge to the floor starts; its state is on tablectl/%s/bridge/state (1 up); then delete %s here", table, o.FloorLogin))
	return nil
}

// mosquittoOwns gives path to the mosquitto user (as root, when there is
// one): Mosquitto reads it again on a reload, after it dropped root.
func mosquittoOwns(path string) error {
	u, err := user.Lookup("mosquitto")
	if err != nil || os.Geteuid() != 0 {
		return nil
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	return os.Chown(path, uid, gid)
}

// clientConfig writes the supervisors' client config beside the
// controller's (client.json, root's, 0600): the box's broker as the
// controller reaches it, the table, and the supervisors' broker login
// whose password init handed off, so that `tablectl suspend --key FILE`
// on the box needs nothing more.
func (p *run) clientConfig(c config.Config) error {
	path := filepath.Join(filepath.Dir(p.o.Config), "client.json")
	if p.exists(path, "the supervisors' client config") {
		return nil
	}
	login := "supervisor-" + c.TableID
	pass := filepath.Join(p.o.Handoff, login+".password")
	if _, err := os.Stat(pass); err != nil {
		p.r.Next = append(p.r.Next, fmt.Sprintf("no %s: write %s by hand for the supervisors' commands on the box (docs/operations.md)", pass, path))
		return nil
	}
	abs, err := filepath.Abs(pass)
	if err != nil {
		return err
	}
	cc := supervisor.ClientConfig{Broker: c.MQTT.Broker, Table: c.TableID, Prefix: c.MQTT.Prefix, Username: login, PasswordFile: abs,
		CAFile: c.MQTT.CAFile}
	if err := supervisor.WriteClientConfig(path, cc); err != nil {
		return fmt.Errorf("client config: %w", err)
	}
	p.made(path, "the supervisors' client config: tablectl suspend, void, ... on this box reach "+c.MQTT.Broker+" as "+login)
	return nil
}

type run struct {
	o   Options
	r   Report
	gid int
}

// officer makes the security officer's key pair when the authority's
// public key (mqtt.keyring_authority) is missing: the public half there,
// the private half to the handoff folder, for the officer alone. It
// returns the private key when this run made it ("" when the authority
// was there already: the officer holds the key, off the box).
func (p *run) officer(authority string) (string, error) {
	if authority == "" || p.exists(authority, "keyring authority (the security officer's public key)") {
		return "", nil
	}
	priv, pub, err := signedcmd.GenerateAuthority(p.o.Handoff)
	if err != nil {
		return "", fmt.Errorf("the security officer's key: %w", err)
	}
	b, err := os.ReadFile(pub)
	if err != nil {
		return "", err
	}
	if err := p.write(authority, b); err != nil {
		return "", err
	}
	p.made(authority, "keyring authority (the security officer's public key): the controller takes only a keyring it signed")
	p.made(priv, "the security officer's private key (signs the supervisors' keyring)")
	p.handoff(priv, "the security officer alone, kept off every table box (tablectl keyring sign); then delete it here")
	return priv, nil
}

// firstSupervisor makes the keyring with a first supervisor's key (when
// the keyring is missing), signed with officer; without it (the officer
// holds the key off the box) the keyring is a draft, and the officer signs
// it before the table starts.
func (p *run) firstSupervisor(keyring, officer string) error {
	if p.exists(keyring, "supervisors' keyring") {
		return nil
	}
	name := p.o.Supervisor
	priv, pub, entry, err := signedcmd.GenerateKey(p.o.Handoff, name)
	if err != nil {
		return fmt.Errorf("supervisor key: %w", err)
	}
	var kr bytes.Buffer
	fmt.Fprintf(&kr, "{\n  \"keys\": [\n    %s\n  ]\n}\n", bytes.TrimSpace(entry))
	doc := kr.Bytes()
	if officer != "" {
		key, err := audit.LoadPrivateKey(officer)
		if err != nil {
			return err
		}
		if doc, _, err = signedcmd.SignKeyring(doc, key, 0, time.Now()); err != nil {
			return fmt.Errorf("keyring: %w", err)
		}
	} else if _, err := signedcmd.ParseKeyring(doc); err != nil {
		return fmt.Errorf("keyring: %w", err)
	}
	if err := p.write(keyring, doc); err != nil {
		return err
	}
	if officer != "" {
		p.made(keyring, "supervisors' keyring, with "+name+" (every action), signed by the security officer's key")
	} else {
		p.made(keyring, "supervisors' keyring, with "+name+" (every action), UNSIGNED")
		p.r.Next = append(p.r.Next, fmt.Sprintf("the keyring %s is a draft: the security officer signs it (tablectl keyring sign --keyring FILE --key officer.key) and it is installed back before the table starts; the controller refuses it until then", keyring))
	}
	p.made(priv, "supervisor "+name+"'s private key")
	p.handoff(priv, name+" alone (it signs their commands); then delete it here")
	p.made(pub, "supervisor "+name+"'s public key")
	return nil
}

func pubPath(key string) string {
	ext := filepath.Ext(key)
	return key[:len(key)-len(ext)] + ".pub"
}

func (p *run) made(path, what string) { p.r.Steps = append(p.r.Steps, Step{Path: path, What: what}) }

func (p *run) handoff(path, to string) {
	p.r.Handoff = append(p.r.Handoff, Handoff{Path: path, To: to})
}

func (p *run) exists(path, what string) bool {
	if _, err := os.Lstat(path); err == nil {
		p.r.Steps = append(p.r.Steps, Step{Path: path, What: what, Kept: true})
		return true
	}
	return false
}

func (p *run) kept(path string) bool {
	for _, s := range p.r.Steps {
		if s.Path == path {
			return s.Kept
		}
	}
	return false
}

// serviceReads makes path root's, mode 0640, group Options.Group.
func (p *run) serviceReads(path string) error {
	if err := os.Chmod(path, 0o640); err != nil {
		return err
	}
	if p.gid >= 0 {
		return os.Chown(path, 0, p.gid)
	}
	return nil
}

// write creates path (never over a file) for the service to read.
func (p *run) write(path string, data []byte) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o750); err != nil {
		return err
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return p.serviceReads(path)
}

// secret makes a password file the service reads (when path is set and
// missing) and notes login's password for Mosquitto; a kept file's
// password is read for Mosquitto too.
func (p *run) secret(path, what, login string, pw map[string]string) error {
	if path == "" {
		return nil
	}
	if p.exists(path, what) {
		if login != "" && pw != nil {
			if b, err := os.ReadFile(path); err == nil {
				pw[login] = string(bytes.TrimSpace(b))
			}
		}
		return nil
	}
	s, err := p.password()
	if err != nil {
		return err
	}
	if err := p.write(path, []byte(s+"\n")); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	p.made(path, what)
	if login != "" && pw != nil {
		pw[login] = s
	}
	return nil
}

// password is 24 random bytes, base64url: 192 bits.
func (p *run) password() (string, error) {
	b := make([]byte, 24)
	if _, err := io.ReadFull(p.o.Rand, b); err != nil {
		return "", err
	}
	return base64.RawURLEncoding.EncodeToString(b), nil
}

// mosquitto writes the table's password file and ACL for Debian's
// Mosquitto: the controller's and the pit's logins with the passwords
// above, and one login each for the first screen, the supervisors'
// command line and replay, whose passwords go to the handoff folder.
func (p *run) mosquitto(table string, pw map[string]string) error {
	passwd := filepath.Join(p.o.Mosquitto, "tablectl.passwd")
	if !p.exists(passwd, "Mosquitto's password file") {
		logins := []string{}
		for l := range pw {
			logins = append(logins, l)
		}
		for _, l := range []string{"display-1", "supervisor-" + table, "replay-" + table, "pit-" + table} {
			if _, ok := pw[l]; ok {
				continue
			}
			f := filepath.Join(p.o.Handoff, l+".password")
			if b, err := os.ReadFile(f); err == nil {
				// Made by an earlier run that stopped before the file.
				pw[l] = string(bytes.TrimSpace(b))
			} else {
				s, err := p.password()
				if err != nil {
					return err
				}
				if err := writeNew(f, []byte(s+"\n"), 0o600); err != nil {
					return err
				}
				pw[l] = s
				p.made(f, "broker password of "+l)
			}
			logins = append(logins, l)
			p.handoff(f, handoffTo(l))
		}
		if err := os.MkdirAll(p.o.Mosquitto, 0o755); err != nil {
			return err
		}
		var b bytes.Buffer
		for _, l := range sorted(logins) {
			line, err := MosquittoHash(l, pw[l], p.o.Rand)
			if err != nil {
				return err
			}
			b.WriteString(line + "\n")
		}
		if err := writeNew(passwd, b.Bytes(), 0o600); err != nil {
			return err
		}
		if err := mosquittoOwns(passwd); err != nil {
			return err
		}
		p.made(passwd, "Mosquitto's password file: "+fmt.Sprint(sorted(logins)))
	}
	acl := filepath.Join(p.o.Mosquitto, "tablectl", "acl")
	if p.o.MosquittoACL != "" && !p.exists(acl, "Mosquitto's ACL") {
		tmpl, err := os.ReadFile(p.o.MosquittoACL)
		if err != nil {
			return fmt.Errorf("ACL template: %w", err)
		}
		if err := os.MkdirAll(filepath.Dir(acl), 0o755); err != nil {
			return err
		}
		if err := writeNew(acl, bytes.ReplaceAll(tmpl, []byte("BAC-07"), []byte(table)), 0o644); err != nil {
			return err
		}
		p.made(acl, "Mosquitto's ACL for table "+table)
	}
	p.r.Next = append(p.r.Next,
		"Mosquitto: install /usr/share/tablectl/mosquitto/mosquitto.conf as /etc/mosquitto/conf.d/tablectl.conf once its TLS certificate and key are in /etc/mosquitto/certs (or drop its TLS listeners), then: systemctl restart mosquitto")
	return nil
}

func handoffTo(login string) string {
	switch {
	case login == "display-1":
		return "the first screen (its broker login display-1)"
	case login[:4] == "pit-":
		return "the pit system (its broker login " + login + ")"
	case len(login) > 11 && login[:11] == "supervisor-":
		return "the supervisors' workstation, with a client config like this box's client.json (tablectl suspend --client-config FILE ...); this box's own commands use it here"
	default:
		return "surveillance (tablectl replay --publish --username " + login + ")"
	}
}

func sorted(s []string) []string {
	out := append([]string{}, s...)
	for i := range out {
		for j := i + 1; j < len(out); j++ {
			if out[j] < out[i] {
				out[i], out[j] = out[j], out[i]
			}
		}
	}
	return out
}

func writeNew(path string, data []byte, perm os.FileMode) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// MosquittoHash is one line of a Mosquitto 2 password file, as
// mosquitto_passwd writes it: login:$7$101$salt$hash, PBKDF2-SHA512 with
// 101 iterations, a 12-byte salt and a 64-byte hash, base64.
func MosquittoHash(login, password string, rnd io.Reader) (string, error) {
	salt := make([]byte, 12)
	if _, err := io.ReadFull(rnd, salt); err != nil {
		return "", err
	}
	h, err := pbkdf2.Key(sha512.New, password, salt, 101, 64)
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("%s:$7$101$%s$%s", login, base64.StdEncoding.EncodeToString(salt), base64.StdEncoding.EncodeToString(h)), nil
}

// Print writes the report for the operator.
func (r Report) Print(w io.Writer) {
	fmt.Fprintf(w, "table %s\n\n", r.Table)
	for _, s := range r.Steps {
		if s.Kept {
			fmt.Fprintf(w, "  kept  %s (%s: exists, not overwritten)\n", s.Path, s.What)
		} else {
			fmt.Fprintf(w, "  made  %s (%s)\n", s.Path, s.What)
		}
	}
	if len(r.Handoff) > 0 {
		fmt.Fprintln(w, "\ncopy off the box:")
		for _, h := range r.Handoff {
			fmt.Fprintf(w, "  %s\n      -> %s\n", h.Path, h.To)
		}
	}
	if len(r.Next) > 0 {
		fmt.Fprintln(w, "\nthen:")
		for _, n := range r.Next {
			fmt.Fprintf(w, "  - %s\n", n)
		}
	}
}

// JSON is the report as JSON, for scripts.
func (r Report) JSON() ([]byte, error) { return json.MarshalIndent(r, "", "  ") }

func or(s, d string) string {
	if s == "" {
		return d
	}
	return s
}
