package audit

import (
	"context"
	"crypto/ed25519"
	"reflect"
	"testing"
)

// TestVerifyChunksMatchRows holds the chunked read to the row-by-row one:
// on a clean trail and on trails edited in each way the sqlite3 shell
// allows once the triggers are dropped (a changed body, a deleted row, a
// time not in stored form, a hash that is not hex, a NUL in a body), both
// find exactly the same.
func TestVerifyChunksMatchRows(t *testing.T) {
	ctx := context.Background()
	s, path := openTest(t, Options{Table: "T1", Key: testKey(), CheckpointEvery: 7})
	for range 30 { // more than one chunk
		if _, err := s.AppendBatch(ctx, sampleEvents(300)); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	edits := map[string]string{
		"clean":    ``,
		"body":     `UPDATE events SET body = replace(body, '"', ' "') WHERE seq = 5000`,
		"deleted":  `DELETE FROM events WHERE seq = 4097`,
		"at":       `UPDATE events SET at = '2025-03-14T15:09:26.500Z' WHERE seq = 9`,
		"hash":     `UPDATE events SET hash = 'zz' || substr(hash, 3) WHERE seq = 8191`,
		"nul body": `UPDATE events SET body = body || char(0) || 'x' WHERE seq = 13`,
	}
	for name, edit := range edits {
		p := copyTrail(t, path)
		if edit != "" {
			db := openRaw(t, p)
			for _, tr := range []string{"events_no_update", "events_no_delete"} {
				if _, err := db.Exec(`DROP TRIGGER ` + tr); err != nil {
					t.Fatal(err)
				}
			}
			if _, err := db.Exec(edit); err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			db.Close()
		}
		opt := VerifyOptions{PublicKeys: []ed25519.PublicKey{testPub()}}
		fast, err := Verify(ctx, p, opt)
		if err != nil {
			t.Fatal(err)
		}
		scanLooseOnly = true
		slow, err := Verify(ctx, p, opt)
		scanLooseOnly = false
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(fast, slow) {
			t.Errorf("%s: chunks found\n%+v\nrows found\n%+v", name, fast, slow)
		}
		if (name == "clean") == fast.Tampered() {
			t.Errorf("%s: tampered %v: %+v", name, fast.Tampered(), fast.Findings)
		}
	}
}

func TestValidChunk(t *testing.T) {
	good := "1 0 0 3 1 2 4 4 atkbdprevhash!" + "2 -1 5 1 1 1 1 1 abcde"
	if !validChunk(good, 2) {
		t.Fatal("a good chunk refused")
	}
	for _, bad := range []struct {
		text string
		n    int64
	}{
		{good, 1}, {good, 3}, {good[:len(good)-1], 2}, {good + "x", 2}, {"1 0 0 3 1 2 4 -4 atkbdprevhash!", 1},
		{"1 0 0 3 1 2 4 99 atkbdprevhash", 1}, {"x 0 0 0 0 0 0 0 ", 1}, {"", 1}, {"1 2 3", 1},
	} {
		if validChunk(bad.text, bad.n) {
			t.Errorf("validChunk(%q, %d) = true", bad.text, bad.n)
		}
	}
}

// FuzzValidChunk: the chunk text comes from a file that may be hostile;
// whatever validChunk accepts, parseChunkRow takes apart into exactly n
// rows without running off the end.
func FuzzValidChunk(f *testing.F) {
	f.Add("1 0 0 3 1 2 4 4 atkbdprevhash!", int64(1))
	f.Add("1 0 0 3 1 2 4 4 atkbdprevhash!2 -1 5 1 1 1 1 1 abcde", int64(2))
	f.Add("9 9 9 0 0 0 0 0 ", int64(1))
	f.Fuzz(func(t *testing.T, text string, n int64) {
		if n < 0 || n > 1000 || !validChunk(text, n) {
			return
		}
		rows := int64(0)
		for rest := text; rest != ""; rows++ {
			if rows >= n {
				t.Fatalf("more than %d rows in %q", n, text)
			}
			_, rest = parseChunkRow(rest)
		}
		if rows != n {
			t.Fatalf("%d rows in %q, validChunk said %d", rows, text, n)
		}
	})
}
