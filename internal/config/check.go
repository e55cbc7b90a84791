package config

import (
	"bytes"
	"crypto/tls"
	"encoding"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"

	"github.com/tablectl/tablectl/audit"
	"github.com/tablectl/tablectl/coup"
	"github.com/tablectl/tablectl/device"
	"github.com/tablectl/tablectl/internal/selfcheck"
	"github.com/tablectl/tablectl/internal/smallfile"
	"github.com/tablectl/tablectl/signedcmd"
)

// Finding is one thing `tablectl config check` says of a config file: an
// error (the controller would not start) or a warning, at a key path
// ("shoe.port.baud") and, when known, a line and column.
type Finding struct {
	Line, Col int
	Key       string
	Warning   bool
	Message   string
}

func (f Finding) String() string {
	var b strings.Builder
	if f.Line > 0 {
		fmt.Fprintf(&b, "%d:%d: ", f.Line, f.Col)
	}
	if f.Warning {
		b.WriteString("warning: ")
	} else {
		b.WriteString("error: ")
	}
	if f.Key != "" {
		b.WriteString(f.Key + ": ")
	}
	b.WriteString(f.Message)
	return b.String()
}

// ConfigError is a config that does not parse: its findings, each with
// line, column and key path.
type ConfigError struct{ Findings []Finding }

func (e *ConfigError) Error() string {
	s := make([]string, len(e.Findings))
	for i, f := range e.Findings {
		s[i] = f.String()
	}
	return strings.Join(s, "; ")
}

// Check is `tablectl config check`: everything the controller would
// refuse at start (JSON syntax, unknown keys, values of the wrong type or
// form, missing or unreadable files the config names, a trail folder it
// cannot write), the self-check it would run at start (the running
// executable and this file against the signed manifest: a failure is an
// error, since the table would start but refuse to deal), and what it would
// start with but an operator should know (no checkpoint key: the trail is
// unsigned; no keyring: every command is refused; an HTTP listener off
// loopback without TLS; no manifest with self_check.require off: an
// unsigned development build). ok is true when the controller would start
// and deal.
func Check(path string) (findings []Finding, ok bool) {
	data, err := smallfile.Read(path, MaxConfig)
	if err != nil {
		return []Finding{{Message: err.Error()}}, false
	}
	findings = Locate(data)
	if len(findings) > 0 {
		return findings, false
	}
	c, _, err := Parse(data, filepath.Dir(path))
	idx := keyOffsets(data)
	if err != nil {
		for _, e := range flatten(err) {
			findings = append(findings, at(data, idx, Finding{Message: strings.TrimPrefix(e.Error(), "config: ")}))
		}
	}
	findings = append(findings, checkFiles(c)...)
	findings = append(findings, checkDevice(c.Shoe.Port)...)
	findings = append(findings, checkSelf(c.SelfCheck, path)...)
	for i, f := range findings {
		findings[i] = at(data, idx, f)
	}
	// In the file's order, as an editor shows it; what has no place in
	// the file (a key left at its default) after.
	sort.SliceStable(findings, func(i, j int) bool {
		a, b := findings[i], findings[j]
		switch {
		case a.Line == 0 || b.Line == 0:
			return a.Line != 0 && b.Line == 0
		case a.Line != b.Line:
			return a.Line < b.Line
		}
		return a.Col < b.Col
	})
	ok = true
	for _, f := range findings {
		if !f.Warning {
			ok = false
		}
	}
	return findings, ok
}

// flatten splits an errors.Join.
func flatten(err error) []error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		var out []error
		for _, e := range j.Unwrap() {
			out = append(out, flatten(e)...)
		}
		return out
	}
	if err == nil {
		return nil
	}
	return []error{err}
}

// at puts a finding at its key's line and column, taking the key from the
// message's start ("shoe.port: ...") when it has none.
func at(data []byte, idx map[string]int64, f Finding) Finding {
	if f.Key == "" {
		best := ""
		for k := range idx {
			if (strings.HasPrefix(f.Message, k+":") || strings.HasPrefix(f.Message, k+" ")) && len(k) > len(best) {
				best = k
			}
		}
		if best != "" {
			f.Key = best
			f.Message = strings.TrimSpace(strings.TrimPrefix(strings.TrimPrefix(f.Message, best), ":"))
		}
	}
	if f.Line == 0 && f.Key != "" {
		if off, ok := idx[f.Key]; ok {
			f.Line, f.Col = lineCol(data, off)
		}
	}
	return f
}

