package controller

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"

	"github.com/tablectl/tablectl/audit"
	"github.com/tablectl/tablectl/base/clock"
	"github.com/tablectl/tablectl/signedcmd"
)

// The supervisors' keyring: taken only signed by a keyring authority (the
// security officer's key, kept off the box), never older than the one the
// trail recorded last, and recorded in the trail before any of its keys
// is used: at start, at every reload, and at the head of each segment.

// openKeyring loads the keyring at start. A keyring refused (unsigned,
// signed by another key, changed after signing, older than the trail's) is
// recorded as refused and stops the start, saying why.
func (ctl *Controller) openKeyring(ctx context.Context) (*signedcmd.Keyring, error) {
	m := ctl.cfg.MQTT
	if m.Keyring == "" {
		return signedcmd.ParseKeyring([]byte(`{"keys":[]}`))
	}
	auth, err := signedcmd.LoadAuthorities(m.KeyringAuthority)
	if err != nil {
		return nil, fmt.Errorf("mqtt.keyring_authority: %w", err)
	}
	ctl.keyringAuthorities = auth
	before, err := ctl.lastRecordedKeyring(ctx)
	if err != nil {
		return nil, err
	}
	kr, _, err := signedcmd.LoadSignedKeyring(m.Keyring, auth)
	if err == nil && before != nil {
		err = signedcmd.CheckSuccession(before.Serial, before.SHA256, kr.Meta())
	}
	if err != nil {
		ctl.recordKeyringRefused(ctx, signedcmd.KeyringAtStart, err, fileSHA256(m.Keyring))
		return nil, fmt.Errorf("mqtt.keyring: %w", err)
	}
	var keys []signedcmd.KeyringKey
	if before != nil {
		keys = before.Keys
	}
	if err := ctl.recordKeyring(ctx, signedcmd.KeyringAtStart, keys, kr); err != nil {
		return nil, err
	}
	return kr, nil
}

// lastRecordedKeyring is the newest keyring row of the trail on the box
// (nil: none). One is recorded at every start, at the head of each segment
// and after each snapshot, so it is never in a segment retention removed
// and the search back for it reads few rows.
func (ctl *Controller) lastRecordedKeyring(ctx context.Context) (*signedcmd.KeyringBody, error) {
	rec, ok, err := ctl.rec.Store().LastOfKind(ctx, signedcmd.KindKeyring, 0)
	if err != nil || !ok {
		return nil, err
	}
	var b signedcmd.KeyringBody
	if err := json.Unmarshal(rec.Body, &b); err != nil {
		return nil, fmt.Errorf("the keyring the trail recorded at seq %d: %w", rec.Seq, err)
	}
	return &b, nil
}

// recordKeyring records kr, taken for reason in place of the keys before.
func (ctl *Controller) recordKeyring(ctx context.Context, reason string, before []signedcmd.KeyringKey, kr *signedcmd.Keyring) error {
	body := signedcmd.NewKeyringBody(reason, ctl.cfg.MQTT.Keyring, before, kr)
	rec, err := ctl.rec.Record(ctx, audit.Event{Kind: signedcmd.KindKeyring, Body: body})
	if err != nil {
		return fmt.Errorf("record the keyring: %w", err)
	}
	ids := func(ks []signedcmd.KeyringKey) []string {
		out := make([]string, len(ks))
		for i, k := range ks {
			out[i] = k.Name + ":" + k.KeyID
		}
		return out
	}
	ctl.log.Info("keyring recorded", "part", "keyring", "reason", reason, "seq", rec.Seq, "serial", body.Serial, "authority", body.Authority,
		"sha256", body.SHA256, "keys", len(body.Keys), "added", ids(body.Added), "removed", ids(body.Removed), "changed", ids(body.Changed))
	return nil
}

// recordKeyringRefused records a keyring refused, and why; fileSHA is the
// SHA-256 of the file's bytes ("" when unreadable).
func (ctl *Controller) recordKeyringRefused(ctx context.Context, reason string, why error, fileSHA string) {
	path := ctl.cfg.MQTT.Keyring
	if reason == signedcmd.KeyringAtStart { // a reload's refusal is logged by the watch
		ctl.log.Error("keyring refused: only a keyring the security officer signed is taken", "part", "keyring", "path", path, "sha256", fileSHA, "err", why)
	}
	body := signedcmd.KeyringRefusedBody{Reason: reason, Path: path, SHA256: fileSHA, Error: why.Error()}
	if _, err := ctl.rec.Record(ctx, audit.Event{Kind: signedcmd.KindKeyringRefused, Body: body}); err != nil {
		ctl.log.Warn("keyring refusal not recorded", "err", err)
	}
}

// fileSHA256 is the hex SHA-256 of the file at path ("" if unreadable).
func fileSHA256(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// newKeyringWatch is the watch of the keyring file: a change is taken only
// signed by an authority, not older than the keys in use, and once the
// trail has recorded it.
func (ctl *Controller) newKeyringWatch(keys *signedcmd.Keyring) *signedcmd.KeyringWatch {
	path, auth := ctl.cfg.MQTT.Keyring, ctl.keyringAuthorities
	w := &signedcmd.KeyringWatch{Path: path, Keys: keys, Logger: ctl.log.With("part", "keyring"),
		Load: func(p string) (*signedcmd.Keyring, error) {
			kr, _, err := signedcmd.LoadSignedKeyring(p, auth)
			return kr, err
		},
		Take: func(next *signedcmd.Keyring) error {
			cur := keys.Meta()
			if err := signedcmd.CheckSuccession(cur.Serial, cur.Hash, next.Meta()); err != nil {
				return err
			}
			return ctl.recordKeyring(context.Background(), signedcmd.KeyringReloaded, signedcmd.RecordedKeys(keys), next)
		},
		Refused: func(err error, fileSHA string) {
			ctl.recordKeyringRefused(context.Background(), signedcmd.KeyringReloaded, err, fileSHA)
		},
	}
	w.Check() // notes the file as loaded
	return w
}

// keyringInForce asks the keyring part to record the keys in force again
// (a segment opened, a snapshot was written), so that the newest keyring
// row is never far back. It never blocks: it is called where the recorder
// commits.
func (ctl *Controller) keyringInForce() {
	select {
	case ctl.keyringAgain <- struct{}{}:
	default:
	}
}

// watchKeyring looks at the keyring file every 2 s (tablectl keyring sign's
// output, installed, takes effect without a restart) and records the keys
// in force again when asked (keyringInForce).
func (ctl *Controller) watchKeyring(ctx context.Context) {
	tick := clock.Real.NewTicker(signedcmd.DefaultWatchEvery) // the file's times are the wall clock's
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C():
			ctl.keyWatch.Check()
		case <-ctl.keyringAgain:
			keys := signedcmd.RecordedKeys(ctl.keys)
			if err := ctl.recordKeyring(ctx, signedcmd.KeyringInForce, keys, ctl.keys); err != nil {
				ctl.log.Warn("the keyring in force not recorded again", "err", err)
			}
		}
	}
}
