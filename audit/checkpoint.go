package audit

import (
	"bytes"
	"crypto"
	"crypto/ed25519"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/tablectl/tablectl/audit/internal/edfast"
)

// CheckpointFormat names the signed message and the checkpoint file format.
const CheckpointFormat = "tablectl-checkpoint-v1"

// maxCheckpointFile bounds what is read from a checkpoint file; a real one
// is about 400 bytes.
const maxCheckpointFile = 64 << 10

// Checkpoint is a signed statement that the trail of table Table had, at
// SignedAt, the row Seq with hash HeadHash at its head. Held elsewhere (a
// file, the MQTT pit tree) it lets Verify catch truncation and a rewritten
// chain, which the hash chain alone cannot.
type Checkpoint struct {
	Table     string
	Seq       int64
	HeadHash  Hash
	SignedAt  time.Time
	KeyID     string
	Signature []byte
}

// Message is the exact byte string that is signed: five lines, each ending
// in "\n":
//
//	tablectl-checkpoint-v1
//	table <table id, may be empty>
//	seq <decimal>
//	head <64 lower-case hex digits>
//	signed_at <RFC 3339 UTC, as stored>
func (c Checkpoint) Message() []byte {
	var b bytes.Buffer
	b.WriteString(CheckpointFormat + "\n")
	b.WriteString("table " + c.Table + "\n")
	b.WriteString("seq " + strconv.FormatInt(c.Seq, 10) + "\n")
	b.WriteString("head " + c.HeadHash.String() + "\n")
	b.WriteString("signed_at " + formatTime(c.SignedAt) + "\n")
	return b.Bytes()
}

// Signer signs checkpoints with an Ed25519 key: an ed25519.PrivateKey read
// from a PEM file, or a key that never leaves a hardware token. Its Public
// must be an ed25519.PublicKey, and Sign must sign the message itself
// (crypto.Hash(0)), as ed25519.PrivateKey does.
type Signer = crypto.Signer

// checkSigner returns k, or nil for no key (a nil ed25519.PrivateKey in the
// interface included), or an error if k is not an Ed25519 signer.
func checkSigner(k Signer) (Signer, error) {
	if k == nil {
		return nil, nil
	}
	if pk, ok := k.(ed25519.PrivateKey); ok {
		if pk == nil {
			return nil, nil
		}
		if len(pk) != ed25519.PrivateKeySize {
			return nil, fmt.Errorf("checkpoint key: %d bytes, want an Ed25519 private key of %d", len(pk), ed25519.PrivateKeySize)
		}
	}
	if _, ok := k.Public().(ed25519.PublicKey); !ok {
		return nil, fmt.Errorf("checkpoint key: a %T public key, want Ed25519", k.Public())
	}
	return k, nil
}

// SignerPublic is the Ed25519 public half of a checkpoint signer.
func SignerPublic(k Signer) ed25519.PublicKey {
	pub, _ := k.Public().(ed25519.PublicKey)
	return pub
}

// signCheckpoint makes the checkpoint of head for table, signed with key at t.
func signCheckpoint(key Signer, table string, head Head, t time.Time) (Checkpoint, error) {
	c := Checkpoint{
		Table:    table,
		Seq:      head.Seq,
		HeadHash: head.Hash,
		SignedAt: t.UTC(),
		KeyID:    KeyID(SignerPublic(key)),
	}
	var sig []byte
	var err error
	if k, inMemory := key.(ed25519.PrivateKey); inMemory {
		// The same bytes as k.Sign, in half the time: this runs on the
		// card's path (see edfast).
		sig = edfast.Sign(k, c.Message())
	} else {
		sig, err = key.Sign(nil, c.Message(), crypto.Hash(0))
	}
	if err != nil {
		return Checkpoint{}, fmt.Errorf("sign checkpoint %d: %w", c.Seq, err)
	}
	c.Signature = sig
	return c, nil
}

