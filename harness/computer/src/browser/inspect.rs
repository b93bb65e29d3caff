//! What the gates learn from the page: the element under a point or holding focus
//! (descending into same-origin iframes, never reading a text field's value), and the
//! current URL.

use super::cdp::cdp;
use super::session::BrowserSession;
use crate::display::CssPoint;
use crate::error::{Error, Result};
use crate::gate::ElementInfo;

/// Describes the element at (X, Y), descending into same-origin iframes. Never reads the
/// value of a text field (it may be a password).
const DESCRIBE_JS: &str = r#"
(function(el) {
  if (!el) return null;
  const label = el.closest('label');
  if (label && label.control && label.control.type === 'file') el = label.control;
  const t = el.closest('a[href],button,input,select,textarea,[role],[contenteditable=""],[contenteditable="true"]') || el;
  const tag = t.tagName.toLowerCase();
  const type = tag === 'input' ? (t.getAttribute('type') || 'text').toLowerCase() : null;
  const buttonLike = tag === 'input' && ['submit','button','reset','image'].includes(type);
  let text = buttonLike ? (t.value || '') : (t.getAttribute('aria-label') || ((tag === 'input' || tag === 'textarea') ? (t.placeholder || '') : (t.innerText || t.textContent || '')));
  text = text.replace(/\s+/g, ' ').trim().slice(0, 80);
  const link = t.closest('a[href]');
  const editable = t.isContentEditable || tag === 'textarea' || (tag === 'input' && !buttonLike && !['checkbox','radio','file','range','color'].includes(type));
  return { tag, input_type: type, role: t.getAttribute('role'), text,
           name: t.getAttribute('name') || t.id || null, autocomplete: t.getAttribute('autocomplete'),
           href: link ? link.href : null, editable };
})
"#;

impl BrowserSession {
    async fn describe(&self, finder: &str) -> Result<Option<ElementInfo>> {
        let v = self.eval(format!("({DESCRIBE_JS})({finder})")).await?;
        if v.is_null() {
            return Ok(None);
        }
        serde_json::from_value(v)
            .map(Some)
            .map_err(|e| Error::Browser(format!("element description: {e}")))
    }

    pub(super) async fn element_at_inner(&mut self, at: CssPoint) -> Result<Option<ElementInfo>> {
        self.describe(&format!(
            "(() => {{ let x = {}, y = {}, el = document.elementFromPoint(x, y);
               while (el && (el.tagName === 'IFRAME' || el.tagName === 'FRAME')) {{
                 let d = null; try {{ d = el.contentDocument; }} catch (e) {{}}
                 if (!d) break;
                 const r = el.getBoundingClientRect();
                 x -= r.left + el.clientLeft; y -= r.top + el.clientTop;
                 const n = d.elementFromPoint(x, y); if (!n) break; el = n;
               }}
               return el; }})()",
            at.x, at.y
        ))
        .await
    }

    pub(super) async fn focused_element_inner(&mut self) -> Result<Option<ElementInfo>> {
        self.describe(
            "(() => { let el = document.activeElement;
               while (el && (el.tagName === 'IFRAME' || el.tagName === 'FRAME')) {
                 let d = null; try { d = el.contentDocument; } catch (e) {}
                 if (!d || !d.activeElement) break; el = d.activeElement;
               }
               return el === document.body ? null : el; })()",
        )
        .await
    }

    pub(super) async fn current_url_inner(&mut self) -> Result<String> {
        // Tracked from `Page.frameNavigated` / `navigatedWithinDocument`: every event sent
        // before the reply to our last command is in the stream already, so this is as
        // fresh as asking the page, without the round trip.
        self.net.drain();
        if let Some(url) = &self.net.url {
            return Ok(url.clone());
        }
        let url = match self.eval("location.href").await {
            Ok(serde_json::Value::String(s)) => s,
            _ => self.page.url().await.map_err(cdp)?.unwrap_or_default(),
        };
        self.net.url = Some(url.clone());
        Ok(url)
    }
}