func checkFiles(c Config) []Finding {
	var fs []Finding
	warn := func(key, msg string) { fs = append(fs, Finding{Key: key, Warning: true, Message: msg}) }
	fail := func(key string, err error) { fs = append(fs, Finding{Key: key, Message: err.Error()}) }
	if c.Audit.CheckpointKey == "" {
		warn("audit.checkpoint_key", "not set: the trail will not be signed (no checkpoints); make a key with tablectl init or tablectl audit keygen")
	} else if !strings.HasPrefix(c.Audit.CheckpointKey, "pkcs11:") {
		if _, err := audit.LoadPrivateKey(c.Audit.CheckpointKey); err != nil {
			fail("audit.checkpoint_key", err)
		}
	}
	if c.Audit.Path != "" {
		dir := filepath.Dir(c.Audit.Path)
		if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
			fail("audit.path", fmt.Errorf("the trail's folder %s does not exist", dir))
		}
	}
	if c.Audit.Dir != "" {
		dir := filepath.Dir(c.Audit.Dir)
		if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
			fail("audit.dir", fmt.Errorf("the folder %s the trail's directory goes in does not exist", dir))
		}
	}
	secret := func(key, path string) {
		if path == "" {
			return
		}
		if _, err := smallfile.Secret(path); err != nil {
			fail(key, err)
		}
	}
	secret("http.display_password_file", c.HTTP.DisplayPasswordFile)
	secret("http.pit_broker_password_file", c.HTTP.PitBrokerPasswordFile)
	secret("http.pit_password_file", c.HTTP.PitPasswordFile)
	if (c.HTTP.CertFile == "") != (c.HTTP.KeyFile == "") {
		fail("http.cert_file", errors.New("http.cert_file and http.key_file go together"))
	} else if c.HTTP.CertFile != "" {
		if _, err := LoadHTTPCert(c.HTTP); err != nil {
			fail("http.cert_file", err)
		}
	}
	if l := c.HTTP.Listen; l != "" && c.HTTP.CertFile == "" && !Loopback(l) {
		warn("http.listen", l+" is reachable off this box without TLS: set http.cert_file and http.key_file, or put a TLS proxy in front (docs/operations.md)")
	}
	if m := c.MQTT; m != nil {
		secret("mqtt.password_file", m.PasswordFile)
		for k, p := range map[string]string{"mqtt.ca_file": m.CAFile, "mqtt.cert_file": m.CertFile, "mqtt.key_file": m.KeyFile} {
			if p != "" {
				if _, err := os.Stat(p); err != nil {
					fail(k, err)
				}
			}
		}
		if m.Keyring == "" {
			warn("mqtt.keyring", "not set: every supervisor command will be refused")
		} else if auth, err := signedcmd.LoadAuthorities(m.KeyringAuthority); err != nil {
			fail("mqtt.keyring_authority", err)
		} else if _, _, err := signedcmd.LoadSignedKeyring(m.Keyring, auth); err != nil {
			fail("mqtt.keyring", err)
		}
	} else {
		warn("mqtt.disabled", "MQTT is off: nothing is published and no command is taken")
	}
	sort.SliceStable(fs, func(i, j int) bool { return fs[i].Key < fs[j].Key })
	return fs
}

// DeviceMissing is the start of the warning for a shoe port that is not
// there (config check's last line says the table would not deal yet).
const DeviceMissing = "not there: "

// checkDevice says whether the shoe's port is there. A missing one is a
// warning, not an error: the controller starts and waits for the shoe,
// which may be unplugged while the box is set up; but the table deals
// nothing until it is there.
func checkDevice(p device.Config) []Finding {
	if p.Path == "" {
		return nil
	}
	fi, err := os.Stat(p.Path)
	switch {
	case err != nil && errors.Is(err, os.ErrNotExist):
		return []Finding{{Key: "shoe.port.path", Warning: true, Message: DeviceMissing + p.Path + " does not exist: the controller would start and wait for it, and deal nothing until it is there (is the shoe plugged in and powered? tablectl ports lists the serial ports; a udev rule names it, deploy/99-tablectl-shoe.rules)"}}
	case err != nil:
		return []Finding{{Key: "shoe.port.path", Warning: true, Message: DeviceMissing + err.Error()}}
	case fi.Mode()&os.ModeCharDevice == 0:
		return []Finding{{Key: "shoe.port.path", Message: p.Path + " is not a serial device (" + fi.Mode().Type().String() + ")"}}
	}
	return nil
}

// didYouMean suggests the key meant by an unknown key path: a key of the
// same section a letter or two away, or the same key in another section.
func didYouMean(path string) string {
	parent, name := "", path
	if i := strings.LastIndexByte(path, '.'); i >= 0 {
		parent, name = path[:i], path[i+1:]
	}
	best, bestD := "", 3
	if name == "" {
		return ""
	}
	for _, k := range Keys() {
		kp, kn := "", k
		if i := strings.LastIndexByte(k, '.'); i >= 0 {
			kp, kn = k[:i], k[i+1:]
		}
		d := editDistance(name, kn)
		switch {
		case kp == parent && d < bestD && d <= max(1, len(name)/4):
			best, bestD = k, d
		case kp != parent && d == 0 && bestD > 0:
			best, bestD = k, 0
		}
	}
	if best == "" {
		return ""
	}
	return fmt.Sprintf(" (did you mean %s?)", best)
}