// VerifySignature checks c's signature with pub. It fails if pub is not the
// key c names.
func (c Checkpoint) VerifySignature(pub ed25519.PublicKey) error {
	return c.verify(KeyID(pub), func(msg, sig []byte) bool { return edfast.Verify(pub, msg, sig) })
}

// verify checks that c names the key id and that verify accepts its
// signature.
func (c Checkpoint) verify(id string, verify func(msg, sig []byte) bool) error {
	if id != c.KeyID {
		return fmt.Errorf("checkpoint seq %d: signed by key %s, not %s", c.Seq, c.KeyID, id)
	}
	if !verify(c.Message(), c.Signature) {
		return fmt.Errorf("checkpoint seq %d: signature does not verify with key %s", c.Seq, c.KeyID)
	}
	return nil
}

// CheckpointKey is a public key made ready to check many checkpoints
// (every signature of a trail, a table's at the floor's witness): its
// point is decoded once, and its id computed once. The rules are
// crypto/ed25519's (audit/internal/edfast).
type CheckpointKey struct {
	id string
	k  *edfast.Key
}

// NewCheckpointKey prepares pub.
func NewCheckpointKey(pub ed25519.PublicKey) *CheckpointKey {
	return &CheckpointKey{id: KeyID(pub), k: edfast.NewKey(pub)}
}

// ID is the key's id, as checkpoints name it.
func (k *CheckpointKey) ID() string { return k.id }

// VerifyWith is VerifySignature with a prepared key.
func (c Checkpoint) VerifyWith(k *CheckpointKey) error { return c.verify(k.id, k.k.Verify) }

// checkpointJSON is the checkpoint file format.
type checkpointJSON struct {
	Format    string `json:"format"`
	Table     string `json:"table"`
	Seq       int64  `json:"seq"`
	HeadHash  string `json:"head_hash"`
	SignedAt  string `json:"signed_at"`
	KeyID     string `json:"key_id"`
	Signature string `json:"signature"`
}

// MarshalJSON writes the checkpoint file form: hashes, key id and signature
// in lower-case hex, the time as stored.
func (c Checkpoint) MarshalJSON() ([]byte, error) {
	return json.Marshal(checkpointJSON{
		Format:    CheckpointFormat,
		Table:     c.Table,
		Seq:       c.Seq,
		HeadHash:  c.HeadHash.String(),
		SignedAt:  formatTime(c.SignedAt),
		KeyID:     c.KeyID,
		Signature: hex.EncodeToString(c.Signature),
	})
}

// UnmarshalJSON parses and validates the checkpoint file form.
func (c *Checkpoint) UnmarshalJSON(data []byte) error {
	p, err := ParseCheckpoint(data)
	if err != nil {
		return err
	}
	*c = p
	return nil
}

