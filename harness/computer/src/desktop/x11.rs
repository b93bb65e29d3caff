//! The session's own X connection (x11rb): screen capture (MIT-SHM into a memfd, plain
//! `GetImage` where SHM is missing), damage tracking for settling, the window under a
//! point or holding focus (for the gates), the pointer, and the keyboard map (for typing).
//!
//! MIT-SHM goes through `ShmAttachFd` with a memfd we own, and the pixels are read back
//! with `pread` on that fd, so no `mmap` (and no `unsafe`) is needed: the copy costs well
//! under a millisecond at 1280×800, against 2–4 ms for `GetImage` over the socket.

use crate::display::Size;
use crate::error::{Error, Result};
use std::collections::HashMap;
use std::os::unix::fs::FileExt as _;
use std::os::unix::net::UnixStream;
use std::path::Path;
use x11rb::connection::{Connection as _, RequestConnection as _};
use x11rb::errors::ReplyError;
use x11rb::protocol::ErrorKind;
use x11rb::protocol::Event;
use x11rb::protocol::damage::{self, ConnectionExt as _};
use x11rb::protocol::shm::{self, ConnectionExt as _};
use x11rb::protocol::xproto::{
    self, Atom, AtomEnum, ConnectionExt as _, ImageFormat as XImageFormat, ImageOrder, MapState,
    Window,
};
use x11rb::rust_connection::{DefaultStream, RustConnection};

/// A captured rectangle.
#[derive(Debug, Clone)]
pub(crate) struct Frame {
    pub width: u32,
    pub height: u32,
    pub pixels: Pixels,
}

/// Captured pixels: the common 32-bit BGRX layout as the server sent it, left in the
/// connection's buffer ([`X11::bgrx`]; resized as is and converted after: fewer pixels to
/// convert, and four-channel SIMD resizing is faster), or anything else converted to RGB8.
#[derive(Debug, Clone)]
pub(crate) enum Pixels {
    Bgrx,
    Rgb(Vec<u8>),
}

/// Packed BGRX → packed RGB8.
pub(crate) fn bgrx_to_rgb(bgrx: &[u8]) -> Vec<u8> {
    let (src, _) = bgrx.as_chunks::<4>();
    let mut out = vec![0; src.len() * 3];
    let (dst, _) = out.as_chunks_mut::<3>();
    for (d, s) in dst.iter_mut().zip(src) {
        *d = [s[2], s[1], s[0]];
    }
    out
}

/// A top-level window.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[non_exhaustive]
pub struct WindowInfo {
    pub id: u32,
    pub title: String,
    /// `WM_CLASS` (instance, class), e.g. `("xterm", "XTerm")`.
    pub class: Option<(String, String)>,
    pub x: i32,
    pub y: i32,
    pub width: u32,
    pub height: u32,
}

/// How pixels are laid out in a `ZPixmap` of the root window.
#[derive(Debug, Clone, Copy)]
struct PixelLayout {
    bits_per_pixel: u8,
    scanline_pad: u8,
    msb_first: bool,
    red: u32,
    green: u32,
    blue: u32,
}

impl PixelLayout {
    fn stride(&self, width: u32) -> usize {
        let bits = width as usize * usize::from(self.bits_per_pixel);
        let pad = usize::from(self.scanline_pad.max(8));
        bits.div_ceil(pad) * pad / 8
    }

    /// The common case: 32 bpp, little endian, 0x00RRGGBB (bytes B, G, R, X).
    fn is_bgrx(&self) -> bool {
        self.bits_per_pixel == 32
            && !self.msb_first
            && (self.red, self.green, self.blue) == (0xff_0000, 0xff00, 0xff)
    }

