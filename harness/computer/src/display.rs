//! The model display and exact mapping between it and the screen.
//!
//! The model sees an image of `display` pixels; the page has a `viewport` in CSS pixels and
//! a device-scale-factor. A model pixel `m` covers CSS `[m·v/d, (m+1)·v/d)`; we act at its
//! centre, `(m + ½)·v/d`, so that screen → model (`floor(c·d/v)`) gives back `m` exactly and
//! no pixel is biased towards its left edge. The factor is taken from the image actually
//! sent (its width and height), never from a nominal size. The DPR never enters the input
//! mapping: CDP input is in CSS pixels; it only decides how to capture.

use crate::error::ActionError;
use cordon_protocol::computer::{CoordSpace, Point, Region};
use serde::{Deserialize, Serialize};

/// A size in pixels.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Size {
    pub width: u32,
    pub height: u32,
}

impl Size {
    pub const fn new(width: u32, height: u32) -> Self {
        Self { width, height }
    }

    /// Parses `1024x768`.
    pub fn parse(s: &str) -> Option<Self> {
        let (w, h) = s.split_once(['x', 'X', '×'])?;
        let (w, h) = (w.trim().parse().ok()?, h.trim().parse().ok()?);
        (w > 0 && h > 0).then_some(Self::new(w, h))
    }
}

impl std::fmt::Display for Size {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}x{}", self.width, self.height)
    }
}

/// Named model display sizes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
#[non_exhaustive]
pub enum Preset {
    /// 1024×768
    Xga,
    /// 1280×800
    Wxga,
    /// 1366×768
    Fwxga,
}

impl Preset {
    pub const ALL: [Self; 3] = [Self::Xga, Self::Wxga, Self::Fwxga];

    pub const fn size(self) -> Size {
        match self {
            Self::Xga => Size::new(1024, 768),
            Self::Wxga => Size::new(1280, 800),
            Self::Fwxga => Size::new(1366, 768),
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        match s.to_ascii_lowercase().as_str() {
            "xga" => Some(Self::Xga),
            "wxga" => Some(Self::Wxga),
            "fwxga" => Some(Self::Fwxga),
            _ => None,
        }
    }
}

/// How the model display size is chosen.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(tag = "mode", rename_all = "snake_case")]
#[non_exhaustive]
pub enum DisplaySpec {
    /// Exactly this size (the aspect may differ from the viewport's: x and y scale apart).
    Fixed {
        size: Size,
    },
    Preset {
        preset: Preset,
    },
    /// The viewport scaled down (never up), aspect kept, until its long edge is at most
    /// `long_edge` and its area at most `max_pixels` (Anthropic's guidance: 1568 px, 1.15 MP).
    Budget {
        long_edge: u32,
        max_pixels: u64,
    },
}

impl DisplaySpec {
    pub const DEFAULT_BUDGET: Self = Self::Budget {
        long_edge: 1568,
        max_pixels: 1_150_000,
    };

    /// The model display for a viewport.
    pub fn resolve(&self, viewport: Size) -> Size {
        match *self {
            Self::Fixed { size } => size,
            Self::Preset { preset } => preset.size(),
            Self::Budget {
                long_edge,
                max_pixels,
            } => {
                let (w, h) = (f64::from(viewport.width), f64::from(viewport.height));
                let s = 1f64
                    .min(f64::from(long_edge) / w.max(h))
                    .min((max_pixels as f64 / (w * h)).sqrt());
                // floor keeps both limits; at least 1 px
                Size::new(
                    ((w * s).floor() as u32).max(1),
                    ((h * s).floor() as u32).max(1),
                )
            }
        }
    }
}

/// A point in CSS pixels of the viewport.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct CssPoint {
    pub x: f64,
    pub y: f64,
}

/// A rectangle in CSS pixels.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct CssRect {
    pub x: f64,
    pub y: f64,
    pub width: f64,
    pub height: f64,
}