// ParseCheckpoint parses one checkpoint in the file form MarshalJSON writes.
// It checks the form of every field (not the signature: see
// VerifySignature) and rejects unknown fields and trailing data.
func ParseCheckpoint(data []byte) (Checkpoint, error) {
	if len(data) > maxCheckpointFile {
		return Checkpoint{}, fmt.Errorf("checkpoint: %d bytes, more than %d", len(data), maxCheckpointFile)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var w checkpointJSON
	if err := dec.Decode(&w); err != nil {
		return Checkpoint{}, fmt.Errorf("checkpoint: %w", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return Checkpoint{}, errors.New("checkpoint: data after the object")
	}
	if w.Format != CheckpointFormat {
		return Checkpoint{}, fmt.Errorf("checkpoint: format %.80q, want %q", w.Format, CheckpointFormat)
	}
	if err := checkTableID(w.Table); err != nil {
		return Checkpoint{}, fmt.Errorf("checkpoint: %w", err)
	}
	if w.Seq < 1 {
		return Checkpoint{}, fmt.Errorf("checkpoint: seq %d, want 1 or more", w.Seq)
	}
	head, err := ParseHash(w.HeadHash)
	if err != nil {
		return Checkpoint{}, fmt.Errorf("checkpoint head_hash: %w", err)
	}
	at, err := parseTime(w.SignedAt)
	if err != nil {
		return Checkpoint{}, fmt.Errorf("checkpoint signed_at: %w", err)
	}
	if err := checkKeyID(w.KeyID); err != nil {
		return Checkpoint{}, fmt.Errorf("checkpoint: %w", err)
	}
	sig, err := parseSignature(w.Signature)
	if err != nil {
		return Checkpoint{}, fmt.Errorf("checkpoint: %w", err)
	}
	return Checkpoint{Table: w.Table, Seq: w.Seq, HeadHash: head, SignedAt: at, KeyID: w.KeyID, Signature: sig}, nil
}

func checkKeyID(id string) error {
	if len(id) != 16 || !isLowerHex(id) {
		return fmt.Errorf("key_id %.80q: want 16 lower-case hex digits", id)
	}
	return nil
}

func parseSignature(s string) ([]byte, error) {
	if len(s) != 2*ed25519.SignatureSize || !isLowerHex(s) {
		return nil, fmt.Errorf("signature: want %d lower-case hex digits", 2*ed25519.SignatureSize)
	}
	return hex.DecodeString(s)
}

// isLowerHex reports whether s is all lower-case hex digits. Verify runs
// it on every stored checkpoint's signature, so it has no branch per byte:
// the digits' values OR'd together keep the high bits clear.
func isLowerHex(s string) bool {
	var or byte
	for i := 0; i < len(s); i++ {
		or |= hexValue[s[i]]
	}
	return or&0xf0 == 0
}

// checkTableID allows 0 to 64 bytes of A-Z a-z 0-9 '.' '_' '-': the id goes
// into a line of the signed message, so it can hold no newline or space.
func checkTableID(id string) error {
	if len(id) > 64 {
		return fmt.Errorf("table id %.80q: longer than 64 bytes", id)
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_' || c == '.' || c == '-') {
			return fmt.Errorf("table id %q: byte %q is not one of A-Z a-z 0-9 _ . -", id, c)
		}
	}
	return nil
}

// ReadCheckpointFile reads a checkpoint file written by WriteCheckpointFile.
func ReadCheckpointFile(path string) (Checkpoint, error) {
	f, err := os.Open(path)
	if err != nil {
		return Checkpoint{}, fmt.Errorf("read checkpoint: %w", err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxCheckpointFile+1))
	if err != nil {
		return Checkpoint{}, fmt.Errorf("read checkpoint %s: %w", path, err)
	}
	c, err := ParseCheckpoint(data)
	if err != nil {
		return Checkpoint{}, fmt.Errorf("%s: %w", path, err)
	}
	return c, nil
}

// WriteCheckpointFile writes c to path as JSON, atomically: a temporary file
// in the same directory is synced and renamed over path, so a crash leaves
// either the old checkpoint or the new one.
func WriteCheckpointFile(path string, c Checkpoint) error {
	data, err := json.MarshalIndent(c, "", "  ")
	if err != nil {
		return fmt.Errorf("encode checkpoint: %w", err)
	}
	data = append(data, '\n')
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("write checkpoint: %w", err)
	}
	f, err := os.CreateTemp(dir, ".checkpoint-*")
	if err != nil {
		return fmt.Errorf("write checkpoint: %w", err)
	}
	tmp := f.Name()
	defer os.Remove(tmp) // fails harmlessly once renamed
	if _, err := f.Write(data); err != nil {
		f.Close()
		return fmt.Errorf("write checkpoint %s: %w", tmp, err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("sync checkpoint %s: %w", tmp, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("close checkpoint %s: %w", tmp, err)
	}
	if err := os.Chmod(tmp, 0o644); err != nil {
		return fmt.Errorf("write checkpoint: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("write checkpoint: %w", err)
	}
	if d, err := os.Open(dir); err == nil {
		// Sync the directory so the rename itself survives a power cut.
		d.Sync()
		d.Close()
	}
	return nil
}
