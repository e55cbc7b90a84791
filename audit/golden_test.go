package audit

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"flag"
	"os"
	"path/filepath"
	"testing"
	"time"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

func mustRead(t testing.TB, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// golden compares got with testdata/name, or rewrites it under -update.
// A golden file changing means the trail or checkpoint format changed:
// every trail already written would stop verifying.
func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want := mustRead(t, path)
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs from the golden file (go test -update to accept a deliberate format change)\ngot:\n%s\nwant:\n%s", path, got, want)
	}
}

// TestRowHashVector builds the hash input of one row byte by byte from the
// description in docs/audit.md, independently of rowHash.
func TestRowHashVector(t *testing.T) {
	at := "2025-03-14T15:09:26.5Z"
	var in []byte
	in = append(in, "tablectl-audit-v1\x00"...)
	in = append(in, 0, 0, 0, 0, 0, 0, 0, 7)
	in = append(in, 0, 0, 0, byte(len(at)))
	in = append(in, at...)
	in = append(in, 0, 0, 0, 4)
	in = append(in, "card"...)
	in = append(in, 0, 0, 0, 0, 0, 0, 0, 3)                         // shoe 3
	in = append(in, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff) // coup -1 (two's complement)
	body := `{"card":"KH","hand":"banker"}`
	in = append(in, 0, 0, 0, byte(len(body)))
	in = append(in, body...)
	prev := bytes.Repeat([]byte{0xab}, 32)
	in = append(in, prev...)
	want := sha256.Sum256(in)

	var prevHash Hash
	copy(prevHash[:], prev)
	got := rowHash(7, at, "card", 3, -1, []byte(body), prevHash)
	if got != Hash(want) {
		t.Fatalf("rowHash = %s, want %s", got, hex.EncodeToString(want[:]))
	}
	// The same digest, computed with Python's hashlib and quoted in
	// docs/audit.md.
	if got.String() != "6001fca878e747e69ba71174c7f85659c8afb06b56efb29b0eda2ead4e9aa8a3" {
		t.Fatalf("rowHash = %s, not the documented example", got)
	}
}

// TestTrailGolden writes a trail with a fixed clock and key and compares
// its export and checkpoints with the golden files.
func TestTrailGolden(t *testing.T) {
	ctx := context.Background()
	s, path := openTest(t, Options{Table: "T1", Key: testKey(), CheckpointEvery: 5})
	appendAll(t, s, sampleEvents(12))
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	r, err := OpenReader(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var export bytes.Buffer
	if _, err := r.Export(ctx, &export, Query{}); err != nil {
		t.Fatal(err)
	}
	golden(t, "trail.golden.jsonl", export.Bytes())

	cps, err := r.Checkpoints(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var cpLines bytes.Buffer
	for _, c := range cps {
		b, err := c.MarshalJSON()
		if err != nil {
			t.Fatal(err)
		}
		cpLines.Write(b)
		cpLines.WriteByte('\n')
	}
	golden(t, "trail-checkpoints.golden.jsonl", cpLines.Bytes())
}

func TestParseHash(t *testing.T) {
	good := "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff"
	if h, err := ParseHash(good); err != nil || h.String() != good {
		t.Fatalf("ParseHash(%s) = %s, %v", good, h, err)
	}
	for _, bad := range []string{"", good[:62], good + "00", "00112233445566778899AABBCCDDEEFF00112233445566778899aabbccddeeff", "g" + good[1:]} {
		if _, err := ParseHash(bad); err == nil {
			t.Errorf("ParseHash(%q) accepted", bad)
		}
	}
}

func TestTimeForm(t *testing.T) {
	cases := map[time.Time]string{
		time.Date(2025, 3, 14, 15, 9, 26, 0, time.UTC):                            "2025-03-14T15:09:26Z",
		time.Date(2025, 3, 14, 15, 9, 26, 500000000, time.UTC):                    "2025-03-14T15:09:26.5Z",
		time.Date(2025, 3, 14, 16, 9, 26, 123456789, time.FixedZone("CET", 3600)): "2025-03-14T15:09:26.123456789Z",
	}
	for in, want := range cases {
		if got := formatTime(in); got != want {
			t.Errorf("formatTime(%v) = %s, want %s", in, got, want)
		}
		back, err := parseTime(want)
		if err != nil || !back.Equal(in) {
			t.Errorf("parseTime(%s) = %v, %v", want, back, err)
		}
	}
	for _, bad := range []string{"2025-03-14T15:09:26.50Z", "2025-03-14T16:09:26+01:00", "yesterday"} {
		if _, err := parseTime(bad); err == nil {
			t.Errorf("parseTime(%q) accepted a non-canonical time", bad)
		}
	}
}
