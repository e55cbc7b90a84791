package signedcmd

import (
	"encoding/json"
	"fmt"

	"github.com/tablectl/tablectl/coup"
)

// Screen is the first look at a command, taken in the MQTT client's message
// handler before the command is queued, so that junk never waits in a queue
// beside real commands. It is cheap: no signature is checked, nothing is
// decoded but the table and supervisor strings, an oversized payload is
// refused on its size alone and the scan of the rest stops as soon as both
// strings are read. It is sure: whatever it refuses, Verify refuses too
// (perhaps for an earlier reason: Verify checks the signature before the
// table). What it lets through names a supervisor of the keyring and this
// table, which a forger can write too: Verify decides. Safe for concurrent
// use.
type Screen struct {
	table string
	// keys is read at each check, so a reloaded keyring's supervisors
	// pass from the reload on.
	keys *Keyring
}

// NewScreen returns the screen for table and the supervisors of keys.
func NewScreen(table string, keys *Keyring) (*Screen, error) {
	if table == "" {
		return nil, fmt.Errorf("command screen: no table id")
	}
	if keys == nil {
		return nil, fmt.Errorf("command screen: no keyring")
	}
	return &Screen{table: table, keys: keys}, nil
}

// Check looks at payload, size bytes on the wire (payload may be cut
// short), and returns the refusal code Verify would give it, or "" when it
// may be a command of a known supervisor for this table. In the order of
// Verify: CodeOversized, CodeMalformed (not an object of strings and
// numbers, no table or supervisor, a repeated one), CodeUnknownKey,
// CodeWrongTable.
func (s *Screen) Check(payload []byte, size int) string {
	if size < len(payload) {
		size = len(payload)
	}
	if size > MaxBytes {
		return CodeOversized
	}
	table, supervisor, ok := scanNames(payload)
	switch {
	case !ok || len(table) == 0 || !coup.ValidStaffName(string(supervisor)):
		return CodeMalformed
	case !s.keys.hasName(supervisor):
		return CodeUnknownKey
	case string(table) != s.table:
		return CodeWrongTable
	}
	return ""
}

// scanNames reads the "table" and "supervisor" strings of a JSON object,
// skipping the other members' values without decoding them. ok is false
// when data cannot be a command: not an object, a value that is an object
// or an array (a command has only strings and integers), bad JSON before
// both names are read, either name missing or given twice. It stops as
// soon as it has both, so what follows is left to Verify.
func scanNames(data []byte) (table, supervisor []byte, ok bool) {
	sc := scanner{b: data}
	sc.space()
	if !sc.eat('{') {
		return nil, nil, false
	}
	var haveTable, haveSupervisor bool
	sc.space()
	if sc.eat('}') {
		return nil, nil, false
	}
	for {
		sc.space()
		key, ok := sc.str()
		if !ok {
			return nil, nil, false
		}
		sc.space()
		if !sc.eat(':') {
			return nil, nil, false
		}
		sc.space()
		var dst *[]byte
		var seen *bool
		switch string(key) {
		case "table":
			dst, seen = &table, &haveTable
		case "supervisor":
			dst, seen = &supervisor, &haveSupervisor
		}
		if dst != nil {
			if *seen {
				return nil, nil, false // a duplicate member: Canonicalize refuses it
			}
			v, ok := sc.str()
			if !ok {
				return nil, nil, false
			}
			*dst, *seen = v, true
		} else if !sc.skipScalar() {
			return nil, nil, false
		}
		sc.space()
		switch {
		case sc.eat(','):
		case sc.eat('}'):
			return table, supervisor, haveTable && haveSupervisor
		default:
			return nil, nil, false
		}
		// Both read; a later duplicate of either, or bad JSON further on,
		// is Verify's to find (it refuses either way).
		if haveTable && haveSupervisor {
			return table, supervisor, true
		}
	}
}

// scanner walks JSON text without building anything.
type scanner struct {
	b []byte
	i int
}

func (s *scanner) space() {
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

func (s *scanner) eat(c byte) bool {
	if s.i < len(s.b) && s.b[s.i] == c {
		s.i++
		return true
	}
	return false
}

// str reads a string. One without escapes is sliced, not copied; one with
// them (rare in a command) is decoded by encoding/json, as Verify would.
func (s *scanner) str() ([]byte, bool) {
	if !s.eat('"') {
		return nil, false
	}
	start, escaped := s.i, false
	for s.i < len(s.b) {
		switch c := s.b[s.i]; {
		case c == '"':
			raw := s.b[start:s.i]
			s.i++
			if !escaped {
				return raw, true
			}
			var v string
			if json.Unmarshal(s.b[start-1:s.i], &v) != nil {
				return nil, false
			}
			return []byte(v), true
		case c == '\\':
			escaped = true
			s.i += 2
		case c < 0x20:
			return nil, false
		default:
			s.i++
		}
	}
	return nil, false
}

// skipScalar passes over a string, a number or a literal. Its bytes are
// checked only as far as finding where it ends: Verify checks the rest.
func (s *scanner) skipScalar() bool {
	if s.i >= len(s.b) {
		return false
	}
	switch c := s.b[s.i]; {
	case c == '"':
		return s.skipStr()
	case c == '-' || '0' <= c && c <= '9':
		for s.i < len(s.b) {
			switch c := s.b[s.i]; {
			case '0' <= c && c <= '9', c == '-', c == '+', c == '.', c == 'e', c == 'E':
				s.i++
			default:
				return true
			}
		}
		return true
	default:
		for _, lit := range []string{"true", "false", "null"} {
			if len(s.b)-s.i >= len(lit) && string(s.b[s.i:s.i+len(lit)]) == lit {
				s.i += len(lit)
				return true
			}
		}
		return false
	}
}

// skipStr passes over a string without decoding it.
func (s *scanner) skipStr() bool {
	s.i++ // the opening quote
	for s.i < len(s.b) {
		switch c := s.b[s.i]; {
		case c == '"':
			s.i++
			return true
		case c == '\\':
			s.i += 2
		case c < 0x20:
			return false
		default:
			s.i++
		}
	}
	return false
}
