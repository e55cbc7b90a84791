package audit

import (
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/tablectl/tablectl/internal/testenv"
)

// tamperTrail writes a 20-row trail of table T1 with stored checkpoints at
// 5, 10, 15 and 20, and returns its path and the checkpoint at 20 as
// surveillance would hold it, read back from its exported file.
func tamperTrail(t *testing.T) (string, Checkpoint) {
	t.Helper()
	s, path := openTest(t, Options{Table: "T1", Key: testKey(), CheckpointEvery: 5})
	appendAll(t, s, sampleEvents(20))
	last, ok, err := s.LastCheckpoint(context.Background())
	if err != nil || !ok || last.Seq != 20 {
		t.Fatalf("LastCheckpoint = %+v %v %v", last, ok, err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "checkpoint.json")
	if err := WriteCheckpointFile(file, last); err != nil {
		t.Fatal(err)
	}
	ext, err := ReadCheckpointFile(file)
	if err != nil {
		t.Fatal(err)
	}
	return path, ext
}

// copyTrail copies a closed trail, with its WAL if a reader left one, to a
// new file.
func copyTrail(t *testing.T, src string) string {
	t.Helper()
	dst := filepath.Join(t.TempDir(), "copy.db")
	copyFile(t, src, dst)
	if _, err := os.Stat(src + "-wal"); err == nil {
		copyFile(t, src+"-wal", dst+"-wal")
	}
	return dst
}

func copyFile(t *testing.T, src, dst string) {
	t.Helper()
	in, err := os.Open(src)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	out, err := os.Create(dst)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(out, in); err != nil {
		t.Fatal(err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
}

// sqlite3Shell runs script through the sqlite3 command-line tool on path,
// exactly as someone with shell access to the controller could.
func sqlite3Shell(t *testing.T, path, script string) {
	t.Helper()
	bin := testenv.Command(t, "sqlite3", "sqlite3") // to tamper with a real trail as an insider would
	cmd := exec.Command(bin, "-bail", path)
	cmd.Stdin = strings.NewReader(script)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("sqlite3 %s: %v\n%s\nscript:\n%s", path, err, out, script)
	}
}

// findingSet renders findings as sorted "kind@seq" strings.
func findingSet(fs []Finding) []string {
	out := make([]string, 0, len(fs))
	for _, f := range fs {
		out = append(out, fmt.Sprintf("%s@%d", f.Kind, f.Seq))
	}
	slices.Sort(out)
	return out
}

func readRow(t *testing.T, path string, seq int64) Record {
	t.Helper()
	r, err := OpenReader(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	for rec, err := range r.Events(context.Background(), Query{From: seq, To: seq}) {
		if err != nil {
			t.Fatal(err)
		}
		return rec
	}
	t.Fatalf("no row %d in %s", seq, path)
	return Record{}
}

// rehashFrom rewrites rows from..to of the copy with new bodies and a
// recomputed, self-consistent chain: the attack the hash chain alone cannot
// catch. It returns the SQL.
func rehashFrom(t *testing.T, path string, from, to int64) string {
	t.Helper()
	var b strings.Builder
	prev := readRow(t, path, from-1).Hash
	for seq := from; seq <= to; seq++ {
		r := readRow(t, path, seq)
		r.Body = []byte(fmt.Sprintf(`{"card":"9H","forged":%d}`, seq))
		r.PrevHash = prev
		r.Hash = r.ComputeHash()
		fmt.Fprintf(&b, "UPDATE events SET body = '%s', prev_hash = '%s', hash = '%s' WHERE seq = %d;\n", r.Body, r.PrevHash, r.Hash, seq)
		prev = r.Hash
	}
	return b.String()
}

// appendRaw is the INSERT an insider would append after the last row of a
// trail: the next seq, linked, its hash computed over exactly the stored
// text, at as given.
func appendRaw(t *testing.T, path, at string) string {
	t.Helper()
	rd, err := OpenReader(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	head, err := rd.Head(context.Background())
	rd.Close()
	if err != nil {
		t.Fatal(err)
	}
	body := `{"action":"void","by":"mallory","id":"x1"}`
	h := rowHash(head.Seq+1, at, "in.cmd", 1, 3, []byte(body), head.Hash)
	return fmt.Sprintf("INSERT INTO events (seq, at, kind, shoe, coup, body, prev_hash, hash) VALUES (%d, '%s', 'in.cmd', 1, 3, '%s', '%s', '%s');",
		head.Seq+1, at, body, head.Hash, h)
}

// TestVerifyCatchesTampering edits, deletes and truncates rows of a real
// trail with the sqlite3 tool, dropping the triggers first as anyone with
// the file can, and checks Verify reports exactly what was done.
func TestVerifyCatchesTampering(t *testing.T) {
	// Alongside the other tests that wait on the disk's fsync, not after
	// them: most of its time is those waits (go test -short's slowest package).
	t.Parallel()
	orig, ext := tamperTrail(t)
	row9 := readRow(t, orig, 9)
	editedRow9 := row9
	editedRow9.Body = []byte(`{"card":"AS","hand":"player","shoe_seq":13}`)
	editedRow9.Hash = editedRow9.ComputeHash()
	const dropUpdate = "DROP TRIGGER events_no_update;\n"
	const dropDelete = "DROP TRIGGER events_no_delete;\n"
	const dropCPDelete = "DROP TRIGGER checkpoints_no_delete;\n"
	const dropCPUpdate = "DROP TRIGGER checkpoints_no_update;\n"
	miss := func(n int) []string { return slices.Repeat([]string{"missing_trigger@0"}, n) }
	otherSig := strings.Repeat("ab", ed25519.SignatureSize)

	tests := []struct {
		name     string
		script   func(path string) string
		external bool
		want     []string // with EverySignature
		// wantDefault is what the default (the newest checkpoint's
		// signature only) finds, when not want.
		wantDefault []string
	}{
		{
			name:   "add a table",
			script: func(string) string { return `CREATE TABLE extra (x INTEGER);` },
			want:   []string{"altered_schema@0"},
		},
		{
			name:   "add a view",
			script: func(string) string { return `CREATE VIEW recent AS SELECT seq, kind FROM events;` },
			want:   []string{"altered_schema@0"},
		},
		{
			name:   "append a forged row, hash and link right",
			script: func(path string) string { return appendRaw(t, path, "2025-03-14T15:30:00Z") },
			want:   []string{"unsigned_rows@21"},
		},
		{
			name:   "append a row whose time is not canonical",
			script: func(path string) string { return appendRaw(t, path, "2025-03-14T15:30:00.000Z") },
			want:   []string{"malformed@21", "unsigned_rows@21"},
		},
		{
			name:   "only the triggers dropped",
			script: func(string) string { return dropUpdate + dropDelete },
			want:   miss(2),
		},
		{
			name: "edit a card",
			script: func(string) string {
				return dropUpdate + `UPDATE events SET body = '{"card":"AS","hand":"player","shoe_seq":13}' WHERE seq = 9;`
			},
			want: append(miss(1), "edited@9"),
		},
		{
			name:   "edit the kind",
			script: func(string) string { return dropUpdate + `UPDATE events SET kind = 'void' WHERE seq = 12;` },
			want:   append(miss(1), "edited@12"),
		},
		{
			name: "edit the time",
			script: func(string) string {
				return dropUpdate + `UPDATE events SET at = '2025-03-14T15:09:00Z' WHERE seq = 3;`
			},
			want: append(miss(1), "edited@3"),
		},
		{
			name:   "edit the coup",
			script: func(string) string { return dropUpdate + `UPDATE events SET coup = 7 WHERE seq = 18;` },
			want:   append(miss(1), "edited@18"),
		},
		{
			name: "edit a card and its hash",
			script: func(string) string {
				return dropUpdate + fmt.Sprintf("UPDATE events SET body = '%s', hash = '%s' WHERE seq = 9;", editedRow9.Body, editedRow9.Hash)
			},
			want: append(miss(1), "broken_link@10"),
		},
		{
			name: "edit a checkpointed row and its hash",
			script: func(path string) string {
				r := readRow(t, path, 10)
				r.Kind = "void"
				return dropUpdate + fmt.Sprintf("UPDATE events SET kind = 'void', hash = '%s' WHERE seq = 10;", r.ComputeHash())
			},
			want: append(miss(1), "broken_link@11", "checkpoint_mismatch@10"),
		},
		{
			name:   "delete a row",
			script: func(string) string { return dropDelete + `DELETE FROM events WHERE seq = 9;` },
			want:   append(miss(1), "gap@9"),
		},
		{
			name:   "delete rows",
			script: func(string) string { return dropDelete + `DELETE FROM events WHERE seq BETWEEN 11 AND 13;` },
			want:   append(miss(1), "gap@11"),
		},
		{
			name:   "delete the first row",
			script: func(string) string { return dropDelete + `DELETE FROM events WHERE seq = 1;` },
			want:   append(miss(1), "gap@1"),
		},
		{
			name:   "delete a checkpointed row",
			script: func(string) string { return dropDelete + `DELETE FROM events WHERE seq = 15;` },
			want:   append(miss(1), "gap@15", "checkpoint_mismatch@15"),
		},
		{
			name:   "truncate behind a stored checkpoint",
			script: func(string) string { return dropDelete + `DELETE FROM events WHERE seq > 17;` },
			want:   append(miss(1), "truncated@20"),
		},
		{
			name:     "truncate behind both checkpoints",
			script:   func(string) string { return dropDelete + `DELETE FROM events WHERE seq > 17;` },
			external: true,
			want:     append(miss(1), "truncated@20", "truncated@20"),
		},
		{
			// Without a copy held elsewhere this leaves a shorter trail
			// that verifies: only the dropped triggers show.
			name: "truncate and delete the stored checkpoints",
			script: func(string) string {
				return dropDelete + dropCPDelete + `DELETE FROM events WHERE seq > 12; DELETE FROM checkpoints WHERE seq > 12;`
			},
			want: append(miss(2), "unsigned_rows@11"),
		},
		{
			name: "truncate and delete the stored checkpoints, external checkpoint",
			script: func(string) string {
				return dropDelete + dropCPDelete + `DELETE FROM events WHERE seq > 12; DELETE FROM checkpoints WHERE seq > 12;`
			},
			external: true,
			want:     append(miss(2), "truncated@20", "unsigned_rows@11"),
		},
		{
			name:   "rewrite the chain behind stored checkpoints",
			script: func(path string) string { return dropUpdate + rehashFrom(t, path, 12, 20) },
			want:   append(miss(1), "checkpoint_mismatch@15", "checkpoint_mismatch@20"),
		},
		{
			name: "rewrite the chain and delete the stored checkpoints, external checkpoint",
			script: func(path string) string {
				return dropUpdate + dropCPDelete + rehashFrom(t, path, 12, 20) + "DELETE FROM checkpoints WHERE seq > 10;"
			},
			external: true,
			want:     append(miss(2), "checkpoint_mismatch@20", "unsigned_rows@11"),
		},
		{
			name: "forge a checkpoint signature",
			script: func(string) string {
				return dropCPUpdate + fmt.Sprintf(`UPDATE checkpoints SET signature = '%s' WHERE seq = 10;`, otherSig)
			},
			want: append(miss(1), "bad_signature@10"),
			// Behind a valid chain, an earlier checkpoint's signature is
			// the signer's own misbehaviour: the default does not look.
			wantDefault: miss(1),
		},
		{
			name: "point a checkpoint at another hash",
			script: func(string) string {
				return dropCPUpdate + fmt.Sprintf(`UPDATE checkpoints SET head_hash = '%s' WHERE seq = 10;`, row9.Hash)
			},
			want:        append(miss(1), "bad_signature@10", "checkpoint_mismatch@10"),
			wantDefault: append(miss(1), "checkpoint_mismatch@10"),
		},
		{
			name:   "garble a checkpoint",
			script: func(string) string { return dropCPUpdate + `UPDATE checkpoints SET key_id = 'nobody' WHERE seq = 5;` },
			want:   append(miss(1), "malformed@5"),
		},
		{
			name: "change the table id",
			script: func(string) string {
				return "DROP TRIGGER meta_no_update; UPDATE meta SET value = 'T2' WHERE key = 'table';"
			},
			external:    true,
			want:        []string{"bad_signature@10", "bad_signature@15", "bad_signature@20", "bad_signature@5", "missing_trigger@0", "wrong_table@20"},
			wantDefault: []string{"bad_signature@20", "missing_trigger@0", "wrong_table@20"},
		},
		{
			name: "scribble over the chain's base",
			script: func(string) string {
				return "DROP TRIGGER meta_no_update; UPDATE meta SET value = 'x' WHERE key IN ('base_seq', 'base_hash');"
			},
			want: []string{"malformed@0", "missing_trigger@0"},
		},
		{
			name: "replace a trigger with one that does nothing",
			script: func(string) string {
				return dropUpdate + "CREATE TRIGGER events_no_update BEFORE UPDATE ON events BEGIN SELECT 1; END;"
			},
			want: []string{"altered_trigger@0"},
		},
		{
			name:   "add a trigger",
			script: func(string) string { return "CREATE TRIGGER sneaky AFTER INSERT ON events BEGIN SELECT 1; END;" },
			want:   []string{"altered_trigger@0"},
		},
		{
			name: "rebuild the events table without STRICT or triggers",
			script: func(string) string {
				return `ALTER TABLE events RENAME TO old; CREATE TABLE events (seq INTEGER PRIMARY KEY, at, kind, shoe, coup, body, prev_hash, hash);
INSERT INTO events SELECT * FROM old; DROP TABLE old; CREATE INDEX events_shoe_coup ON events (shoe, coup);
UPDATE events SET shoe = 'one' WHERE seq = 4;`
			},
			// The rename also rewrote checkpoints_at_event to name "old".
			want: append(miss(3), "altered_schema@0", "altered_trigger@0", "malformed@4"),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := copyTrail(t, orig)
			requireClean(t, mustVerify(t, path, VerifyOptions{PublicKeys: []ed25519.PublicKey{testPub()}, Checkpoints: []Checkpoint{ext}}))
			sqlite3Shell(t, path, tt.script(path))
			for _, every := range []bool{true, false} {
				opt := VerifyOptions{PublicKeys: []ed25519.PublicKey{testPub()}, EverySignature: every}
				if tt.external {
					opt.Checkpoints = []Checkpoint{ext}
				}
				rep := mustVerify(t, path, opt)
				want := slices.Clone(tt.want)
				if !every && tt.wantDefault != nil {
					want = slices.Clone(tt.wantDefault)
				}
				slices.Sort(want)
				if got := findingSet(rep.Findings); !slices.Equal(got, want) {
					t.Errorf("every signature %v: findings %v, want %v\n%s", every, got, want, reportText(rep))
				}
			}
		})
	}
}

func reportText(rep *Report) string {
	var b strings.Builder
	rep.WriteText(&b)
	return b.String()
}

// TestVerifyFindsRandomTampering changes one field of one random row of a
// trail (through the driver, triggers dropped) and checks Verify names that
// row or its successor, and nothing else.
func TestVerifyFindsRandomTampering(t *testing.T) {
	ctx := context.Background()
	orig, _ := tamperTrail(t)
	fields := []struct {
		col string
		set func(r *rand.Rand) string
	}{
		{"at", func(r *rand.Rand) string { return fmt.Sprintf("'2025-03-14T15:%02d:00Z'", r.IntN(60)) }},
		{"kind", func(r *rand.Rand) string { return "'void'" }},
		{"shoe", func(r *rand.Rand) string { return fmt.Sprint(2 + r.IntN(5)) }},
		{"coup", func(r *rand.Rand) string { return fmt.Sprint(100 + r.IntN(5)) }},
		{"body", func(r *rand.Rand) string { return fmt.Sprintf(`'{"card":"%dH"}'`, 2+r.IntN(8)) }},
		{"prev_hash", func(r *rand.Rand) string { return fmt.Sprintf("'%064x'", r.Uint64()) }},
		{"hash", func(r *rand.Rand) string { return fmt.Sprintf("'%064x'", r.Uint64()) }},
	}
	rng := rand.New(rand.NewPCG(4, 2))
	for i := 0; i < 40; i++ {
		path := copyTrail(t, orig)
		seq := int64(1 + rng.IntN(20))
		f := fields[rng.IntN(len(fields))]
		db := openRaw(t, path)
		if _, err := db.ExecContext(ctx, "DROP TRIGGER events_no_update"); err != nil {
			t.Fatal(err)
		}
		q := fmt.Sprintf("UPDATE events SET %s = %s WHERE seq = %d", f.col, f.set(rng), seq)
		if _, err := db.ExecContext(ctx, q); err != nil {
			t.Fatal(err)
		}
		db.Close()
		rep := mustVerify(t, path, VerifyOptions{PublicKeys: []ed25519.PublicKey{testPub()}})
		var named bool
		for _, fd := range rep.Findings {
			switch {
			case fd.Kind == FindingMissingTrigger:
			case fd.Seq == seq || fd.Seq == seq+1:
				named = true
			default:
				t.Errorf("%s: finding about an untouched row: %v", q, fd)
			}
		}
		if !named {
			t.Errorf("%s: no finding names row %d or %d: %v", q, seq, seq+1, rep.Findings)
		}
	}
}

// TestVerifyWrongKey: a key that signed none of the checkpoints is a wrong
// key file, reported as unverifiable, not as tampering; a key that signed
// some of them makes the others findings.
func TestVerifyWrongKey(t *testing.T) {
	orig, _ := tamperTrail(t)
	seed := sha256.Sum256([]byte("someone else"))
	other := ed25519.NewKeyFromSeed(seed[:]).Public().(ed25519.PublicKey)
	rep := mustVerify(t, orig, VerifyOptions{PublicKeys: []ed25519.PublicKey{other}})
	if rep.Tampered() || rep.OK() || rep.SignaturesChecked || !strings.Contains(rep.Unverifiable, KeyID(testPub())) {
		t.Fatalf("wrong key: tampered %v ok %v checked %v unverifiable %q\n%s", rep.Tampered(), rep.OK(), rep.SignaturesChecked, rep.Unverifiable, reportText(rep))
	}
	if txt := reportText(rep); !strings.Contains(txt, "UNVERIFIED") || strings.Contains(txt, "TAMPERED") {
		t.Fatalf("report:\n%s", txt)
	}
	rep = mustVerify(t, orig, VerifyOptions{PublicKeys: []ed25519.PublicKey{other, testPub()}})
	requireClean(t, rep)
}
