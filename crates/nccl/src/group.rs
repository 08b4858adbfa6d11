//! NCCL groups that always close.
//!
//! Calls between ncclGroupStart and ncclGroupEnd are only queued; a group
//! left open (an early `?` return) would swallow every later call of the
//! thread. [`Group`] opens a group when made and closes it exactly once:
//! [`Group::end`] returns ncclGroupEnd's result, and dropping an unfinished
//! group (an error inside it) closes it too.

use crate::error::NcclError;

/// The two calls a group needs; [`crate::ffi::Nccl`] implements it, and
/// tests use a fake that counts.
pub trait GroupApi {
    /// `ncclGroupStart`
    fn group_start(&self) -> Result<(), NcclError>;
    /// `ncclGroupEnd`
    fn group_end(&self) -> Result<(), NcclError>;
}

/// An open NCCL group; closed by [`Group::end`] or, failing that, on drop.
#[must_use = "a group is closed by end(); dropping it ends it and loses the result"]
pub struct Group<'a, G: GroupApi + ?Sized> {
    api: &'a G,
    open: bool,
}

impl<'a, G: GroupApi + ?Sized> Group<'a, G> {
    /// Calls ncclGroupStart.
    pub fn start(api: &'a G) -> Result<Group<'a, G>, NcclError> {
        api.group_start()?;
        Ok(Group { api, open: true })
    }

    /// Opens a group only when `cond` holds (several GPUs, `-m` > 1).
    pub fn start_if(cond: bool, api: &'a G) -> Result<Option<Group<'a, G>>, NcclError> {
        cond.then(|| Group::start(api)).transpose()
    }

    /// Calls ncclGroupEnd, which launches what the group queued.
    pub fn end(mut self) -> Result<(), NcclError> {
        self.open = false;
        self.api.group_end()
    }
}

/// Ends an optional group (see [`Group::start_if`]).
pub fn end_if<G: GroupApi + ?Sized>(group: Option<Group<'_, G>>) -> Result<(), NcclError> {
    group.map_or(Ok(()), Group::end)
}

impl<G: GroupApi + ?Sized> Drop for Group<'_, G> {
    fn drop(&mut self) {
        if self.open {
            // Only reached on an error path: that error is what the caller
            // reports, so this one is only shown with COLLBENCH_DEBUG.
            if let Err(e) = self.api.group_end() {
                if std::env::var_os("COLLBENCH_DEBUG").is_some() {
                    collbench_core::diag::line(&format!(
                        "collbench debug: closing a group after an error: {e}"
                    ));
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::{Cell, RefCell};

    /// Records the calls; fails ncclGroupEnd when told to.
    #[derive(Default)]
    struct Fake {
        calls: RefCell<Vec<&'static str>>,
        depth: Cell<i32>,
        fail_end: bool,
    }

    impl GroupApi for Fake {
        fn group_start(&self) -> Result<(), NcclError> {
            self.calls.borrow_mut().push("start");
            self.depth.set(self.depth.get() + 1);
            Ok(())
        }
        fn group_end(&self) -> Result<(), NcclError> {
            self.calls.borrow_mut().push("end");
            self.depth.set(self.depth.get() - 1);
            if self.fail_end {
                return Err(err("ncclGroupEnd"));
            }
            Ok(())
        }
    }

    fn err(call: &str) -> NcclError {
        NcclError::Call {
            call: call.into(),
            code: 5,
            text: "invalid usage".into(),
            last: None,
        }
    }

    /// A group with two calls inside; the second fails when `fail` is set.
    fn body(api: &Fake, fail: bool) -> Result<(), NcclError> {
        let g = Group::start(api)?;
        api.calls.borrow_mut().push("send");
        if fail {
            return Err(err("ncclRecv"));
        }
        api.calls.borrow_mut().push("recv");
        g.end()
    }

    #[test]
    fn success_closes_the_group_exactly_once() {
        let f = Fake::default();
        body(&f, false).unwrap();
        assert_eq!(*f.calls.borrow(), ["start", "send", "recv", "end"]);
        assert_eq!(f.depth.get(), 0);
    }

    #[test]
    fn an_error_inside_the_group_closes_it() {
        let f = Fake::default();
        let e = body(&f, true).unwrap_err();
        assert!(e.to_string().starts_with("ncclRecv failed"), "{e}");
        assert_eq!(*f.calls.borrow(), ["start", "send", "end"]);
        assert_eq!(f.depth.get(), 0);
    }

    #[test]
    fn end_returns_group_end_errors_and_does_not_close_twice() {
        let f = Fake {
            fail_end: true,
            ..Fake::default()
        };
        let e = body(&f, false).unwrap_err();
        assert!(e.to_string().starts_with("ncclGroupEnd failed"), "{e}");
        assert_eq!(*f.calls.borrow(), ["start", "send", "recv", "end"]);
    }

    #[test]
    fn nested_groups_close_inside_out() {
        let f = Fake::default();
        let run = || -> Result<(), NcclError> {
            let _outer = Group::start(&f)?;
            let _inner = Group::start(&f)?;
            Err(err("ncclSend"))
        };
        assert!(run().is_err());
        assert_eq!(*f.calls.borrow(), ["start", "start", "end", "end"]);
        assert_eq!(f.depth.get(), 0);
    }

    #[test]
    fn optional_group_only_when_asked() {
        let f = Fake::default();
        end_if(Group::start_if(false, &f).unwrap()).unwrap();
        assert!(f.calls.borrow().is_empty());
        end_if(Group::start_if(true, &f).unwrap()).unwrap();
        assert_eq!(*f.calls.borrow(), ["start", "end"]);
    }
}
