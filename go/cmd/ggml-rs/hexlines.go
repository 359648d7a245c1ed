package main

import (
	"bufio"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
)

// maxHexLine bounds one line of a tokenize -batch file: 64 MiB of hex (a
// 32 MiB text). Only one line is held at a time, so an endless line (or
// input) ends with an error instead of exhausting memory.
const maxHexLine = 64 << 20

// openBatch opens the file name of tokenize -batch ("-": stdin).
func openBatch(name string) (io.ReadCloser, error) {
	if name == "-" {
		return io.NopCloser(os.Stdin), nil
	}
	return os.Open(name)
}

// scanHexLines calls f with the text of each line of r, one hex-encoded
// text a line: an empty line is the empty text, a final newline is
// optional and "\r\n" ends a line too. A line may hold at most limit hex
// digits; name is r's name for errors. It stops at f's first error.
func scanHexLines(r io.Reader, name string, limit int, f func(text string) error) error {
	sc := bufio.NewScanner(r)
	// The buffer must hold a whole line and its "\r\n". The scanner
	// doubles it as lines grow, up to size: starting at size/1024 (rounded
	// up), the tenth doubling reaches size exactly, with no extra step of
	// the full size.
	size := limit + 2
	sc.Buffer(make([]byte, (size+1023)/1024), size)
	n := 0
	for sc.Scan() {
		n++
		line := sc.Bytes()
		if len(line) > limit {
			return lineTooLong(name, n, limit)
		}
		text := make([]byte, hex.DecodedLen(len(line)))
		if _, err := hex.Decode(text, line); err != nil {
			return fmt.Errorf("%s:%d: not hex: %v", name, n, err)
		}
		if err := f(string(text)); err != nil {
			return err
		}
	}
	if err := sc.Err(); errors.Is(err, bufio.ErrTooLong) {
		return lineTooLong(name, n+1, limit)
	} else if err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	return nil
}

func lineTooLong(name string, line, limit int) error {
	return fmt.Errorf("%s:%d: line longer than %s of hex, the limit of tokenize -batch", name, line, bytesIEC(uint64(limit)))
}
