//! Per-rank host buffers, grown on demand and kept between cases.

use crate::backend::BackendError;

/// One rank's send, receive and staging buffers (8-byte aligned).
#[derive(Default)]
pub struct RankBuffers {
    send: Vec<u64>,
    recv: Vec<u64>,
    scratch: Vec<u64>,
}

fn grow(buf: &mut Vec<u64>, bytes: u64, what: &str) -> Result<(), BackendError> {
    let words = bytes.div_ceil(8) as usize + 1;
    if buf.len() >= words {
        return Ok(());
    }
    buf.clear();
    buf.shrink_to_fit();
    buf.try_reserve_exact(words).map_err(|_| {
        BackendError::OutOfMemory(format!(
            "cannot allocate {bytes} bytes for a {what} buffer: lower -e (maximum size) or use fewer --ranks"
        ))
    })?;
    buf.resize(words, 0);
    Ok(())
}

impl RankBuffers {
    /// Makes sure the buffers hold at least these many bytes.
    pub fn reserve(&mut self, send: u64, recv: u64, scratch: u64) -> Result<(), BackendError> {
        grow(&mut self.send, send, "send")?;
        grow(&mut self.recv, recv, "receive")?;
        grow(&mut self.scratch, scratch, "staging")
    }

    pub fn send_ptr(&mut self) -> *mut u8 {
        self.send.as_mut_ptr() as *mut u8
    }

    pub fn recv_ptr(&mut self) -> *mut u8 {
        self.recv.as_mut_ptr() as *mut u8
    }

    pub fn scratch_ptr(&mut self) -> *mut u8 {
        self.scratch.as_mut_ptr() as *mut u8
    }
}
