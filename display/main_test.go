package display_test

import (
	"os"
	"testing"

	"github.com/tablectl/tablectl/internal/browsertest"
)

// TestMain stops the browser the package's browser tests share.
func TestMain(m *testing.M) {
	code := m.Run()
	browsertest.CloseShared()
	os.Exit(code)
}
