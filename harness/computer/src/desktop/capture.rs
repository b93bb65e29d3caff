//! One capture of the display at the model's size: the clip read through x11rb (MIT-SHM
//! where it can), resized and encoded.

use super::session::DesktopSession;
use super::x11::{Pixels, bgrx_to_rgb};
use crate::display::{CapturePlan, Size};
use crate::error::Result;
use crate::image::{EncodedImage, ImageFormat, encode_rgb, resize_rgb, resize_x4};

impl DesktopSession {
    pub(super) fn capture_inner(
        &mut self,
        plan: &CapturePlan,
        format: ImageFormat,
    ) -> Result<EncodedImage> {
        let c = plan.clip;
        let x0 = c.x.floor().max(0.0) as u32;
        let y0 = c.y.floor().max(0.0) as u32;
        let x1 = ((c.x + c.width).ceil() as u32).min(self.opts.screen.width);
        let y1 = ((c.y + c.height).ceil() as u32).min(self.opts.screen.height);
        let frame = self
            .x
            .capture(x0, y0, x1.saturating_sub(x0), y1.saturating_sub(y0));
        let frame = self.vet(frame)?;
        let got = Size::new(frame.width, frame.height);
        let resized = got != plan.out;
        let pixels = match frame.pixels {
            Pixels::Bgrx if resized => bgrx_to_rgb(&resize_x4(self.x.bgrx(got), got, plan.out)?),
            Pixels::Bgrx => bgrx_to_rgb(self.x.bgrx(got)),
            Pixels::Rgb(px) if resized => resize_rgb(px, got, plan.out)?,
            Pixels::Rgb(px) => px,
        };
        Ok(EncodedImage {
            data: encode_rgb(&pixels, plan.out, format)?,
            size: plan.out,
            format,
            resized,
        })
    }
}
