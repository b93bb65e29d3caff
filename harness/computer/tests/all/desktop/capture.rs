//! Capture: MIT-SHM and plain GetImage give the same picture, 16-bit screens convert,
//! and zoom shows a region of the screen at the model's size.

use super::*;
use cordon_computer::image::decode_rgb;
use serde_json::json;

// `cat` prints nothing, so the picture is the same whenever it is taken.
const RED_TERM: &str = "xterm -bg red -geometry 40x10+0+0 -e cat";

fn red(px: &[u8]) -> usize {
    px.as_chunks::<3>()
        .0
        .iter()
        .filter(|p| p[0] > 200 && p[1] < 60 && p[2] < 60)
        .count()
}

async fn screenshot(o: DesktopOptions) -> (bool, Vec<u8>) {
    let session = DesktopSession::start(o).await.unwrap();
    let shm = session.uses_shm();
    let mut c = computer(session, Rules::allow_all());
    let r = ok_step(&mut c, json!({"action": "screenshot"})).await;
    c.into_backend().close().await.unwrap();
    let (size, px) = decode_rgb(&r.screenshot.unwrap().data).unwrap();
    assert_eq!(size, Size::new(1024, 640));
    (shm, px)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shm_and_getimage_agree_and_16_bit_screens_convert() {
    let (shm, with_shm) = screenshot(opts(&[RED_TERM])).await;
    assert!(shm, "Xvfb has MIT-SHM");
    let mut o = opts(&[RED_TERM]);
    o.shm = false;
    let (shm, without) = screenshot(o).await;
    assert!(!shm);
    assert!(red(&with_shm) > 10_000);
    assert_eq!(red(&with_shm), red(&without));
    assert!(
        with_shm == without,
        "the same screen captured two ways differs"
    );
    // RGB565: red is 0xf800, which converts back to full red.
    let mut o = opts(&[RED_TERM]);
    o.depth = 16;
    let (_, sixteen) = screenshot(o).await;
    assert_eq!(red(&sixteen), red(&with_shm));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn zoom_shows_a_region_at_the_model_size() {
    let session = start(&[RED_TERM]).await;
    let mut c = computer(session, Rules::allow_all());
    let whole = ok_step(&mut c, json!({"action": "screenshot"})).await;
    // The top-left quarter of the model display, shown at 1024×640: the red terminal
    // (top-left) covers four times the pixels.
    let zoom = ok_step(
        &mut c,
        json!({"action": "zoom", "region": [0, 0, 512, 320]}),
    )
    .await;
    let shot = zoom.screenshot.unwrap();
    assert_eq!(shot.size, Size::new(1024, 640));
    let (_, zoomed) = decode_rgb(&shot.data).unwrap();
    let (_, plain) = decode_rgb(&whole.screenshot.unwrap().data).unwrap();
    let ratio = red(&zoomed) as f64 / red(&plain) as f64;
    assert!((3.8..4.2).contains(&ratio), "{ratio}");
    c.into_backend().close().await.unwrap();
}
