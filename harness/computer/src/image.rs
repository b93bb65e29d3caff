//! The screenshot pipeline's last mile: make sure the model gets exactly the planned size in
//! the requested format. Backends capture at the screen's own resolution (a scaled capture
//! costs Chromium a new frame); we resize with `fast_image_resize` (SIMD, ~2.7 ms for
//! 1280×800 → 1024×640 with Catmull-Rom, against ~20–40 ms for `image`'s resizer) and
//! encode JPEG with `jpeg-encoder` (AVX2, ~5 ms against ~18 ms for `image`'s encoder).

use crate::display::Size;
use crate::error::{Error, Result};
use fast_image_resize as fir;
use image::ImageEncoder as _;
use serde::{Deserialize, Serialize};

/// The encoding the model receives.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(tag = "format", rename_all = "lowercase")]
#[non_exhaustive]
pub enum ImageFormat {
    Png,
    Jpeg { quality: u8 },
}

impl ImageFormat {
    pub const JPEG: Self = Self::Jpeg { quality: 80 };

    pub fn media_type(self) -> &'static str {
        match self {
            Self::Png => "image/png",
            Self::Jpeg { .. } => "image/jpeg",
        }
    }

    pub fn extension(self) -> &'static str {
        match self {
            Self::Png => "png",
            Self::Jpeg { .. } => "jpg",
        }
    }

    /// `png`, `jpeg`, `jpeg:90`.
    pub fn parse(s: &str) -> Option<Self> {
        let (name, q) = s.split_once(':').unwrap_or((s, "80"));
        match name.to_ascii_lowercase().as_str() {
            "png" => Some(Self::Png),
            "jpeg" | "jpg" => Some(Self::Jpeg {
                quality: q.parse().ok().filter(|q| (1..=100).contains(q))?,
            }),
            _ => None,
        }
    }
}

/// An encoded image as sent to the model.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EncodedImage {
    pub data: Vec<u8>,
    pub size: Size,
    pub format: ImageFormat,
    /// Whether we had to resize (the capture was not already at the model size).
    pub resized: bool,
}

fn img_err(e: impl std::fmt::Display) -> Error {
    Error::Image(e.to_string())
}

/// Reads the pixel size from the image header without decoding.
pub fn dimensions(data: &[u8]) -> Result<Size> {
    let (w, h) = image::ImageReader::new(std::io::Cursor::new(data))
        .with_guessed_format()
        .map_err(img_err)?
        .into_dimensions()
        .map_err(img_err)?;
    Ok(Size::new(w, h))
}

/// Returns `data` (encoded as `captured_as`) as exactly `want` in `format`.
pub fn fit(
    data: Vec<u8>,
    captured_as: ImageFormat,
    want: Size,
    format: ImageFormat,
) -> Result<EncodedImage> {
    let size = dimensions(&data)?;
    if size == want && captured_as == format {
        return Ok(EncodedImage {
            data,
            size,
            format,
            resized: false,
        });
    }
    let rgb = image::load_from_memory(&data).map_err(img_err)?.into_rgb8();
    let resized = size != want;
    let pixels = if resized {
        resize_rgb(rgb.into_raw(), size, want)?
    } else {
        rgb.into_raw()
    };
    Ok(EncodedImage {
        data: encode_rgb(&pixels, want, format)?,
        size: want,
        format,
        resized,
    })
}

fn resize_options() -> fir::ResizeOptions {
    // Catmull-Rom keeps small UI text legible when shrinking, for ~0.5 ms more than
    // bilinear at 1280×800 → 1024×640.
    fir::ResizeOptions::new().resize_alg(fir::ResizeAlg::Convolution(fir::FilterType::CatmullRom))
}

/// Resizes packed RGB8 pixels.
pub fn resize_rgb(pixels: Vec<u8>, from: Size, to: Size) -> Result<Vec<u8>> {
    let src =
        fir::images::Image::from_vec_u8(from.width, from.height, pixels, fir::PixelType::U8x3)
            .map_err(img_err)?;
    let mut dst = fir::images::Image::new(to.width, to.height, fir::PixelType::U8x3);
    fir::Resizer::new()
        .resize(&src, &mut dst, &resize_options())
        .map_err(img_err)?;
    Ok(dst.into_vec())
}

/// Resizes packed 4-byte pixels whose fourth byte is not alpha (an X server's BGRX):
/// every channel is filtered alike, with the same filter as [`resize_rgb`]. The SIMD
/// kernels are faster on four channels than on three.
pub fn resize_x4(pixels: &[u8], from: Size, to: Size) -> Result<Vec<u8>> {
    let src = fir::images::ImageRef::new(from.width, from.height, pixels, fir::PixelType::U8x4)
        .map_err(img_err)?;
    let mut dst = fir::images::Image::new(to.width, to.height, fir::PixelType::U8x4);
    // The padding byte is often 0: taken for alpha it would blacken every pixel.
    let opts = resize_options().use_alpha(false);
    fir::Resizer::new()
        .resize(&src, &mut dst, &opts)
        .map_err(img_err)?;
    Ok(dst.into_vec())
}

/// Encodes packed RGB8 pixels.
pub fn encode_rgb(pixels: &[u8], size: Size, format: ImageFormat) -> Result<Vec<u8>> {
    let mut out = Vec::with_capacity(pixels.len() / 4);
    match format {
        ImageFormat::Png => image::codecs::png::PngEncoder::new_with_quality(
            &mut out,
            image::codecs::png::CompressionType::Fast,
            image::codecs::png::FilterType::Adaptive,
        )
        .write_image(
            pixels,
            size.width,
            size.height,
            image::ExtendedColorType::Rgb8,
        )
        .map_err(img_err)?,
        ImageFormat::Jpeg { quality } => {
            let (Ok(width), Ok(height)) = (u16::try_from(size.width), u16::try_from(size.height))
            else {
                return Err(Error::Image(format!("{size} is too large for JPEG")));
            };
            jpeg_encoder::Encoder::new(&mut out, quality)
                .encode(pixels, width, height, jpeg_encoder::ColorType::Rgb)
                .map_err(img_err)?;
        }
    }
    Ok(out)
}

/// Decodes any PNG/JPEG into RGB8 (for comparisons in replay).
pub fn decode_rgb(data: &[u8]) -> Result<(Size, Vec<u8>)> {
    let rgb = image::load_from_memory(data).map_err(img_err)?.into_rgb8();
    Ok((Size::new(rgb.width(), rgb.height()), rgb.into_raw()))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "tests")]
    use super::*;

    #[test]
    fn fit_resizes_and_reencodes_to_the_planned_size() {
        let from = Size::new(40, 20);
        let pixels: Vec<u8> = (0..40 * 20)
            .flat_map(|i| [(i % 251) as u8, 0, 255])
            .collect();
        let png = encode_rgb(&pixels, from, ImageFormat::Png).unwrap();
        let same = fit(png.clone(), ImageFormat::Png, from, ImageFormat::Png).unwrap();
        assert!(!same.resized);
        assert_eq!(same.data, png);
        let out = fit(png, ImageFormat::Png, Size::new(30, 20), ImageFormat::JPEG).unwrap();
        assert!(out.resized);
        assert_eq!(dimensions(&out.data).unwrap(), Size::new(30, 20));
        assert_eq!(&out.data[..2], &[0xFF, 0xD8], "JPEG magic");
        assert_eq!(
            ImageFormat::parse("jpeg:90"),
            Some(ImageFormat::Jpeg { quality: 90 })
        );
        assert_eq!(ImageFormat::parse("gif"), None);
    }
}