    /// Converts one rectangle of raw pixels to RGB8.
    fn convert(&self, raw: &[u8], width: u32, height: u32, out: &mut Vec<u8>) -> Result<()> {
        let stride = self.stride(width);
        let need = stride * height as usize;
        if raw.len() < need {
            return Err(Error::Desktop(format!(
                "short image: {} bytes for {width}x{height}",
                raw.len()
            )));
        }
        let w = width as usize;
        out.clear();
        out.resize(w * height as usize * 3, 0);
        let rows = raw[..need]
            .chunks_exact(stride)
            .zip(out.chunks_exact_mut(w * 3));
        if self.is_bgrx() {
            for (row, dst) in rows {
                let (src, _) = row[..w * 4].as_chunks::<4>();
                let (dst, _) = dst.as_chunks_mut::<3>();
                for (d, s) in dst.iter_mut().zip(src) {
                    *d = [s[2], s[1], s[0]];
                }
            }
            return Ok(());
        }
        let bytes = usize::from(self.bits_per_pixel / 8).max(1);
        let channel = |v: u32, mask: u32| -> u8 {
            if mask == 0 {
                return 0;
            }
            let shifted = (v & mask) >> mask.trailing_zeros();
            let max = mask >> mask.trailing_zeros();
            ((shifted * 255 + max / 2) / max) as u8
        };
        for (row, dst) in rows {
            let (dst, _) = dst.as_chunks_mut::<3>();
            for (px, d) in row[..w * bytes].chunks_exact(bytes).zip(dst) {
                let v = px.iter().enumerate().fold(0u32, |acc, (i, b)| {
                    if self.msb_first {
                        (acc << 8) | u32::from(*b)
                    } else {
                        acc | (u32::from(*b) << (8 * i))
                    }
                });
                *d = [
                    channel(v, self.red),
                    channel(v, self.green),
                    channel(v, self.blue),
                ];
            }
        }
        Ok(())
    }
}

struct Shm {
    seg: shm::Seg,
    file: std::fs::File,
}

/// Keysym → (keycode, level) as the server's keyboard map has it right now.
#[derive(Debug, Default, Clone)]
pub(crate) struct KeyTable {
    pub keys: HashMap<u32, (u8, u8)>,
    /// A keycode that produces Shift.
    pub shift: Option<u8>,
    /// Keycodes with no keysym at all: what enigo may remap for other characters.
    pub spare: usize,
    pub spare_codes: Vec<u8>,
}

/// What happened on the display since the last look.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct Seen {
    pub damage: bool,
    pub mapping: bool,
}

pub(crate) struct X11 {
    conn: RustConnection,
    root: Window,
    pub width: u32,
    pub height: u32,
    layout: PixelLayout,
    shm: Option<Shm>,
    damage: Option<damage::Damage>,
    /// The last capture as the server sent it.
    raw: Vec<u8>,
    atoms: Atoms,
}

impl std::fmt::Debug for X11 {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("X11")
            .field("size", &(self.width, self.height))
            .field("shm", &self.shm.is_some())
            .field("damage", &self.damage.is_some())
            .finish_non_exhaustive()
    }
}

#[derive(Debug, Clone, Copy)]
struct Atoms {
    net_wm_name: Atom,
    utf8_string: Atom,
}

/// The most windows [`X11::describe`] looks into below a top level for its title.
const DESCRIBE_BUDGET: usize = 64;

fn x_err(e: impl std::fmt::Display) -> Error {
    Error::Desktop(format!("X: {e}"))
}

/// `None` for a `BadWindow` reply: the program destroyed the window between our requests,
/// which any program may do at any moment (it is not a failure of the display).
fn unless_gone<T>(r: std::result::Result<T, ReplyError>) -> Result<Option<T>> {
    match r {
        Ok(v) => Ok(Some(v)),
        Err(ReplyError::X11Error(e)) if e.error_kind == ErrorKind::Window => Ok(None),
        Err(e) => Err(x_err(e)),
    }
}

