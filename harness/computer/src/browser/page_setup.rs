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
/// running finite animations and transitions end]`. Endless animations are left out:
/// waiting for them is pointless.
pub(super) const MOTION_JS: &str = r#"(() => {
  if (Object.getOwnPropertyDescriptor(window, '__cordonMotion')) return;
  let last = performance.now(), n = 0;
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
  new MutationObserver(() => { last = performance.now(); n++; })
    .observe(document, {attributes: true, childList: true, subtree: true, characterData: true});
  Object.defineProperty(window, '__cordonMotion', { value: () => {
    let wait = 0;
    for (const a of document.getAnimations()) {
      if (a.playState !== 'running' || !a.effect) continue;
      const t = a.effect.getComputedTiming();
      if (!isFinite(t.endTime) || t.localTime == null) continue;
      wait = Math.max(wait, (t.endTime - t.localTime) / Math.abs(a.playbackRate || 1));
    }
    return [performance.now() - last, n, wait, pending.size];
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
