//! [`DesktopSession`] as a [`Backend`]: windows stand in for elements, `x11:<title>` for
//! the URL, and navigation is refused.

use super::blocking::blocking;
use super::dispatch::unsupported_op;
use super::input::{char_keysym, key_keysym};
use super::session::DesktopSession;
use crate::backend::Backend;
use crate::display::{CapturePlan, CssPoint, Scaler};
use crate::error::{ActionError, Error, Result};
use crate::gate::ElementInfo;
use crate::image::{EncodedImage, ImageFormat};
use crate::op::Op;
use crate::origin::OriginPolicy;

impl Backend for DesktopSession {
    fn name(&self) -> &'static str {
        "desktop"
    }

    fn scaler(&self) -> Scaler {
        self.scaler
    }

    /// Unused on a desktop (nothing navigates); allow-all.
    fn policy(&self) -> &OriginPolicy {
        &self.policy
    }

    async fn element_at(&mut self, at: CssPoint) -> Result<Option<ElementInfo>> {
        self.check_server()?;
        let (x, y) = self.point(at);
        blocking(|| {
            let r = self.x.window_at(x, y).and_then(|w| self.element(w));
            self.vet(r)
        })
    }

    async fn focused_element(&mut self) -> Result<Option<ElementInfo>> {
        self.check_server()?;
        blocking(|| {
            let r = self.x.focused_window().and_then(|w| self.element(w));
            self.vet(r)
        })
    }

    async fn current_url(&mut self) -> Result<String> {
        let el = self.focused_element().await?;
        Ok(format!("x11:{}", el.map(|e| e.text).unwrap_or_default()))
    }

    async fn run(&mut self, op: &Op) -> Result<()> {
        let r = self.run_inner(op).await;
        if matches!(&r, Err(e) if !matches!(e, Error::Action(_))) {
            self.input.release_all();
        }
        self.vet(r)
    }

    async fn settle(&mut self) -> Result<bool> {
        self.settle_inner().await
    }

    async fn capture(&mut self, plan: &CapturePlan, format: ImageFormat) -> Result<EncodedImage> {
        self.check_server()?;
        blocking(|| self.capture_inner(plan, format))
    }

    fn check(&self, op: &Op) -> std::result::Result<(), ActionError> {
        match op {
            Op::KeyDown { key, .. } | Op::KeyUp { key, .. } => key_keysym(key).map(|_| ()),
            Op::Text { text } => text.chars().try_for_each(|c| char_keysym(c).map(|_| ())),
            Op::Navigate { .. } | Op::History { .. } => Err(unsupported_op(op)),
            _ => Ok(()),
        }
    }

    async fn pointer(&mut self) -> Result<Option<CssPoint>> {
        self.check_server()?;
        let (x, y) = blocking(|| {
            let r = self.x.pointer();
            self.vet(r)
        })?;
        // The centre of the pixel, as the scaler maps model pixels.
        Ok(Some(CssPoint {
            x: f64::from(x) + 0.5,
            y: f64::from(y) + 0.5,
        }))
    }
}
