package shoesim

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"sync"
	"time"

	"github.com/creack/pty"
	"golang.org/x/sys/unix"
)

// PTY is a pseudo-terminal standing in for the shoe's cable: the Sim writes
// to its master side and the controller opens its slave side (/dev/pts/N)
// as it would a serial port. Unplug closes the master, so the slave hangs up
// and vanishes, as a USB adapter does when pulled; Replug makes a new
// pseudo-terminal, which usually has another name. With a link path, PTY
// keeps a symlink there pointing at the current slave, removed while
// unplugged and repointed atomically on replug, as udev keeps
// /dev/serial/by-id, so the controller can be configured with one stable
// path.
type PTY struct {
	link string

	mu     sync.Mutex
	master *os.File // nil while unplugged
	path   string
	closed bool
}

// OpenPTY makes a pseudo-terminal and, when link is not empty, the symlink
// link to its slave. An existing file at link that is not a symlink is left
// alone and is an error.
func OpenPTY(link string) (*PTY, error) {
	if link != "" {
		if fi, err := os.Lstat(link); err == nil && fi.Mode()&fs.ModeSymlink == 0 {
			return nil, fmt.Errorf("pty link %s: exists and is not a symlink; refusing to replace it", link)
		}
	}
	p := &PTY{link: link}
	if err := p.open(); err != nil {
		return nil, err
	}
	return p, nil
}

// Path is the current slave device, such as /dev/pts/3 ("" while unplugged).
func (p *PTY) Path() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.master == nil {
		return ""
	}
	return p.path
}

// Link is the symlink kept to the slave ("" for none).
func (p *PTY) Link() string { return p.link }

// open makes a new pseudo-terminal and points the link at it. p.mu is held
// or p is not yet shared.
func (p *PTY) open() error {
	m, s, err := pty.Open()
	if err != nil {
		return fmt.Errorf("open pseudo-terminal: %w", err)
	}
	path := s.Name()
	// Raw before anyone opens it, so bytes written before the controller
	// does are not cooked (CR to LF, echo) by the line discipline.
	rawErr := makeRaw(s)
	// The slave is the controller's to open: holding it would keep the
	// pseudo-terminal from hanging up when the controller closes it.
	s.Close()
	master, err := nonblocking(m)
	if err == nil {
		err = rawErr
	}
	if err != nil {
		if master != nil {
			master.Close()
		}
		return fmt.Errorf("pseudo-terminal %s: %w", path, err)
	}
	if p.link != "" {
		if err := repoint(p.link, path); err != nil {
			master.Close()
			return err
		}
	}
	p.master, p.path = master, path
	return nil
}

// nonblocking returns m's descriptor as a file in non-blocking mode, so
// that writes honour deadlines and Close interrupts them (pty.Open's file
// is in blocking mode), and closes m.
func nonblocking(m *os.File) (*os.File, error) {
	defer m.Close()
	rc, err := m.SyscallConn()
	if err != nil {
		return nil, err
	}
	fd := -1
	var dupErr error
	if err := rc.Control(func(f uintptr) { fd, dupErr = unix.FcntlInt(f, unix.F_DUPFD_CLOEXEC, 0) }); err != nil {
		return nil, err
	}
	if dupErr != nil {
		return nil, fmt.Errorf("dup master: %w", dupErr)
	}
	if err := unix.SetNonblock(fd, true); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("master non-blocking: %w", err)
	}
	return os.NewFile(uintptr(fd), "/dev/ptmx"), nil
}

// repoint makes link a symlink to target, atomically: a reader sees the old
// target or the new, never no link.
func repoint(link, target string) error {
	tmp := fmt.Sprintf("%s.%d.tmp", link, os.Getpid())
	os.Remove(tmp)
	if err := os.Symlink(target, tmp); err != nil {
		return fmt.Errorf("pty link: %w", err)
	}
	if err := os.Rename(tmp, link); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("pty link: %w", err)
	}
	return nil
}

// Write sends b whole to the controller's side. It blocks while the
// terminal's buffer is full (the controller is not reading) and gives up
// when ctx is done or the PTY is unplugged or closed.
func (p *PTY) Write(ctx context.Context, b []byte) error {
	p.mu.Lock()
	m := p.master
	p.mu.Unlock()
	if m == nil {
		return errors.New("pseudo-terminal is unplugged")
	}
	if err := m.SetWriteDeadline(time.Time{}); err != nil {
		return err
	}
	stop := context.AfterFunc(ctx, func() { m.SetWriteDeadline(time.Unix(1, 0)) })
	defer stop()
	if _, err := m.Write(b); err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return err
	}
	return nil
}

// Unplug closes the master, so the slave hangs up and vanishes, and removes
// the link.
func (p *PTY) Unplug() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.unplugLocked()
}

func (p *PTY) unplugLocked() error {
	if p.master == nil {
		return nil
	}
	if p.link != "" {
		// Only our own link: someone may have put another in its place.
		if t, err := os.Readlink(p.link); err == nil && t == p.path {
			os.Remove(p.link)
		}
	}
	err := p.master.Close()
	p.master = nil
	return err
}

// Replug makes a new pseudo-terminal and points the link at it.
func (p *PTY) Replug() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return errors.New("pseudo-terminal is closed")
	}
	if p.master != nil {
		return nil
	}
	return p.open()
}

// Close unplugs for good.
func (p *PTY) Close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.closed = true
	return p.unplugLocked()
}