impl X11 {
    /// Connects to the display's socket with the session cookie.
    pub fn connect(socket: &Path, cookie: &[u8], use_shm: bool) -> Result<Self> {
        let stream = UnixStream::connect(socket)
            .map_err(|e| Error::Desktop(format!("connecting to {}: {e}", socket.display())))?;
        let (stream, _peer) = DefaultStream::from_unix_stream(stream).map_err(x_err)?;
        let conn = RustConnection::connect_to_stream_with_auth_info(
            stream,
            0,
            b"MIT-MAGIC-COOKIE-1".to_vec(),
            cookie.to_vec(),
        )
        .map_err(x_err)?;
        let setup = conn.setup();
        let screen = setup.roots.first().ok_or_else(|| x_err("no screen"))?;
        let root = screen.root;
        let (width, height) = (
            u32::from(screen.width_in_pixels),
            u32::from(screen.height_in_pixels),
        );
        let depth = screen.root_depth;
        let format = setup
            .pixmap_formats
            .iter()
            .find(|f| f.depth == depth)
            .ok_or_else(|| x_err(format!("no pixmap format for depth {depth}")))?;
        let visual = screen
            .allowed_depths
            .iter()
            .flat_map(|d| d.visuals.iter())
            .find(|v| v.visual_id == screen.root_visual)
            .ok_or_else(|| x_err("root visual not found"))?;
        let layout = PixelLayout {
            bits_per_pixel: format.bits_per_pixel,
            scanline_pad: format.scanline_pad,
            msb_first: setup.image_byte_order == ImageOrder::MSB_FIRST,
            red: visual.red_mask,
            green: visual.green_mask,
            blue: visual.blue_mask,
        };
        if !matches!(layout.bits_per_pixel, 8 | 16 | 24 | 32) {
            return Err(x_err(format!(
                "unsupported pixel size {} bits",
                layout.bits_per_pixel
            )));
        }
        let intern = |name: &[u8]| -> Result<Atom> {
            Ok(conn
                .intern_atom(false, name)
                .map_err(x_err)?
                .reply()
                .map_err(x_err)?
                .atom)
        };
        let (net_wm_name, utf8_string) = (intern(b"_NET_WM_NAME")?, intern(b"UTF8_STRING")?);
        let mut x = Self {
            conn,
            root,
            width,
            height,
            layout,
            shm: None,
            damage: None,
            raw: Vec::new(),
            atoms: Atoms {
                net_wm_name,
                utf8_string,
            },
        };
        if use_shm {
            x.shm = x.attach_shm(layout.stride(width) * height as usize)?;
        }
        x.damage = x.watch_damage()?;
        Ok(x)
    }

    fn has_extension(&self, name: &'static str) -> Result<bool> {
        Ok(self
            .conn
            .extension_information(name)
            .map_err(x_err)?
            .is_some())
    }

    /// MIT-SHM ≥ 1.2 (fd passing), or `None` when the server lacks it.
    fn attach_shm(&self, size: usize) -> Result<Option<Shm>> {
        if !self.has_extension(shm::X11_EXTENSION_NAME)? {
            return Ok(None);
        }
        let v = self
            .conn
            .shm_query_version()
            .map_err(x_err)?
            .reply()
            .map_err(x_err)?;
        if (v.major_version, v.minor_version) < (1, 2) {
            return Ok(None);
        }
        let fd = rustix::fs::memfd_create("cordon-capture", rustix::fs::MemfdFlags::CLOEXEC)
            .map_err(|e| x_err(format!("memfd_create: {e}")))?;
        let file = std::fs::File::from(fd);
        file.set_len(size as u64)
            .map_err(|e| x_err(format!("sizing the capture buffer: {e}")))?;
        let server_fd = file.try_clone().map_err(|e| x_err(format!("dup: {e}")))?;
        let seg = self.conn.generate_id().map_err(x_err)?;
        // read_only = false: the server writes the image into it.
        let attached = self
            .conn
            .shm_attach_fd(seg, std::os::fd::OwnedFd::from(server_fd), false)
            .map_err(x_err)?
            .check();
        match attached {
            Ok(()) => Ok(Some(Shm { seg, file })),
            // A server that cannot map our fd (e.g. another host): fall back to GetImage.
            Err(_) => Ok(None),
        }
    }

    /// A damage object on the root window: any drawing on the screen reports.
    fn watch_damage(&self) -> Result<Option<damage::Damage>> {
        if !self.has_extension(damage::X11_EXTENSION_NAME)? {
            return Ok(None);
        }
        self.conn
            .damage_query_version(1, 1)
            .map_err(x_err)?
            .reply()
            .map_err(x_err)?;
        let id = self.conn.generate_id().map_err(x_err)?;
        self.conn
            .damage_create(id, self.root, damage::ReportLevel::NON_EMPTY)
            .map_err(x_err)?
            .check()
            .map_err(x_err)?;
        Ok(Some(id))
    }

    pub fn uses_shm(&self) -> bool {
        self.shm.is_some()
    }

