//! Owner tokens after a real `fork()`: parent and child must never mint the same token.
//! Any entropy buffered in the process would be copied into the child, and both would
//! then hand out the same "unique" tokens.

#![cfg(unix)]
#![allow(unsafe_code)] // fork, pipe, read, write and waitpid have no safe wrappers in std.

use locksmith_core::OwnerToken;

#[test]
fn parent_and_child_mint_different_tokens_after_fork() {
    // Mint first, so any buffer the generator keeps is warm when the process is copied.
    let _warm = OwnerToken::generate().unwrap();
    let mut fds = [0i32; 2];
    // SAFETY: `fds` is a valid array of two file descriptors for pipe() to fill.
    assert_eq!(unsafe { libc::pipe(fds.as_mut_ptr()) }, 0);
    // SAFETY: the child only mints a token (a getrandom syscall and hex formatting, no
    // allocation or locks), writes it to the pipe and leaves with _exit.
    let pid = unsafe { libc::fork() };
    assert!(pid >= 0, "fork failed");
    if pid == 0 {
        let token = OwnerToken::generate().map(|t| *t.as_str().as_bytes().first_chunk::<32>().unwrap());
        let bytes = token.unwrap_or([b'!'; 32]);
        // SAFETY: writing 32 bytes from a live buffer to the pipe's write end.
        unsafe {
            libc::write(fds[1], bytes.as_ptr().cast(), bytes.len());
            libc::_exit(0);
        }
    }
    let parent_tokens: Vec<String> =
        (0..8).map(|_| OwnerToken::generate().unwrap().as_str().to_owned()).collect();
    let mut child = [0u8; 32];
    // SAFETY: reading at most 32 bytes into a live buffer; waiting for our own child.
    let read = unsafe {
        libc::close(fds[1]);
        let n = libc::read(fds[0], child.as_mut_ptr().cast(), child.len());
        let mut status = 0;
        libc::waitpid(pid, &raw mut status, 0);
        libc::close(fds[0]);
        n
    };
    assert_eq!(read, 32, "the child wrote its token");
    let child = std::str::from_utf8(&child).unwrap();
    assert_ne!(child, "!".repeat(32), "the child could not mint a token");
    assert!(
        !parent_tokens.iter().any(|t| t == child),
        "the child minted a token the parent also minted: {child}"
    );
}
