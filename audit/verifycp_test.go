package audit

import (
	"context"
	"crypto/ed25519"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// FuzzCheckCheckpointRow: Verify checks a stored checkpoint's values
// without decoding them (checkCheckpointRow); whatever a hostile file
// holds, it must refuse what decodeCheckpointRow refuses, with the same
// error, and read the same seq, head and key otherwise.
func FuzzCheckCheckpointRow(f *testing.F) {
	head := Hash{1, 2, 3}.String()
	sig := strings.Repeat("ab", 64)
	f.Add(int64(7), head, "2026-11-25T15:58:00.12Z", "0123456789abcdef", sig, uint8(0))
	f.Add(int64(7), head, "2026-11-25T15:58:00.120Z", "0123456789abcdef", sig, uint8(0))
	f.Add(int64(7), head, "2026-11-25T15:58:00Z", "0123456789ABCDEF", sig, uint8(1))
	f.Add(int64(-1), "zz"+head[2:], "x", "k", sig[:127]+"\x00", uint8(2))
	f.Add(int64(7), head, "2026-11-25T15:58:00Z", "0123456789abcdef", strings.ToUpper(sig), uint8(3))
	f.Fuzz(func(t *testing.T, seq int64, head, at, key, sig string, types uint8) {
		// types picks other stored types for some values, as a table
		// without STRICT may hold.
		var vSeq, vHead, vAt, vKey, vSig any = seq, head, at, key, sig
		if types&1 != 0 {
			vSeq = head
		}
		if types&2 != 0 {
			vSig = []byte(sig)
		}
		if types&4 != 0 {
			vAt = nil
		}
		if types&8 != 0 {
			vKey = seq
		}
		if types&16 != 0 {
			vHead = float64(seq)
		}
		want, wantErr := decodeCheckpointRow("T1", vSeq, vHead, vAt, vKey, vSig)
		h, gotKey, err := checkCheckpointRow(vSeq, vHead, vAt, vKey, vSig)
		if (err == nil) != (wantErr == nil) || err != nil && err.Error() != wantErr.Error() {
			t.Fatalf("checkCheckpointRow: %v, decodeCheckpointRow: %v", err, wantErr)
		}
		if err == nil && (h.seq != want.Seq || h.head != want.HeadHash || gotKey != want.KeyID) {
			t.Fatalf("read seq %d head %s key %q, want %d %s %q", h.seq, h.head, gotKey, want.Seq, want.HeadHash, want.KeyID)
		}
	})
}

// TestVerifyCheckpointsStreamed: a trail signed in every commit, with more
// checkpoints than fill two of cpHeads' chunks, read on the checkpoints'
// own connection while the rows are; two heads edited at chunk edges are
// found, as the one-connection reference path finds them, by default and
// with every signature.
func TestVerifyCheckpointsStreamed(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	if fi, err := os.Stat("/dev/shm"); err == nil && fi.IsDir() {
		// fsync costs nothing there: thousands of commits in a second.
		if d, err := os.MkdirTemp("/dev/shm", "cpstream"); err == nil {
			t.Cleanup(func() { os.RemoveAll(d) })
			dir = d
		}
	}
	const commits = 2<<cpChunkBits + 100
	path := filepath.Join(dir, "trail.db")
	s := openAt(t, path, Options{Table: "T1", Key: testKey(), CheckpointEvery: 1})
	evs := sampleEvents(commits)
	for i := range evs {
		if _, err := s.AppendBatch(ctx, evs[i:i+1]); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	pub := []ed25519.PublicKey{testPub()}
	rep, err := Verify(ctx, path, VerifyOptions{PublicKeys: pub})
	if err != nil {
		t.Fatal(err)
	}
	if !rep.OK() || rep.Events != commits || rep.Checkpoints != commits || rep.SignedHead != commits || rep.SignaturesVerified != 1 {
		t.Fatalf("clean trail: ok %v, %d rows, %d checkpoints, signed head %d, %d signatures: %v",
			rep.OK(), rep.Events, rep.Checkpoints, rep.SignedHead, rep.SignaturesVerified, rep.Findings)
	}

	// Seqs 4096, 4097 and 8193 are the last of the first chunk and the
	// first of the second and third.
	edited := []int64{1 << cpChunkBits, 1<<cpChunkBits + 1, 2<<cpChunkBits + 1}
	db, err := sql.Open("sqlite3", path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`DROP TRIGGER checkpoints_no_update`); err != nil {
		t.Fatal(err)
	}
	for _, seq := range edited {
		if _, err := db.Exec(`UPDATE checkpoints SET head_hash = ? WHERE seq = ?`, Hash{byte(seq)}.String(), seq); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := db.Exec(`CREATE TRIGGER checkpoints_no_update BEFORE UPDATE ON checkpoints
BEGIN SELECT RAISE(ABORT, 'audit: checkpoints are append-only: UPDATE refused'); END`); err != nil {
		t.Fatal(err)
	}
	db.Close()
	for _, every := range []bool{false, true} {
		opt := VerifyOptions{PublicKeys: pub, EverySignature: every}
		rep, err := Verify(ctx, path, opt)
		if err != nil {
			t.Fatal(err)
		}
		var want []string
		for _, seq := range edited {
			if every {
				want = append(want, fmt.Sprintf("bad_signature@%d", seq))
			}
			want = append(want, fmt.Sprintf("checkpoint_mismatch@%d", seq))
		}
		slices.Sort(want)
		if got := findingSet(rep.Findings); !slices.Equal(got, want) {
			t.Errorf("every signature %v: findings %v, want %v", every, got, want)
		}
		scanReference = true
		ref, err := Verify(ctx, path, opt)
		scanReference = false
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(rep, ref) {
			t.Errorf("every signature %v: the streamed report differs from the reference path's:\n%+v\n%+v", every, rep, ref)
		}
	}
}
