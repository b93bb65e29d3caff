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
/// pointless. A motion timer is a short one that changes the DOM (see the script); short
/// means it can fire within the quiet time settling asks for (`STABLE_QUIET_MS`, 50 ms):
/// after a longer one the page has already been still long enough.
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
  // Short timers that drive motion, not run or cleared yet: a timeout (delay of at most
  // SHORT_TIMER_MS) set by a task that had just changed the DOM, as the next tick of a
  // script animation is; an interval whose last run changed the DOM. A tick may come
  // after a capture that was quicker than it. Timers that change nothing (a counter, a
  // poll) are not counted, so they never hold a step.
  const timers = new Set();
  const setT = window.setTimeout, setI = window.setInterval;
  const clearT = window.clearTimeout, clearI = window.clearInterval;
  const short = (delay) => !(Number(delay) > SHORT_TIMER_MS);
  if ([setT, setI, clearT, clearI].every((f) => typeof f === 'function')) {
    window.setTimeout = function setTimeout(handler, delay, ...args) {
      if (typeof handler !== 'function' || !short(delay) || !changedJustNow()) {
        return setT.call(window, handler, delay, ...args);
      }
      const id = setT.call(window, function () { timers.delete(id); return handler.apply(this, arguments); }, delay, ...args);
      timers.add(id);
      return id;
    };
    window.setInterval = function setInterval(handler, delay, ...args) {
      if (typeof handler !== 'function' || !short(delay)) return setI.call(window, handler, delay, ...args);
      const id = setI.call(window, function () {
        try { return handler.apply(this, arguments); } finally {
          if (changedJustNow()) timers.add(id); else timers.delete(id);
        }
      }, delay, ...args);
      return id;
    };
    // Timeouts and intervals share their ids: either call clears either.
    window.clearTimeout = function clearTimeout(id) { timers.delete(id); return clearT.call(window, id); };
    window.clearInterval = function clearInterval(id) { timers.delete(id); return clearI.call(window, id); };
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
