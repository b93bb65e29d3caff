//! Clicks computed in the model display hit their targets for every display size and DPR,
//! and the image the model gets shows the target where it clicked.

#![allow(clippy::unwrap_used, reason = "tests")]

use crate::common::*;
use cordon_computer::display::{CssPoint, DisplaySpec, Preset, Size};
use cordon_computer::gate::Rules;
use cordon_protocol::computer::Vendor;
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn clicks_hit_targets_for_every_preset_at_dpr_1_and_2() {
    let server = PageServer::start(None).await;
    with_browser(|browser| async move {
        let viewport = Size::new(1280, 800);
        let mut specs: Vec<DisplaySpec> = Preset::ALL
            .iter()
            .map(|p| DisplaySpec::Preset { preset: *p })
            .collect();
        specs.push(DisplaySpec::DEFAULT_BUDGET);
        specs.push(DisplaySpec::Fixed {
            size: Size::new(1024, 640),
        });
        for dpr in [1.0, 2.0] {
            for spec in &specs {
                let opts = session_opts(viewport, dpr, *spec, Some(server.url("/targets")));
                let mut c = computer(&browser, opts, Rules::allow_all()).await;
                let scaler = c.scaler();
                let mut expected = Vec::new();
                let mut last = None;
                for (id, x, y) in TARGETS {
                    let half = f64::from(TARGET_SIZE) / 2.0;
                    let css = CssPoint {
                        x: f64::from(*x) + half,
                        y: f64::from(*y) + half,
                    };
                    let m = scaler.to_model(css);
                    let r = left_click(&mut c, [m.x, m.y]).await;
                    expected.push(id.to_string());
                    last = Some((r, m));
                }
                let hits: Vec<String> = serde_json::from_value(eval(&c, "hits").await).unwrap();
                assert_eq!(
                    hits, expected,
                    "dpr {dpr} {spec:?} display {}",
                    scaler.display
                );
                // The model's image is exactly the display size and shows the (red) target
                // under the pixel it clicked.
                let (report, m) = last.unwrap();
                let shot = Shot::of(&report);
                assert_eq!(shot.size, scaler.display, "dpr {dpr} {spec:?}");
                let px = shot.pixel(m.x as u32, m.y as u32);
                assert!(
                    px[0] > 150 && px[1] < 80 && px[2] < 80,
                    "dpr {dpr} {spec:?}: pixel at model {m:?} is {px:?}, want red"
                );
                c.into_backend().close().await.unwrap();
            }
        }
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn same_aspect_captures_at_model_size_without_resizing() {
    let server = PageServer::start(None).await;
    with_browser(|browser| async move {
        for dpr in [1.0, 2.0] {
            let opts = session_opts(
                Size::new(1280, 800),
                dpr,
                DisplaySpec::Fixed {
                    size: Size::new(1024, 640),
                },
                Some(server.url("/targets")),
            );
            let mut c = computer(&browser, opts, Rules::allow_all()).await;
            let r = ok_step(&mut c, Vendor::Anthropic, json!({"action": "screenshot"})).await;
            let shot = r.screenshot.unwrap();
            assert_eq!(shot.size, Size::new(1024, 640));
            assert!(
                !shot.resized,
                "dpr {dpr}: CDP clip.scale should deliver the model size"
            );
            c.into_backend().close().await.unwrap();
        }
    })
    .await;
}