// editDistance is the Levenshtein distance between a and b.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// checkSelf runs the start-up self-check as the controller would with the
// config at path, this program being the executable (config check runs
// the installed tablectl, the service's binary).
func checkSelf(s SelfCheckSection, path string) []Finding {
	if err := s.Complete(""); err != nil {
		return nil // Parse has said so
	}
	if abs, err := filepath.Abs(path); err == nil {
		path = abs
	}
	res := selfcheck.Checker{Manifest: s.Manifest, PublicKey: s.PublicKey, Require: s.Require, Config: path}.Check()
	switch res.Result {
	case coup.SelfCheckOK:
		return nil
	case coup.SelfCheckUnsigned:
		return []Finding{{Key: "self_check.require", Warning: true, Message: "off, and no manifest at " + s.Manifest +
			": the controller runs as an unsigned development build; a production table ships its signed manifest and sets require"}}
	}
	hint := ""
	switch {
	case strings.Contains(res.Detail, "no manifest"):
		hint = " (self_check.require is on: the package ships the manifest signed with the build key; docs/operations.md, Self-authentication)"
	case strings.Contains(res.Detail, "config file"):
		hint = " (a changed config needs a manifest re-signed by the build key's holder; docs/operations.md, Self-authentication)"
	}
	return []Finding{{Key: "self_check", Message: "the self-check would fail, so the table would start but refuse to deal (self_check_failed): " + res.Detail + hint}}
}

// Loopback says whether addr (host:port) listens on loopback only.
func Loopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// Locate finds what makes a config document fail to decode, each at its
// line and column with its key path: JSON syntax, keys the config does not
// have, and values of the wrong type or form (a bad duration, "baud":
// "fast"). Nil when the document decodes.
func Locate(data []byte) []Finding {
	if err := syntaxCheck(data); err != nil {
		return []Finding{*err}
	}
	var fs []Finding
	walkValue(data, reflect.TypeOf(Config{}), "", func(path string, off int64, t reflect.Type, raw json.RawMessage, unknown bool) {
		line, col := lineCol(data, off)
		if unknown {
			fs = append(fs, Finding{Line: line, Col: col, Key: path, Message: "unknown key" + didYouMean(path)})
			return
		}
		if t == nil {
			return
		}
		v := reflect.New(t)
		if err := json.Unmarshal(raw, v.Interface()); err != nil {
			fs = append(fs, Finding{Line: line, Col: col, Key: path, Message: typeMessage(err, t)})
		}
	})
	return fs
}

func typeMessage(err error, t reflect.Type) string {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		return fmt.Sprintf("a JSON %s where %s is wanted", te.Value, kindName(t))
	}
	return strings.TrimPrefix(err.Error(), "json: ")
}

func kindName(t reflect.Type) string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.Bool:
		return "true or false"
	case reflect.Int, reflect.Int64, reflect.Int32, reflect.Uint, reflect.Uint64, reflect.Uint32, reflect.Uint16, reflect.Uint8, reflect.Int16, reflect.Int8:
		return "an integer"
	case reflect.Float64, reflect.Float32:
		return "a number"
	case reflect.String:
		return "a string"
	case reflect.Slice:
		return "a list"
	case reflect.Struct, reflect.Map:
		return "an object"
	}
	return t.String()
}

func syntaxCheck(data []byte) *Finding {
	dec := json.NewDecoder(bytes.NewReader(data))
	var v any
	if err := dec.Decode(&v); err != nil {
		var se *json.SyntaxError
		off := dec.InputOffset()
		msg := strings.TrimPrefix(err.Error(), "json: ")
		if errors.As(err, &se) {
			off = se.Offset - 1 // the offending byte
		} else if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			off, msg = int64(len(data)), "the document ends early"
		}
		line, col := lineCol(data, off)
		return &Finding{Line: line, Col: col, Message: "JSON: " + msg}
	}
	if _, err := dec.Token(); err != io.EOF {
		line, col := lineCol(data, dec.InputOffset())
		return &Finding{Line: line, Col: col, Message: "text after the JSON document"}
	}
	if _, ok := v.(map[string]any); !ok {
		return &Finding{Line: 1, Col: 1, Message: "the config is a JSON object"}
	}
	return nil
}

// lineCol is the 1-based line and column (in bytes) of a byte offset.
func lineCol(data []byte, off int64) (int, int) {
	if off > int64(len(data)) {
		off = int64(len(data))
	}
	if off < 0 {
		off = 0
	}
	before := data[:off]
	line := bytes.Count(before, []byte("\n")) + 1
	col := int(off) - bytes.LastIndexByte(before, '\n')
	return line, col
}