    /// Lets connections from this uid in without a cookie (`si:localuser:NAME`), or takes
    /// that back. Used around enigo's connect, which can only read `$XAUTHORITY`.
    pub fn allow_local_user(&self, user: &str, allow: bool) -> Result<()> {
        let mut addr = b"localuser\0".to_vec();
        addr.extend_from_slice(user.as_bytes());
        let mode = if allow {
            xproto::HostMode::INSERT
        } else {
            xproto::HostMode::DELETE
        };
        self.conn
            .change_hosts(mode, xproto::Family::SERVER_INTERPRETED, &addr)
            .map_err(x_err)?
            .check()
            .map_err(x_err)
    }

    /// Turns host-based access control off (every local client may connect) or on again.
    pub fn set_access_control(&self, enabled: bool) -> Result<()> {
        let mode = if enabled {
            xproto::AccessControl::ENABLE
        } else {
            xproto::AccessControl::DISABLE
        };
        self.conn
            .set_access_control(mode)
            .map_err(x_err)?
            .check()
            .map_err(x_err)
    }

    /// Drains queued events: was anything drawn, did the keyboard map change?
    pub fn poll(&mut self) -> Result<Seen> {
        let mut seen = Seen::default();
        while let Some(ev) = self.conn.poll_for_event().map_err(x_err)? {
            match ev {
                Event::DamageNotify(_) => seen.damage = true,
                Event::MappingNotify(_) => seen.mapping = true,
                _ => {}
            }
        }
        if seen.damage
            && let Some(d) = self.damage
        {
            // Empty the region so the next drawing reports again (NonEmpty level).
            self.conn
                .damage_subtract(d, x11rb::NONE, x11rb::NONE)
                .map_err(x_err)?;
            self.conn.flush().map_err(x_err)?;
        }
        Ok(seen)
    }

    /// A round trip: everything sent before has been processed by the server.
    pub fn sync(&self) -> Result<()> {
        self.conn
            .get_input_focus()
            .map_err(x_err)?
            .reply()
            .map_err(x_err)?;
        Ok(())
    }

    /// Captures a rectangle of the screen (clamped to it).
    pub fn capture(&mut self, x: u32, y: u32, w: u32, h: u32) -> Result<Frame> {
        let x = x.min(self.width - 1);
        let y = y.min(self.height - 1);
        let w = w.clamp(1, self.width - x);
        let h = h.clamp(1, self.height - y);
        let (xi, yi, wi, hi) = (x as i16, y as i16, w as u16, h as u16);
        let len = self.layout.stride(w) * h as usize;
        let raw = if let Some(shm) = &self.shm {
            let reply = self
                .conn
                .shm_get_image(
                    self.root,
                    xi,
                    yi,
                    wi,
                    hi,
                    !0,
                    XImageFormat::Z_PIXMAP.into(),
                    shm.seg,
                    0,
                )
                .map_err(x_err)?
                .reply()
                .map_err(x_err)?;
            // The buffer is reused: a fresh 4 MB one costs ~1 ms of page faults.
            let mut raw = std::mem::take(&mut self.raw);
            raw.resize(len, 0);
            let size = (reply.size as usize).min(len);
            shm.file
                .read_exact_at(&mut raw[..size], 0)
                .map_err(|e| x_err(format!("reading the capture buffer: {e}")))?;
            raw
        } else {
            self.conn
                .get_image(XImageFormat::Z_PIXMAP, self.root, xi, yi, wi, hi, !0)
                .map_err(x_err)?
                .reply()
                .map_err(x_err)?
                .data
        };
        self.raw = raw;
        let pixels = if self.layout.is_bgrx() && self.raw.len() >= w as usize * h as usize * 4 {
            // Rows of 32-bit pixels have no padding: the buffer is the image.
            Pixels::Bgrx
        } else {
            let mut rgb = Vec::new();
            self.layout.convert(&self.raw, w, h, &mut rgb)?;
            Pixels::Rgb(rgb)
        };
        Ok(Frame {
            width: w,
            height: h,
            pixels,
        })
    }

    /// The pixels of the last capture when it returned [`Pixels::Bgrx`].
    pub fn bgrx(&self, size: Size) -> &[u8] {
        &self.raw[..size.width as usize * size.height as usize * 4]
    }

