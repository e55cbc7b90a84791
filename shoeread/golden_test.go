package shoeread

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/ from the decoders' output")

// golden is what a recorded byte stream decodes to, through a Reader.
type golden struct {
	Driver     string        `json:"driver"`
	Guarantees Guarantees    `json:"guarantees"`
	Events     []Event       `json:"events"`
	Stats      Stats         `json:"stats"`
	Sequence   SequenceStats `json:"sequence"`
}

// TestGolden decodes each recorded stream testdata/<driver>_*.txt (raw bytes
// off the line, noise and all) and compares the events, stats and sequence
// anomalies with testdata/<name>.golden.json. Run with -update to rewrite
// the golden files, then read the diff before committing it.
func TestGolden(t *testing.T) {
	files, err := filepath.Glob("testdata/*.txt")
	if err != nil || len(files) == 0 {
		t.Fatalf("no recorded streams in testdata: %v", err)
	}
	for _, path := range files {
		name := strings.TrimSuffix(filepath.Base(path), ".txt")
		t.Run(name, func(t *testing.T) {
			in, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			driver, _, _ := strings.Cut(name, "_")
			d, err := New(driver)
			if err != nil {
				t.Fatalf("stream %s: %v", path, err)
			}
			r := NewReader(d)
			got := golden{Driver: driver, Guarantees: r.Guarantees(), Events: r.Decode(in), Stats: r.Stats(), Sequence: r.Sequencer().Stats()}

			// The serial port hands over bytes in arbitrary reads: odd-sized
			// chunks must give the very same result.
			r2 := NewReader(mustNew(t, driver))
			var chunked []Event
			for rest := in; len(rest) > 0; {
				n := min(7, len(rest))
				chunked = append(chunked, r2.Decode(rest[:n])...)
				rest = rest[n:]
			}
			sameEvents(t, chunked, got.Events)

			js, err := json.MarshalIndent(got, "", "  ")
			if err != nil {
				t.Fatal(err)
			}
			js = append(js, '\n')
			goldenPath := filepath.Join("testdata", name+".golden.json")
			if *update {
				if err := os.WriteFile(goldenPath, js, 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(goldenPath)
			if err != nil {
				t.Fatalf("%v (run go test -update to create it)", err)
			}
			if !bytes.Equal(js, want) {
				t.Errorf("%s differs from the decoded stream (run go test -update and read the diff):\n%s", goldenPath, diffLines(string(want), string(js)))
			}
		})
	}
}

func mustNew(t *testing.T, name string) Driver {
	t.Helper()
	d, err := New(name)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// diffLines shows the first lines where want and got part.
func diffLines(want, got string) string {
	w, g := strings.Split(want, "\n"), strings.Split(got, "\n")
	var b strings.Builder
	shown := 0
	for i := 0; i < max(len(w), len(g)) && shown < 10; i++ {
		var wl, gl string
		if i < len(w) {
			wl = w[i]
		}
		if i < len(g) {
			gl = g[i]
		}
		if wl != gl {
			b.WriteString("line " + strconv.Itoa(i+1) + ":\n  want " + wl + "\n  got  " + gl + "\n")
			shown++
		}
	}
	return b.String()
}
