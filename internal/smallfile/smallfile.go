// Package smallfile reads the small files tablectl takes from outside (the
// config, a rule profile, password files) with a bound, so a wrong path to
// a huge file is an error, not the table box's memory.
package smallfile

import (
	"fmt"
	"io"
	"os"
	"strings"
)

// MaxSecret bounds a password file.
const MaxSecret = 4096

// Read reads path, refusing a file over max bytes.
func Read(path string, max int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, max+1))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	if int64(len(data)) > max {
		return nil, fmt.Errorf("%s is larger than %d bytes", path, max)
	}
	return data, nil
}

// Secret reads a one-line password file (at most MaxSecret bytes) without
// its line ending.
func Secret(path string) (string, error) {
	b, err := Read(path, MaxSecret)
	if err != nil {
		return "", err
	}
	return strings.TrimRight(string(b), "\r\n"), nil
}
