//! The image's exports: the one runtime, made while the image is snapshotted, and each
//! execution handed to it.

use std::cell::RefCell;

use cordon_guest::{Guest, Outcome};

use crate::driver::Loaded;

thread_local! {
    // wasm32-wasip1 has one thread; this lives in linear memory and so in the snapshot.
    static LOADED: RefCell<Option<Loaded>> = const { RefCell::new(None) };
}

fn internal_error(message: impl Into<String>) -> Outcome {
    Outcome::Error {
        error_type: "CordonInternalError".into(),
        message: message.into(),
        traceback: String::new(),
    }
}

struct JavaScript;

impl Guest for JavaScript {
    fn initialize() {
        match Loaded::initialize() {
            Ok(loaded) => LOADED.with_borrow_mut(|slot| *slot = Some(loaded)),
            Err(error) => {
                // Fails the image build loudly: the snapshot must never hold a half runtime.
                eprintln!("cordon javascript guest: initialization failed: {error}");
                std::process::abort();
            }
        }
    }

    fn execute(code: &str, tools: &[&str]) -> Outcome {
        LOADED.with_borrow(|loaded| match loaded {
            Some(loaded) => loaded.run(code, tools),
            None => internal_error("the image was not pre-initialized"),
        })
    }
}

cordon_guest::export_guest!(JavaScript);
