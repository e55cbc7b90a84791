package edfast

import (
	"bytes"
	"crypto/ed25519"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"testing"
)

// agree fails t unless both of this package's checks give what
// crypto/ed25519 gives, which it returns.
func agree(t *testing.T, name string, pub ed25519.PublicKey, msg, sig []byte) bool {
	t.Helper()
	want := len(pub) == ed25519.PublicKeySize && ed25519.Verify(pub, msg, sig)
	if got := Verify(pub, msg, sig); got != want {
		t.Errorf("%s: Verify %v, crypto/ed25519 %v", name, got, want)
	}
	if got := NewKey(pub).Verify(msg, sig); got != want {
		t.Errorf("%s: Key.Verify %v, crypto/ed25519 %v", name, got, want)
	}
	return want
}

// The paper's cases, where Ed25519 implementations part ways: small-order
// and non-canonical keys and R, S past the order, cofactored equations.
func TestSpeccheckCases(t *testing.T) {
	data, err := os.ReadFile("testdata/speccheck_cases.json")
	if err != nil {
		t.Fatal(err)
	}
	var cases []struct {
		Message   string `json:"message"`
		PublicKey string `json:"pub_key"`
		Signature string `json:"signature"`
	}
	if err := json.Unmarshal(data, &cases); err != nil {
		t.Fatal(err)
	}
	// What the paper (and curve25519-voi's own tests) record for Go's
	// crypto/ed25519: the oracle below must still give it, or the cases
	// have stopped testing the edges they name.
	stdlib := []bool{true, true, true, true, false, false, false, false, false, false, false, true}
	if len(cases) != len(stdlib) {
		t.Fatalf("%d cases, want %d", len(cases), len(stdlib))
	}
	for i, c := range cases {
		msg, err1 := hex.DecodeString(c.Message)
		pub, err2 := hex.DecodeString(c.PublicKey)
		sig, err3 := hex.DecodeString(c.Signature)
		if err1 != nil || err2 != nil || err3 != nil {
			t.Fatalf("case %d does not decode", i)
		}
		if got := agree(t, fmt.Sprintf("case %d", i), pub, msg, sig); got != stdlib[i] {
			t.Errorf("case %d: crypto/ed25519 says %v, the paper %v", i, got, stdlib[i])
		}
	}
}

func TestEveryByte(t *testing.T) {
	pub, priv, _ := ed25519.GenerateKey(nil)
	msg := []byte(`{"head_hash":"00","seq":7,"table":"BAC-07"}`)
	sig := ed25519.Sign(priv, msg)
	if !agree(t, "the signature as made", pub, msg, sig) {
		t.Fatal("a good signature does not verify")
	}
	// Any one bit of the signature, the message or the key changed.
	for i := range len(sig) * 8 {
		bad := append([]byte(nil), sig...)
		bad[i/8] ^= 1 << (i % 8)
		agree(t, fmt.Sprintf("signature bit %d", i), pub, msg, bad)
	}
	for i := range len(pub) * 8 {
		bad := append(ed25519.PublicKey(nil), pub...)
		bad[i/8] ^= 1 << (i % 8)
		agree(t, fmt.Sprintf("key bit %d", i), bad, msg, sig)
	}
	for i := range len(msg) * 8 {
		bad := append([]byte(nil), msg...)
		bad[i/8] ^= 1 << (i % 8)
		agree(t, fmt.Sprintf("message bit %d", i), pub, bad, sig)
	}
	// Wrong lengths: false, never a panic.
	for _, n := range []int{0, 31, 33} {
		if Verify(make([]byte, n), msg, sig) || NewKey(make([]byte, n)).Verify(msg, sig) {
			t.Errorf("a %d-byte key verifies", n)
		}
	}
	for _, n := range []int{0, 63, 65} {
		agree(t, fmt.Sprintf("a %d-byte signature", n), pub, msg, make([]byte, n))
	}
}

// FuzzAgreesWithStdlib: whatever key, message and signature, this
// package says what crypto/ed25519 says. With a 32-byte raw key the
// fuzzer's bytes are the key and signature as given; otherwise seed makes
// a key, which signs msg, and flip is XORed into its signature.
func FuzzAgreesWithStdlib(f *testing.F) {
	f.Add([]byte("seed"), []byte("msg"), []byte{}, []byte{})
	f.Add([]byte("seed"), []byte("msg"), []byte{0, 0, 0, 1}, []byte{})
	f.Add([]byte{}, []byte{}, make([]byte, 64), append([]byte{1}, make([]byte, 31)...)) // the identity as key and R, S = 0
	f.Fuzz(func(t *testing.T, seed, msg, flip, rawPub []byte) {
		var pub ed25519.PublicKey
		var sig []byte
		if len(rawPub) == ed25519.PublicKeySize {
			pub, sig = rawPub, flip
		} else {
			s := make([]byte, ed25519.SeedSize)
			copy(s, seed)
			priv := ed25519.NewKeyFromSeed(s)
			pub = priv.Public().(ed25519.PublicKey)
			sig = ed25519.Sign(priv, msg)
			for i := range min(len(flip), len(sig)) {
				sig[i] ^= flip[i]
			}
		}
		agree(t, "fuzzed", pub, msg, sig)
	})
}

