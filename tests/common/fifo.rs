//! Named pipes for the tests that a model path naming one is refused
//! without blocking.

use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::time::Duration;

/// How long a refusal may take; a reader blocked in open(2) is released
/// after this (see [`make`]), so a regression fails instead of hanging.
pub const PATIENCE: Duration = Duration::from_secs(5);

/// Makes a named pipe at `path` (replacing what is there) and, after
/// [`PATIENCE`], opens it once for writing without blocking and closes it:
/// a reader still blocked in open(2) then returns and sees end of file.
pub fn make(path: &Path) {
    let _ = std::fs::remove_file(path);
    let c = CString::new(path.as_os_str().as_bytes()).unwrap();
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0, "mkfifo {}", path.display());
    std::thread::spawn(move || {
        std::thread::sleep(PATIENCE);
        let fd = unsafe { libc::open(c.as_ptr(), libc::O_WRONLY | libc::O_NONBLOCK) };
        if fd >= 0 {
            unsafe { libc::close(fd) };
        }
    });
}
