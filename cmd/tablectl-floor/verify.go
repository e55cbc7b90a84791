package main

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/tablectl/tablectl/audit"
	"github.com/tablectl/tablectl/floor"
	"github.com/tablectl/tablectl/internal/pkcs11signer"
)

func init() {
	register(command{Name: "verify", Short: "verify a table's trail and compare it row by row with the floor's witnessed copy", Run: runVerify})
}

// errTampered is returned when verify found something, after printing it.
var errTampered = errors.New("the audit trail did not verify")

// errUnverified: the trail could not be held against what proves it.
var errUnverified = errors.New("the checkpoint signatures were not verified")

func runVerify(args []string, stdout io.Writer) error {
	fs := newFlagSet("verify")
	fs.Usage = func() {
		usageHead(fs.Output(), "verify", "--db FILE --pubkey FILE --witness URL [flags]", `Verifies a table's trail as tablectl audit verify does (the chain, the
newest checkpoint's signature), then compares it row by row with the
floor's witnessed copy: every row the witness holds must be the trail's,
hash for hash. Exits 1 on any difference. docs/floor.md.`)
		printFlags(fs.Output(), fs)
	}
	db := fs.String("db", "", "the trail (required; opened read-only): a `file`, a directory of segments, or segment files in order, comma-separated")
	var keyFiles []string
	fs.Func("pubkey", "the table's checkpoint public key: a PEM `file` or a pkcs11: URI (repeatable; required)", func(s string) error {
		keyFiles = append(keyFiles, s)
		return nil
	})
	witness := fs.String("witness", "", "the floor's database: its `URL` (postgres://...) or SQLite file (the demo's) (required)")
	schema := fs.String("witness-schema", "floor", "the floor's `schema` in the witness's database")
	asJSON := fs.Bool("json", false, "print the reports as JSON")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *db == "" || *witness == "" || len(keyFiles) == 0 {
		return usageError(fs, "--db, --pubkey and --witness are required")
	}
	var keys []ed25519.PublicKey
	for _, f := range keyFiles {
		k, err := pkcs11signer.LoadPublic(f)
		if err != nil {
			return err
		}
		keys = append(keys, k)
	}
	rep, err := audit.Verify(context.Background(), *db, audit.VerifyOptions{PublicKeys: keys})
	if err != nil {
		return err
	}
	witnessed, err := verifyAgainstWitness(*db, *witness, *schema)
	if err != nil {
		return err
	}
	if *asJSON {
		err = errors.Join(rep.WriteJSON(stdout), json.NewEncoder(stdout).Encode(witnessed))
	} else {
		err = errors.Join(rep.WriteText(stdout), witnessed.WriteText(stdout))
	}
	if err != nil {
		return err
	}
	switch {
	case witnessed.NothingWitnessed:
		return fmt.Errorf("%w: the witness holds no row of table %s to compare with", errUnverified, witnessed.Table)
	case !witnessed.OK():
		return fmt.Errorf("%w: it differs from what the floor witnessed", errTampered)
	case rep.Tampered():
		return fmt.Errorf("%w: %d findings", errTampered, int64(len(rep.Findings))+rep.Omitted)
	case rep.Unverifiable != "":
		return fmt.Errorf("%w: %s", errUnverified, rep.Unverifiable)
	}
	return nil
}

// verifyAgainstWitness compares the trail at db with the floor's copy in
// the database at url.
func verifyAgainstWitness(db, url, schema string) (*floor.TrailReport, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	r, err := audit.OpenReader(ctx, db)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	if !strings.HasPrefix(url, "postgres://") && !strings.HasPrefix(url, "postgresql://") {
		// A SQLite witness must be there: opening a path that is not
		// would make an empty one, against which every row is merely
		// "never witnessed".
		if _, err := os.Stat(strings.TrimPrefix(url, "sqlite:")); err != nil {
			return nil, fmt.Errorf("witness: %w", err)
		}
	}
	st, err := floor.Open(ctx, url, schema)
	if err != nil {
		return nil, fmt.Errorf("witness: %w", err)
	}
	defer st.Close()
	return floor.VerifyTrail(ctx, r, st, r.Table())
}