    pub fn pointer(&self) -> Result<(i32, i32)> {
        let r = self
            .conn
            .query_pointer(self.root)
            .map_err(x_err)?
            .reply()
            .map_err(x_err)?;
        Ok((i32::from(r.root_x), i32::from(r.root_y)))
    }

    /// The top-level window at a screen point, if any.
    pub fn window_at(&self, x: i32, y: i32) -> Result<Option<Window>> {
        let r = self
            .conn
            .translate_coordinates(self.root, self.root, x as i16, y as i16)
            .map_err(x_err)?
            .reply()
            .map_err(x_err)?;
        Ok((r.child != x11rb::NONE).then_some(r.child))
    }

    /// The window keys go to: the focus window, or (focus follows the pointer, as without
    /// a window manager) the top-level under the pointer.
    pub fn focused_window(&self) -> Result<Option<Window>> {
        let focus = self
            .conn
            .get_input_focus()
            .map_err(x_err)?
            .reply()
            .map_err(x_err)?
            .focus;
        if focus != x11rb::NONE
            && focus != u32::from(xproto::InputFocus::POINTER_ROOT)
            && focus != self.root
        {
            return Ok(Some(focus));
        }
        let (x, y) = self.pointer()?;
        self.window_at(x, y)
    }

    fn property(&self, w: Window, prop: Atom, ty: Atom) -> Result<Option<Vec<u8>>> {
        let r = self
            .conn
            .get_property(false, w, prop, ty, 0, 4096)
            .map_err(x_err)?
            .reply();
        Ok(unless_gone(r)?.and_then(|r| (r.type_ != x11rb::NONE).then_some(r.value)))
    }

    /// The window's parent and children, or `None` once it is gone.
    fn tree(&self, w: Window) -> Result<Option<xproto::QueryTreeReply>> {
        unless_gone(self.conn.query_tree(w).map_err(x_err)?.reply())
    }

    fn own_title(&self, w: Window) -> Result<Option<String>> {
        if let Some(v) = self.property(w, self.atoms.net_wm_name, self.atoms.utf8_string)? {
            return Ok(Some(String::from_utf8_lossy(&v).into_owned()));
        }
        // WM_NAME is usually STRING (Latin-1).
        Ok(self
            .property(w, AtomEnum::WM_NAME.into(), AtomEnum::ANY.into())?
            .map(|v| v.iter().map(|b| char::from(*b)).collect()))
    }

    fn class(&self, w: Window) -> Result<Option<(String, String)>> {
        Ok(self
            .property(w, AtomEnum::WM_CLASS.into(), AtomEnum::STRING.into())?
            .map(|v| {
                let mut parts = v
                    .split(|b| *b == 0)
                    .map(|s| String::from_utf8_lossy(s).into_owned());
                (
                    parts.next().unwrap_or_default(),
                    parts.next().unwrap_or_default(),
                )
            }))
    }

    /// The named window for `w`: itself, an ancestor, or (for frames) a descendant that
    /// carries a title. Returns (title, class).
    pub fn describe(&self, w: Window) -> Result<(String, Option<(String, String)>)> {
        let mut up = w;
        // Up to the top level: the focus is often a child of the titled window.
        for _ in 0..8 {
            if let Some(t) = self.own_title(up)? {
                return Ok((t, self.class(up)?));
            }
            let Some(tree) = self.tree(up)? else { break };
            if tree.parent == x11rb::NONE || tree.parent == self.root {
                break;
            }
            up = tree.parent;
        }
        // Down from the top level (a reparenting window manager's frame). A bounded
        // number of windows: a program with thousands of untitled children would
        // otherwise cost thousands of round trips for every gate check.
        let mut queue = vec![(up, 0)];
        let mut budget = DESCRIBE_BUDGET;
        while let Some((win, depth)) = queue.pop() {
            budget = match budget.checked_sub(1) {
                Some(b) => b,
                None => break,
            };
            if let Some(t) = self.own_title(win)? {
                return Ok((t, self.class(win)?));
            }
            if depth < 3
                && let Some(tree) = self.tree(win)?
            {
                queue.extend(tree.children.into_iter().map(|c| (c, depth + 1)));
            }
        }
        Ok((String::new(), self.class(w)?))
    }

