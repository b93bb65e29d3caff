//! How every page of a session is set up before use (its own page and each popup it
//! follows): fixed viewport and DPR, intercepted file choosers, and the motion script
//! settling reads.

use super::cdp::cdp;
use crate::display::Size;
use crate::error::Result;
use chromiumoxide::Page;
use chromiumoxide::cdp::browser_protocol::emulation::SetDeviceMetricsOverrideParams;
use chromiumoxide::cdp::browser_protocol::page::{
    AddScriptToEvaluateOnNewDocumentParams, SetInterceptFileChooserDialogParams,
};
use chromiumoxide::cdp::js_protocol::runtime::EvaluateParams;

/// Installed in every document of a session's pages before the page's own scripts: counts
/// DOM mutations, and answers `[ms since the last mutation, mutations, ms until the
/// running finite animations and transitions end, animation-frame callbacks waiting,
/// motion timers waiting]`. Endless animations are left out: waiting for them is
/// pointless. A motion timer is a short one the input started or that changes the DOM
/// (see the script); short means it can fire within the quiet time settling asks for
/// (`STABLE_QUIET_MS`, 50 ms): after a longer one the page has already been still long
/// enough.
pub(super) const MOTION_JS: &str = r#"(() => {
  if (Object.getOwnPropertyDescriptor(window, '__cordonMotion')) return;
  let last = performance.now(), n = 0;
  const SHORT_TIMER_MS = 50;
  // Animation-frame callbacks not run yet: on a page that draws only when asked they run
  // only in a frame drawn for them.
  const pending = new Set();
  const request = window.requestAnimationFrame, cancel = window.cancelAnimationFrame;
  if (typeof request === 'function' && typeof cancel === 'function') {
    window.requestAnimationFrame = function requestAnimationFrame(callback) {
      if (typeof callback !== 'function') return request.call(window, callback);
      const id = request.call(window, (time) => { pending.delete(id); return callback(time); });
      pending.add(id);
      return id;
    };
    window.cancelAnimationFrame = function cancelAnimationFrame(id) {
      pending.delete(id);
      return cancel.call(window, id);
    };
  }
  const observer = new MutationObserver(() => { last = performance.now(); n++; });
  observer.observe(document, {attributes: true, childList: true, subtree: true, characterData: true});
  // Whether the DOM changed in the running task (records not delivered yet) or just now.
  const changedJustNow = () => {
    if (observer.takeRecords().length) { last = performance.now(); n++; }
    return performance.now() - last < 2;
  };
  // Whether the running task handles the user's input (a click, a key, typing, a wheel):
  // what it starts is the action's reaction.
  const byInput = () => {
    const e = window.event;
    return !!e && e.isTrusted && typeof UIEvent === 'function' && e instanceof UIEvent;
  };
  // Short timers (a delay of at most SHORT_TIMER_MS) that may drive motion, not run or
  // cleared yet: a timeout set while handling input, by a task that had just changed the
  // DOM, or by a timeout whose run changed it (the next tick of a script animation,
  // scheduled before or after the tick's change); an interval set while handling input,
  // until its first run, and after each run that changed the DOM. A tick may come after
  // a capture that was quicker than it, so a step waits for them. Timers that change
  // nothing (a counter, a poll) stop counting after their first run, or never count.
  const timers = new Set();
  // Short intervals not cleared: one cleared by its own run is not counted after it.
  const intervals = new Set();
  const setT = window.setTimeout, setI = window.setInterval;
  const clearT = window.clearTimeout, clearI = window.clearInterval;
  const short = (delay) => !(Number(delay) > SHORT_TIMER_MS);
  if ([setT, setI, clearT, clearI].every((f) => typeof f === 'function')) {
    // Short timeouts not run or cleared yet, and those the timeout running now has set: a
    // tick may set the next one before it changes the DOM.
    const waiting = new Set();
    let setInRun = null;
    window.setTimeout = function setTimeout(handler, delay, ...args) {
      if (typeof handler !== 'function' || !short(delay)) return setT.call(window, handler, delay, ...args);
      const id = setT.call(window, function () {
        timers.delete(id);
        waiting.delete(id);
        const outer = setInRun;
        setInRun = [];
        try { return handler.apply(this, arguments); } finally {
          const set = setInRun;
          setInRun = outer;
          if (changedJustNow()) for (const next of set) if (waiting.has(next)) timers.add(next);
        }
      }, delay, ...args);
      waiting.add(id);
      if (setInRun) setInRun.push(id);
      if (byInput() || changedJustNow()) timers.add(id);
      return id;
    };
    window.setInterval = function setInterval(handler, delay, ...args) {
      if (typeof handler !== 'function' || !short(delay)) return setI.call(window, handler, delay, ...args);
      const id = setI.call(window, function () {
        try { return handler.apply(this, arguments); } finally {
          if (intervals.has(id) && changedJustNow()) timers.add(id); else timers.delete(id);
        }
      }, delay, ...args);
      intervals.add(id);
      if (byInput()) timers.add(id);
      return id;
    };
    // Timeouts and intervals share their ids: either call clears either.
    // Ids are numbers; a page may pass one as a string, as the native functions allow.
    const forget = (id) => { timers.delete(Number(id)); intervals.delete(Number(id)); waiting.delete(Number(id)); };
    window.clearTimeout = function clearTimeout(id) { forget(id); return clearT.call(window, id); };
    window.clearInterval = function clearInterval(id) { forget(id); return clearI.call(window, id); };
  }
  Object.defineProperty(window, '__cordonMotion', { value: () => {
    let wait = 0;
    for (const a of document.getAnimations()) {
      if (a.playState !== 'running' || !a.effect) continue;
      const t = a.effect.getComputedTiming();
      if (!isFinite(t.endTime) || t.localTime == null) continue;
      wait = Math.max(wait, (t.endTime - t.localTime) / Math.abs(a.playbackRate || 1));
    }
    return [performance.now() - last, n, wait, pending.size, timers.size];
  }});
})()"#;

/// Fixed viewport and DPR; file choosers intercepted (no dialog; `answer_file_choosers`
/// fills them from the session's upload files or leaves them empty).
pub(super) async fn prepare_page(page: &Page, viewport: Size, dpr: f64) -> Result<()> {
    page.execute(SetDeviceMetricsOverrideParams::new(
        i64::from(viewport.width),
        i64::from(viewport.height),
        dpr,
        false,
    ))
    .await
    .map_err(cdp)?;
    page.execute(SetInterceptFileChooserDialogParams::new(true))
        .await
        .map_err(cdp)?;
    page.execute(AddScriptToEvaluateOnNewDocumentParams::new(MOTION_JS))
        .await
        .map_err(cdp)?;
    // A popup may have its document already.
    page.execute(EvaluateParams::new(MOTION_JS))
        .await
        .map_err(cdp)?;
    Ok(())
}
