//go:build !linux

package shoesim

import "os"

// makeRaw is left to the controller's serial library, which sets raw mode
// when it opens the port; only Linux is a supported table box.
func makeRaw(*os.File) error { return nil }
