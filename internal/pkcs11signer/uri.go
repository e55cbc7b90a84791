package pkcs11signer

import (
	"errors"
	"fmt"
	"net/url"
	"path/filepath"
	"strings"
)

// Scheme starts a PKCS#11 URI (RFC 7512).
const Scheme = "pkcs11:"

// IsURI reports whether ref names a key in a token (a PKCS#11 URI) rather
// than a file.
func IsURI(ref string) bool { return strings.HasPrefix(ref, Scheme) }

// URI is the part of an RFC 7512 PKCS#11 URI that names one Ed25519 key
// pair in one token: which module to load, which token, which object, and
// where the user PIN is.
type URI struct {
	// ModulePath is the PKCS#11 library to load (query attribute
	// module-path), an absolute path.
	ModulePath string
	// Token and Serial pick the token by label and serial number (path
	// attributes token and serial); at least one is set.
	Token, Serial string
	// Object and ID pick the key pair by CKA_LABEL and CKA_ID (path
	// attributes object and id); at least one is set. The private key and
	// its public key carry the same label and id.
	Object string
	ID     []byte
	// PINFile is the file holding the user PIN (query attribute
	// pin-source); empty logs in to no token, which finds public keys only.
	PINFile string
}

// The attributes ParseURI takes; any other is refused rather than ignored,
// so a URI never means less than it says.
var (
	pathAttrs  = []string{"token", "serial", "object", "id", "type"}
	queryAttrs = []string{"module-path", "pin-source"}
)

// ParseURI parses the PKCS#11 URI s. It takes the path attributes token,
// serial, object, id and type (private or public: either names the pair)
// and the query attributes module-path and pin-source (a file: URI or an
// absolute path), percent-encoded as RFC 7512 says; any other attribute,
// pin-value among them, is an error.
func ParseURI(s string) (URI, error) {
	if !IsURI(s) {
		return URI{}, fmt.Errorf("pkcs11 URI %.80q: does not start with %q", s, Scheme)
	}
	path, query, _ := strings.Cut(strings.TrimPrefix(s, Scheme), "?")
	pa, err := attrs(path, ";", pathAttrs)
	if err != nil {
		return URI{}, fmt.Errorf("pkcs11 URI: %w", err)
	}
	qa, err := attrs(query, "&", queryAttrs)
	if err != nil {
		return URI{}, fmt.Errorf("pkcs11 URI: %w", err)
	}
	u := URI{ModulePath: qa["module-path"], Token: pa["token"], Serial: pa["serial"], Object: pa["object"]}
	if id, ok := pa["id"]; ok {
		if id == "" {
			return URI{}, errors.New("pkcs11 URI: id is empty")
		}
		u.ID = []byte(id)
	}
	if t, ok := pa["type"]; ok && t != "private" && t != "public" {
		return URI{}, fmt.Errorf("pkcs11 URI: type=%.40q, want private or public (the key pair)", t)
	}
	switch {
	case u.ModulePath == "":
		return URI{}, errors.New("pkcs11 URI: module-path is required (e.g. ?module-path=/usr/lib/softhsm/libsofthsm2.so)")
	case !filepath.IsAbs(u.ModulePath):
		return URI{}, fmt.Errorf("pkcs11 URI: module-path %q is not an absolute path", u.ModulePath)
	case u.Token == "" && u.Serial == "":
		return URI{}, errors.New("pkcs11 URI: name the token (token= or serial=)")
	case u.Object == "" && u.ID == nil:
		return URI{}, errors.New("pkcs11 URI: name the key (object= or id=)")
	}
	if src, ok := qa["pin-source"]; ok {
		if u.PINFile, err = pinFile(src); err != nil {
			return URI{}, err
		}
	}
	return u, nil
}

// attrs splits s on sep into name=value pairs, percent-decoding the values;
// a name outside allowed, or given twice, is an error.
func attrs(s, sep string, allowed []string) (map[string]string, error) {
	m := map[string]string{}
	if s == "" {
		return m, nil
	}
	for _, kv := range strings.Split(s, sep) {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return nil, fmt.Errorf("attribute %.80q: want name=value", kv)
		}
		if k == "pin-value" {
			return nil, errors.New("pin-value is refused: keep the PIN out of the config, in a file named by pin-source=file:/path")
		}
		known := false
		for _, a := range allowed {
			known = known || a == k
		}
		if !known {
			return nil, fmt.Errorf("attribute %.40q is not supported here (supported: %s)", k, strings.Join(allowed, ", "))
		}
		if _, dup := m[k]; dup {
			return nil, fmt.Errorf("attribute %q given twice", k)
		}
		dv, err := url.PathUnescape(v)
		if err != nil {
			return nil, fmt.Errorf("attribute %s: %w", k, err)
		}
		m[k] = dv
	}
	return m, nil
}

// pinFile takes a pin-source value: file:/abs/path, file:///abs/path or
// /abs/path.
func pinFile(src string) (string, error) {
	p := src
	if rest, ok := strings.CutPrefix(src, "file://"); ok {
		p = rest
	} else if rest, ok := strings.CutPrefix(src, "file:"); ok {
		p = rest
	}
	if !filepath.IsAbs(p) {
		return "", fmt.Errorf("pkcs11 URI: pin-source %q: want file:/absolute/path", src)
	}
	return p, nil
}

// String is the URI in the form ParseURI reads, without the PIN file's
// contents (which it never holds).
func (u URI) String() string {
	var path []string
	add := func(k, v string) { path = append(path, k+"="+escape(v)) }
	if u.Token != "" {
		add("token", u.Token)
	}
	if u.Serial != "" {
		add("serial", u.Serial)
	}
	if u.Object != "" {
		add("object", u.Object)
	}
	if u.ID != nil {
		add("id", string(u.ID))
	}
	q := "module-path=" + escape(u.ModulePath)
	if u.PINFile != "" {
		q += "&pin-source=" + escape("file:"+u.PINFile)
	}
	return Scheme + strings.Join(path, ";") + "?" + q
}

// escape percent-encodes all but RFC 7512's unreserved characters and the
// few others its attribute values may hold as they are ('/' and ':').
func escape(v string) string {
	var b strings.Builder
	for i := 0; i < len(v); i++ {
		c := v[i]
		if 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.IndexByte("-._~/:", c) >= 0 {
			b.WriteByte(c)
		} else {
			fmt.Fprintf(&b, "%%%02X", c)
		}
	}
	return b.String()
}
