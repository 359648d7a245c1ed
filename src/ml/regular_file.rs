//! Opening a model file without blocking on what is not one.
//!
//! `open(2)` of a named pipe waits for a writer, possibly forever, and a
//! device such as /dev/zero reads without end. A model path must name a
//! regular file: [`open`] opens with `O_NONBLOCK` (a pipe opens at once),
//! checks the type of what it opened with `fstat` (no race with a path
//! swapped between a `stat` and the `open`), and refuses anything else.

use std::fs::{File, Metadata, OpenOptions};
use std::io;
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::os::unix::io::AsRawFd;
use std::path::Path;

/// Opens the regular file at `path` for reading and returns it with its
/// metadata. Anything else (a directory, a named pipe, a device, a socket)
/// is an error of kind `InvalidInput`, "not a regular file (a named pipe)".
pub(crate) fn open(path: impl AsRef<Path>) -> io::Result<(File, Metadata)> {
    let f = OpenOptions::new().read(true).custom_flags(libc::O_NONBLOCK).open(path)?;
    let meta = f.metadata()?;
    if !meta.is_file() {
        let t = meta.file_type();
        let what = if t.is_dir() {
            "a directory"
        } else if t.is_fifo() {
            "a named pipe"
        } else if t.is_char_device() {
            "a character device"
        } else if t.is_block_device() {
            "a block device"
        } else if t.is_socket() {
            "a socket"
        } else {
            "of an unknown type"
        };
        return Err(io::Error::new(io::ErrorKind::InvalidInput, format!("not a regular file ({what})")));
    }
    // Reads of a regular file never wait anyway; clear the flag so the
    // handle behaves as one from File::open.
    let fd = f.as_raw_fd();
    // SAFETY: fcntl on a descriptor this function owns.
    unsafe {
        let flags = libc::fcntl(fd, libc::F_GETFL);
        if flags >= 0 {
            libc::fcntl(fd, libc::F_SETFL, flags & !libc::O_NONBLOCK);
        }
    }
    Ok((f, meta))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refuses_what_is_not_a_regular_file() {
        let e = open("/dev/null").unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::InvalidInput);
        assert_eq!(e.to_string(), "not a regular file (a character device)");
        let e = open(std::env::temp_dir()).unwrap_err();
        assert_eq!(e.to_string(), "not a regular file (a directory)");
        assert_eq!(open("/nonexistent/x").unwrap_err().kind(), io::ErrorKind::NotFound);
    }
}
