package audit

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
)

func TestCanonicalize(t *testing.T) {
	tests := []struct {
		name, in, want string
	}{
		{"null", ` null `, `null`},
		{"true", "true", "true"},
		{"empty object", "{ }", "{}"},
		{"empty array", "[ ]", "[]"},
		{"sorted keys", `{"b":1,"a":2,"c":{"z":[],"y":null}}`, `{"a":2,"b":1,"c":{"y":null,"z":[]}}`},
		{"keys by bytes", `{"b":1,"B":2,"é":3,"e":4,"":5}`, `{"":5,"B":2,"b":1,"e":4,"é":3}`},
		{"whitespace", "{\n  \"a\" : [ 1 , 2 ]\t}\r\n", `{"a":[1,2]}`},
		{"numbers as written", `[1.0, -0, 1e5, 1E+5, 0.10, 12345678901234567890123]`, `[1.0,-0,1e5,1E+5,0.10,12345678901234567890123]`},
		{"short escapes", `"a\"b\\c\/d\b\f\n\r\t"`, `"a\"b\\c/d\b\f\n\r\t"`},
		{"control characters", `"\u0000\u001f\u0007"`, `"\u0000\u001f\u0007"`},
		{"escaped letters unescaped", `"\u0041\u00e9\u20ac"`, `"Aé€"`},
		{"html and separators raw", `"<a>&\u2028\u2029"`, "\"<a>&\u2028\u2029\""},
		{"DEL raw", "\"\x7f\"", "\"\x7f\""},
		{"surrogate pair", `"\ud83c\udca1"`, `"🂡"`},
		{"lone surrogate", `"\ud800"`, "\"\ufffd\""},
		{"nested", `{"coup":{"cards":[{"r":"K","s":"H"}],"n":1}}`, `{"coup":{"cards":[{"r":"K","s":"H"}],"n":1}}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Canonicalize([]byte(tt.in))
			if err != nil {
				t.Fatalf("Canonicalize(%s): %v", tt.in, err)
			}
			if string(got) != tt.want {
				t.Fatalf("Canonicalize(%s) = %s, want %s", tt.in, got, tt.want)
			}
			again, err := Canonicalize(got)
			if err != nil || !bytes.Equal(again, got) {
				t.Fatalf("not idempotent: %s -> %s (%v)", got, again, err)
			}
		})
	}
}

func TestCanonicalizeRejects(t *testing.T) {
	tests := []struct {
		name, in string
	}{
		{"empty", ""},
		{"space", "  "},
		{"two values", "1 2"},
		{"trailing garbage", `{"a":1}x`},
		{"unclosed", `{"a":1`},
		{"trailing comma", `[1,]`},
		{"duplicate key", `{"a":1,"b":2,"a":3}`},
		{"duplicate nested key", `{"x":{"k":1,"k":1}}`},
		{"invalid UTF-8", "\"\xff\""},
		{"single quotes", `{'a':1}`},
		{"bare word", `nope`},
		{"NaN", `NaN`},
		{"leading zero", `01`},
		{"too deep", strings.Repeat("[", maxDepth+1) + strings.Repeat("]", maxDepth+1)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got, err := Canonicalize([]byte(tt.in)); err == nil {
				t.Fatalf("Canonicalize(%q) = %s, want an error", tt.in, got)
			}
		})
	}
	deep := strings.Repeat("[", maxDepth) + strings.Repeat("]", maxDepth)
	if _, err := Canonicalize([]byte(deep)); err != nil {
		t.Fatalf("depth %d refused: %v", maxDepth, err)
	}
}

func TestCanonicalJSONOfGoValues(t *testing.T) {
	type card struct {
		Rank string `json:"rank"`
		Suit string `json:"suit"`
	}
	tests := []struct {
		name string
		v    any
		want string
	}{
		{"struct fields sorted", struct {
			Z int  `json:"z"`
			A card `json:"a"`
		}{1, card{"K", "H"}}, `{"a":{"rank":"K","suit":"H"},"z":1}`},
		{"map", map[string]int64{"banker": 9, "player": 3}, `{"banker":9,"player":3}`},
		{"raw message", json.RawMessage(` {"b": 1, "a": 2} `), `{"a":2,"b":1}`},
		{"nil", nil, `null`},
		{"html kept", "<&>", `"<&>"`},
		{"float", 0.1, `0.1`},
		{"money in minor units", int64(-150000), `-150000`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := CanonicalJSON(tt.v)
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tt.want {
				t.Fatalf("CanonicalJSON(%#v) = %s, want %s", tt.v, got, tt.want)
			}
		})
	}
	if _, err := CanonicalJSON(make(chan int)); err == nil {
		t.Fatal("CanonicalJSON of a channel succeeded")
	}
}

// randomValue builds a random JSON-able value of bounded depth.
func randomValue(r *rand.Rand, depth int) any {
	n := r.IntN(8)
	if depth > 4 {
		n = r.IntN(5)
	}
	switch n {
	case 0:
		return nil
	case 1:
		return r.IntN(2) == 1
	case 2:
		return r.Int64() - r.Int64()
	case 3:
		return r.NormFloat64() * 1e6
	case 4:
		runes := []rune{'a', 'Z', '"', '\\', '\n', 0, 0x1f, 0x7f, '<', 'é', 0x2028, '🂡', ' '}
		var b strings.Builder
		for i := r.IntN(6); i > 0; i-- {
			b.WriteRune(runes[r.IntN(len(runes))])
		}
		return b.String()
	case 5, 6:
		m := map[string]any{}
		for i := r.IntN(5); i > 0; i-- {
			m[fmt.Sprint(randomValue(r, 99))] = randomValue(r, depth+1)
		}
		return m
	default:
		var a []any
		for i := r.IntN(5); i > 0; i-- {
			a = append(a, randomValue(r, depth+1))
		}
		return a
	}
}

// TestCanonicalProperties: for random values, the canonical form is valid
// JSON, means the same as encoding/json's, is a fixed point, and does not
// depend on the input's key order or layout.
func TestCanonicalProperties(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for i := 0; i < 2000; i++ {
		v := randomValue(r, 0)
		c, err := CanonicalJSON(v)
		if err != nil {
			t.Fatalf("CanonicalJSON(%#v): %v", v, err)
		}
		if !json.Valid(c) {
			t.Fatalf("invalid JSON %s", c)
		}
		var a, b any
		plain, _ := json.Marshal(v)
		json.Unmarshal(plain, &a)
		if err := json.Unmarshal(c, &b); err != nil || !reflect.DeepEqual(a, b) {
			t.Fatalf("canonical %s means something else than %s (%v)", c, plain, err)
		}
		if again, _ := Canonicalize(c); !bytes.Equal(again, c) {
			t.Fatalf("not a fixed point: %s -> %s", c, again)
		}
		indented, _ := json.MarshalIndent(v, "", "   ")
		if c2, err := Canonicalize(indented); err != nil || !bytes.Equal(c2, c) {
			t.Fatalf("layout changed the canonical form: %s vs %s (%v)", c2, c, err)
		}
	}
}

// FuzzCanonicalize: bodies arrive from outside through json.RawMessage and
// from exported files. No input may panic; accepted input must give valid
// JSON that is a fixed point and means the same.
func FuzzCanonicalize(f *testing.F) {
	for _, s := range []string{`{"b":1,"a":[true,null,"x\u0000"]}`, `1e5`, `"\ud800"`, `{"a":1,"a":2}`, "[[[[]]]]"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := Canonicalize(data)
		if err != nil {
			return
		}
		if !json.Valid(c) {
			t.Fatalf("Canonicalize(%q) = %q: invalid JSON", data, c)
		}
		again, err := Canonicalize(c)
		if err != nil || !bytes.Equal(again, c) {
			t.Fatalf("not a fixed point: %q -> %q -> %q (%v)", data, c, again, err)
		}
		var a, b any
		if json.Unmarshal(data, &a) == nil {
			json.Unmarshal(c, &b)
			if !reflect.DeepEqual(a, b) {
				t.Fatalf("meaning changed: %q -> %q", data, c)
			}
		}
	})
}
