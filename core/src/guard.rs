//! tract's panics as errors, quietly. A model from a file or a peer can
//! make tract panic (a malformed graph its parser trips on, a tensor it
//! cannot build); inside [`caught`] such a panic becomes an error naming
//! what was being done, and the panic hook prints nothing for it, so a
//! command-line tool prints one clear error and no backtrace. Panics
//! anywhere else print as before.
//!
//! An allocation that fails aborts the process instead of panicking: no
//! guard here can catch that, which is why a model's sizes are checked
//! first ([`crate::budget`]) and why the handheld loads peers' models in a
//! child process.

use std::cell::Cell;
use std::panic::{self, AssertUnwindSafe};
use std::sync::Once;

use crate::error::{Error, Result};

thread_local! {
    /// How many [`caught`] calls this thread is inside.
    static QUIET: Cell<u32> = const { Cell::new(0) };
}

/// The panic's message, as `panic!` formatted it.
pub fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    payload
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "a panic without a message".into())
}

/// Wraps the process's panic hook once: silent for panics inside
/// [`caught`], the previous hook for every other.
fn install() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let previous = panic::take_hook();
        panic::set_hook(Box::new(move |info| {
            if QUIET.with(Cell::get) == 0 {
                previous(info);
            }
        }));
    });
}

/// Runs `f`; a panic inside it becomes [`Error::Tract`] with `context`
/// ("while …") and the panic's message, and prints nothing.
pub fn caught<T>(context: impl FnOnce() -> String, f: impl FnOnce() -> Result<T>) -> Result<T> {
    caught_on(tandem_types::Engine::Tract, context, f)
}

/// [`caught`] for code running on `engine`: a panic becomes
/// [`Error::Tract`] for tract, [`Error::Engine`] for the others.
pub fn caught_on<T>(
    engine: tandem_types::Engine,
    context: impl FnOnce() -> String,
    f: impl FnOnce() -> Result<T>,
) -> Result<T> {
    install();
    QUIET.with(|q| q.set(q.get() + 1));
    let result = panic::catch_unwind(AssertUnwindSafe(f));
    QUIET.with(|q| q.set(q.get() - 1));
    result.unwrap_or_else(|payload| {
        let (context, message) = (context(), format!("it panicked: {}", panic_message(&*payload)));
        Err(match engine {
            tandem_types::Engine::Tract => Error::Tract { context, message },
            engine => Error::Engine { engine, context, message },
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_panic_inside_is_an_error_naming_it() {
        let err =
            caught(|| "testing".into(), || -> Result<()> { panic!("boom {}", 7) }).expect_err("panicked");
        assert!(err.to_string().contains("testing") && err.to_string().contains("boom 7"), "{err}");
        assert_eq!(caught(|| "testing".into(), || Ok(3)).expect("no panic"), 3);
        // The guard is undone: this thread is quiet no more.
        assert_eq!(QUIET.with(Cell::get), 0);
    }
}
