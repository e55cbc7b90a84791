package smallfile

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestRead(t *testing.T) {
	dir := t.TempDir()
	write := func(name, s string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	for _, tc := range []struct {
		name, content string
		max           int64
		want, err     string
	}{
		{"fits", "12345", 5, "12345", ""},
		{"over", "123456", 5, "", "larger than 5 bytes"},
		{"empty", "", 5, "", ""},
	} {
		got, err := Read(write(tc.name, tc.content), tc.max)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%s: err %v, want %q", tc.name, err, tc.err)
			}
			continue
		}
		if err != nil || string(got) != tc.want {
			t.Errorf("%s: %q, %v", tc.name, got, err)
		}
	}
	if _, err := Read(filepath.Join(dir, "absent"), 5); !os.IsNotExist(err) {
		t.Errorf("absent file: %v", err)
	}
	if s, err := Secret(write("pw", "s3cret\r\n")); err != nil || s != "s3cret" {
		t.Errorf("Secret: %q, %v", s, err)
	}
	if _, err := Secret(write("big", strings.Repeat("x", MaxSecret+1))); err == nil {
		t.Error("a secret over MaxSecret was read")
	}
}