// rfc8032 are the first three test vectors of RFC 8032, section 7.1
// (TEST 1, 2 and 3): secret key, message, signature, in hex.
var rfc8032 = [][3]string{
	{"9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60", "",
		"e5564300c360ac729086e2cc806e828a84877f1eb8e5d974d873e065224901555fb8821590a33bacc61e39701cf9b46bd25bf5f0595bbe24655141438e7a100b"},
	{"4ccd089b28ff96da9db6c346ec114e0f5b8a319f35aba624da8cf6ed4fb8a6fb", "72",
		"92a009a9f0d4cab8720e820b5f642540a2b27b5416503f8fb3762223ebdb69da085ac1e43e15996e458f3613d0f11d8c387b2eaeb4302aeeb00d291612bb0c00"},
	{"c5aa8df43f9f837bedb7442f31dcb7b166d38535076f094b85ce3a2e0b4458f7", "af82",
		"6291d657deec24024827e69c3abe01a30ce548a284743a445e3680d7db5ac3ac18ff9b538d16f290ae67f760984dc6594a7c15e9716ed28dc027beceea1ec40a"},
}

func TestSignRFC8032(t *testing.T) {
	for i, v := range rfc8032 {
		seed, _ := hex.DecodeString(v[0])
		msg, _ := hex.DecodeString(v[1])
		if got := hex.EncodeToString(Sign(ed25519.NewKeyFromSeed(seed), msg)); got != v[2] {
			t.Errorf("TEST %d: signature %s, RFC 8032 has %s", i+1, got, v[2])
		}
	}
}

// TestSignAsStdlib: for many keys and messages of every length that
// crosses a SHA-512 block, Sign's bytes are ed25519.Sign's.
func TestSignAsStdlib(t *testing.T) {
	keys := 500
	if testing.Short() {
		keys = 50
	}
	for k := range keys {
		seed := make([]byte, ed25519.SeedSize)
		seed[0], seed[1] = byte(k), byte(k>>8)
		priv := ed25519.NewKeyFromSeed(seed)
		for _, n := range []int{0, 1, 55, 56, 63, 64, 111, 112, 127, 128, 160, 1000} {
			msg := make([]byte, n)
			for i := range msg {
				msg[i] = byte(i*31 + k)
			}
			if got, want := Sign(priv, msg), ed25519.Sign(priv, msg); !bytes.Equal(got, want) {
				t.Fatalf("key %d, %d-byte message: signature %x, crypto/ed25519 %x", k, n, got, want)
			}
		}
	}
}

// FuzzSignAsStdlib: whatever the key's seed, its public half (as stored,
// even one that is not the seed's) and the message, Sign gives
// ed25519.Sign's bytes.
func FuzzSignAsStdlib(f *testing.F) {
	f.Add([]byte("seed"), []byte("msg"), []byte{})
	f.Add([]byte{}, []byte{}, make([]byte, 32))
	f.Fuzz(func(t *testing.T, seed, msg, pubHalf []byte) {
		s := make([]byte, ed25519.SeedSize)
		copy(s, seed)
		priv := ed25519.NewKeyFromSeed(s)
		if len(pubHalf) == ed25519.PublicKeySize {
			copy(priv[ed25519.SeedSize:], pubHalf)
		}
		if got, want := Sign(priv, msg), ed25519.Sign(priv, msg); !bytes.Equal(got, want) {
			t.Fatalf("signature %x, crypto/ed25519 %x", got, want)
		}
	})
}

func BenchmarkSign(b *testing.B) {
	_, priv, _ := ed25519.GenerateKey(nil)
	msg := []byte(`{"head_hash":"5e1c9a7a6b9f0e3d2c1b0a99887766554433221100ffeeddccbbaa9988776655","seq":123456,"signed_at":"2026-11-26T01:02:03.456789Z","table":"BAC-07"}`)
	b.Run("crypto-ed25519", func(b *testing.B) {
		for b.Loop() {
			ed25519.Sign(priv, msg)
		}
	})
	b.Run("Sign", func(b *testing.B) {
		for b.Loop() {
			Sign(priv, msg)
		}
	})
}

func BenchmarkVerify(b *testing.B) {
	pub, priv, _ := ed25519.GenerateKey(nil)
	msg := []byte(`{"head_hash":"5e1c9a7a6b9f0e3d2c1b0a99887766554433221100ffeeddccbbaa9988776655","seq":123456,"signed_at":"2026-11-26T01:02:03.456789Z","table":"BAC-07"}`)
	sig := ed25519.Sign(priv, msg)
	b.Run("crypto-ed25519", func(b *testing.B) {
		for b.Loop() {
			ed25519.Verify(pub, msg, sig)
		}
	})
	b.Run("Verify", func(b *testing.B) {
		for b.Loop() {
			Verify(pub, msg, sig)
		}
	})
	k := NewKey(pub)
	b.Run("Key.Verify", func(b *testing.B) {
		for b.Loop() {
			k.Verify(msg, sig)
		}
	})
}