    /// Mapped top-level windows, bottom to top.
    pub fn windows(&self) -> Result<Vec<WindowInfo>> {
        let tree = self
            .conn
            .query_tree(self.root)
            .map_err(x_err)?
            .reply()
            .map_err(x_err)?;
        let mut out = Vec::new();
        for w in tree.children {
            let Ok(attrs) = self.conn.get_window_attributes(w).map_err(x_err)?.reply() else {
                continue; // destroyed meanwhile
            };
            if attrs.map_state != MapState::VIEWABLE || attrs.override_redirect {
                continue;
            }
            let Ok(g) = self.conn.get_geometry(w).map_err(x_err)?.reply() else {
                continue;
            };
            let (title, class) = self.describe(w)?;
            out.push(WindowInfo {
                id: w,
                title,
                class,
                x: i32::from(g.x),
                y: i32::from(g.y),
                width: u32::from(g.width),
                height: u32::from(g.height),
            });
        }
        Ok(out)
    }

    /// The keyboard map as it is now.
    pub fn key_table(&self) -> Result<KeyTable> {
        let setup = self.conn.setup();
        let (min, max) = (setup.min_keycode, setup.max_keycode);
        let map = self
            .conn
            .get_keyboard_mapping(min, max - min + 1)
            .map_err(x_err)?
            .reply()
            .map_err(x_err)?;
        let per = usize::from(map.keysyms_per_keycode.max(1));
        let mut table = KeyTable::default();
        for (i, syms) in map.keysyms.chunks(per).enumerate() {
            let code = min.saturating_add(i as u8);
            if syms.iter().all(|s| *s == 0) {
                // Keycode 8 maps to evdev 0 and never produces anything (enigo skips it).
                if code != 8 {
                    table.spare += 1;
                    table.spare_codes.push(code);
                }
                continue;
            }
            // Levels 1 and 2 (plain, Shift); the first keycode found wins.
            for (level, sym) in syms.iter().take(2).enumerate() {
                if *sym != 0 {
                    table.keys.entry(*sym).or_insert((code, level as u8));
                }
            }
        }
        let mods = self
            .conn
            .get_modifier_mapping()
            .map_err(x_err)?
            .reply()
            .map_err(x_err)?;
        let per_mod = usize::from(mods.keycodes_per_modifier());
        table.shift = mods
            .keycodes
            .iter()
            .take(per_mod)
            .copied()
            .find(|k| *k != 0);
        Ok(table)
    }
}

impl Drop for X11 {
    fn drop(&mut self) {
        if let Some(shm) = &self.shm {
            let _detached = self.conn.shm_detach(shm.seg);
        }
        let _flushed = self.conn.flush();
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "tests")]
    use super::*;

    #[test]
    fn pixels_convert_from_common_layouts() {
        let bgrx = PixelLayout {
            bits_per_pixel: 32,
            scanline_pad: 32,
            msb_first: false,
            red: 0xff_0000,
            green: 0xff00,
            blue: 0xff,
        };
        let mut out = Vec::new();
        bgrx.convert(&[3, 2, 1, 0, 30, 20, 10, 0], 2, 1, &mut out)
            .unwrap();
        assert_eq!(out, [1, 2, 3, 10, 20, 30]);
        // 16 bpp RGB565, rows padded to 32 bits: one pixel + 2 bytes of pad per row.
        let rgb565 = PixelLayout {
            bits_per_pixel: 16,
            scanline_pad: 32,
            msb_first: false,
            red: 0xf800,
            green: 0x07e0,
            blue: 0x001f,
        };
        assert_eq!(rgb565.stride(1), 4);
        let white_then_red = [0xff, 0xff, 0, 0, 0x00, 0xf8, 0, 0];
        rgb565.convert(&white_then_red, 1, 2, &mut out).unwrap();
        assert_eq!(out, [255, 255, 255, 255, 0, 0]);
        assert!(bgrx.convert(&[0; 4], 2, 1, &mut out).is_err());
        assert_eq!(
            bgrx_to_rgb(&[3, 2, 1, 0, 30, 20, 10, 9]),
            [1, 2, 3, 10, 20, 30]
        );
    }
}
