//! The macro that writes one safe method per NCCL collective or
//! point-to-point call (used by `api/mod.rs`).

/// Writes one safe method per NCCL call. Every call takes its device
/// buffers, then `count` and the data type, then the arguments listed after
/// the `;` (each with the expression that turns it into what C takes), then
/// the communicator and stream. `required` calls are resolved at load time;
/// `since_2_28` ones are `Option`s (see [`Nccl::native`]).
macro_rules! nccl_call {
    ($(#[$doc:meta])* required $method:ident, $symbol:literal, $($rest:tt)*) => {
        nccl_call!(@method $(#[$doc])* $method, $symbol,
            |n: &Nccl| Ok::<_, NcclError>(n.$method), $($rest)*);
    };
    ($(#[$doc:meta])* since_2_28 $method:ident, $symbol:literal, $($rest:tt)*) => {
        nccl_call!(@method $(#[$doc])* $method, $symbol,
            |n: &Nccl| n.$method.ok_or_else(|| missing($symbol)), $($rest)*);
    };
    (@method $(#[$doc:meta])* $method:ident, $symbol:literal, $lookup:expr,
     ($($buf:ident),+; $($arg:ident: $ty:ty => $raw:expr),*)) => {
        $(#[$doc])*
        #[allow(clippy::too_many_arguments)]
        pub fn $method(
            &self,
            $($buf: DevicePtr,)+
            count: usize,
            dt: DataType,
            $($arg: $ty,)*
            comm: &Communicator,
            s: &Stream,
        ) -> Result<(), NcclError> {
            let f = ($lookup)(self)?;
            // SAFETY: device buffers, a live or null communicator and a live
            // stream (see the module doc); NCCL only queues work on `s`.
            let r = unsafe {
                f(
                    $($buf.as_raw(),)+
                    count,
                    ffi::dtype_id(dt),
                    $($raw,)*
                    comm.0,
                    s.raw(),
                )
            };
            self.check($symbol, r)
        }
    };
}
