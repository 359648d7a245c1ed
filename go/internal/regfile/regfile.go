// Package regfile opens files that must be regular files (models,
// checkpoints and their JSON), refusing anything else without blocking:
// open(2) of a named pipe waits for a writer, possibly forever, and a
// device such as /dev/zero reads without end. ReadFile also bounds the
// size it reads.
package regfile

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"syscall"
)

// ErrNotRegular is wrapped by Open's and ReadFile's errors for a path that
// names something other than a regular file.
var ErrNotRegular = errors.New("not a regular file")

// Open opens the regular file at path for reading. It opens with
// O_NONBLOCK (a named pipe opens at once) and checks what it opened (no
// race with a path replaced between a stat and the open); a directory,
// named pipe, device or socket is an error "PATH is not a regular file
// (a named pipe)".
func Open(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	if err := Check(path, st.Mode()); err != nil {
		f.Close()
		return nil, err
	}
	// Reads of a regular file never wait anyway; clear the flag so that the
	// file behaves as one from os.Open.
	if rc, err := f.SyscallConn(); err == nil {
		rc.Control(func(fd uintptr) { syscall.SetNonblock(int(fd), false) })
	}
	return f, nil
}

// Check is Open's verdict on a file of mode m at path, for a caller that
// already has its FileInfo (from a stat, which does not block either):
// nil for a regular file, else "PATH is not a regular file (a named pipe)"
// wrapping ErrNotRegular.
func Check(path string, m fs.FileMode) error {
	if m.IsRegular() {
		return nil
	}
	return fmt.Errorf("%s is %w (%s)", path, ErrNotRegular, kind(m))
}

// ReadFile reads the regular file at path, which must hold at most limit
// bytes ("PATH is larger than the N bytes this reader accepts" otherwise;
// nothing larger is allocated).
func ReadFile(path string, limit int64) ([]byte, error) {
	f, err := Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if st.Size() > limit {
		return nil, tooLarge(path, limit)
	}
	// The file may grow while it is read: read one byte past the limit to
	// tell.
	data, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(data)) > limit {
		return nil, tooLarge(path, limit)
	}
	return data, nil
}

func tooLarge(path string, limit int64) error {
	return fmt.Errorf("%s is larger than the %d bytes this reader accepts", path, limit)
}

// kind names a file type that is not a regular file.
func kind(m fs.FileMode) string {
	switch {
	case m.IsDir():
		return "a directory"
	case m&fs.ModeNamedPipe != 0:
		return "a named pipe"
	case m&fs.ModeCharDevice != 0:
		return "a character device"
	case m&fs.ModeDevice != 0:
		return "a block device"
	case m&fs.ModeSocket != 0:
		return "a socket"
	}
	return "of type " + m.Type().String()
}
