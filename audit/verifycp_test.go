package audit

import (
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
