package audit

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"unicode/utf8"
)

// MaxBodyBytes bounds one event body in canonical form. Events describe a
// card, a button or a supervisor action; a megabyte is far beyond any of
// them, and the bound keeps a runaway caller from filling the disk.
const MaxBodyBytes = 1 << 20

// maxDepth bounds nesting in canonical JSON so hostile input cannot exhaust
// the stack.
const maxDepth = 64

// CanonicalJSON marshals v with encoding/json and returns its canonical form
// (see Canonicalize). It is what Append stores and hashes as an event body.
func CanonicalJSON(v any) ([]byte, error) {
	raw, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("marshal body: %w", err)
	}
	return Canonicalize(raw)
}

// Canonicalize returns the canonical form of the JSON text data:
//
//   - no insignificant whitespace;
//   - object keys sorted by their UTF-8 bytes; a duplicate key is an error;
//   - numbers exactly as written (encoding/json writes a Go value's number
//     the same way every time, so equal values give equal bytes);
//   - strings in double quotes with only '"', '\\' and the control
//     characters below U+0020 escaped: \b \f \n \r \t in short form, the
//     others as \u00xx in lower-case hex; every other character, including
//     '<', '>', '&', U+2028 and U+2029, is written as raw UTF-8. An escaped
//     lone surrogate becomes U+FFFD, as in encoding/json.
//
// The input must be valid UTF-8, hold exactly one JSON value and nest at
// most 64 deep. Canonicalize is idempotent: Canonicalize(Canonicalize(x))
// equals Canonicalize(x).
func Canonicalize(data []byte) ([]byte, error) {
	if !utf8.Valid(data) {
		return nil, errors.New("canonical json: input is not valid UTF-8")
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var out bytes.Buffer
	out.Grow(len(data))
	if err := canonValue(dec, &out, 0); err != nil {
		return nil, fmt.Errorf("canonical json: %w", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("canonical json: data after the top-level value")
	}
	return out.Bytes(), nil
}

// canonValue reads one value from dec and writes its canonical form.
func canonValue(dec *json.Decoder, out *bytes.Buffer, depth int) error {
	tok, err := dec.Token()
	if err != nil {
		if err == io.EOF {
			return errors.New("unexpected end of input")
		}
		return err
	}
	return canonToken(dec, out, tok, depth)
}

func canonToken(dec *json.Decoder, out *bytes.Buffer, tok json.Token, depth int) error {
	switch t := tok.(type) {
	case json.Delim:
		if depth >= maxDepth {
			return fmt.Errorf("nested deeper than %d", maxDepth)
		}
		switch t {
		case '{':
			return canonObject(dec, out, depth+1)
		case '[':
			return canonArray(dec, out, depth+1)
		}
		return fmt.Errorf("unexpected %q", rune(t))
	case string:
		appendString(out, t)
	case json.Number:
		out.WriteString(string(t))
	case bool:
		if t {
			out.WriteString("true")
		} else {
			out.WriteString("false")
		}
	case nil:
		out.WriteString("null")
	default:
		return fmt.Errorf("unexpected token %v", tok)
	}
	return nil
}

func canonArray(dec *json.Decoder, out *bytes.Buffer, depth int) error {
	out.WriteByte('[')
	for first := true; ; first = false {
		tok, err := dec.Token()
		if err != nil {
			return err
		}
		if d, ok := tok.(json.Delim); ok && d == ']' {
			out.WriteByte(']')
			return nil
		}
		if !first {
			out.WriteByte(',')
		}
		if err := canonToken(dec, out, tok, depth); err != nil {
			return err
		}
	}
}

func canonObject(dec *json.Decoder, out *bytes.Buffer, depth int) error {
	type member struct {
		key   string
		value []byte
	}
	var members []member
	for {
		tok, err := dec.Token()
		if err != nil {
			return err
		}
		if d, ok := tok.(json.Delim); ok && d == '}' {
			break
		}
		key, ok := tok.(string)
		if !ok {
			return fmt.Errorf("object key is %v, not a string", tok)
		}
		var v bytes.Buffer
		if err := canonValue(dec, &v, depth); err != nil {
			return err
		}
		members = append(members, member{key, v.Bytes()})
	}
	slices.SortFunc(members, func(a, b member) int {
		switch {
		case a.key < b.key:
			return -1
		case a.key > b.key:
			return 1
		}
		return 0
	})
	out.WriteByte('{')
	for i, m := range members {
		if i > 0 {
			if members[i-1].key == m.key {
				return fmt.Errorf("duplicate object key %q", m.key)
			}
			out.WriteByte(',')
		}
		appendString(out, m.key)
		out.WriteByte(':')
		out.Write(m.value)
	}
	out.WriteByte('}')
	return nil
}

const lowerHex = "0123456789abcdef"

// appendString writes s as a canonical JSON string. s is valid UTF-8: the
// decoder replaces bad sequences from escapes with U+FFFD and Canonicalize
// rejects raw invalid input.
func appendString(out *bytes.Buffer, s string) {
	out.WriteByte('"')
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '"':
			out.WriteString(`\"`)
		case c == '\\':
			out.WriteString(`\\`)
		case c == '\b':
			out.WriteString(`\b`)
		case c == '\f':
			out.WriteString(`\f`)
		case c == '\n':
			out.WriteString(`\n`)
		case c == '\r':
			out.WriteString(`\r`)
		case c == '\t':
			out.WriteString(`\t`)
		case c < 0x20:
			out.WriteString(`\u00`)
			out.WriteByte(lowerHex[c>>4])
			out.WriteByte(lowerHex[c&0xf])
		default:
			out.WriteByte(c)
		}
	}
	out.WriteByte('"')
}