/// Maps between the model's coordinates and the viewport's CSS pixels.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Scaler {
    /// The size of the image the model was (or will be) sent.
    pub display: Size,
    /// The viewport in CSS pixels.
    pub viewport: Size,
    /// Device pixels per CSS pixel.
    pub dpr: f64,
}

impl Scaler {
    pub fn new(display: Size, viewport: Size, dpr: f64) -> Self {
        Self {
            display,
            viewport,
            dpr,
        }
    }

    /// The grid a coordinate space uses: the display, or a normalized `(max+1)²` grid.
    fn grid(&self, space: CoordSpace) -> (i64, i64) {
        match space {
            CoordSpace::Normalized { max } => (i64::from(max) + 1, i64::from(max) + 1),
            _ => (
                i64::from(self.display.width),
                i64::from(self.display.height),
            ),
        }
    }

    /// Model point → CSS point, or a model-visible error naming the valid range.
    pub fn to_css(&self, p: Point, space: CoordSpace) -> Result<CssPoint, ActionError> {
        let (gw, gh) = self.grid(space);
        if !(0..gw).contains(&p.x) || !(0..gh).contains(&p.y) {
            return Err(ActionError::OutOfRange {
                x: p.x,
                y: p.y,
                max_x: gw - 1,
                max_y: gh - 1,
            });
        }
        Ok(CssPoint {
            x: (p.x as f64 + 0.5) * f64::from(self.viewport.width) / gw as f64,
            y: (p.y as f64 + 0.5) * f64::from(self.viewport.height) / gh as f64,
        })
    }

    /// CSS point → model display pixel (clamped into the display).
    pub fn to_model(&self, c: CssPoint) -> Point {
        let (gw, gh) = self.grid(CoordSpace::Display);
        let x = (c.x * gw as f64 / f64::from(self.viewport.width)).floor() as i64;
        let y = (c.y * gh as f64 / f64::from(self.viewport.height)).floor() as i64;
        Point::new(x.clamp(0, gw - 1), y.clamp(0, gh - 1))
    }

    /// A model-space distance along x/y (scroll pixels) → CSS pixels.
    pub fn distance_to_css(&self, dx: i64, dy: i64, space: CoordSpace) -> (f64, f64) {
        let (gw, gh) = self.grid(space);
        (
            dx as f64 * f64::from(self.viewport.width) / gw as f64,
            dy as f64 * f64::from(self.viewport.height) / gh as f64,
        )
    }

    /// A model region (corners, `x1`/`y1` exclusive) → CSS rect, validated.
    pub fn region_to_css(&self, r: Region, space: CoordSpace) -> Result<CssRect, ActionError> {
        let (gw, gh) = self.grid(space);
        if r.x0 < 0 || r.y0 < 0 || r.x1 > gw || r.y1 > gh || r.x1 <= r.x0 || r.y1 <= r.y0 {
            return Err(ActionError::Invalid(format!(
                "region [{}, {}, {}, {}] must satisfy 0 <= x0 < x1 <= {gw} and 0 <= y0 < y1 <= {gh}",
                r.x0, r.y0, r.x1, r.y1
            )));
        }
        let sx = f64::from(self.viewport.width) / gw as f64;
        let sy = f64::from(self.viewport.height) / gh as f64;
        Ok(CssRect {
            x: r.x0 as f64 * sx,
            y: r.y0 as f64 * sy,
            width: (r.x1 - r.x0) as f64 * sx,
            height: (r.y1 - r.y0) as f64 * sy,
        })
    }

    /// How to capture the whole viewport at the display size.
    pub fn capture_plan(&self) -> CapturePlan {
        let full = CssRect {
            x: 0.0,
            y: 0.0,
            width: f64::from(self.viewport.width),
            height: f64::from(self.viewport.height),
        };
        CapturePlan::new(full, self.display, self.dpr)
    }

