package command

import (
	"context"
	"log/slog"
	"os"
	"time"

	"github.com/tablectl/tablectl/audit"
	"github.com/tablectl/tablectl/internal/clock"
)

// DefaultWatchEvery is how often WatchKeyring looks at the keyring file.
const DefaultWatchEvery = 2 * time.Second

// WatchKeyring reloads kr from the file at path whenever the file changes
// (its size, time or identity; `tablectl enrol` replaces it whole), until
// ctx ends, looking every `every`. A file that does not load (missing,
// malformed, a repeated key) changes nothing: the keys in use stay, and
// the error is logged at each change until the file is right. So a key
// enrolled, or one given a not_after, takes effect without restarting the
// table.
func WatchKeyring(ctx context.Context, path string, kr *Keyring, every time.Duration, clk clock.Clock, log *slog.Logger) {
	if every <= 0 {
		every = DefaultWatchEvery
	}
	clk = clock.Or(clk)
	if log == nil {
		log = slog.Default()
	}
	last, _ := os.Stat(path)
	tick := clk.NewTicker(every)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C():
		}
		fi, err := os.Stat(path)
		if err == nil && last != nil && os.SameFile(fi, last) && fi.Size() == last.Size() && fi.ModTime().Equal(last.ModTime()) {
			continue
		}
		if err != nil && last == nil {
			continue
		}
		last = fi
		if err != nil {
			log.Error("keyring file gone: keeping the keys in use", "path", path, "err", err)
			continue
		}
		next, err := LoadKeyring(path)
		if err != nil {
			log.Error("keyring not reloaded: keeping the keys in use", "path", path, "err", err)
			continue
		}
		kr.Replace(next)
		ids := make([]string, 0, next.Len())
		for _, k := range next.keys {
			ids = append(ids, k.Name+":"+audit.KeyID(k.PublicKey))
		}
		log.Info("keyring reloaded", "path", path, "keys", next.Len(), "ids", ids)
	}
}
