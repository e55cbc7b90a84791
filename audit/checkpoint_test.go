package audit

import (
	"bytes"
	"crypto/ed25519"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func sampleCheckpoint() Checkpoint {
	head, _ := ParseHash("00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff")
	c, err := signCheckpoint(testKey(), "T1", Head{Seq: 42, Hash: head}, time.Date(2025, 3, 14, 15, 9, 26, 500000000, time.FixedZone("CET", 3600)))
	if err != nil {
		panic(err)
	}
	return c
}

func TestCheckpointMessage(t *testing.T) {
	c := sampleCheckpoint()
	// Written out by hand from docs/audit.md: the time is shown in UTC.
	want := "tablectl-checkpoint-v1\n" +
		"table T1\n" +
		"seq 42\n" +
		"head 00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff\n" +
		"signed_at 2025-03-14T14:09:26.5Z\n"
	if got := string(c.Message()); got != want {
		t.Fatalf("Message =\n%s\nwant\n%s", got, want)
	}
	if !ed25519.Verify(testPub(), []byte(want), c.Signature) {
		t.Fatal("the signature is not over the documented message")
	}
}

func TestCheckpointSignatureTampering(t *testing.T) {
	good := sampleCheckpoint()
	if err := good.VerifySignature(testPub()); err != nil {
		t.Fatal(err)
	}
	other, _, _ := ed25519.GenerateKey(nil)
	tests := []struct {
		name   string
		change func(c *Checkpoint)
		pub    ed25519.PublicKey
	}{
		{"seq", func(c *Checkpoint) { c.Seq++ }, testPub()},
		{"head", func(c *Checkpoint) { c.HeadHash[31] ^= 1 }, testPub()},
		{"table", func(c *Checkpoint) { c.Table = "T2" }, testPub()},
		{"time", func(c *Checkpoint) { c.SignedAt = c.SignedAt.Add(time.Nanosecond) }, testPub()},
		{"signature bit", func(c *Checkpoint) { c.Signature[7] ^= 0x80 }, testPub()},
		{"signature short", func(c *Checkpoint) { c.Signature = c.Signature[:32] }, testPub()},
		{"key id", func(c *Checkpoint) { c.KeyID = KeyID(other) }, testPub()},
		{"another key", func(c *Checkpoint) {}, other},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := good
			c.Signature = bytes.Clone(good.Signature)
			tt.change(&c)
			if err := c.VerifySignature(tt.pub); err == nil {
				t.Fatal("tampered checkpoint verified")
			}
		})
	}
}

func TestCheckpointFile(t *testing.T) {
	c := sampleCheckpoint()
	path := filepath.Join(t.TempDir(), "cp.json")
	if err := WriteCheckpointFile(path, c); err != nil {
		t.Fatal(err)
	}
	// Overwrite in place: the rename replaces it.
	if err := WriteCheckpointFile(path, c); err != nil {
		t.Fatal(err)
	}
	got, err := ReadCheckpointFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if got.Seq != c.Seq || got.HeadHash != c.HeadHash || got.Table != c.Table || !got.SignedAt.Equal(c.SignedAt) ||
		got.KeyID != c.KeyID || !bytes.Equal(got.Signature, c.Signature) {
		t.Fatalf("read back %+v, wrote %+v", got, c)
	}
	if err := got.VerifySignature(testPub()); err != nil {
		t.Fatal(err)
	}
	entries, _ := os.ReadDir(filepath.Dir(path))
	if len(entries) != 1 {
		t.Fatalf("directory holds %d files, want only the checkpoint", len(entries))
	}
	golden(t, "checkpoint.golden.json", mustRead(t, path))

	// A checkpoint file edited by hand parses but no longer verifies.
	edited := strings.Replace(string(mustRead(t, path)), `"seq": 42`, `"seq": 43`, 1)
	ec, err := ParseCheckpoint([]byte(edited))
	if err != nil {
		t.Fatal(err)
	}
	if ec.VerifySignature(testPub()) == nil {
		t.Fatal("edited checkpoint file verified")
	}
}

func TestParseCheckpointRejects(t *testing.T) {
	good := string(mustRead(t, filepath.Join("testdata", "checkpoint.golden.json")))
	if _, err := ParseCheckpoint([]byte(good)); err != nil {
		t.Fatalf("golden checkpoint: %v", err)
	}
	tests := []struct {
		name, old, new string
	}{
		{"format", `"tablectl-checkpoint-v1"`, `"tablectl-checkpoint-v2"`},
		{"table with a newline", `"table": "T1"`, `"table": "T1\nseq 1"`},
		{"seq zero", `"seq": 42`, `"seq": 0`},
		{"seq fraction", `"seq": 42`, `"seq": 4.2`},
		{"seq string", `"seq": 42`, `"seq": "42"`},
		{"upper-case hash", `"head_hash": "0011`, `"head_hash": "00AA`},
		{"short hash", `"head_hash": "0011`, `"head_hash": "11`},
		{"local time", `14:09:26.5Z`, `15:09:26.5+01:00`},
		{"padded time", `14:09:26.5Z`, `14:09:26.500Z`},
		{"key id", `"key_id": "`, `"key_id": "x`},
		{"signature", `"signature": "`, `"signature": "00`},
		{"unknown field", `"seq": 42`, `"seq": 42, "valid": true`},
		{"trailing data", "}\n", "} {}\n"},
		{"not an object", good, `[]`},
		{"empty", good, ``},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := strings.Replace(good, tt.old, tt.new, 1)
			if in == good {
				t.Fatalf("%q not found in the golden file", tt.old)
			}
			if c, err := ParseCheckpoint([]byte(in)); err == nil {
				t.Fatalf("accepted %s as %+v", in, c)
			}
		})
	}
	if _, err := ParseCheckpoint(bytes.Repeat([]byte(" "), maxCheckpointFile+1)); err == nil {
		t.Fatal("accepted an oversized checkpoint")
	}
	if _, err := ReadCheckpointFile(filepath.Join(t.TempDir(), "missing.json")); err == nil {
		t.Fatal("read a missing file")
	}
}

// FuzzParseCheckpoint: a checkpoint file comes from another machine. It
// must never panic, and what it accepts must write back to the same
// checkpoint.
func FuzzParseCheckpoint(f *testing.F) {
	f.Add(mustRead(f, filepath.Join("testdata", "checkpoint.golden.json")))
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := ParseCheckpoint(data)
		if err != nil {
			return
		}
		out, err := c.MarshalJSON()
		if err != nil {
			t.Fatalf("marshal %+v: %v", c, err)
		}
		c2, err := ParseCheckpoint(out)
		if err != nil {
			t.Fatalf("re-parse %s: %v", out, err)
		}
		if !bytes.Equal(c.Message(), c2.Message()) || !bytes.Equal(c.Signature, c2.Signature) || c.KeyID != c2.KeyID {
			t.Fatalf("round trip changed %+v to %+v", c, c2)
		}
		c.VerifySignature(testPub()) // must not panic whatever the bytes
	})
}
