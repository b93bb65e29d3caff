//! The Chromium backend (feature `browser`): one browser process, one BrowserContext per
//! session, input through CDP `Input.*`, capture with `Page.captureScreenshot` at the model
//! size (`clip.scale`), or, on the headless shell (the default binary where installed), a
//! frame drawn for the capture at the model's size (`frames`, `screens`).
//!
//! Isolation: every session's context is routed through the session's own SOCKS5 proxy
//! (`socks`), which checks the allow- and block-list by name, resolves the name itself,
//! refuses private-network addresses (unless allowed) and block-listed addresses, and
//! connects to the address it checked; this covers pages, popups, iframes, workers and
//! WebSockets. On top of that a browser-wide `Fetch` interception refuses block-listed
//! origins and non-web schemes for every target. WebRTC may not send UDP around the proxy
//! (`--webrtc-ip-handling-policy=disable_non_proxied_udp`). A session keeps at most
//! [`MAX_OPEN_PAGES`] pages open; the page's extra windows are closed as they open.
//! Downloads are denied per context unless allowed.
//!
//! The files, leaves first:
//! - `options`: [`BrowserOptions`], [`SessionOptions`] and their defaults and limits;
//! - `cdp`: the CDP error conversion, page evaluation, the `Sync` stream wrapper;
//! - `chromium`: starting one Chromium process (its flags, its profile, the root check);
//! - `state`: what a browser shares with its sessions and tasks (generations, refusals);
//! - `lifecycle`: [`Browser`]: launch, watchdog, restart after a loss, close;
//! - `request_guard`: the browser-wide `Fetch` interception (origin and navigation policy);
//! - `page_warden`: the per-session page cap and the stream of new pages;
//! - `in_flight`: a page's requests and main-frame load, from events read in any order;
//! - `net_watch`: a page's requests, loads, URL and file choosers, from CDP events;
//! - `page_setup`: viewport, DPR, file-chooser interception and the motion script;
//! - `session`: [`BrowserSession`]: opening, its handles, closing;
//! - `recycle`: starting a session over on another page, its context's storage cleared;
//! - `in_place`: readying a session for a new episode on the page it shows (no load);
//! - `inspect`: the element under a point or holding focus, and the current URL;
//! - `popups`: following popups and tabs, and leaving refused ones;
//! - `input`: screen ops as CDP input, text, navigation and history;
//! - `settle`: waiting for the page to react, go quiet and hold still around the capture;
//! - `file_chooser`: answering file choosers with the session's upload files;
//! - `frames`: frames on demand (the headless shell's begin-frame control);
//! - `screens`: headless screens at a session's display scale (frames at the model's size);
//! - `capture`: `Page.captureScreenshot` (or an opted-in screencast frame) at the model's size;
//! - `backend`: the [`Backend`](crate::Backend) impl, guarded against a lost Chromium.

mod backend;
mod capture;
mod cdp;
mod chromium;
mod file_chooser;
mod frames;
mod in_flight;
mod in_place;
mod input;
mod inspect;
mod lifecycle;
mod net_watch;
mod options;
mod page_setup;
mod page_warden;
mod popups;
mod recycle;
mod request_guard;
mod screens;
mod session;
mod settle;
mod state;

pub use chromium::running_as_root;
pub use lifecycle::Browser;
pub use options::{
    BrowserOptions, CHROMIUM, DEFAULT_SETTLE_TIMEOUT, HEADLESS_SHELL, MAX_OPEN_PAGES,
    SessionOptions, default_chromium,
};
pub use session::BrowserSession;
