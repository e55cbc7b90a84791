package signedcmd

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// fsizeChild names the keyring a child process of TestEnrolFileWriteFails
// enrols into under a file size limit.
const fsizeChild = "TABLECTL_TEST_ENROL_FSIZE"

// TestEnrolFileWriteFails: a keyring that cannot be written whole (the
// process's file size limit stops the write part-way, as a full disk
// would) is an error, and the keyring on disk stays as it was, with no
// file left beside it: the part-written file is never renamed over it
// (issue 36: the write's error was dropped, and the file renamed anyway).
// The limit is set in a child process, so no other test writes under it.
func TestEnrolFileWriteFails(t *testing.T) {
	if path := os.Getenv(fsizeChild); path != "" {
		signal.Ignore(syscall.SIGXFSZ) // the write fails with EFBIG instead
		if err := syscall.Setrlimit(syscall.RLIMIT_FSIZE, &syscall.Rlimit{Cur: 512, Max: 512}); err != nil {
			fmt.Println("setrlimit:", err)
			os.Exit(2)
		}
		pub, _, _ := ed25519.GenerateKey(rand.Reader)
		err := EnrolFile(path, Enrolment{Name: "bob", PublicKey: pub, Comment: strings.Repeat("a long note ", 60)})
		if err == nil {
			fmt.Println("enrolled: no error")
			os.Exit(3)
		}
		fmt.Println("refused:", err)
		os.Exit(0)
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "supervisors.json")
	pub, _, _ := ed25519.GenerateKey(rand.Reader)
	if err := EnrolFile(path, Enrolment{Name: "ann", PublicKey: pub}); err != nil {
		t.Fatal(err)
	}
	before, _ := os.ReadFile(path)
	if len(before) >= 512 {
		t.Fatalf("the keyring is %d bytes: the limit would not bite part-way", len(before))
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestEnrolFileWriteFails$")
	cmd.Env = append(os.Environ(), fsizeChild+"="+path)
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		t.Fatal(err)
	}
	if err != nil || !bytes.Contains(out, []byte("file too large")) {
		t.Fatalf("enrolment under a 512-byte file size limit: %v\n%s", err, out)
	}
	if after, _ := os.ReadFile(path); !bytes.Equal(after, before) {
		t.Fatalf("the keyring changed:\n%s", after)
	}
	if files, _ := os.ReadDir(dir); len(files) != 1 {
		t.Fatalf("left in the keyring's directory: %v", files)
	}
	if _, err := LoadKeyring(path); err != nil {
		t.Fatal(err)
	}
}