    /// How to capture `rect` scaled to fit the display, aspect kept (zoom).
    pub fn zoom_plan(&self, rect: CssRect) -> CapturePlan {
        let fit = (f64::from(self.display.width) / rect.width)
            .min(f64::from(self.display.height) / rect.height);
        let out = Size::new(
            ((rect.width * fit).round() as u32).max(1),
            ((rect.height * fit).round() as u32).max(1),
        );
        CapturePlan::new(rect, out, self.dpr)
    }
}

/// What to ask the browser for, and what the model must receive.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct CapturePlan {
    pub clip: CssRect,
    /// CDP `clip.scale`: output device pixels = CSS × scale × DPR.
    pub scale: f64,
    /// The exact size the model gets.
    pub out: Size,
}

impl CapturePlan {
    fn new(clip: CssRect, out: Size, dpr: f64) -> Self {
        // With the same aspect, one uniform scale yields `out` directly. Otherwise capture at
        // the larger of the two factors (no detail lost) and resize the rest of the way.
        let sx = f64::from(out.width) / clip.width;
        let sy = f64::from(out.height) / clip.height;
        Self {
            clip,
            scale: sx.max(sy) / dpr,
            out,
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "tests")]
    use super::*;

    #[test]
    fn every_model_pixel_round_trips_exactly() {
        for preset in Preset::ALL {
            for viewport in [
                Size::new(1280, 800),
                Size::new(1366, 768),
                Size::new(800, 600),
            ] {
                let s = Scaler::new(preset.size(), viewport, 2.0);
                for x in 0..i64::from(preset.size().width) {
                    let c = s.to_css(Point::new(x, 0), CoordSpace::Display).unwrap();
                    assert_eq!(s.to_model(c).x, x, "{preset:?} {viewport}");
                }
            }
        }
    }

    #[test]
    fn out_of_range_names_the_valid_range() {
        let s = Scaler::new(Size::new(1024, 640), Size::new(1280, 800), 1.0);
        let e = s
            .to_css(Point::new(1024, 10), CoordSpace::Display)
            .unwrap_err();
        assert_eq!(
            e.to_string(),
            "coordinate (1024, 10) is outside the screen: x must be in 0..=1023 and y in 0..=639"
        );
        assert!(s.to_css(Point::new(-1, 0), CoordSpace::Display).is_err());
        let e = s
            .to_css(Point::new(5, 1000), CoordSpace::Normalized { max: 999 })
            .unwrap_err();
        assert!(e.to_string().contains("0..=999"), "{e}");
    }

    #[test]
    fn normalized_grid_maps_to_the_viewport() {
        let s = Scaler::new(Size::new(1024, 640), Size::new(1280, 800), 1.0);
        let c = s
            .to_css(Point::new(500, 500), CoordSpace::Normalized { max: 999 })
            .unwrap();
        assert!(
            (c.x - 640.64).abs() < 1e-9 && (c.y - 400.4).abs() < 1e-9,
            "{c:?}"
        );
    }

    #[test]
    fn budget_keeps_aspect_and_limits() {
        let b = DisplaySpec::DEFAULT_BUDGET;
        assert_eq!(b.resolve(Size::new(1280, 800)), Size::new(1280, 800));
        let big = b.resolve(Size::new(1920, 1080));
        assert!(big.width <= 1568 && u64::from(big.width) * u64::from(big.height) <= 1_150_000);
        assert!((f64::from(big.width) / f64::from(big.height) - 16.0 / 9.0).abs() < 0.01);
        assert_eq!(Size::parse("1024x640"), Some(Size::new(1024, 640)));
    }

    #[test]
    fn capture_plan_uses_clip_scale_with_dpr() {
        let s = Scaler::new(Size::new(1024, 640), Size::new(1280, 800), 2.0);
        let p = s.capture_plan();
        assert!((p.scale - 0.4).abs() < 1e-12);
        assert_eq!(p.out, Size::new(1024, 640));
        // aspect differs: capture at the larger factor, resize the rest
        let s = Scaler::new(Size::new(1024, 768), Size::new(1280, 800), 1.0);
        assert!((s.capture_plan().scale - 0.96).abs() < 1e-12);
    }
}
