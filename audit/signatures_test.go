package audit

import (
	"context"
	"crypto"
	"crypto/ed25519"
	"io"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
)

// badSigner is the checkpoint key misbehaving: its bad-th signature (from
// 1) has a bit flipped. The store writes that checkpoint as any other, so
// the chain and its triggers are whole: only the signature is wrong.
type badSigner struct {
	ed25519.PrivateKey
	bad   int64
	calls atomic.Int64
}

func (s *badSigner) Sign(r io.Reader, msg []byte, o crypto.SignerOpts) ([]byte, error) {
	sig, err := s.PrivateKey.Sign(r, msg, o)
	if s.calls.Add(1) == s.bad {
		sig[7] ^= 0x10
	}
	return sig, err
}

// signedTrail writes n events, one commit and one checkpoint each (as the
// recorder does), the bad-th checkpoint's signature made wrong.
func signedTrail(t *testing.T, n int, bad int64) string {
	t.Helper()
	s, path := openTest(t, Options{Table: "T1", Key: &badSigner{PrivateKey: testKey(), bad: bad}, CheckpointEvery: 1})
	for _, e := range sampleEvents(n) {
		if _, err := s.Append(context.Background(), e); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestVerifyNewestSignature: by default Verify checks the newest
// checkpoint's signature, which through the chain covers every row; a bad
// signature on an earlier checkpoint behind a valid chain is found only
// with EverySignature, and the report says it was not checked.
func TestVerifyNewestSignature(t *testing.T) {
	const n = 12
	keys := []ed25519.PublicKey{testPub()}
	t.Run("an earlier checkpoint badly signed", func(t *testing.T) {
		path := signedTrail(t, n, 5)
		rep := mustVerify(t, path, VerifyOptions{PublicKeys: keys})
		text := reportText(rep)
		if !rep.OK() || rep.SignedHead != n || rep.SignaturesVerified != 1 || rep.SignaturesUnchecked != n-1 || rep.Checkpoints != n {
			t.Fatalf("default: ok %v, signed head %d, %d verified, %d unchecked, %d checkpoints; want true, %d, 1, %d, %d\n%s",
				rep.OK(), rep.SignedHead, rep.SignaturesVerified, rep.SignaturesUnchecked, rep.Checkpoints, n, n-1, n, text)
		}
		for _, want := range []string{"newest checkpoint at seq 12 verified, covering 12 rows", "11 earlier checkpoints' signatures not checked (--every-signature checks them)"} {
			if !strings.Contains(text, want) {
				t.Errorf("default report does not say %q:\n%s", want, text)
			}
		}
		rep = mustVerify(t, path, VerifyOptions{PublicKeys: keys, EverySignature: true})
		if got := findingSet(rep.Findings); !slices.Equal(got, []string{"bad_signature@5"}) || rep.SignaturesVerified != n || rep.SignaturesUnchecked != 0 {
			t.Errorf("every signature: findings %v, %d verified, %d unchecked; want [bad_signature@5], %d, 0\n%s",
				got, rep.SignaturesVerified, rep.SignaturesUnchecked, n, reportText(rep))
		}
		// A start from a snapshot before it checks the newest too.
		rd, err := OpenReader(context.Background(), path)
		if err != nil {
			t.Fatal(err)
		}
		defer rd.Close()
		from, err := rd.VerifyFrom(context.Background(), 3, keys)
		if err != nil {
			t.Fatal(err)
		}
		if !from.OK() || from.SignedHead != n {
			t.Errorf("VerifyFrom: ok %v, signed head %d; want true, %d\n%s", from.OK(), from.SignedHead, n, reportText(from))
		}
	})
	t.Run("the newest checkpoint badly signed", func(t *testing.T) {
		path := signedTrail(t, n, n)
		for _, every := range []bool{false, true} {
			rep := mustVerify(t, path, VerifyOptions{PublicKeys: keys, EverySignature: every})
			// Every signature checked, the one before the newest is the
			// newest that verified.
			wantHead := map[bool]int64{false: 0, true: n - 1}[every]
			if got := findingSet(rep.Findings); !slices.Equal(got, []string{"bad_signature@12"}) || rep.OK() || rep.SignedHead != wantHead {
				t.Errorf("every signature %v: findings %v, ok %v, signed head %d; want [bad_signature@12], false, %d\n%s",
					every, got, rep.OK(), rep.SignedHead, wantHead, reportText(rep))
			}
			if text := reportText(rep); !strings.Contains(text, "the newest checkpoint (seq 12) did not verify") {
				t.Errorf("every signature %v: the report does not say the newest did not verify:\n%s", every, text)
			}
		}
		rd, err := OpenReader(context.Background(), path)
		if err != nil {
			t.Fatal(err)
		}
		defer rd.Close()
		from, err := rd.VerifyFrom(context.Background(), 3, keys)
		if err != nil {
			t.Fatal(err)
		}
		if got := findingSet(from.Findings); !slices.Equal(got, []string{"bad_signature@12"}) {
			t.Errorf("VerifyFrom: findings %v, want [bad_signature@12]\n%s", got, reportText(from))
		}
	})
	t.Run("anchors", func(t *testing.T) {
		path := signedTrail(t, n, 5)
		rep := mustVerify(t, path, VerifyOptions{PublicKeys: keys, Anchors: []int64{5}})
		if got := findingSet(rep.Findings); !slices.Equal(got, []string{"bad_signature@5"}) || rep.SignaturesVerified != 2 {
			t.Errorf("anchor at 5: findings %v, %d verified; want [bad_signature@5], 2\n%s", got, rep.SignaturesVerified, reportText(rep))
		}
	})
	t.Run("a wrong key", func(t *testing.T) {
		path := signedTrail(t, n, 0)
		other := ed25519.NewKeyFromSeed(make([]byte, ed25519.SeedSize)).Public().(ed25519.PublicKey)
		for _, every := range []bool{false, true} {
			rep := mustVerify(t, path, VerifyOptions{PublicKeys: []ed25519.PublicKey{other}, EverySignature: every})
			if rep.Tampered() || rep.OK() || rep.SignaturesChecked || rep.Unverifiable == "" {
				t.Errorf("every signature %v: tampered %v ok %v checked %v unverifiable %q; want false, false, false, a reason\n%s",
					every, rep.Tampered(), rep.OK(), rep.SignaturesChecked, rep.Unverifiable, reportText(rep))
			}
		}
	})
}
