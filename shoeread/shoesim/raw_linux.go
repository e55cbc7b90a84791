package shoesim

import (
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// makeRaw puts a terminal in raw mode, as cfmakeraw(3) does: no line
// editing, echo, signals or CR/LF translation; 8 data bits.
func makeRaw(f *os.File) error {
	rc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var opErr error
	err = rc.Control(func(fd uintptr) {
		t, err := unix.IoctlGetTermios(int(fd), unix.TCGETS)
		if err != nil {
			opErr = fmt.Errorf("get terminal settings: %w", err)
			return
		}
		t.Iflag &^= unix.IGNBRK | unix.BRKINT | unix.PARMRK | unix.ISTRIP | unix.INLCR | unix.IGNCR | unix.ICRNL | unix.IXON
		t.Oflag &^= unix.OPOST
		t.Lflag &^= unix.ECHO | unix.ECHONL | unix.ICANON | unix.ISIG | unix.IEXTEN
		t.Cflag &^= unix.CSIZE | unix.PARENB
		t.Cflag |= unix.CS8
		t.Cc[unix.VMIN], t.Cc[unix.VTIME] = 1, 0
		if err := unix.IoctlSetTermios(int(fd), unix.TCSETS, t); err != nil {
			opErr = fmt.Errorf("set raw mode: %w", err)
		}
	})
	if err != nil {
		return err
	}
	return opErr
}