var unmarshalerType = reflect.TypeOf((*json.Unmarshaler)(nil)).Elem()
var textUnmarshalerType = reflect.TypeOf((*encoding.TextUnmarshaler)(nil)).Elem()

// leaf reports whether a config type is decoded as a whole (not walked
// into): anything but a plain struct or a pointer to one.
func leaf(t reflect.Type) bool {
	if t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t.Kind() != reflect.Struct {
		return true
	}
	pt := reflect.PointerTo(t)
	return pt.Implements(unmarshalerType) || pt.Implements(textUnmarshalerType)
}

// fields are a struct type's JSON keys.
func fields(t reflect.Type) map[string]reflect.Type {
	if t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	out := map[string]reflect.Type{}
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "-" {
			continue
		}
		if name == "" {
			name = f.Name
		}
		out[name] = f.Type
	}
	return out
}

// walkValue visits each key of the document at data against the config
// type t: visit hears each leaf key's path, offset, type and raw value,
// and each unknown key.
func walkValue(data []byte, t reflect.Type, prefix string, visit func(path string, off int64, t reflect.Type, raw json.RawMessage, unknown bool)) {
	dec := json.NewDecoder(bytes.NewReader(data))
	walkObject(dec, data, 0, t, prefix, visit)
}

func walkObject(dec *json.Decoder, data []byte, base int64, t reflect.Type, prefix string, visit func(string, int64, reflect.Type, json.RawMessage, bool)) {
	tok, err := dec.Token()
	if err != nil || tok != json.Delim('{') {
		return
	}
	fs := fields(t)
	for dec.More() {
		keyOff := dec.InputOffset()
		k, err := dec.Token()
		if err != nil {
			return
		}
		key, _ := k.(string)
		path := key
		if prefix != "" {
			path = prefix + "." + key
		}
		keyAt := base + keyOff + int64(skipSpace(data[base+keyOff:]))
		ft, known := fs[key]
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return
		}
		switch {
		case !known:
			visit(path, keyAt, nil, nil, true)
		case leaf(ft):
			visit(path, keyAt, ft, raw, false)
		case bytes.Equal(bytes.TrimSpace(raw), []byte("null")):
		default:
			if bytes.TrimSpace(raw)[0] != '{' {
				visit(path, keyAt, ft, raw, false)
				continue
			}
			// Offsets inside raw are relative to where the value starts.
			valOff := base + dec.InputOffset() - int64(len(raw))
			walkObject(json.NewDecoder(bytes.NewReader(raw)), data, valOff, ft, path, visit)
		}
	}
}

func skipSpace(b []byte) int {
	n := 0
	for n < len(b) && (b[n] == ' ' || b[n] == '\t' || b[n] == '\n' || b[n] == '\r' || b[n] == ',' || b[n] == '{') {
		n++
	}
	return n
}

// keyOffsets maps every key path of a document to its key's offset.
func keyOffsets(data []byte) map[string]int64 {
	idx := map[string]int64{}
	var walk func(dec *json.Decoder, base int64, prefix string)
	walk = func(dec *json.Decoder, base int64, prefix string) {
		if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
			return
		}
		for dec.More() {
			keyOff := dec.InputOffset()
			k, err := dec.Token()
			if err != nil {
				return
			}
			key, _ := k.(string)
			path := key
			if prefix != "" {
				path = prefix + "." + key
			}
			idx[path] = base + keyOff + int64(skipSpace(data[base+keyOff:]))
			var raw json.RawMessage
			if err := dec.Decode(&raw); err != nil {
				return
			}
			if t := bytes.TrimSpace(raw); len(t) > 0 && t[0] == '{' {
				walk(json.NewDecoder(bytes.NewReader(raw)), base+dec.InputOffset()-int64(len(raw)), path)
			}
		}
	}
	walk(json.NewDecoder(bytes.NewReader(data)), 0, "")
	return idx
}

// LoadHTTPCert reads the HTTP listener's certificate and key.
func LoadHTTPCert(h HTTPSection) (tls.Certificate, error) {
	cert, err := tls.LoadX509KeyPair(h.CertFile, h.KeyFile)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("http.cert_file, http.key_file: %w", err)
	}
	return cert, nil
}

// Keys are every key path of the config file, as documented in
// docs/configuration.md (a test holds them together).
func Keys() []string { return configKeys(reflect.TypeOf(Config{}), "") }

func configKeys(t reflect.Type, prefix string) []string {
	var out []string
	for name, ft := range fields(t) {
		p := name
		if prefix != "" {
			p = prefix + "." + name
		}
		out = append(out, p)
		if !leaf(ft) {
			out = append(out, configKeys(ft, p)...)
		}
	}
	sort.Strings(out)
	return out
}
