package signedcmd

import (
	"bytes"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/tablectl/tablectl/audit"
	"github.com/tablectl/tablectl/coup"
)

// RequestDomain opens the bytes an enrolment request's signature covers.
const RequestDomain = "tablectl-enrolment-v1\n"

// RequestFormat is an enrolment request's "format".
const RequestFormat = "tablectl-enrolment-v1"

// maxRequest bounds an enrolment request: a few hundred bytes.
const maxRequest = 4096

// Request is an enrolment request: a supervisor's new public key, signed
// with that key, for the security officer to add to the keyring and sign
// it (tablectl enrol --request, then tablectl keyring sign). The pit
// console makes one for a key made in the browser, tablectl keygen for a
// key file. The signature proves the request comes from whoever holds the
// private half; the officer still checks the key id with the supervisor
// before signing it in.
type Request struct {
	Format    string `json:"format"`
	Name      string `json:"name"`
	PublicKey string `json:"public_key"`
	// RequestedAt is when it was made (RFC 3339); Table the table whose
	// console made it, if any. Both are for the officer's eyes.
	RequestedAt string `json:"requested_at"`
	Table       string `json:"table,omitempty"`
	Sig         string `json:"sig,omitempty"`
}

// signingBytes are RequestDomain and the request's canonical JSON without
// its signature.
func (r Request) signingBytes() ([]byte, error) {
	r.Sig = ""
	canon, err := audit.CanonicalJSON(r)
	if err != nil {
		return nil, fmt.Errorf("enrolment request: %w", err)
	}
	return append([]byte(RequestDomain), canon...), nil
}

// NewRequest makes the enrolment request of the key pair whose private half
// is key, for name.
func NewRequest(name string, key ed25519.PrivateKey, table string, now time.Time) ([]byte, error) {
	if !coup.ValidStaffName(name) {
		return nil, fmt.Errorf("name %q: want 1 to 64 bytes of A-Z a-z 0-9 . _ @ -", clip(name))
	}
	r := Request{Format: RequestFormat, Name: name, PublicKey: base64.StdEncoding.EncodeToString(key.Public().(ed25519.PublicKey)),
		RequestedAt: now.UTC().Format(time.RFC3339), Table: table}
	msg, err := r.signingBytes()
	if err != nil {
		return nil, err
	}
	r.Sig = base64.StdEncoding.EncodeToString(ed25519.Sign(key, msg))
	out, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(out, '\n'), nil
}

// ParseRequest reads an enrolment request strictly and checks that the key
// it carries signed it. It returns the request and the public key.
func ParseRequest(data []byte) (Request, ed25519.PublicKey, error) {
	if len(data) > maxRequest {
		return Request{}, nil, fmt.Errorf("enrolment request: %d bytes, more than %d", len(data), maxRequest)
	}
	var r Request
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&r); err != nil {
		return Request{}, nil, fmt.Errorf("enrolment request: %w", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return Request{}, nil, errors.New("enrolment request: data after the JSON document")
	}
	switch {
	case r.Format != RequestFormat:
		return Request{}, nil, fmt.Errorf("enrolment request: format %q, want %q", clip(r.Format), RequestFormat)
	case !coup.ValidStaffName(r.Name):
		return Request{}, nil, fmt.Errorf("enrolment request: name %q: want 1 to 64 bytes of A-Z a-z 0-9 . _ @ -", clip(r.Name))
	case r.Table != "" && !coup.ValidStaffName(r.Table):
		return Request{}, nil, fmt.Errorf("enrolment request: table %q", clip(r.Table))
	}
	if _, err := time.Parse(time.RFC3339, r.RequestedAt); err != nil {
		return Request{}, nil, fmt.Errorf("enrolment request: requested_at %q: want an RFC 3339 time", clip(r.RequestedAt))
	}
	pub, err := base64.StdEncoding.Strict().DecodeString(r.PublicKey)
	if err != nil || len(pub) != ed25519.PublicKeySize {
		return Request{}, nil, fmt.Errorf("enrolment request: public_key: want %d bytes in standard base64", ed25519.PublicKeySize)
	}
	sig, err := base64.StdEncoding.Strict().DecodeString(r.Sig)
	if err != nil || len(sig) != ed25519.SignatureSize {
		return Request{}, nil, fmt.Errorf("enrolment request: sig: want %d bytes in standard base64", ed25519.SignatureSize)
	}
	msg, err := r.signingBytes()
	if err != nil {
		return Request{}, nil, err
	}
	if !ed25519.Verify(pub, msg, sig) {
		return Request{}, nil, fmt.Errorf("enrolment request for %s: the signature does not verify with the key it carries (%s)", r.Name, audit.KeyID(pub))
	}
	return r, ed25519.PublicKey(pub), nil
}
