//! The calling thread's side of rank 0's event loop: commands on a
//! channel plus a waker, and what the loop records for the caller (who
//! left, who joined). Its own file so the shared state can hold it without
//! reaching into the loop.

use crate::control::{lock, PeerHello};
use mio::Waker;
use std::sync::atomic::AtomicBool;
use std::sync::mpsc::{self, Sender};
use std::sync::{Arc, Mutex};
use std::thread::{self, JoinHandle};
use std::time::Duration;

/// What the calling thread asks of the loop.
pub(in crate::control) enum Command {
    /// Send `frame` to every joined rank but `except`; then, if given, say
    /// so on `written` (a failure notice is in the kernel's hands before
    /// the caller goes on, as when the caller wrote it itself).
    SendAll {
        except: Option<usize>,
        frame: Arc<[u8]>,
        written: Option<Sender<()>>,
    },
    /// Goodbye to everyone, read until each closes (1 s at most), stop.
    Goodbye,
    /// Drop every connection once what is queued is written (1 s at most).
    Close,
}

/// The calling thread's side of the loop.
pub(in crate::control) struct HubHandle {
    commands: Mutex<Sender<Command>>,
    waker: Waker,
    /// Per rank: said goodbye.
    pub(in crate::control) left: Vec<AtomicBool>,
    /// Per rank: its hello, once admitted.
    pub(in crate::control) hellos: Mutex<Vec<Option<PeerHello>>>,
    thread: Mutex<Option<JoinHandle<()>>>,
}

impl HubHandle {
    /// The handle to a loop of `world_size` ranks that has admitted only
    /// this one (`own`): commands go on `commands`, then `waker` wakes it.
    pub(super) fn new(
        world_size: usize,
        own: PeerHello,
        waker: Waker,
        commands: Sender<Command>,
    ) -> HubHandle {
        let mut hellos = vec![None; world_size];
        hellos[0] = Some(own);
        HubHandle {
            commands: Mutex::new(commands),
            waker,
            left: (0..world_size).map(|_| AtomicBool::new(false)).collect(),
            hellos: Mutex::new(hellos),
            thread: Mutex::new(None),
        }
    }

    /// Records the loop's thread, for [`HubHandle::finish`] to join.
    pub(super) fn set_thread(&self, thread: JoinHandle<()>) {
        *lock(&self.thread) = Some(thread);
    }

    /// Hands `command` to the loop; false if the loop has ended.
    pub(in crate::control) fn command(&self, command: Command) -> bool {
        let sent = lock(&self.commands).send(command).is_ok();
        sent && self.waker.wake().is_ok()
    }

    /// Sends `frame` to every joined rank but `except` and waits (1 s at
    /// most) until the loop has written it; not on the loop's own thread
    /// (a failure hook), where waiting would only wait out the second.
    pub(in crate::control) fn send_all_now(&self, frame: Arc<[u8]>, except: Option<usize>) {
        let (written, done) = mpsc::channel();
        let on_loop = lock(&self.thread)
            .as_ref()
            .is_some_and(|t| t.thread().id() == thread::current().id());
        let written = (!on_loop).then_some(written);
        let waiting = written.is_some();
        if self.command(Command::SendAll {
            except,
            frame,
            written,
        }) && waiting
        {
            let _ = done.recv_timeout(Duration::from_secs(1));
        }
    }

    /// `command`, then waits for the loop to end.
    pub(in crate::control) fn finish(&self, command: Command) {
        self.command(command);
        // Taken first: the lock is not held while the loop finishes.
        let thread = lock(&self.thread).take();
        if let Some(thread) = thread {
            let _ = thread.join();
        }
    }
}
