package signedcmd

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"log/slog"
	"os"
	"time"

	"github.com/tablectl/tablectl/audit"
	"github.com/tablectl/tablectl/base/clock"
)

// DefaultWatchEvery is how often WatchKeyring looks at the keyring file.
const DefaultWatchEvery = 2 * time.Second

// KeyringWatch reloads Keys from the keyring file at Path when the file
// changes (its size, time or identity; a keyring is replaced whole). A file
// that does not load, or that Take refuses, changes nothing: the keys in
// use stay, and Refused hears why at each change until the file is right.
// So a key enrolled (in a keyring the officer signed), or one given a
// not_after, takes effect without restarting the table.
type KeyringWatch struct {
	Path string
	Keys *Keyring
	// Load reads and checks the file; nil is LoadKeyring (no signature
	// checked: the controller passes one that checks it).
	Load func(path string) (*Keyring, error)
	// Take, if set, hears of a keyring that loaded before it replaces
	// Keys; an error refuses it. The controller checks the serial and
	// records the keyring in the trail there, so no key is used before the
	// trail says so.
	Take func(next *Keyring) error
	// Refused, if set, hears of a change that was not taken, with the
	// SHA-256 (hex) of the file's bytes ("" when they could not be read).
	Refused func(err error, fileSHA256 string)
	Logger  *slog.Logger

	last    os.FileInfo
	started bool
}

// Check looks at the file once and reports whether Keys changed. The
// first call only notes the file as it is (the keyring was loaded from
// it).
func (w *KeyringWatch) Check() bool {
	log := w.Logger
	if log == nil {
		log = slog.Default()
	}
	fi, err := os.Stat(w.Path)
	if !w.started {
		w.started, w.last = true, fi
		return false
	}
	if err == nil && w.last != nil && os.SameFile(fi, w.last) && fi.Size() == w.last.Size() && fi.ModTime().Equal(w.last.ModTime()) {
		return false
	}
	if err != nil && w.last == nil {
		return false
	}
	w.last = fi
	refuse := func(err error) {
		sum := ""
		if b, rerr := readSmall(w.Path, maxKeyring); rerr == nil {
			s := sha256.Sum256(b)
			sum = hex.EncodeToString(s[:])
		}
		log.Error("keyring not reloaded: keeping the keys in use", "path", w.Path, "sha256", sum, "err", err)
		if w.Refused != nil {
			w.Refused(err, sum)
		}
	}
	if err != nil {
		refuse(err)
		return false
	}
	load := w.Load
	if load == nil {
		load = LoadKeyring
	}
	next, err := load(w.Path)
	if err == nil && w.Take != nil {
		err = w.Take(next)
	}
	if err != nil {
		refuse(err)
		return false
	}
	w.Keys.Replace(next)
	ids := make([]string, 0, next.Len())
	for _, k := range next.Keys() {
		ids = append(ids, k.Name+":"+audit.KeyID(k.PublicKey))
	}
	m := next.Meta()
	log.Info("keyring reloaded", "path", w.Path, "serial", m.Serial, "authority", m.Authority, "sha256", m.Hash, "keys", next.Len(), "ids", ids)
	return true
}

// WatchKeyring runs w.Check every `every` (0: DefaultWatchEvery) until ctx
// ends.
func WatchKeyring(ctx context.Context, w *KeyringWatch, every time.Duration, clk clock.Clock) {
	if every <= 0 {
		every = DefaultWatchEvery
	}
	w.Check()
	tick := clock.Or(clk).NewTicker(every)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C():
			w.Check()
		}
	}
}
